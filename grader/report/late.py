"""Late submissions: a deadline per lab, extensions per student, and the class's late policy.

* A **deadline** is given per lab (``--deadline labN=2025-03-07T23:59``; ISO 8601, with a UTC
  offset or in the grading machine's local time).
* A submission's **time** is the modification time of its file (of its newest file, for a folder
  submission with support files): copy submissions with their times kept (``cp -p``, ``unzip``,
  ``rsync -t``), or set them with ``touch -d``.
* An **extension** file (CSV: ``student,lab,days,until,reason``) moves a student's deadline:
  ``student`` is a roster ``student_id``/email or a submission's name; ``lab`` empty means every
  lab; ``days`` adds days to the deadline, ``until`` replaces it (one of the two).
* The **policy** (``--late-policy``) is ``flag`` (late submissions are marked, no points taken) or
  ``P%/day`` (``10%/day``: for each day or part of a day after the deadline, P percent of the lab's
  points are taken off, never below zero).

:func:`lateness` combines them into a :class:`Late`, shown in the gradebook, the exports and the
student's feedback.
"""
from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

DAY = timedelta(days=1)


class LateError(ValueError):
    """A deadline, policy or extension that cannot be used; the message says what to write instead."""


def parse_time(text: str, what: str = "time") -> datetime:
    """An aware datetime from ISO 8601 text; without an offset it is the machine's local time."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise LateError(f"{what} {text!r} is not a date and time: write ISO 8601, e.g. 2025-03-07T23:59 or "
                        "2025-03-07T23:59:00+01:00") from None
    return moment if moment.tzinfo else moment.astimezone()


@dataclass(frozen=True)
class Policy:
    """What a late submission costs."""

    percent_per_day: float = 0.0
    """Percent of the lab's points taken off per day (or part of a day) late; 0 flags only."""

    @classmethod
    def parse(cls, text: str) -> "Policy":
        """``flag`` or ``P%/day`` (``10%/day``, ``2.5%/day``)."""
        text = text.strip().lower().replace(" ", "")
        if text in ("flag", "0", "0%/day"):
            return cls(0.0)
        match = re.fullmatch(r"(\d+(?:\.\d+)?)%/day", text)
        if not match or not 0 < float(match.group(1)) <= 100:
            raise LateError(f"late policy {text!r}: write 'flag' (mark late submissions, take nothing) or "
                            "'P%/day' with 0 < P <= 100, e.g. '10%/day'")
        return cls(float(match.group(1)))

    def describe(self) -> str:
        return (f"{self.percent_per_day:g}% of the lab's points per day late" if self.percent_per_day
                else "late submissions are flagged, no points taken")

    def __str__(self) -> str:
        return f"{self.percent_per_day:g}%/day" if self.percent_per_day else "flag"


@dataclass(frozen=True)
class Extension:
    """A student's own deadline for one lab (or every lab)."""

    student: str
    lab: str
    """Empty: every lab."""
    days: float = 0.0
    until: datetime | None = None
    reason: str = ""

    def deadline(self, deadline: datetime) -> datetime:
        return self.until if self.until is not None else deadline + self.days * DAY


def read_extensions(path: Path) -> list[Extension]:
    """Read an extension file (see the module's docstring); :class:`LateError` names the bad line."""
    try:
        rows = list(csv.DictReader(path.read_text(encoding="utf-8-sig").splitlines()))
    except (OSError, UnicodeDecodeError) as exc:
        raise LateError(f"cannot read the extensions {path}: {exc}") from None
    out = []
    for line, row in enumerate(rows, start=2):
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
        if not any(row.values()):
            continue
        student, days, until = row.get("student", ""), row.get("days", ""), row.get("until", "")
        if not student or bool(days) == bool(until):
            raise LateError(f"{path} line {line}: write a student and exactly one of days (extra days) or until "
                            "(a new deadline); the header is student,lab,days,until,reason")
        try:
            extra = float(days) if days else 0.0
        except ValueError:
            raise LateError(f"{path} line {line}: days {days!r} is not a number") from None
        out.append(Extension(student, row.get("lab", ""), extra,
                             parse_time(until, f"{path} line {line}: until") if until else None, row.get("reason", "")))
    return out


@dataclass(frozen=True)
class Late:
    """How late one submission was, and what it cost."""

    submitted: datetime
    deadline: datetime
    """The deadline that applied (an extension included)."""
    days: int
    """Days or parts of days after the deadline; 0 when on time."""
    penalty: float
    """Points taken off (0 under a flag-only policy)."""
    policy: Policy
    extended: bool = False

    def sentence(self) -> str:
        """For the student's feedback."""
        when = (f"submitted {self.submitted:%Y-%m-%d %H:%M %z}, {self.days} day{'s' if self.days != 1 else ''} "
                f"after the {'extended ' if self.extended else ''}deadline ({self.deadline:%Y-%m-%d %H:%M %z})")
        cost = (f"{self.penalty:g} points taken off ({self.policy.describe()})" if self.penalty
                else "no points taken off (late submissions are flagged only)")
        return f"Late: {when}; {cost}."


def lateness(submitted: datetime | None, deadline: datetime | None, policy: Policy, max_points: float,
             points: float, extension: Extension | None = None) -> Late | None:
    """The :class:`Late` of a submission worth ``points`` of ``max_points``; ``None`` without a
    deadline or a submission time."""
    if submitted is None or deadline is None:
        return None
    if extension is not None:
        deadline = extension.deadline(deadline)
    days = max(0, math.ceil((submitted - deadline) / DAY))
    penalty = min(points, max_points * policy.percent_per_day / 100 * days) if days else 0.0
    return Late(submitted, deadline, days, round(penalty, 6), policy, extension is not None)


def file_time(path: Path) -> datetime | None:
    """When ``path`` was submitted: its modification time, or its newest file's for a folder."""
    try:
        if path.is_dir() and not path.is_symlink():
            times = [p.lstat().st_mtime for p in path.rglob("*") if p.is_file() and not p.is_symlink()]
            stamp = max(times) if times else path.lstat().st_mtime
        else:
            stamp = path.lstat().st_mtime
    except OSError:
        return None
    return datetime.fromtimestamp(stamp, timezone.utc)
