"""Shared fixtures: grading a notebook is slow (seconds), so each is graded once per session.

Under pytest-xdist (``-n 3``, the default in ``pyproject.toml``) every test that belongs to one lab
(a ``lab_name`` parameter, a ``[labN/...]`` id, a module ``tests/labs/test_labN_*`` or a test
``test_labN_*``) joins that
lab's group (``--dist loadgroup``), so one worker grades each lab's solution once and reuses it;
every other test stays with its module's group, so a module-scoped fixture (a hostile class graded
once) runs on one worker only. ``tests/test_test_groups.py`` checks that the groups hold (with pytest 9.2
they silently did not: ``requirements.txt`` pins the pytest they hold with).

Each lab's tests have a budget in seconds (:data:`LAB_BUDGETS`): at the end of a run the time each lab's tests
took (set-up, call and tear-down, summed over its tests, whichever worker ran them) is printed against it, with
the slowest modules, and a lab over its budget fails the run (``tests/test_lab_budgets.py`` checks that it does),
so that a lab whose tests outgrow their share of CI is seen the day it happens.
"""
from __future__ import annotations

import os
import re
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import pytest

from grader.core import records
from grader.core.limits import Limits
from grader.core.results import SubmissionResult
from grader.grade import resume
from grader.grade.submission import grade_submission
from util.labs import LABS, get_lab

REPO = Path(__file__).resolve().parent.parent


REUSE_ENV = "COURSE_TESTS_GRADEBOOK"
"""A gradebook folder this test run may take results from (``.ci/run`` sets it to the folder its main job,
``python -m grader grade grader/examples``, just wrote): a notebook graded there under the very key this
run would grade it under (the same notebook, references, scoring code and limits) is not graded again.
Unset (a developer's run), everything is graded here."""


@lru_cache(maxsize=None)
def _gradebook(folder: str) -> dict[str, tuple[Path, records.Previous]]:
    return {os.path.abspath(r.source): (Path(folder) / name, r)
            for name, r in records.load_all(Path(folder)).items() if r.source}


def _from_gradebook(path: Path, lab_name: str) -> tuple[SubmissionResult, Path] | None:
    folder = os.environ.get(REUSE_ENV)
    found = _gradebook(folder).get(os.path.abspath(path)) if folder else None
    if found is None or found[1].retry:
        return None
    key = resume.key(path, get_lab(lab_name), Limits())
    key["feedback"] = "expected values hidden"
    return (found[1].result, found[0]) if found[1].key == key else None


def folder_from_gradebook(path: Path, lab_name: str) -> Path | None:
    """The result folder the main job's gradebook (:data:`REUSE_ENV`) holds for ``path``, graded under the very key
    this run would grade it under; ``None`` when there is none (a developer's run grades it instead)."""
    found = _from_gradebook(Path(path), lab_name)
    return found[1] if found else None


@pytest.fixture(scope="session")
def graded(tmp_path_factory):
    """``graded(path, lab_name) -> SubmissionResult``, memoised for the session (and taken from the main
    job's gradebook when :data:`REUSE_ENV` names one that graded it under the same key);
    ``graded.folder(path, lab_name)``: the folder its result files lie in (``cases.json``,
    ``diagnosis.json``...), graded by the same one grading."""
    cache: dict[tuple[str, str], tuple[SubmissionResult, Path]] = {}

    def _graded(path: Path, lab_name: str) -> tuple[SubmissionResult, Path]:
        key = (str(path), lab_name)
        if key not in cache:
            out = tmp_path_factory.mktemp("graded")
            cache[key] = _from_gradebook(path, lab_name) or (grade_submission(path, get_lab(lab_name), out), out)
        return cache[key]

    def grade(path: Path, lab_name: str) -> SubmissionResult:
        return _graded(path, lab_name)[0]

    grade.folder = lambda path, lab_name: _graded(path, lab_name)[1]
    return grade


_LAB = re.compile(r"(?<![\w])(lab\d+)(?![\w])")


