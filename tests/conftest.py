"""Shared fixtures: grading a notebook is slow (seconds), so each is graded once per session.

Under pytest-xdist (``-n 3``, the default in ``pyproject.toml``) every test that belongs to one lab
(a ``lab_name`` parameter, a ``[labN/...]`` id, a module ``tests/labs/test_labN_*`` or a test
``test_labN_*``) joins that
lab's group (``--dist loadgroup``), so one worker grades each lab's solution once and reuses it;
every other test stays with its module's group, so a module-scoped fixture (a hostile class graded
once) runs on one worker only. ``tests/test_test_groups.py`` checks that the groups hold (with pytest 9.2
they silently did not: ``requirements.txt`` pins the pytest they hold with).
"""
from __future__ import annotations

import os
import re
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
