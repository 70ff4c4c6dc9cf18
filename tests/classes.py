"""Small hand-made classes for the report-side tests: results built in memory and stored as a grading
run would store them (``grading.json`` in each submission's folder), so the gradebooks, exports and
the class report are tested in milliseconds without running a notebook.

``result("lab900", {"900.1": 5, "900.2": (0, "failed", "expected 42, found 41")})`` makes a result: each
task is worth 5 points in one check (``answer``); a number is its points (5: passed, else failed),
a tuple gives points, status and message. ``store(out, "amy", result, source=..., submitted=...)``
writes the record.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from grader.core import records
from grader.core.results import CheckResult, SubmissionResult, TaskResult

TITLES = {"900.1": "First", "900.2": "Second", "8.1": "Other"}


def result(lab: str, tasks: dict, *, execution: str = "completed", notes: tuple[str, ...] = (),
           max_points: float = 5) -> SubmissionResult:
    out = []
    for task_id, spec in tasks.items():
        if not isinstance(spec, tuple):
            spec = (spec, "passed" if spec == max_points else "failed", "" if spec == max_points else "differs")
        points, status, message = spec
        out.append(TaskResult(task_id, TITLES.get(task_id, task_id), (
            CheckResult("answer", status, points, max_points, message),)))
    return SubmissionResult(f"{lab}.ipynb", lab, tuple(out), 1.0, execution, notes)


def when(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(timezone.utc)


def store(out: Path, name: str, res: SubmissionResult, *, source: Path | str | None = None,
          submitted: str | None = None, digest: str | None = None, retry: bool = False) -> Path:
    """Write ``res`` as the record of submission ``name`` (and an empty results.json)."""
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text("{}")
    key = {"lab": res.lab, "submission": digest or f"hash-of-{name}", "references": "r", "grader": "g", "limits": "l"}
    records.save(folder, key, res, source=Path(source) if source else out.parent / "class" / name / "nb.ipynb",
                submitted=when(submitted) if submitted else None, retry=retry)
    return folder
