"""solutions/ -> labs/ and example submissions: fresh, marker-free, stubs naming their task."""
import copy

import pytest

from grader.author import build
from grader.author.markers import MarkerError, has_markers
from grader.core import notebook
from util.contract import Mistake
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


# ---------------------------------------------------------------- figures

def _square(color):
    def draw():
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(1, 1))
        ax.add_patch(plt.Rectangle((0, 0), 1, 1, color=color))
        ax.axis("off")
        return fig
    return draw


def test_a_figure_is_embedded_in_the_cell_that_shows_it_and_kept_while_its_pixels_stay(monkeypatch):
    import base64

    from nbformat.v4 import new_markdown_cell, new_notebook

    from grader.author import figures

    nb = new_notebook(cells=[new_markdown_cell("![a square](attachment:square.png)"), new_markdown_cell("text")])
    lab = LABS["lab1"]
    monkeypatch.setattr(figures, "lab_figures", lambda lab: {"square.png": _square("tab:blue")})
    assert figures.embed(lab, nb, "x.ipynb") == []
    png = base64.b64decode(nb.cells[0].attachments["square.png"]["image/png"])
    assert png.startswith(b"\x89PNG") and "attachments" not in nb.cells[1]
    import io

    from PIL import Image

    other = io.BytesIO()        # the same pixels, other bytes (another PNG encoder's choice)
    Image.open(io.BytesIO(png)).save(other, format="PNG", compress_level=1)
    assert other.getvalue() != png
    nb.cells[0].attachments["square.png"]["image/png"] = kept = base64.b64encode(other.getvalue()).decode()
    figures.embed(lab, nb, "x.ipynb")
    assert nb.cells[0].attachments["square.png"]["image/png"] == kept
    monkeypatch.setattr(figures, "lab_figures", lambda lab: {"square.png": _square("tab:red")})
    figures.embed(lab, nb, "x.ipynb")   # another drawing: re-embedded
    assert not figures.same_picture(base64.b64decode(nb.cells[0].attachments["square.png"]["image/png"]), png)
    nb.cells[0].source = "no longer shown"
    problems = figures.embed(lab, nb, "x.ipynb")
    assert problems == ["x.ipynb: figure square.png must be shown by exactly one markdown cell "
                        "(![...](attachment:square.png)); 0 show it",
                        "x.ipynb: cell 0 carries attachment square.png but does not show it"]


@pytest.mark.parametrize("lab_name", [name for name in LAB_NAMES if build.figures.lab_figures(LABS[name])])
def test_each_lab_figure_is_in_its_solution_and_student_copy(lab_name):
    lab = LABS[lab_name]
    for root in (build.SOLUTIONS, build.LABS):
        nb = notebook.read(root / lab.notebook)
        shown = {name for c in nb.cells for name in c.get("attachments", {})}
        assert set(build.figures.lab_figures(lab)) <= shown, root
