"""A class's settings: the instructor's files and dates, remembered in the gradebook folder.

``grade``, ``report`` and ``export`` take the same flags (``--roster``, ``--overrides``,
``--extensions``, ``--deadline``, ``--late-policy``). What is given once is saved in
``<gradebook folder>/class.json`` and used by every later command on that folder, so an override
or a deadline never drops out because a flag was forgotten; each command prints the settings it
used. A file's path is remembered, not its content: an edited ``overrides.csv`` applies on the
next run. Give a flag again to change a setting; ``none`` removes it (``--roster none``).

What students read per failed hidden case is a setting too (``--student-feedback``, ``--feedback-from``):
``summary`` (the default: where and how a result differs, never the input or the expected value), or
``diagnosed`` from a date (``feedback_from``, YYYY-MM-DD, from that day's midnight, local time): from then on,
and only after the lab's own deadline, the feedback shows each failed hidden case's input, the student's value,
the expected value or the failed property, and the declared mistake it looks like
(:mod:`grader.grade.diagnosis`, :func:`Settings.diagnosed`).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime
from pathlib import Path

from grader.core import files
from grader.core.namespace import class_file
from grader.report.late import Policy, parse_time

FILE = "class.json"
"""Where the settings live in the gradebook folder."""
NONE = "none"
"""A flag value that removes the setting."""
SUMMARY, DIAGNOSED = "summary", "diagnosed"
FEEDBACK = (SUMMARY, DIAGNOSED)
"""What the feedback shows per failed hidden case (``Settings.feedback``)."""


@dataclass(frozen=True)
class Settings:
    """What a class's gradebook is built with (every path absolute)."""

    roster: str | None = None
    """The roster CSV (:mod:`grader.report.roster`)."""
    overrides: str | None = None
    """The overrides CSV (:mod:`grader.report.overrides`)."""
    extensions: str | None = None
    """The extensions CSV (:mod:`grader.report.late`)."""
    deadlines: dict[str, str] = field(default_factory=dict)
    """Lab name -> deadline (ISO 8601)."""
    late_policy: str = "flag"
    """``flag`` or ``P%/day`` (:class:`grader.report.late.Policy`)."""
    term: str | None = None
    """The file holding this term's secret (``--term``): the hidden cases' seeds are drawn from it
    (:func:`util.hidden.term_spec`) and graded against the references made for it (``python -m grader regen
    --term FILE``, stored beside it: :func:`grader.judge.references.reference_dir`)."""

    feedback: str = SUMMARY
    """``summary`` or ``diagnosed`` (from :attr:`feedback_from`, after the lab's deadline): :meth:`diagnosed`."""
    feedback_from: str | None = None
    """The day (YYYY-MM-DD) diagnosed feedback starts, at local midnight; required with ``diagnosed``."""

    @classmethod
    def load(cls, out: Path) -> "Settings":
        """The settings saved in ``out`` (defaults when there are none)."""
        try:
            data = json.loads((out / FILE).read_text(encoding="utf-8"))
            return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})
        except (OSError, ValueError, TypeError):
            return cls()

    def save(self, out: Path) -> None:
        files.write_text(class_file(out, FILE), json.dumps(asdict(self), indent=1, sort_keys=True) + "\n")

    def updated(self, *, roster: str | None = None, overrides: str | None = None, extensions: str | None = None,
                deadlines: list[str] | None = None, late_policy: str | None = None,
                term: str | None = None, feedback: str | None = None,
                feedback_from: str | None = None) -> "Settings":
        """These settings with the flags given (``None``: not given) applied; raises ``ValueError``
        with a message for a malformed deadline, policy, feedback or date (``diagnosed`` needs a date)."""
        changes: dict = {}
        for name, value in (("roster", roster), ("overrides", overrides), ("extensions", extensions), ("term", term)):
            if value is not None:
                changes[name] = None if value == NONE else str(Path(value).resolve())
        if deadlines:
            merged = dict(self.deadlines)
            for item in deadlines:
                lab, sep, when = item.partition("=")
                if not sep or not lab.strip():
                    raise ValueError(f"--deadline {item!r}: write LAB=TIME, e.g. labN=2025-03-07T23:59 (or LAB=none)")
                if when.strip().lower() == NONE:
                    merged.pop(lab.strip(), None)
                else:
                    merged[lab.strip()] = parse_time(when, f"--deadline {lab.strip()}").isoformat()
            changes["deadlines"] = merged
        if late_policy is not None:
            changes["late_policy"] = str(Policy.parse(late_policy))
        if feedback is not None:
            if feedback.strip().lower() not in (*FEEDBACK, NONE):
                raise ValueError(f"--student-feedback {feedback!r}: write {SUMMARY} or {DIAGNOSED}")
            changes["feedback"] = SUMMARY if feedback.strip().lower() == NONE else feedback.strip().lower()
        if feedback_from is not None:
            changes["feedback_from"] = None if feedback_from.strip().lower() == NONE else _day(feedback_from)
        done = replace(self, **changes)
        if done.feedback == DIAGNOSED and not done.feedback_from:
            raise ValueError(f"--student-feedback {DIAGNOSED} needs the day it starts: --feedback-from YYYY-MM-DD "
                             "(after the deadline)")
        return done

    def feedback_start(self) -> datetime | None:
        """When diagnosed feedback starts (local midnight of :attr:`feedback_from`); ``None`` under ``summary``."""
        if self.feedback != DIAGNOSED or not self.feedback_from:
            return None
        try:
            return datetime.combine(date.fromisoformat(self.feedback_from), datetime.min.time()).astimezone()
        except ValueError:  # a hand-edited class.json: summary, as if unset
            return None

    def diagnosed(self, lab: str, now: datetime | None = None) -> bool:
        """Whether ``lab``'s feedback shows the diagnosis at ``now`` (default: now): the class chose
        ``diagnosed``, its day has come, and the lab's deadline (when it has one) has passed."""
        start = self.feedback_start()
        now = now or datetime.now().astimezone()
        if start is None or now < start:
            return False
        deadline = self.deadlines.get(lab)
        try:
            return deadline is None or now > parse_time(deadline)
        except ValueError:
            return False

    @property
    def policy(self) -> Policy:
        return Policy.parse(self.late_policy)

    def describe(self) -> str:
        """One line for the log, e.g. ``roster roster.csv; deadlines labN 2025-03-07T23:59+01:00; ...``."""
        parts = [f"{name} {value}" for name, value in (("roster", self.roster), ("overrides", self.overrides),
                                                       ("extensions", self.extensions), ("term secret", self.term))
                 if value]
        if self.deadlines:
            parts.append("deadlines " + ", ".join(f"{lab} {when}" for lab, when in sorted(self.deadlines.items())))
            parts.append(f"late policy {self.policy.describe()}")
        if self.feedback == DIAGNOSED:
            parts.append(f"diagnosed feedback from {self.feedback_from} (after each lab's deadline)")
        return "; ".join(parts) or "no roster, overrides or deadlines"


def _day(text: str) -> str:
    """``text`` as a YYYY-MM-DD day, or ``ValueError`` saying how to write it."""
    try:
        return date.fromisoformat(text.strip()).isoformat()
    except ValueError:
        raise ValueError(f"--feedback-from {text!r} is not a day: write YYYY-MM-DD, e.g. 2025-03-10") from None
