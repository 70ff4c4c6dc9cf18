"""The students' self-check: public checks per task, in the notebook and from a terminal.

It must say passed / failed with a hint, run on the student's current answer and functions, and
work where no reference file exists (the student image), never revealing a hidden case.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import cli
from grader.author.solution import solution_namespace
from grader.judge import references
from grader.selfcheck import run_selfcheck
from util import labs
from util.answers import OUTPUT_DIR_ENV, write_answer
from util.checks import equal
from util.contract import Check, Lab, Task
from util.labs import LABS, get_lab
from util.labs.lab3 import public_checks as lab3_checks
from util.selfcheck import check, task_report

REPO = Path(__file__).resolve().parent.parent
TASK = Task(
    id="900.1", title="Toy", answer_points=1, answer="a dict {'a': int, 'b': int, 'sum': int}", function="add",
    checks=(
        Check("sum = a + b", lambda x: equal(x["sum"], x["a"] + x["b"], "sum"), "add the two parts"),
        Check("add(2, 3)", lambda f: equal(f(2, 3), 5, "add(2, 3)"), "2 + 3 = 5", calls_function=True),
    ))
LAB = Lab(name="lab900", title="Toy lab", notebook="lab900.ipynb", tasks=(TASK,))


def _statuses(report):
    return [(o.name, o.status) for o in report.outcomes]


def test_passing_checks_say_so():
    report = task_report(LAB, TASK, {"add": lambda a, b: a + b}, {"900.1": {"a": 1, "b": 2, "sum": 3}})
    assert _statuses(report) == [("sum = a + b", "passed"), ("add(2, 3)", "passed")]
    assert report.passed
    assert report.text().startswith("Task 900.1 (Toy): 2/2 public checks passed")


def test_a_failing_check_says_what_it_found_and_where_to_look():
    report = task_report(LAB, TASK, {"add": lambda a, b: a * b}, {"900.1": {"a": 1, "b": 2, "sum": 4}})
    assert _statuses(report) == [("sum = a + b", "failed"), ("add(2, 3)", "failed")]
    assert [o.message for o in report.outcomes] == ["sum is 4; expected 3", "add(2, 3) is 6; expected 5"]
    text = report.text()
    assert "FAILED  add(2, 3)" in text and "hint: 2 + 3 = 5" in text and not report.passed


def test_no_answer_no_function_and_a_raising_function_are_told_apart():
    missing = task_report(LAB, TASK, {}, {})
    assert _statuses(missing) == [("sum = a + b", "missing"), ("add(2, 3)", "missing")]
    assert 'run the cell with submit("900.1", ...) first' in missing.outcomes[0].hint
    assert "defines no function add()" in missing.outcomes[1].message

    def stub(a, b):
        raise NotImplementedError("Implement task 900.1: Toy")

    raising = task_report(LAB, TASK, {"add": stub}, {"900.1": {"a": 1}})  # KeyError inside the answer check
    assert _statuses(raising) == [("sum = a + b", "error"), ("add(2, 3)", "error")]
    assert raising.outcomes[0].message == "KeyError: 'sum'"
    assert raising.outcomes[1].message == "NotImplementedError: Implement task 900.1: Toy"


def test_function_results_are_judged_as_the_grader_stores_them():
    """A tuple comes back as a list, exactly as the hidden cases' results are stored (JSON)."""
    task = Task(id="900.2", title="Shape", answer_points=1, answer="a list", function="shape",
                checks=(Check("shape", lambda f: equal(f(), [1, 2], "shape()"), "", calls_function=True),))
    lab = Lab(name="lab900", title="", notebook="lab900.ipynb", tasks=(task,))
    assert task_report(lab, task, {"shape": lambda: (1, 2)}, {}).passed


