"""Result dataclasses: one per check, per task and per submission, serialised as JSON.

``SubmissionResult.to_gradescope_dict()`` follows Gradescope's results.json schema (score,
execution_time, tests[] with name, score, max_score, status, output, visibility); the course's
finer status (passed, failed, error, timeout, memory, crash, missing) rides in ``extra_data``.

Messages, notes and the submission's name often hold a student's text (an exception message, a
file name). Each result cleans its own text when it is made (:func:`grader.core.safe_text.plain`: valid
UTF-8, no control characters, at most ``LIMIT_MESSAGE`` characters; at most :data:`MAX_NOTES`
notes), so no writer can receive a 4 MiB message or a lone surrogate; each writer then escapes
for where it writes (Gradescope is told to show every output as plain text).
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

from grader.core.safe_text import LIMIT_MESSAGE, LIMIT_NAME, file_name, plain
from util.contract import ANSWER  # noqa: F401  (re-exported: the check on a task's exported answer)
from util.written import FOUND, MAX_CHARACTERS

STATUSES = ("passed", "failed", "error", "timeout", "memory", "crash", "missing")
"""Every status a check can have. Only ``passed`` earns points."""

GRADER_FAULT = "the grader could not"
"""Messages starting with this are the grader's fault, not the student's: such a submission is not
stored as done, so the next run grades it again (:mod:`grader.batch`)."""

MAX_NOTES = 20
LIMIT_EXPLAINED = 16000
"""Longest text of one task's explained hidden cases on Gradescope (12 cases of a few bounded lines)."""
"""Notes kept per submission (a notebook whose 500 cells raise gets 20, and a count of the rest)."""


def _set(instance: Any, name: str, value: Any) -> None:
    object.__setattr__(instance, name, value)  # cleaning a frozen dataclass's own fields


@dataclass(frozen=True)
class CheckResult:
    """One graded check: the answer a task exported, or one case the grader ran."""

    name: str
    """``answer`` or the case id, e.g. ``resnet18@1x3x224x224``."""
    status: str
    """One of :data:`STATUSES`."""
    score: float
    """Points earned: ``max_score`` when passed, else 0."""
    max_score: float
    """Points the check is worth."""
    message: str
    """What was expected, what was found, what to do; hidden checks never show the expected value."""
    hidden: bool = False
    """Whether the check ran on an input the notebook never shows."""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")
        _set(self, "name", plain(self.name, LIMIT_NAME))
        _set(self, "message", plain(self.message, LIMIT_MESSAGE))


@dataclass(frozen=True)
class TaskResult:
    """All checks of one task."""

    task_id: str
    """e.g. ``1.4``."""
    title: str
    """The task's declared title."""
    checks: tuple[CheckResult, ...]
    """The exported answer first, then each case in declaration order."""

    @property
    def score(self) -> float:
        return sum(c.score for c in self.checks)

    @property
    def max_score(self) -> float:
        return sum(c.max_score for c in self.checks)

    @property
    def status(self) -> str:
        """``passed`` when every check passed, else the status of the first check that did not."""
        return next((c.status for c in self.checks if c.status != "passed"), "passed")

    def output(self) -> str:
        """Feedback text: one line per check."""
        lines = []
        for c in self.checks:
            label = f"{c.name} (hidden)" if c.hidden else c.name
            lines.append(f"[{c.status}] {label}: {c.score:g}/{c.max_score:g}" + (f" - {c.message}" if c.message else ""))
        return "\n".join(lines)


