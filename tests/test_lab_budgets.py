"""Each lab's tests have a budget in seconds (``tests/conftest.py``, ``LAB_BUDGETS``), printed at the end of every run
and held: a run in which a lab's tests took longer than its budget fails, naming the lab and what to do. This runs
the course's hooks in small sessions of their own (under xdist, as CI runs them: the controller counts what its
workers report) with budgets of a second, and checks every lab of the course declares one."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import conftest as course

from util.labs import LABS

REPO = Path(__file__).resolve().parent.parent

CONFTEST = f'''
import importlib.util, sys
sys.path.insert(0, {str(REPO)!r})
spec = importlib.util.spec_from_file_location("course_conftest", {str(REPO / "tests" / "conftest.py")!r})
course = importlib.util.module_from_spec(spec)
spec.loader.exec_module(course)
course.LAB_BUDGETS = {{"lab1": 30.0, "lab2": 1.0}}
for name in ("pytest_configure", "pytest_itemcollected", "pytest_runtest_logreport", "pytest_sessionfinish",
             "pytest_terminal_summary", "pytest_collection_modifyitems"):
    globals()[name] = getattr(course, name)
'''

TESTS = '''
import time, pytest

@pytest.mark.parametrize("lab_name", ["lab1", "lab2"])
@pytest.mark.parametrize("i", range(3))
def test_a_lab(lab_name, i):
    time.sleep(0.6 if lab_name == "lab2" else 0.1)

@pytest.mark.slow
def test_lab2_repeated_under_slow():
    time.sleep(3)   # not counted: the default run leaves it out

def test_no_lab():
    time.sleep(0.2)
'''


def _session(tmp_path: Path, budgets: str | None, *extra: str, workers: str = "2") -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    (tmp_path / "test_budgets_run.py").write_text(TESTS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COURSE_TESTS"))}
    if budgets is not None:
        env[course.BUDGETS_ENV] = budgets
    return subprocess.run([sys.executable, "-m", "pytest", "-n", workers, "-p", "no:cacheprovider", "-q", "-c",
                           str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), str(tmp_path), *extra],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)


def test_a_lab_over_its_budget_fails_the_run_and_the_table_shows_every_lab(tmp_path):
    done = _session(tmp_path, "1")
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "8 passed" in out   # every test passed (the slow one runs here, not counted): the budget alone failed the run
    [lab1] = [line for line in out.splitlines() if line.strip().startswith("lab1 ")]
    [lab2] = [line for line in out.splitlines() if line.strip().startswith("lab2 ")]
    assert "3 tests" in lab1 and "budget     30 s" in lab1 and lab1.endswith("ok"), out
    assert "3 tests" in lab2 and "budget      1 s" in lab2 and lab2.endswith("OVER"), out
    seconds = float(lab2.split("tests")[1].split("s")[0])
    assert 1.8 <= seconds < 3, lab2   # its three tests, summed across both workers; the slow one not counted
    assert "lab2's tests took 2 s, over their budget of 1 s (LAB_BUDGETS in tests/conftest.py)" in out, out
    assert "test_budgets_run.py" in out.split("slowest modules:")[1]


def test_the_table_is_printed_and_nothing_held_when_budgets_are_off(tmp_path):
    done = _session(tmp_path, "0", workers="0")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(not held: COURSE_TESTS_BUDGETS is 0, or unset outside CI) lab2's tests took" in done.stdout


def test_a_run_of_some_labs_within_their_budgets_passes(tmp_path):
    done = _session(tmp_path, "1", "-k", "lab1 or no_lab", workers="0")
    assert done.returncode == 0 and "OVER" not in done.stdout, done.stdout   # lab1 within its budget, lab2 not run


def test_every_lab_of_the_course_has_a_budget_and_the_measured_ones_are_held_to_their_measure():
    assert all(0 < seconds <= 3600 for seconds in course.LAB_BUDGETS.values()), course.LAB_BUDGETS
    for lab, seconds in course.MEASURED.items():   # room for load and for the tests a release adds, not a blank cheque
        assert seconds < course.LAB_BUDGETS[lab] <= max(course.FLOOR, course.HEADROOM * seconds), \
            (lab, seconds, course.LAB_BUDGETS[lab])
    assert set(course.LAB_BUDGETS) == set(LABS)
    assert course.budget_of("lab99") == (course.DEFAULT_BUDGET, False)   # a lab the course does not have
