"""Manual overrides: the instructor's word on a task's points, applied on every run.

``overrides.csv`` (header ``student,task,points,reason``) sets task ``task`` of ``student`` to
``points`` (between 0 and the task's points), for ``reason``, which the student reads in their
feedback. ``student`` is a roster ``student_id`` or email, or a submission's name in the gradebook
(its result folder). The autograder's own result is kept unchanged in ``results.json``; the
gradebook, the exports, the class report and the feedback show the override. A line that matches
no graded task is reported (and changes nothing) rather than silently ignored.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path


class OverrideError(ValueError):
    """An overrides file that cannot be read; the message names the line."""


@dataclass(frozen=True)
class Override:
    """One line of ``overrides.csv``."""

    student: str
    task: str
    points: float
    reason: str
    line: int
    """Line number in the file (for messages)."""


@dataclass(frozen=True)
class Applied:
    """An override applied to one task of one submission."""

    task: str
    old: float
    """The autograder's points."""
    new: float
    reason: str


def read(path: Path) -> list[Override]:
    """The overrides in ``path``; :class:`OverrideError` for a malformed file or line."""
    try:
        rows = list(csv.DictReader(path.read_text(encoding="utf-8-sig").splitlines()))
    except (OSError, UnicodeDecodeError) as exc:
        raise OverrideError(f"cannot read the overrides {path}: {exc}") from None
    out = []
    for line, row in enumerate(rows, start=2):
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in row.items() if k is not None}
        if not any(row.values()):
            continue
        try:
            points = float(row.get("points", ""))
            if not math.isfinite(points):
                raise ValueError
        except ValueError:
            raise OverrideError(f"{path} line {line}: points {row.get('points', '')!r} is not a number; the header "
                                "is student,task,points,reason") from None
        if not row.get("student") or not row.get("task"):
            raise OverrideError(f"{path} line {line}: a student and a task are needed (header "
                                "student,task,points,reason)")
        out.append(Override(row["student"], row["task"], points, row.get("reason", ""), line))
    return out


def check_points(override: Override, max_points: float) -> str | None:
    """Why ``override`` cannot apply to a task worth ``max_points`` (``None`` when it can)."""
    if not 0 <= override.points <= max_points:
        return (f"line {override.line}: {override.points:g} points for task {override.task}, which is worth "
                f"{max_points:g}: write 0 to {max_points:g}")
    return None
