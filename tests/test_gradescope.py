"""The Gradescope autograder zip, run in a simulated /autograder layout in a temporary folder."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from grader import cli
from grader import REPO
from util.labs import get_lab


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    """The lab 1 zip, unpacked where Gradescope puts it: <root>/source."""
    root = tmp_path_factory.mktemp("autograder")
    zip_path = root / "autograder_lab1.zip"
    assert cli.main(["gradescope", "--lab", "lab1", "--out", str(zip_path), "--memory", "3G"]) == 0
    with zipfile.ZipFile(zip_path) as archive:
        names = archive.namelist()
        archive.extractall(root / "source")
    for script in ("setup.sh", "run_autograder"):
        (root / "source" / script).chmod(0o755)
    return root, names


def _run_autograder(root, *files):
    """A fresh submission folder holding ``files`` (path -> destination name); run_autograder on it."""
    shutil.rmtree(root / "submission", ignore_errors=True)
    shutil.rmtree(root / "results", ignore_errors=True)
    (root / "submission").mkdir()
    for source, name in files:
        shutil.copy(source, root / "submission" / name)
    env = {**os.environ, "GRADESCOPE_ROOT": str(root), "PYTHON": sys.executable}
    done = subprocess.run([str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((root / "results" / "results.json").read_text())


def test_the_zip_has_the_grader_and_references_but_no_solutions(autograder):
    _, names = autograder
    assert {"setup.sh", "run_autograder", "requirements.txt", "grader/cli.py", "util/contract.py",
            "grader/references/lab1.json"} <= set(names)
    assert not [n for n in names if n.startswith(("solutions/", "grader/examples/", "tests/"))]
    assert [n for n in names if n.startswith("grader/references/")] == ["grader/references/lab1.json"]


def test_run_autograder_script_passes_the_limits(autograder):
    root, _ = autograder
    script = (root / "source" / "run_autograder").read_text()
    assert f"autograde --lab lab1 --memory {3 << 30}" in script


@pytest.mark.notebook
def test_run_autograder_grades_the_submission_into_results_json(autograder):
    root, _ = autograder
    lab = get_lab("lab1")
    data = _run_autograder(root, (REPO / "solutions" / lab.notebook, "my_lab1.ipynb"))
    assert data["score"] == lab.max_points
    assert [t["number"] for t in data["tests"]] == [t.id for t in lab.tasks]
    assert all(t["status"] == "passed" and t["score"] == t["max_score"] for t in data["tests"])
    assert (root / "results" / "feedback.md").read_text().count("passed") >= len(lab.tasks)


def test_a_submission_without_a_notebook_gets_zero_and_the_reason(autograder, tmp_path):
    root, _ = autograder
    (tmp_path / "lab1.py").write_text("print('answers')\n")
    data = _run_autograder(root, (tmp_path / "lab1.py", "lab1.py"))
    assert data["score"] == 0
    assert "no notebook (.ipynb) was found in submission/ (it holds: lab1.py)" in data["output"]
