"""Shared fixtures: grading a notebook is slow (seconds), so each is graded once per session."""
from __future__ import annotations

from pathlib import Path

import pytest

from grader.grade.submission import grade_submission
from grader.report.results import SubmissionResult
from util.labs import get_lab

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def graded(tmp_path_factory):
    """``graded(path, lab_name) -> SubmissionResult``, memoised for the session."""
    cache: dict[tuple[str, str], SubmissionResult] = {}

    def grade(path: Path, lab_name: str) -> SubmissionResult:
        key = (str(path), lab_name)
        if key not in cache:
            out = tmp_path_factory.mktemp("graded")
            cache[key] = grade_submission(path, get_lab(lab_name), out)
        return cache[key]

    return grade
