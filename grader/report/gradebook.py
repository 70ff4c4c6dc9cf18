"""The gradebook: one row per submission (and per student with nothing submitted), as numbers.

Files (in the gradebook folder, ``grade --out``):

* ``gradebook_<lab>.csv``, one per lab: the lab ``release`` the notebook was built from (and graded as:
  :mod:`grader.core.releases`; empty when nothing was read), per task its points and its maximum (``1.4``, ``1.4 max``:
  the autograder's), per written question its marked points and its maximum (``1.Q1``, ``1.Q1 max``: the
  points of its mark, or ``to mark``; :mod:`grader.mark.state`), then ``score``, ``max``, ``late days``, ``penalty``, ``total``, ``percent``, ``status``, what
  went wrong (``problems``), manual ``overrides``, submissions with ``identical`` files, and when it
  was ``submitted``; once a similarity report was made for the class (``python -m grader similarity``,
  :mod:`grader.report.similarity`), also the submission's closest match as that report names it
  (``similar to``) and the fraction of code they share (``similarity``), which change no grade;
* ``gradebook.csv``, the class summary: one row per submission (every lab), with its ``release`` and the totals.

Every score is a number (``84``, not ``"84/100"``): a spreadsheet can sum it; an answer nobody has marked
yet reads ``to mark``, which a spreadsheet's sum skips. ``score`` is the autograder's points with manual
overrides applied and the written answers' marks added, ``total`` is ``score`` minus the late penalty
(never below 0), ``percent`` is ``total`` of ``max``. With a roster, each row names its student
(``student_id``, ``name``, ``email``), and a student who submitted nothing for a lab gets a row
of that lab's file with status ``not submitted``.

``status`` is one of :data:`STATUSES`:

* ``full marks``: every point;
* ``partial``: it ran, and some checks failed or were never exported;
* ``errors``: something raised, timed out, ran out of memory or crashed (points may remain);
* ``to mark``: a written answer is still to be marked (or re-marked: its text changed since), so the
  total is not final (``problems`` names the questions);
* ``ungraded``: it could not be graded at all (not a notebook, lab unknown, a grader fault);
* ``not submitted``: on the roster, nothing submitted for this lab.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabulate import tabulate

from grader.core import files, safe_text
from grader.core.namespace import class_file
from grader.core.results import SubmissionResult
from grader.mark.state import Marked
from grader.report import similarity
from grader.report.late import Late
from grader.report.overrides import Applied
from grader.report.roster import Student

FULL, PARTIAL, ERRORS, UNGRADED, NOT_SUBMITTED = "full marks", "partial", "errors", "ungraded", "not submitted"
TO_MARK = "to mark"
STATUSES = (FULL, PARTIAL, ERRORS, TO_MARK, UNGRADED, NOT_SUBMITTED)
"""Every gradebook status, best first."""
TROUBLE = {"error", "timeout", "memory", "crash"}
"""Check statuses that make a row's status ``errors``."""


@dataclass(frozen=True)
class Cell:
    """One task of one row."""

    task_id: str
    title: str
    score: float
    """Points, after a manual override."""
    max_score: float
    status: str
    """The autograder's task status (``passed``, ``failed``, ...); ``missing`` when not submitted."""
    override: Applied | None = None


