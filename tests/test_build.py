"""solutions/ -> labs/ and example submissions: fresh, marker-free, stubs naming their task."""
import copy

import pytest

from grader.author import build
from grader import notebook
from util.contract import Mistake
from grader.author.markers import MarkerError, has_markers
from util.labs import LABS

LAB_NAMES = [name for name, lab in LABS.items() if lab.tasks]


@pytest.mark.parametrize("lab_name", LAB_NAMES)
def test_committed_generated_files_are_fresh(lab_name):
    assert build.check(LABS[lab_name]) == []


@pytest.mark.parametrize("lab_name", LAB_NAMES)
def test_student_copy_has_a_stub_per_task_and_no_solution(lab_name):
    lab = LABS[lab_name]
    solution = notebook.read(build.SOLUTIONS / lab.notebook)
    student = build.student_copy(lab, solution)
    code = "\n".join(c.source for c in student.cells if c.cell_type == "code")
    folder = (build.LABS / lab.notebook).parent
    code += "\n".join(item.text for item in build.outputs(lab)  # a folder lab's C++ stubs count too
                      if lab.support and item.path.is_relative_to(folder) and item.path.suffix in build.CPP_SUFFIXES)
    assert not has_markers(code)
    for task in lab.tasks:
        assert f"Implement task {task.id}: {task.title}" in code
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in student.cells if c.cell_type == "code")
    assert student.metadata["course"]["lab"] == lab_name


def test_check_reports_a_stale_student_copy(tmp_path, monkeypatch):
    lab = LABS["lab1"]
    monkeypatch.setattr(build, "LABS", tmp_path)
    (tmp_path / lab.notebook).write_text("{}")
    assert any("is stale" in p for p in build.check(lab))


def test_unbalanced_marker_in_the_solution_fails_the_build():
    lab = LABS["lab1"]
    nb = copy.deepcopy(notebook.read(build.SOLUTIONS / lab.notebook))
    cell = next(c for c in nb.cells if "### END SOLUTION" in c.source)
    cell.source = cell.source.replace("### END SOLUTION", "", 1)
    with pytest.raises(MarkerError, match="never closed"):
        build.student_copy(lab, nb)


def test_a_heading_that_disagrees_with_the_declaration_is_reported():
    lab = LABS["lab1"]
    nb = copy.deepcopy(notebook.read(build.SOLUTIONS / lab.notebook))
    cell = next(c for c in nb.cells if c.source.startswith("## Task 1.4"))
    cell.source = cell.source.replace("(40 points)", "(30 points)", 1)
    assert any("declaration says 'MACs (40 points)'" in p for p in build.validate_solution(lab, nb))


def test_an_example_replacement_must_match_exactly_once():
    lab = LABS["lab1"]
    nb = notebook.read(build.SOLUTIONS / lab.notebook)
    with pytest.raises(ValueError, match="occurs 0 times"):
        build.example_copy(lab, nb, Mistake("x", "typo", (("no such code", "y"),)))
