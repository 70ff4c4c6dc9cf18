"""A lab is one folder: the core names no lab, and a new lab is picked up from its folder and notebook.

The first test reads every core module (``grader/``, ``util/`` outside ``util/labs/labN/``); the
second copies the course's code into a temporary repository, adds ``util/labs/lab99/`` and
``solutions/lab99_new.ipynb`` (nothing else), and builds, regenerates and grades it there with the
command line, sandbox included.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader import REPO

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


TASKS = '''\
"""A lab added by a test: one folder, one notebook, nothing else touched."""
from util.contract import Case, Check, Lab, Task


def _call(fn, spec):
    return fn(spec["n"])


LAB = Lab(name="lab99", title="Added lab", notebook="lab99_new.ipynb", tasks=(
    Task(id="99.1", title="Squares", answer_points=4, answer="the sum of the first n squares for n = 10",
         function="squares", run_case=_call, cases=(Case("n=20", {"n": 20}, 3), Case("n=0", {"n": 0}, 3)),
         checks=(Check("squares(2) = 5", lambda f: None if f(2) == 5 else f"squares(2) is {f(2)}", "1 + 4",
                       calls_function=True),)),
))
'''
MISTAKES = '''\
from util.contract import ANSWER, Mistake

MISTAKES = (Mistake("off_by_one", "sums up to n - 1", (("range(1, n + 1)", "range(1, n)"),),
                    {"99.1": (ANSWER, "n=20")}),)
'''


def _solution() -> nbformat.NotebookNode:
    return new_notebook(cells=[
        new_code_cell("from util import check, progress, setup, submit\nsetup()"),
        new_markdown_cell("## Task 99.1: Squares (10 points)"),
        new_code_cell("def squares(n):\n    ### BEGIN SOLUTION\n    return sum(i * i for i in range(1, n + 1))\n"
                      "    ### END SOLUTION"),
        new_code_cell('submit("99.1", squares(10))\ncheck("99.1")'),
        new_code_cell('progress("lab99")'),
    ], metadata={"course": {"lab": "lab99"}})


def _run(repo: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, *args], cwd=repo, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.mark.notebook
def test_a_new_lab_is_picked_up_from_its_folder_and_its_notebook(tmp_path):
    repo = tmp_path / "course"
    skip = shutil.ignore_patterns("__pycache__", "examples", "references", "*.onnx", "*.pt")
    for folder in ("util", "grader"):
        shutil.copytree(REPO / folder, repo / folder, ignore=skip)
    (repo / "solutions").mkdir()
    lab = repo / "util" / "labs" / "lab99"
    lab.mkdir()
    (lab / "__init__.py").write_text('"""An added lab."""\n')
    (lab / "tasks.py").write_text(TASKS)
    (lab / "mistakes.py").write_text(MISTAKES)
    nbformat.write(_solution(), str(repo / "solutions" / "lab99_new.ipynb"))

    listed = _run(repo, "-c", "from util.labs import LABS; print(' '.join(LABS))").stdout.split()
    assert listed[-1] == "lab99" and listed[:-1] == sorted(listed[:-1], key=lambda n: int(n[3:]))
    _run(repo, "-m", "grader", "build", "--lab", "lab99")
    assert (repo / "labs" / "lab99_new.ipynb").is_file()
    assert (repo / "grader" / "examples" / "lab99" / "off_by_one.ipynb").is_file()
    _run(repo, "-m", "grader", "regen", "--lab", "lab99")
    refs = json.loads((repo / "grader" / "references" / "lab99.json").read_text())
    assert refs["answers"] == {"99.1": 385} and refs["cases"] == {"99.1": {"n=20": 2870, "n=0": 0}}
    out = tmp_path / "out"
    _run(repo, "-m", "grader", "grade", "solutions/lab99_new.ipynb", "labs/lab99_new.ipynb",
         "grader/examples/lab99/off_by_one.ipynb", "--out", str(out), "--no-progress")
    rows = (out / "gradebook.csv").read_text().splitlines()
    assert len(rows) == 4, rows  # a header and the solution, the student copy and the example
    totals = sorted(json.loads(p.read_text())["score"] for p in out.glob("*/results.json"))
    assert totals == [0, 3, 10]  # the stub, off_by_one (its answer and n=20 fail; n=0 still passes), the solution