@dataclass(frozen=True)
class WrittenAnswer:
    """A written answer as the grader received it, kept for marking by hand (:mod:`grader.mark`); the
    autograder gives it no points. Its text is cleaned when it is made (valid UTF-8, no control
    characters, at most :data:`util.written.MAX_CHARACTERS` characters), so every reader gets it bounded."""

    question: str
    """The question's id, e.g. ``10.Q6``."""
    text: str
    """The answer (heading and placeholder removed); ``""`` when there is none."""
    found: str = "cell"
    """How the grader found it: :data:`util.written.FOUND` (``heading``: the cell's metadata was gone)."""

    def __post_init__(self) -> None:
        _set(self, "question", plain(self.question, 64))
        _set(self, "text", plain(self.text, MAX_CHARACTERS).strip())
        if self.found not in FOUND:
            _set(self, "found", "none")

    @property
    def sha256(self) -> str:
        """SHA-256 of the text: a mark is kept for this text, and an answer whose text changed is re-marked."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    @property
    def words(self) -> int:
        return len(self.text.split())

    def describe(self) -> str:
        """What the student is told at submission: ``answer received, 142 words`` or why none was."""
        if self.found == "none":
            return "no answer cell was found: the question is marked as unanswered"
        if not self.text:
            return "the answer cell is empty: the question is marked as unanswered"
        cut = " (cut: only the first part is read)" if self.text.endswith("characters cut]") else ""
        return f"answer received, {self.words} words{cut}; it is marked by hand"


@dataclass(frozen=True)
class SubmissionResult:
    """The grade of one submitted notebook."""

    submission: str
    """Path of the notebook as given on the command line."""
    lab: str
    """Lab name (``labN``)."""
    tasks: tuple[TaskResult, ...]
    """One result per declared task, in order."""
    execution_time: float
    """Seconds spent executing the notebook and its hidden cases."""
    execution_status: str
    """``completed``, ``timeout``, ``memory`` or ``crash``."""
    notes: tuple[str, ...] = field(default=())
    """Things the student should know that belong to no single task (cells that raised, timeouts, a
    notebook built from an earlier release of its lab)."""
    release: int | None = None
    """The lab release the notebook was built from and graded as (:mod:`grader.core.releases`); ``None``
    when nothing was read."""
    written: tuple[WrittenAnswer, ...] = ()
    """The answers to the written questions its release asks, as received (marked by hand later;
    :mod:`grader.mark`)."""
    leaderboard: tuple[tuple[str, float, str], ...] = ()
    """``(title, value, "asc"|"desc")`` of the lab's leaderboard figure (``util.contract.Leaderboard``), as the
    grader measured it, when it has one: Gradescope's ``leaderboard`` key."""

    def __post_init__(self) -> None:
        _set(self, "submission", file_name(self.submission, LIMIT_MESSAGE))
        notes = tuple(plain(note, LIMIT_MESSAGE) for note in self.notes[:MAX_NOTES])
        if len(self.notes) > MAX_NOTES:  # MAX_NOTES in all, so that cleaning twice changes nothing
            notes = notes[:-1] + (f"... and {len(self.notes) - MAX_NOTES + 1} more notes like these",)
        _set(self, "notes", notes)

    @property
    def score(self) -> float:
        return sum(t.score for t in self.tasks)

    @property
    def max_score(self) -> float:
        return sum(t.max_score for t in self.tasks)

    def to_dict(self) -> dict[str, Any]:
        """Everything, for the course's own tools."""
        data = asdict(self)
        data["score"], data["max_score"] = self.score, self.max_score
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SubmissionResult":
        """The inverse of :meth:`to_dict` (derived ``score`` / ``max_score`` are recomputed)."""
        tasks = tuple(TaskResult(t["task_id"], t["title"], tuple(CheckResult(**c) for c in t["checks"]))
                      for t in data["tasks"])
        release = data.get("release")
        written = tuple(WrittenAnswer(w["question"], w["text"], w.get("found", "cell"))
                        for w in data.get("written", ()) if isinstance(w, dict))
        board = tuple((str(n), float(v), str(o)) for n, v, o in data.get("leaderboard") or ())
        return cls(data["submission"], data["lab"], tasks, data["execution_time"], data["execution_status"],
                   tuple(data.get("notes", ())), release if isinstance(release, int) else None, written, board)

    def to_gradescope_dict(self, explained: dict[str, str] | None = None) -> dict[str, Any]:
        """Gradescope's results.json schema; every output and name is shown as plain text
        (``output_format``, ``test_output_format``, ``test_name_format``: ``text``), never as
        Markdown or HTML. The lab release the notebook was built from rides in ``extra_data``. Each written
        answer is a test worth 0 that says whether it was received (it is marked by hand, outside
        Gradescope's autograder score): a missing answer shows at submission time, not at marking.

        ``explained`` (task id -> plain text, :func:`grader.report.feedback.explained_text`: the class's
        diagnosed feedback) adds, per task it names, a test worth 0 whose ``visibility`` is
        ``after_due_date``: Gradescope shows it once the assignment's due date has passed, beside the task's
        own test (the summary, visible at once, as without it)."""
        extra = {"extra_data": {"release": self.release}} if self.release is not None else {}
        if self.leaderboard:
            extra["leaderboard"] = [{"name": n, "value": v, "order": o} for n, v, o in self.leaderboard]
        return {**extra,
            "score": self.score,
            "execution_time": round(self.execution_time, 2),
            "output": "\n".join(self.notes),
            "output_format": "text",
            "test_output_format": "text",
            "test_name_format": "text",
            "tests": [
                {
                    "name": f"Task {t.task_id}: {t.title}",
                    "number": t.task_id,
                    "score": t.score,
                    "max_score": t.max_score,
                    "status": "passed" if t.status == "passed" else "failed",
                    "output": t.output(),
                    "visibility": "visible",
                    "extra_data": {"status": t.status},
                }
                for t in self.tasks
            ] + [
                {
                    "name": f"Written answer {w.question} (graded by hand)",
                    "number": w.question,
                    "score": 0,
                    "max_score": 0,
                    "status": "passed" if w.text else "failed",
                    "output": w.describe(),
                    "visibility": "visible",
                }
                for w in self.written
            ] + [
                {
                    "name": f"Task {t.task_id}: {t.title} (the hidden inputs explained)",
                    "number": f"{t.task_id}.explained",
                    "score": 0,
                    "max_score": 0,
                    "status": "failed",
                    "output": plain(explained[t.task_id], LIMIT_EXPLAINED),
                    "visibility": "after_due_date",
                }
                for t in self.tasks if explained and explained.get(t.task_id)
            ],
        }
