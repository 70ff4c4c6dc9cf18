"""A lab is one folder: the core names no lab, and a new lab is picked up from its folder and notebook.

The first test reads every core module (``grader/``, ``util/`` outside ``util/labs/labN/``); the
second copies the course's code into a temporary repository, adds the next lab the course would
have (``util/labs/labN/`` and ``solutions/labN_new.ipynb``, N one past the course's last lab, and
nothing else; a written question is one declaration, one rubric and one answer cell), and builds,
regenerates and grades it there with the command line, sandbox included,
with the test labs (numbered from 900) registered beside it. A test lab that takes a course lab's
number is refused, naming both folders.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader import REPO
from util import labs
from util.labs import LABS

LAB_NAME = re.compile(r"(?i)\blab[ _-]?\d+")
"""``lab3``, ``Lab 3``, ``lab_3``, ``lab4_libtorch``: how a lab is named."""


def _core_modules() -> list[Path]:
    core = sorted((REPO / "grader").rglob("*.py")) + sorted((REPO / "util").rglob("*.py"))
    lab_folders = re.compile(r"util/labs/lab\d+/")
    return [p for p in core if "__pycache__" not in p.parts and not lab_folders.search(p.relative_to(REPO).as_posix())]


def test_no_core_module_names_a_lab():
    modules = _core_modules()
    assert len(modules) >= 30 and REPO / "util" / "labs" / "__init__.py" in modules
    named = [f"{p.relative_to(REPO)}:{n}: {line.strip()}" for p in modules
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if LAB_NAME.search(line)]
    assert named == []


def test_the_pattern_finds_the_ways_a_lab_is_named():
    for text in ("lab3", "Lab 3", "LAB_3", "lab4_libtorch", "(``lab12``)", "grader/examples/lab1"):
        assert LAB_NAME.search(text), text
    for text in ("labN", "lab.name", "labs", "a collaborator", "elaborate 3", "util/labs/"):
        assert not LAB_NAME.search(text), text


TASKS_TEMPLATE = '''\
"""A lab added by a test: one folder, one notebook, nothing else touched."""
from util.contract import Check, Lab, Task, Written


def _call(fn, spec):
    return fn(spec["n"])


LAB = Lab(name="labNN", title="Added lab", notebook="labNN_new.ipynb", packages=("numpy",), tasks=(
    Task(id="NN.1", title="Squares", answer_points=2, answer="the sum of the first n squares for n = 10",
         written=(Written("NN.Q1", "Why is the sum a cubic in n?", 2, words=(3, 60)),),
         function="squares", run_case=_call, hidden_points=6,
         checks=(Check("squares(2) = 5", lambda f: None if f(2) == 5 else f"squares(2) is {f(2)}", "1 + 4",
                       calls_function=True),)),
))
'''
CASES_TEMPLATE = '''\
"""The added lab's hidden cases: grader-only."""
from util.contract import Case

CASES = {"NN.1": (Case("n=20", {"n": 20}, 3), Case("n=0", {"n": 0}, 3))}
'''
RUBRICS_TEMPLATE = '''\
from util.rubric import Item, Rubric

RUBRICS = {"NN.Q1": Rubric(items=(Item("A", 2, "Sums n terms of order n squared", note="n^3/3 is enough"),))}
'''
MODEL = "Each of its n terms is at most n squared, so the sum grows like n cubed (n^3/3)."
MISTAKES_TEMPLATE = '''\
from util.contract import ANSWER, Mistake

MISTAKES = (Mistake("off_by_one", "sums up to n - 1", (("range(1, n + 1)", "range(1, n)"),),
                    {"NN.1": (ANSWER, "n=20")}),)
