"""The Gradescope autograder zip, run in a simulated /autograder layout in a temporary folder; its
setup.sh run against stand-ins for apt-get and Python, to check how it finds a Python 3.11."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from grader import REPO, cli
from util.labs import get_lab


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    """The lab 1 zip, unpacked where Gradescope puts it: <root>/source."""
    root = tmp_path_factory.mktemp("autograder")
    zip_path = root / "autograder_lab1.zip"
    assert cli.main(["gradescope", "--lab", "lab1", "--out", str(zip_path), "--memory", "3G", "--timeout", "600",
                     "--cell-timeout", "240"]) == 0
    with zipfile.ZipFile(zip_path) as archive:
        names = archive.namelist()
        archive.extractall(root / "source")
    for script in ("setup.sh", "run_autograder"):
        (root / "source" / script).chmod(0o755)
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")  # where Gradescope runs it from
    return root, names


def _run_autograder(root, *files):
    """A fresh submission folder holding ``files`` (path -> destination name); run_autograder on it."""
    shutil.rmtree(root / "submission", ignore_errors=True)
    shutil.rmtree(root / "results", ignore_errors=True)
    (root / "submission").mkdir()
    for source, name in files:
        shutil.copy(source, root / "submission" / name)
    env = {**os.environ, "GRADESCOPE_ROOT": str(root), "PYTHON": sys.executable}
    done = subprocess.run([str(root / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=600, cwd=root)
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
    assert f"autograde --lab lab1 --memory {3 << 30} --procs 64" in script
    assert script.rstrip().endswith("--timeout 600 --cell-timeout 240")
    assert 'PYTHON="${PYTHON:-/autograder/venv/bin/python}"' in script


@pytest.mark.notebook
def test_run_autograder_grades_the_submission_into_results_json(autograder):
    root, _ = autograder
    lab = get_lab("lab1")
    data = _run_autograder(root, (REPO / "solutions" / lab.notebook, "my_lab1.ipynb"))
    assert data["score"] == lab.auto_points  # the written answers are marked by hand, outside Gradescope's score
    assert [t["number"] for t in data["tests"]] == [t.id for t in lab.tasks] + [q.id for q in lab.written]
    assert all(t["status"] == "passed" and t["score"] == t["max_score"] for t in data["tests"])
    assert [t["output"] for t in data["tests"] if t["number"] == "1.Q1"][0].startswith("answer received, ")
    assert (root / "results" / "feedback.md").read_text().count("passed") >= len(lab.tasks)
    html = (root / "results" / "feedback.html").read_text()
    assert "<strong>Score: 95 / 100</strong> (not final: 1 written answer still to be marked)" in html


def test_a_submission_without_a_notebook_gets_zero_and_the_reason(autograder, tmp_path):
    root, _ = autograder
    (tmp_path / "lab1.py").write_text("print('answers')\n")
    data = _run_autograder(root, (tmp_path / "lab1.py", "lab1.py"))
    assert data["score"] == 0
    assert "no notebook (.ipynb) was found in submission/ (it holds: lab1.py)" in data["output"]


def test_two_notebooks_uploaded_the_results_say_which_was_graded(autograder, tmp_path):
    root, _ = autograder
    (tmp_path / "broken.ipynb").write_text("{")
    data = _run_autograder(root, (tmp_path / "broken.ipynb", "a_draft.ipynb"),
                           (tmp_path / "broken.ipynb", get_lab("lab1").notebook))
    assert data["output"].startswith(
        "you uploaded 2 notebooks (a_draft.ipynb, lab1_pytorch_analysis.ipynb); only lab1_pytorch_analysis.ipynb "
        "was graded, because it is named like the lab's notebook")
    assert "only lab1_pytorch_analysis.ipynb was graded" in (root / "results" / "feedback.html").read_text()
    assert "only lab1_pytorch_analysis.ipynb was graded" in (root / "results" / "feedback.md").read_text()


def test_what_students_see_names_no_path_of_the_grader(autograder, tmp_path):
    root, _ = autograder
    (tmp_path / "broken.ipynb").write_text("{")
    _run_autograder(root, (tmp_path / "broken.ipynb", "lab1.ipynb"))
    for name in ("results.json", "feedback.md", "feedback.html"):
        text = (root / "results" / name).read_text()
        assert str(root) not in text and str(REPO) not in text and "/tmp/" not in text, (name, text[:500])


# setup.sh, against stand-ins: each stand-in logs how it was called; "python3.11" is a real Python 3.11
# whose "-m venv" makes a venv python that logs pip and import checks instead of installing.

STAND_INS = {
    "apt-get": """#!/bin/bash