@dataclass(frozen=True)
class Row:
    """One submission of one lab (or a roster student without one)."""

    submission: str
    """Its result folder's name; empty when nothing was submitted."""
    lab: str
    cells: tuple[Cell, ...]
    status: str
    student: Student | None = None
    late: Late | None = None
    identical: tuple[str, ...] = ()
    """Other submissions whose files are byte for byte the same."""
    result: SubmissionResult | None = field(default=None, compare=False)
    """The autograder's result (``None`` when nothing was submitted)."""
    written: tuple[Marked, ...] = ()
    """Each written question its release asked: its state and marked points (:mod:`grader.mark.state`)."""

    @property
    def score(self) -> float:
        """The autograder's points (overrides applied) and the written answers' marks."""
        return sum(c.score for c in self.cells) + sum(w.counted for w in self.written)

    @property
    def max_score(self) -> float:
        return sum(c.max_score for c in self.cells) + sum(w.question.points for w in self.written)

    @property
    def auto_score(self) -> float:
        """The autograder's points alone (overrides applied), written answers left out."""
        return sum(c.score for c in self.cells)

    @property
    def to_mark(self) -> tuple[Marked, ...]:
        """Its written answers still to be marked or re-marked."""
        return tuple(w for w in self.written if w.pending)

    @property
    def penalty(self) -> float:
        return self.late.penalty if self.late else 0.0

    @property
    def total(self) -> float:
        return max(self.score - self.penalty, 0.0)

    @property
    def percent(self) -> float:
        return round(100 * self.total / self.max_score, 1) if self.max_score else 0.0

    @property
    def release(self) -> int | str:
        """The lab release the notebook was built from, or ``""`` (nothing submitted or read)."""
        release = self.result.release if self.result is not None else None
        return release if release is not None else ""

    @property
    def overrides(self) -> tuple[Applied, ...]:
        return tuple(c.override for c in self.cells if c.override is not None)

    @property
    def problems(self) -> str:
        """``"1.4 failed; 1.5 error; 1.Q1 to mark"``: the tasks short of their points, and why, and the written
        answers still to be marked."""
        if self.status == NOT_SUBMITTED:
            return ""
        return "; ".join([f"{c.task_id} {c.status}" for c in self.cells if c.score < c.max_score]
                         + [f"{w.question.id} {w.state}" for w in self.to_mark])


def status_of(result: SubmissionResult | None, cells: tuple[Cell, ...], *, ungraded: bool = False,
              written: tuple[Marked, ...] = ()) -> str:
    """The row status (see the module's docstring) of ``result`` with ``cells`` (overrides applied) and its
    ``written`` answers."""
    if result is None:
        return NOT_SUBMITTED
    if ungraded or result.execution_status == "missing":
        return UNGRADED
    if any(w.pending for w in written):
        return TO_MARK
    if sum(c.score for c in cells) + sum(w.counted for w in written) >= (
            sum(c.max_score for c in cells) + sum(w.question.points for w in written)):
        return FULL
    short = {c.task_id for c in cells if c.score < c.max_score}
    troubled = result.execution_status != "completed" or any(
        check.status in TROUBLE for task in result.tasks if task.task_id in short for check in task.checks)
    return ERRORS if troubled else PARTIAL


def number(value: float) -> int | float:
    """``84.0`` -> ``84``; other values rounded to 2 decimals."""
    return int(value) if float(value).is_integer() else round(value, 2)


def _student_columns(rows: list[Row]) -> bool:
    return any(r.student is not None for r in rows)


def _student(row: Row) -> list[Any]:
    s = row.student
    return [s.student_id, s.name, s.email] if s else ["", "", ""]


def written_value(marked: Marked | None) -> int | float | str:
    """A written answer's gradebook cell: its points, ``to mark``, or empty (its release did not ask it)."""
    if marked is None:
        return ""
    return TO_MARK if marked.points is None else number(marked.points)