def test_a_function_check_can_reach_the_object_itself_when_it_needs_more_than_its_results():
    """A check of a class (its ``apply``) or a compiled kernel unwraps what it is handed (``inspect.unwrap``)."""
    import inspect

    class Doubler:
        @staticmethod
        def apply(x):
            return 2 * x

    task = Task(id="900.3", title="Class", answer_points=1, answer="a class", function="Doubler",
                checks=(Check("apply", lambda f: equal(inspect.unwrap(f).apply(2), 4, "apply(2)"), "",
                              calls_function=True),))
    lab = Lab(name="lab900", title="", notebook="lab900.ipynb", tasks=(task,))
    assert task_report(lab, task, {"Doubler": Doubler}, {}).passed


def test_the_solution_namespace_keeps_each_cells_source_readable():
    """Triton's interpreter and ``inspect.getsource`` read the source of what a solution cell defines."""
    import inspect

    source = inspect.getsource(solution_namespace("lab14", ("14.1",))["attention_costs"])
    assert source.startswith("def attention_costs(") and "### BEGIN SOLUTION" not in source


def test_check_in_a_notebook_uses_the_exported_answer_and_the_callers_functions(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(OUTPUT_DIR_ENV, str(tmp_path))
    total = 6624904  # GoogLeNet's documented count, which one of the checks compares with
    write_answer(tmp_path, "1.1", {"total": total, "trainable": total - 100, "non_trainable": 100})
    code = ("def count_parameters(model):\n"
            "    total = sum(p.numel() for p in model.parameters())\n"
            "    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)\n"
            "    return {'total': total, 'trainable': trainable, 'non_trainable': total - trainable}\n"
            "from util import check\n"
            "check('1.1')\n")
    exec(compile(code, "<notebook cell>", "exec"), {})  # check() finds count_parameters in the caller's globals
    out = capsys.readouterr().out
    assert out.startswith("Task 1.1 (Parameters): 5/5 public checks passed"), out

    write_answer(tmp_path, "1.1", {"total": total, "trainable": total, "non_trainable": 0})
    namespace = {"count_parameters": lambda model: {"total": 12, "trainable": 12, "non_trainable": 0}}
    check("1.1", namespace)
    out = capsys.readouterr().out
    assert "Task 1.1 (Parameters): 2/5 public checks passed" in out
    assert "FAILED  the frozen stem is non-trainable" in out and "non_trainable is 0; expected at least 1" in out
    assert "the result['trainable'] is 12; expected 6" in out


@pytest.mark.parametrize("lab_name", list(LABS))
def test_every_lab_declares_public_checks_for_every_task(lab_name):
    lab = get_lab(lab_name)
    for task in lab.tasks:
        names = [c.name for c in task.checks]
        assert names and len(names) == len(set(names)), task.id  # at least one check, named uniquely


def test_every_declared_check_names_a_function_when_it_calls_one():
    for lab in LABS.values():
        for task in lab.tasks:
            for c in task.checks:
                assert c.hint and c.name, (task.id, c)
                if c.calls_function:
                    assert task.function, (task.id, c.name)


def _checks(lab: Lab, task: Task) -> tuple[Check, ...]:
    return task.checks


@pytest.mark.parametrize("lab_name", list(LABS))
def test_every_lab_attaches_its_public_checks_module_to_its_tasks(lab_name):
    lab = get_lab(lab_name)
    public = labs.part(lab, "public_checks")
    assert public is not None, f"{lab_name} has no public_checks.py"
    tasks = {t.id: t for t in lab.tasks}
    assert set(public.CHECKS) == set(tasks)
    for task_id, checks in public.CHECKS.items():
        assert tasks[task_id].checks == checks, f"task {task_id}: checks=CHECKS[{task_id!r}] is not attached"
        assert all(tasks[task_id].function for c in checks if c.calls_function), task_id


@pytest.mark.notebook
@pytest.mark.parametrize("lab_name", list(LABS))
def test_public_checks_pass_on_the_reference_answers_and_the_solution_functions(lab_name, tmp_path, monkeypatch):
    """A public check that the solution fails would mislead every student: none may."""
    from dataclasses import replace

    lab = get_lab(lab_name)
    answers = references.load(lab)["answers"]
    folder = Path(lab.notebook).parent
    if folder != Path("."):  # a folder lab (notebook + support files): run in a copy of its folder
        shutil.copytree(REPO / "solutions" / folder, tmp_path / folder, ignore=shutil.ignore_patterns("build"))
    monkeypatch.chdir(tmp_path / folder)  # the solution's cells may save files in the working directory
    monkeypatch.setenv(OUTPUT_DIR_ENV, str(tmp_path / "outputs"))
    with_functions = tuple(t.id for t in lab.tasks if any(c.calls_function for c in _checks(lab, t)))
    namespace = solution_namespace(lab_name, with_functions) if with_functions else {}
    for task in lab.tasks:
        checks = _checks(lab, task)
        assert checks, f"task {task.id} has no public check"
        report = task_report(lab, replace(task, checks=checks), namespace, answers)
        assert report.passed, report.text()


@pytest.mark.notebook
def test_lab3_function_checks_catch_ignored_attributes_bounds_and_a_blind_comparison():
    solution = solution_namespace("lab3", ("3.1", "3.2", "3.3", "3.4"))  # 3.4 uses 3.3's chain
    checks = {c.name: c for task_id in ("3.1", "3.2", "3.4") for c in lab3_checks.CHECKS[task_id] if c.calls_function}
    gemm, tiled, report = solution["gemm_model"], solution["tiled_gemm_model"], solution["equivalence_report"]

    def run(name_start, function):
        [check] = [c for name, c in checks.items() if name.startswith(name_start)]
        return check.test(function)

    assert run("gemm_model", gemm) is None
    assert "differs from numpy" in run("gemm_model", lambda *a, **k: gemm(*a, **{**k, "alpha": 1.0}))
    assert run("tiled_gemm_model", tiled) is None
    assert "exceeds the bounds [2, 3, 2]" in run("tiled_gemm_model", lambda m, k, n, bounds, **kw: tiled(m, k, n, **kw))
    assert run("equivalence_report", report) is None
    assert "expected False" in run("equivalence_report", lambda *a, **k: {**report(*a, **k), "agree": True})


# ---------------------------------------------------------------- whole notebooks

def _student_image_copy(root: Path) -> Path:
    """The student image's files under ``root`` (an empty folder): the students' copy it is built from."""
    from grader.author import release

    release.release(root)
    return root


@pytest.fixture(scope="module")
def student_image(tmp_path_factory) -> Path:
    return _student_image_copy(tmp_path_factory.mktemp("course"))


def _run_in(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop(OUTPUT_DIR_ENV, None)
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.notebook
def test_grader_check_works_in_the_student_image_where_no_reference_exists(student_image):
    assert not (student_image / "grader" / "references").exists()
    assert not (student_image / "solutions").exists()
    where = _run_in(student_image, "-c", "import grader, util; print(grader.__file__); print(util.__file__)")
    assert where.stdout.split() == [str(student_image / "grader" / "__init__.py"),
                                    str(student_image / "util" / "__init__.py")]

    solution = _run_in(student_image, "-m", "grader", "check", str(REPO / "solutions" / "lab1_pytorch_analysis.ipynb"))
    assert solution.returncode == 0, solution.stdout + solution.stderr
    assert "5/5 tasks pass all their public checks" in solution.stdout

    mistake = REPO / "grader" / "examples" / "lab1" / "grouped_conv_ignored.ipynb"
    result = _run_in(student_image, "-m", "grader", "check", str(mistake))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Task 1.4 (MACs): 5/7 public checks passed" in result.stdout  # 6 checks and its written Q1, answered
    assert "ok      Q1 answered in 30-200 words (a TA marks it)" in result.stdout
    assert "FAILED  count_macs on Conv2d(4, 8, 3, padding=1, groups=2) at 1x4x8x8" in result.stdout
    assert "the total is 18,432; expected 9,216" in result.stdout
    assert "4/5 tasks pass all their public checks" in result.stdout
    hidden = [case.id for task in get_lab("lab1").tasks for case in task.cases]
    assert not [case for case in hidden if case in result.stdout], "a hidden case was named"


@pytest.mark.notebook
def test_grader_check_on_the_generated_lab_reports_every_task_unfinished(capsys):
    code = cli.main(["check", str(REPO / "labs" / "lab2_onnx_analysis.ipynb")])
    out = capsys.readouterr().out
    assert code == 1
    assert "0/5 tasks pass all their public checks" in out
    assert "NotImplementedError: Implement task 2.3: Memory bandwidth per node" in out
    assert "task 2.1 has no exported answer yet" in out
    assert "note: cell" in out  # the stubs' errors are listed, as the grader would see them


@pytest.mark.notebook
def test_lab2_checks_pass_on_the_solution_and_catch_the_int64_mistake():
    lab = get_lab("lab2")
    solution = run_selfcheck(REPO / "solutions" / lab.notebook, lab)
    assert solution.execution.status == "completed" and solution.passed, solution.text()
    mistake = run_selfcheck(REPO / "grader" / "examples" / "lab2" / "int64_as_four_bytes.ipynb", lab)
    assert [r.task_id for r in mistake.reports if not r.passed] == ["2.2"]
    [failed] = [o for r in mistake.reports for o in r.outcomes if o.status != "passed"]
    assert failed.name == "inspect_node on a Reshape whose shape input is an int64 tensor [2]"
    assert failed.message == "the shape input['bytes'] is 8; expected 16"


# ---------------------------------------------------------------- from any folder, one task at a time

def test_a_lab_or_notebook_name_is_found_from_any_folder(tmp_path, monkeypatch):
    from grader.selfcheck import find_notebook

    lab1, lab4 = get_lab("lab1"), get_lab("lab4")
    labs = REPO / "labs"
    assert find_notebook("lab1", cwd=labs) == labs / lab1.notebook                 # JupyterLab's terminal in labs/
    assert find_notebook("lab1", cwd=REPO) == REPO / "labs" / lab1.notebook         # the course image's, in the root
    assert find_notebook("lab1", cwd=tmp_path) == REPO / "labs" / lab1.notebook     # anywhere: the package's labs/
    assert find_notebook("lab4", cwd=labs / "lab4_libtorch") == labs / lab4.notebook  # inside a folder lab
    assert find_notebook(Path(lab1.notebook).name, cwd=tmp_path) == REPO / "labs" / lab1.notebook
    mine = tmp_path / lab1.notebook
    mine.write_text("{}")
    assert find_notebook("lab1", cwd=tmp_path) == mine                              # the student's own copy first
    monkeypatch.chdir(tmp_path)
    assert find_notebook(str(mine)) == mine                                          # a path is taken as it is
    with pytest.raises(FileNotFoundError, match="give a notebook's path or a lab's name"):
        find_notebook("lab99", cwd=tmp_path)
    with pytest.raises(FileNotFoundError, match="found no notebook"):
        find_notebook("other.ipynb", cwd=tmp_path)


def test_check_refuses_an_unknown_task_and_names_the_missing_tools(capsys, monkeypatch):
    from grader import selfcheck

    assert cli.main(["check", "lab1", "--task", "2.1"]) == 1
    assert capsys.readouterr().out.strip() == "check: lab1 has no task 2.1; its tasks are 1.1, 1.2, 1.3, 1.4, 1.5"
    assert selfcheck._tasks(get_lab("lab1"), ["1.4,1.5", "1.4"]) == ("1.4", "1.5")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert selfcheck.missing_tools(get_lab("lab4")) == ["g++", "cmake", "make"]
    assert selfcheck.missing_tools(get_lab("lab1")) == []
