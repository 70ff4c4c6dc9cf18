"""Reading what a graded kernel exported (answers, hidden-case records), with bounds and shapes.

The student's code wrote these files, and it can write anything: a link to the grader's
references, a FIFO, six answers of 15 MiB, JSON nested 100,000 levels deep, a record without the
fields the grader reads. Everything here is read without following links, within stated limits
(checked before a byte is parsed, so the grader never holds more than the limits), parsed with
bounded nesting and checked against the shape the grader expects. What breaks a rule is left
out and reported (:attr:`Exports.refused`), never raised.
"""
from __future__ import annotations

import heapq
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.core.limits import format_size
from grader.core.untrusted import Refused, loads, read_bounded

MAX_EXPORT_BYTES = 2 << 20
"""Largest exported answer file the grader reads (the largest reference answer is about 26 KiB)."""
MAX_CASES_BYTES = 4 << 20
"""Largest hidden-case record file the grader reads."""
MAX_TOTAL_BYTES = 8 << 20
"""All answers and the hidden-case records together: more is not read."""
MAX_ANSWER_FILES = 64
"""Answer files read per notebook (a lab has fewer than 10 tasks)."""
HIDDEN = "hidden cases"
"""The key :attr:`Exports.refused` uses for the hidden-case records."""
CASE_STATUSES = ("ok", "error", "missing")



@dataclass(frozen=True)
class Exports:
    """What a notebook exported, as the grader may use it."""

    answers: dict[str, Any] = field(default_factory=dict)
    """Task id -> exported answer."""
    cases: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    """Task id -> case id -> ``{"status": "ok"|"error"|"missing", "value"?, "message": str}``."""
    refused: dict[str, str] = field(default_factory=dict)
    """Task id (the answer file's name), or :data:`HIDDEN`, -> why that file was not read."""


def _case_record(record: Any) -> dict[str, Any] | None:
    """A hidden-case record in the shape :mod:`grader.judge.score` reads, or ``None``."""
    if not isinstance(record, dict) or record.get("status") not in CASE_STATUSES:
        return None
    message = record.get("message")
    clean = {"status": record["status"], "message": message if isinstance(message, str) else ""}
    seconds = record.get("seconds")
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and 0 <= seconds < 1e7:
        clean["seconds"] = float(seconds)  # as the kernel timed it: shown in disputes, never scored
    if record["status"] == "ok":
        if "value" not in record:
            return None
        clean["value"] = record["value"]
    return clean


def _cases(data: Any) -> dict[str, dict[str, dict[str, Any]]]:
    if not isinstance(data, dict):
        raise Refused("it is not an object of tasks")
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for task_id, records in data.items():
        if isinstance(records, dict):
            out[task_id] = {case: clean for case, record in records.items()
                            if (clean := _case_record(record)) is not None}
    return out


def _why(exc: Exception) -> str:
    return str(exc) if isinstance(exc, Refused) else f"it could not be read ({getattr(exc, 'strerror', None) or exc})"


def _answer_names(folder: Path) -> tuple[list[str], int]:
    """The first :data:`MAX_ANSWER_FILES` + 1 ``*.json`` names in ``folder`` in name order (memory
    bounded, however many files there are) and how many there are."""
    count = 0

    def names():
        nonlocal count
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(".json"):
                    count += 1
                    yield entry.name

    try:
        first = heapq.nsmallest(MAX_ANSWER_FILES + 1, names())
    except OSError:
        return [], 0
    return first, count


def read_exports(answers_dir: Path, cases_path: Path) -> Exports:
    """Read the answers in ``answers_dir`` (``<task>.json``: ``{"task", "value"}``) and the hidden-case
    records in ``cases_path``, within the limits above; the records first (the grader's own cell
    wrote them last, so a flood of answers cannot push them out)."""
    exports = Exports()
    budget = MAX_TOTAL_BYTES
    if os.path.lexists(cases_path):
        try:
            data = read_bounded(cases_path, MAX_CASES_BYTES)
            budget -= len(data)
            exports.cases.update(_cases(loads(data)))
        except (Refused, OSError) as exc:
            exports.refused[HIDDEN] = _why(exc)
    if answers_dir.is_symlink() or not answers_dir.is_dir():
        return exports
    names, count = _answer_names(answers_dir)
    for index, name in enumerate(names):
        task = name[: -len(".json")]
        if index >= MAX_ANSWER_FILES:
            exports.refused[task] = (f"the notebook exported {count:,} answer files; the grader reads the first "
                                     f"{MAX_ANSWER_FILES} (in name order)")
            continue
        try:
            data = read_bounded(answers_dir / name, MAX_EXPORT_BYTES)
            if len(data) > budget:
                raise Refused(f"the notebook's exports together are over {format_size(MAX_TOTAL_BYTES)}, the most "
                              "the grader reads; this one was not read")
            budget -= len(data)
            record = loads(data)
            if not isinstance(record, dict) or "value" not in record or not isinstance(record.get("task"), str):
                raise Refused('it is not an exported answer ({"task": ..., "value": ...})')
            exports.answers[record["task"]] = record["value"]
        except (Refused, OSError) as exc:
            exports.refused[task] = _why(exc)
    return exports