def lab_table(rows: list[Row], similar: dict[str, tuple[str, float]] | None = None
              ) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows of one lab's gradebook file; ``similar`` (submission -> its closest match and their
    score, :func:`grader.report.similarity.closest_of`) adds the ``similar to`` and ``similarity`` columns."""
    task_ids = list(dict.fromkeys(c.task_id for r in rows for c in r.cells))
    question_ids = list(dict.fromkeys(w.question.id for r in rows for w in r.written))
    with_students = _student_columns(rows)
    headers = ["submission"] + (["student_id", "name", "email"] if with_students else []) + ["lab", "release"]
    for task_id in task_ids:
        headers += [task_id, f"{task_id} max"]
    for question_id in question_ids:
        headers += [question_id, f"{question_id} max"]
    headers += ["score", "max", "late days", "penalty", "total", "percent", "status", "problems", "overrides",
                "identical", "submitted"] + (["similar to", "similarity"] if similar is not None else [])
    body = []
    for r in rows:
        by_id = {c.task_id: c for c in r.cells}
        cells = []
        for task_id in task_ids:
            cell = by_id.get(task_id)
            cells += [number(cell.score), number(cell.max_score)] if cell else ["", ""]
        asked = {w.question.id: w for w in r.written}
        for question_id in question_ids:
            marked = asked.get(question_id)
            cells += [written_value(marked), number(marked.question.points) if marked else ""]
        overrides = "; ".join(f"{o.task}: {number(o.old)} -> {number(o.new)} ({o.reason})" for o in r.overrides)
        body.append([r.submission] + (_student(r) if with_students else []) + [r.lab, r.release] + cells + [
            number(r.score), number(r.max_score), r.late.days if r.late else "", number(r.penalty), number(r.total),
            r.percent, r.status, r.problems, overrides, " ".join(r.identical),
            r.late.submitted.isoformat(timespec="seconds") if r.late else ""]
            + (list(similar.get(r.submission, ("", ""))) if similar is not None else []))
    return headers, body


def summary_table(rows: list[Row]) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows of the class summary (``gradebook.csv``)."""
    with_students = _student_columns(rows)
    headers = ["submission"] + (["student_id", "name", "email"] if with_students else []) + [
        "lab", "release", "score", "max", "late days", "penalty", "total", "percent", "status"]
    body = [[r.submission] + (_student(r) if with_students else []) + [
        r.lab, r.release, number(r.score), number(r.max_score), r.late.days if r.late else "", number(r.penalty),
        number(r.total), r.percent, r.status] for r in rows]
    return headers, body


def write(out: Path, rows: list[Row]) -> list[Path]:
    """Write ``gradebook.csv`` and one ``gradebook_<lab>.csv`` per lab into ``out``; returns them.

    Lab files of labs with no rows any more are removed, so the folder never shows stale ones."""
    written = [files.write_csv(class_file(out, "gradebook.csv"), *summary_table(rows))]
    labs = list(dict.fromkeys(r.lab for r in rows))
    for lab in labs:
        written.append(files.write_csv(class_file(out, f"gradebook_{lab}.csv"),
                                       *lab_table([r for r in rows if r.lab == lab], similarity.closest_of(out, lab))))
    for stale in out.glob("gradebook_*.csv"):
        if stale not in written and stale.is_file() and not stale.is_symlink():
            stale.unlink()
    return written


def render(rows: list[Row]) -> str:
    """The gradebook for the terminal: one table per lab, each with only its own task columns."""
    tables = []
    for lab in dict.fromkeys(r.lab for r in rows):
        lab_rows = [r for r in rows if r.lab == lab]
        task_ids = list(dict.fromkeys(c.task_id for r in lab_rows for c in r.cells))
        question_ids = list(dict.fromkeys(w.question.id for r in lab_rows for w in r.written if w.question.points))
        headers = ["submission"] + task_ids + question_ids + ["total", "max", "%", "status"]
        body = []
        for r in lab_rows:
            by_id = {c.task_id: c for c in r.cells}
            asked = {w.question.id: w for w in r.written}
            name = r.submission or (f"({r.student.student_id})" if r.student else "")
            body.append([safe_text.terminal(name, safe_text.LIMIT_NAME)]
                        + [f"{by_id[t].score:g}" if t in by_id else "" for t in task_ids]
                        + [str(written_value(asked.get(q))) for q in question_ids]
                        + [f"{r.total:g}", f"{r.max_score:g}", f"{r.percent:g}",
                           r.status + (f", {r.late.days} d late" if r.late and r.late.days else "")])
        tables.append(f"{lab}\n" + tabulate(body, headers=headers, disable_numparse=True))
    return "\n\n".join(tables)