echo "apt-get $*" >> "$LOG"
if [[ "$*" == *python3.11* ]]; then
    [ -n "$APT_HAS_PYTHON311" ] && cp "$STUBS/python3.11.pkg" "$BIN/python3.11" && exit 0
    exit 100
fi
exit 0
""",
    "add-apt-repository": """#!/bin/bash
echo "add-apt-repository $*" >> "$LOG"
exit 1
""",
    "python3.11.pkg": """#!/bin/bash
echo "python3.11 $*" >> "$LOG"
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then mkdir -p "$3/bin" && cp "$STUBS/venv-python" "$3/bin/python"; exit; fi
exec "$REAL_PYTHON" "$@"
""",
    "venv-python": """#!/bin/bash
echo "venv-python $*" >> "$LOG"
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then exit 0; fi
if [ "$1" = "-c" ]; then exit 0; fi
exec "$REAL_PYTHON" "$@"
""",
    "python3": """#!/bin/bash
echo "python3 $*" >> "$LOG"
exit 1
""",
}


def _setup(autograder, tmp_path, *, python311=False, apt_has_python311=False, ubuntu=True):
    root, _ = autograder
    stubs, bin_ = tmp_path / "stubs", tmp_path / "bin"
    stubs.mkdir()
    bin_.mkdir()
    for name, text in STAND_INS.items():
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    for name in ("apt-get", "add-apt-repository", "python3"):  # python3: an image's own, not 3.11
        os.symlink(stubs / name, bin_ / name)
    if python311:
        shutil.copy(stubs / "python3.11.pkg", bin_ / "python3.11")
    for tool in ("bash", "dirname", "grep", "cat", "mkdir", "cp"):
        os.symlink(shutil.which(tool), bin_ / tool)
    (tmp_path / "os-release").write_text("ID=ubuntu\nVERSION_ID=\"24.04\"\n" if ubuntu else "ID=debian\n")
    env = {"PATH": str(bin_), "LOG": str(tmp_path / "log"), "STUBS": str(stubs), "BIN": str(bin_),
           "REAL_PYTHON": sys.executable, "COURSE_VENV": str(tmp_path / "venv"),
           "COURSE_OS_RELEASE": str(tmp_path / "os-release"), "HOME": str(tmp_path)}
    if apt_has_python311:
        env["APT_HAS_PYTHON311"] = "1"
    done = subprocess.run([shutil.which("bash"), str(root / "source" / "setup.sh")], env=env, capture_output=True,
                          text=True, timeout=120)
    log = (tmp_path / "log").read_text().splitlines() if (tmp_path / "log").exists() else []
    return done, log


def test_setup_uses_a_python_311_on_the_path_in_a_venv(autograder, tmp_path):
    done, log = _setup(autograder, tmp_path, python311=True)
    assert done.returncode == 0, done.stderr
    assert "apt-get install -y -q --no-install-recommends bubblewrap g++ cmake make ca-certificates" in log
    assert f"python3.11 -m venv {tmp_path / 'venv'}" in log
    assert "venv-python -m pip install --no-cache-dir --progress-bar off -r requirements.txt" in log
    assert not [line for line in log if line.startswith(("python3 ", "add-apt-repository"))
                or "install" in line and "python3.11" in line]  # the image's python3 is never used
    from grader import __version__
    assert done.stdout.rstrip().endswith(f"setup.sh: ready: python -m grader {__version__}")


def test_setup_installs_the_distributions_python_311_when_there_is_none(autograder, tmp_path):
    done, log = _setup(autograder, tmp_path, apt_has_python311=True)
    assert done.returncode == 0, done.stderr
    assert "apt-get install -y -q --no-install-recommends python3.11 python3.11-venv" in log
    assert f"python3.11 -m venv {tmp_path / 'venv'}" in log


def test_setup_fails_loudly_without_a_python_311(autograder, tmp_path):
    done, log = _setup(autograder, tmp_path)
    assert done.returncode == 1
    assert "add-apt-repository -y ppa:deadsnakes/ppa" in log  # tried on Ubuntu
    assert "setup.sh: FAILED: no Python 3.11 could be found or installed" in done.stderr
    assert not (tmp_path / "venv").exists() and not [line for line in log if "-m pip" in line]
