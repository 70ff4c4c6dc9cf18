"""The record each graded submission keeps: ``grading.json`` in its result folder.

It is written last (so its presence means the other files are complete), and every class-level
output is built from the records of a gradebook folder (the gradebooks, statistics, exports, the
class report), never from one run's results: a rerun that grades one student rewrites that
student's record and keeps everyone else's. Its fields (``format`` 2):

* ``key``: what the submission was graded under, part by part (below);
* ``result``: the full result (:meth:`grader.core.results.SubmissionResult.to_dict`);
* ``source``: the absolute path of what was submitted (a later run that names the same path
  writes to the same folder, whatever else it grades);
* ``submitted``: when it was submitted (ISO 8601, UTC): the newest modification time of its files;
* ``graded``: when it was graded;
* ``retry``: present (and true) when the grader itself failed: the row is shown, and the next run
  grades it again.

Written by :mod:`grader.grade` (which computes the key, :mod:`grader.grade.resume`), read by
:mod:`grader.report` (the class's files) and by the next run (what to skip).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from grader.core.results import SubmissionResult
from util.answers import write_json

RECORD = "grading.json"
"""File name of the record in each submission's result folder."""
FORMAT = 2
"""Version of the record's layout (1 had no ``format``, ``source``, ``submitted`` or ``graded``)."""


@dataclass(frozen=True)
class Previous:
    """What an earlier run stored for a submission."""

    key: dict[str, str]
    result: SubmissionResult
    source: str | None = None
    """Absolute path of what was submitted (``None`` in records of format 1)."""
    submitted: datetime | None = None
    graded: datetime | None = None
    retry: bool = False
    """The grader failed on it: shown, and graded again by the next run."""


def _time(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if text else None
    except (TypeError, ValueError):
        return None


def load(folder: Path) -> Previous | None:
    """The stored record in ``folder``, or ``None`` if there is none (or it cannot be read)."""
    try:
        data = json.loads((folder / RECORD).read_text(encoding="utf-8"))
        return Previous(dict(data["key"]), SubmissionResult.from_dict(data["result"]), data.get("source"),
                        _time(data.get("submitted")), _time(data.get("graded")), bool(data.get("retry")))
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


def load_all(out: Path) -> dict[str, Previous]:
    """Every record under ``out`` (one per result folder), by folder name, sorted by name."""
    records = {}
    for record in sorted(out.glob(f"*/{RECORD}")) if out.is_dir() else ():
        previous = load(record.parent)
        if previous is not None:
            records[record.parent.name] = previous
    return records


def save(folder: Path, grading_key: dict[str, str], result: SubmissionResult, *, source: Path | None = None,
         submitted: datetime | None = None, retry: bool = False) -> None:
    """Store the record (call after every other result file is written)."""
    data = {"format": FORMAT, "key": grading_key, "result": result.to_dict(),
            "source": os.path.abspath(source) if source is not None else None,
            "submitted": submitted.isoformat() if submitted else None,
            "graded": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if retry:
        data["retry"] = True
    write_json(folder / RECORD, data)