'''


NEXT = max(int(name[3:]) for name in LABS if (REPO / "util" / "labs" / name).is_dir()) + 1
"""The number the course's next lab would take (9 while the course has eight labs)."""
FIXTURES = [REPO / "tests" / folder for folder in ("tinylab_labs", "hostile_labs", "cachelab_labs")]
"""The test labs' folders (lab900, lab997, lab998), registered beside the new lab."""


def _lab(number: int) -> tuple[str, str, str, str]:
    return tuple(template.replace("NN", str(number)) for template in (TASKS_TEMPLATE, CASES_TEMPLATE, MISTAKES_TEMPLATE,
                                                                     RUBRICS_TEMPLATE))


def _solution(number: int) -> nbformat.NotebookNode:
    return new_notebook(cells=[
        new_code_cell("from util import check, progress, setup, submit\nsetup()"),
        new_markdown_cell(f"## Task {number}.1: Squares (10 points)"),
        new_code_cell("def squares(n):\n    ### BEGIN SOLUTION\n    return sum(i * i for i in range(1, n + 1))\n"
                      "    ### END SOLUTION"),
        new_code_cell(f'submit("{number}.1", squares(10))\ncheck("{number}.1")'),
        new_markdown_cell("Why is the sum a cubic in n?"),
        new_markdown_cell(f"#### Answer to Q1 (2 points, graded by hand; 3-60 words)\n\n{MODEL}"),
        new_code_cell(f'progress("lab{number}")'),
    ], metadata={"course": {"lab": f"lab{number}"}})


def _run(repo: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, *args], cwd=repo, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _copy_course(tmp_path: Path) -> Path:
    repo = tmp_path / "course"
    skip = shutil.ignore_patterns("__pycache__", "examples", "references", "*.onnx", "*.pt")
    for folder in ("util", "grader"):
        shutil.copytree(REPO / folder, repo / folder, ignore=skip)
    (repo / "solutions").mkdir()
    return repo


def _with_fixtures() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the copy's own grader and util
    env[labs.LAB_DIRS_ENV] = os.pathsep.join(str(f) for f in FIXTURES)
    return env


@pytest.mark.notebook
def test_the_next_lab_is_picked_up_from_its_folder_and_its_notebook_beside_the_test_labs(tmp_path):
    repo, number = _copy_course(tmp_path), NEXT
    name = f"lab{number}"
    folder = repo / "util" / "labs" / name
    folder.mkdir()
    (folder / "__init__.py").write_text('"""An added lab."""\n')
    tasks, cases, mistakes, rubrics = _lab(number)
    (folder / "tasks.py").write_text(tasks)
    (folder / "cases.py").write_text(cases)
    (folder / "mistakes.py").write_text(mistakes)
    (folder / "rubrics.py").write_text(rubrics)
    nbformat.write(_solution(number), str(repo / "solutions" / f"{name}_new.ipynb"))
    env = _with_fixtures()

    listed = _run(repo, "-c", "from util.labs import LABS; print(' '.join(LABS))", env=env).stdout.split()
    assert listed[-4:] == [name, "lab900", "lab997", "lab998"]
    assert listed == sorted(listed, key=lambda n: int(n[3:]))
    _run(repo, "-m", "grader", "build", "--lab", name, env=env)
    handout = (repo / "labs" / f"{name}_new.ipynb").read_text()
    assert "Type your answer here" in handout and MODEL not in handout  # the generated answer cell only
    assert (repo / "grader" / "examples" / name / "off_by_one.ipynb").is_file()
    _run(repo, "-m", "grader", "regen", "--lab", name, env=env)
    refs = json.loads((repo / "grader" / "references" / f"{name}.json").read_text())
    assert refs["answers"] == {f"{number}.1": 385} and refs["cases"] == {f"{number}.1": {"n=20": 2870, "n=0": 0}}
    assert set(refs["provenance"]["packages"]) == {"numpy"}  # what the lab declares, nothing the core lists
    out = tmp_path / "out"
    _run(repo, "-m", "grader", "grade", f"solutions/{name}_new.ipynb", f"labs/{name}_new.ipynb",
         f"grader/examples/{name}/off_by_one.ipynb", "--out", str(out), "--no-progress", env=env)
    rows = (out / "gradebook.csv").read_text().splitlines()
    assert len(rows) == 4, rows  # a header and the solution, the student copy and the example
    totals = sorted(json.loads(p.read_text())["score"] for p in out.glob("*/results.json"))
    assert totals == [0, 3, 8]  # the stub, off_by_one (its answer and n=20 fail; n=0 still passes), the solution
    lab_rows = (out / f"gradebook_{name}.csv").read_text()
    assert f"{number}.Q1,{number}.Q1 max" in lab_rows and "to mark" in lab_rows  # the solution's answer: to mark


@pytest.mark.parametrize("taken", ["lab1", "lab01"])
def test_a_test_lab_that_takes_a_course_labs_number_is_refused_naming_both_folders(tmp_path, taken):
    extra = tmp_path / "extra"
    (extra / taken).mkdir(parents=True)
    (extra / taken / "tasks.py").write_text(TASKS_TEMPLATE.replace("labNN", taken).replace("NN", "1"))
    env = {**os.environ, labs.LAB_DIRS_ENV: str(extra)}
    done = subprocess.run([sys.executable, "-c", "import util.labs"], cwd=REPO, capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("util.labs.LabClash: two labs take number 1:")
    assert str(extra / taken) in last and str(REPO / "util" / "labs" / "lab1") in last
    assert "test labs are numbered from 900" in last


def test_a_labs_sources_are_the_course_modules_it_and_its_solution_import_found_by_reading_them():
    course = [lab for name, lab in LABS.items() if labs.PACKAGES[name].startswith("util.labs.")]
    assert len(course) >= 12
    for lab in course:
        found = [path.relative_to(REPO).as_posix() for path in labs.imported_sources(lab)]
        files = [path.relative_to(REPO).as_posix() for path in labs.source_files(lab)]
        assert "util/seeding.py" in found, lab.name  # `from util import setup`: the seeds make the values
        assert not set(found) & set(labs.PLUMBING), lab.name
        assert set(found) <= set(files) and f"util/labs/{lab.name}/tasks.py" in files, lab.name
        assert f"util/labs/{lab.name}/mistakes.py" not in files, lab.name
        assert not [s for s in lab.shared_sources if s in found], f"{lab.name} names a module it imports"
    by_name = {lab.name: [p.relative_to(REPO).as_posix() for p in labs.imported_sources(lab)] for lab in course}
    assert "util/onnx_session.py" in by_name["lab11"]  # imported only inside a function of its judge_measure.py
    assert "util/data.py" in by_name["lab9"] and "util/data.py" in by_name["lab12"]
    assert "util/data.py" not in by_name["lab1"]


def test_plumbing_names_modules_that_exist_and_compute_no_lab_value():
    for path in labs.PLUMBING:
        assert (REPO / path).is_file(), path
    assert not {"util/seeding.py", "util/models.py", "util/onnx_models.py", "util/data.py"} & set(labs.PLUMBING)


def test_a_cell_that_does_not_parse_imports_nothing_and_the_others_still_count():
    assert labs._imports("def broken(:\n    import util.data") == set()
    assert labs._imports("def f():\n    from util.models import build_model\n") == {"util.models",
                                                                                 "util.models.build_model"}


def test_another_labs_module_a_lab_imports_is_one_of_its_sources():
    """Lab 15 decodes with lab 10's TinyGPT: a change to ``gpt.py`` makes lab 15's references stale, and no other
    lab's grader-only file is ever counted as a source."""
    found = labs.source_files(labs.get_lab("lab15"))
    assert REPO / "util" / "labs" / "lab10" / "gpt.py" in found
    for lab in LABS.values():
        for path in labs.source_files(lab):
            if path.is_relative_to(REPO / "util" / "labs") and not path.is_relative_to(labs.folder(lab)):
                within = path.relative_to(REPO / "util" / "labs").parts[1:]  # inside the other lab's folder
                assert not labs.grader_only(Path(*within)), path