def _lab_of(item: pytest.Item) -> str | None:
    """The course lab ``item`` belongs to, if any: a name the tests give a lab of their own (``lab900``, a hostile
    submission's folder) is no lab, and its test stays with its module (and the module's fixtures)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    named = re.match(r"test_(lab\d+)_", Path(str(item.fspath)).name) or re.match(r"test_(lab\d+)_", item.name)
    found = _LAB.search(item.nodeid.partition("[")[2])
    for name in (params.get("lab_name"), named and named.group(1), found and found.group(1)):
        if isinstance(name, str) and name in LABS:
            return name
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (its worker plugin registers after this file)
def pytest_collection_modifyitems(config, items):
    """Put each lab's tests in one xdist group, the others in their module's (a no-op without xdist); a test or
    module that names its group itself (``pytest.mark.xdist_group``) keeps it."""
    for item in items:  # the rest stay with their module: module-scoped fixtures run once, on one worker
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(_lab_of(item) or Path(str(item.fspath)).stem))


# ---------------------------------------------------------------- each lab's budget

MEASURED = {"lab1": 105.7, "lab2": 62.4, "lab3": 220.2, "lab4": 532.3, "lab5": 325.9, "lab6": 165.8, "lab7": 229.1,
            "lab8": 299.8, "lab9": 133.3, "lab10": 452.9, "lab11": 597.5, "lab12": 527.1, "lab13": 683.4, "lab14":
            529.6, "lab15": 612.1, "lab16": 846.0, "lab17": 53.6}
"""Seconds measured on this course machine (2026-12-04, quiet but for the run itself, ``build/artifacts/test_times.txt``:
the default run with the main job's gradebook, 47 minutes of tests, before the earlier frozen releases, two labs'
two-thread gradings and three of lab 13's variants went under ``-m slow``). CI's run of 2026-12-03 took 1.0-3.4x
its run of 2026-12-02's figures, which these replace: lab 16's tests reached 85 % of a budget from them. Lab 16's
is its 1,049.4 s less the 203.4 s of the three of its tests since under ``-m slow``."""
PROVISIONAL = 1200.0
"""The budget of a lab whose tests were not measured as they are now: about four times the measured labs' figures.
CI prints every lab's seconds (``build/artifacts/test_times.txt``): replace it with CI's figure in :data:`MEASURED`."""
HEADROOM = 4.0
"""A measured lab's budget over its measure: the machine's load (CI's own machine went from quiet to a load of 6,
which more than doubles a test's time) and the tests a next release adds. The default run on this course machine
at a load of 6-16, without CI's gradebook (every example graded again), took 1.5-4x these budgets: that is not
CI's run, and CI holds the budgets only with its gradebook."""
FLOOR = 400.0
"""No measured lab's budget is below this: a lab with few quick tests spends most of its time starting processes
and kernels, which load slows most."""
LAB_BUDGETS: dict[str, float] = {name: max(FLOOR, float(int(HEADROOM * MEASURED[name]))) if name in MEASURED
                                 else PROVISIONAL for name in LABS}
"""Seconds each lab's tests may take in the default run (``python -m pytest``; the ``slow``, ``images`` and ``hub``
tests are not counted), summed over its tests: set-up, call and tear-down, on whichever worker, so a lab's share of
CI's workers, not its wall time. :data:`HEADROOM` times :data:`MEASURED` (at least :data:`FLOOR`), else
:data:`PROVISIONAL`. A lab it does not name is held to :data:`DEFAULT_BUDGET`, and
``tests/test_lab_budgets.py`` fails until the lab has a figure here: a new lab must be given one."""
DEFAULT_BUDGET = 600.0
"""The budget of a lab :data:`LAB_BUDGETS` does not name (lab 17 on the day it arrives, until it is given one)."""
BUDGETS_ENV = "COURSE_TESTS_BUDGETS"
"""``1``: hold the budgets; ``0``: print the table only. Unset: held when :data:`REUSE_ENV` is set, as in CI (the
budgets are CI's: a developer's run grades the example submissions again and takes longer)."""
NOT_COUNTED = ("slow", "images", "hub")
_LAB_KEY = "course_lab"
_RUN: dict = {}
"""This run's seconds: per lab, the lab's tests, per module."""


def budget_of(lab: str) -> tuple[float, bool]:
    """``lab``'s budget in seconds, and whether it is its own (else :data:`DEFAULT_BUDGET`)."""
    return (LAB_BUDGETS[lab], True) if lab in LAB_BUDGETS else (DEFAULT_BUDGET, False)


def pytest_configure(config):
    _RUN.update(labs=defaultdict(float), tests=defaultdict(set), modules=defaultdict(float))


@pytest.hookimpl(trylast=True)
def pytest_itemcollected(item):
    """Each test carries its lab (or none) in its reports, so the controller of an xdist run can count it."""
    counted = not any(item.get_closest_marker(name) for name in NOT_COUNTED)
    item.user_properties.append((_LAB_KEY, [_lab_of(item) if counted else None, counted]))


def pytest_runtest_logreport(report):
    if "labs" not in _RUN:
        return
    lab, counted = dict(report.user_properties).get(_LAB_KEY, (None, False))
    _RUN["modules"][report.nodeid.split("::")[0]] += report.duration
    if lab and counted:
        _RUN["labs"][lab] += report.duration
        _RUN["tests"][lab].add(report.nodeid)


def over_budget(labs: dict[str, float]) -> list[str]:
    """A sentence for each lab of ``labs`` (lab -> seconds its tests took) over its budget."""
    over = []
    for lab, seconds in sorted(labs.items()):
        budget, own = budget_of(lab)
        if seconds > budget:
            over.append(f"{lab}'s tests took {seconds:.0f} s, over their budget of {budget:.0f} s "
                        f"({'LAB_BUDGETS' if own else 'DEFAULT_BUDGET, none of its own'} in tests/conftest.py): make "
                        "them cheaper (grade once and share the result, keep per-lab repetitions under -m slow) or, "
                        "if the lab grew, raise its budget saying why")
    return over


def _held(config) -> bool:
    wanted = os.environ.get(BUDGETS_ENV, "1" if os.environ.get(REUSE_ENV) else "0")
    return wanted != "0" and not hasattr(config, "workerinput")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    if "labs" in _RUN and _held(session.config) and session.exitstatus == 0 and over_budget(_RUN["labs"]):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


TIMES_ENV = "COURSE_TESTS_TIMES"
"""A file the table is also written to (``.ci/run`` prints it again when CI ends, with its steps' times)."""


def time_table(config) -> list[str]:
    """This run's seconds per lab against its budget, the labs' total, the slowest modules, what is over."""
    times = _RUN
    lines = []
    for lab in sorted(times["labs"], key=lambda name: list(LABS).index(name) if name in LABS else len(LABS)):
        seconds = times["labs"][lab]
        budget, own = budget_of(lab)
        lines.append(f"{lab:>6}  {len(times['tests'][lab]):5d} tests  {seconds:7.1f} s  budget {budget:6.0f} s"
                     f"{'' if own else ' (default)'}  {100 * seconds / budget:5.1f}%  "
                     f"{'OVER' if seconds > budget else 'ok'}")
    lines.append(f"{'labs':>6}  {sum(len(t) for t in times['tests'].values()):5d} tests  "
                 f"{sum(times['labs'].values()):7.1f} s of {sum(times['modules'].values()):.1f} s of test time in all")
    lines.append("slowest modules:")
    lines += [f"  {seconds:7.1f} s  {module}"
              for module, seconds in sorted(times["modules"].items(), key=lambda kv: -kv[1])[:15]]
    held = _held(config)
    lines += [("" if held else f"(not held: {BUDGETS_ENV} is 0, or unset outside CI) ") + sentence
              for sentence in over_budget(times["labs"])]
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _RUN.get("modules") or hasattr(config, "workerinput"):
        return
    terminalreporter.section("time per lab (seconds of test time, summed over workers) and its budget")
    lines = time_table(config)
    for line in lines:
        terminalreporter.write_line(line, red="over their budget" in line and _held(config))
    if os.environ.get(TIMES_ENV):
        path = Path(os.environ[TIMES_ENV])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
