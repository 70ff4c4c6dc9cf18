"""The grades an LMS export lays out: every roster student's row per lab, chosen once for all formats.

:func:`gather` picks, for each student on the roster and each lab, the submission to export (the
latest when there are several, reported) and collects what the instructor should know before
uploading; a format (:mod:`grader.report.lms`) only decides the columns, through :meth:`Table.grade`
(the number to upload) and :meth:`Table.comment` (a short feedback text).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from grader.report import gradebook
from grader.report.gradebook import NOT_SUBMITTED, TO_MARK, UNGRADED, Row
from grader.report.roster import Student

MISSING = ("zero", "blank")
"""What a student with no submission for a lab gets: 0, or an empty cell (no grade)."""
UNMARKED = ("blank", "zero", "auto")
"""What a lab with written answers still to mark gets: an empty cell (no grade, reported), the total so far
(answers to mark count 0), or the autograder's points alone (with overrides and the late penalty)."""


@dataclass
class Table:
    """One export's grades: per roster student, per lab, the row exported (``None``: nothing submitted)."""

    labs: list[str]
    """The labs exported, in course order."""
    columns: dict[str, str]
    """Lab -> the LMS column it goes in (``--column``, else ``labN: <title>``)."""
    maxima: dict[str, float]
    """Lab -> its maximum points."""
    students: list[tuple[Student, dict[str, Row | None]]]
    """Every roster student with the row chosen for each lab."""
    missing: str = "zero"
    """:data:`MISSING`: the grade of a student with no submission."""
    unmarked: str = "blank"
    """:data:`UNMARKED`: the grade of a lab whose written answers are not all marked."""
    warnings: list[str] = field(default_factory=list)
    """What the instructor should know before uploading (several submissions, a grader fault...)."""

    def grade(self, row: Row | None, who: str, lab: str) -> int | float | str:
        """The number to upload for one student and lab: the total, 0 or empty when nothing was
        submitted, empty (and a warning) when the grader failed on it."""
        if row is None:
            return 0 if self.missing == "zero" else ""
        if row.status == UNGRADED and row.result is not None and any("grader could not" in n for n in row.result.notes):
            self.warnings.append(f"{who}: {lab} ({row.submission}) could not be graded (a grader fault): left "
                                 "empty; grade it again first")
            return ""
        if row.status == TO_MARK:
            if self.unmarked == "blank":
                self.warnings.append(f"{who}: {lab} ({row.submission}) has written answers still to mark "
                                     f"({', '.join(w.question.id for w in row.to_mark)}): left empty (--unmarked "
                                     "zero or auto exports a grade)")
                return ""
            if self.unmarked == "auto":
                return gradebook.number(max(row.auto_score - row.penalty, 0.0))
        return gradebook.number(row.total)

    def comment(self, row: Row | None, lab: str) -> str:
        """A short feedback text: ``84/100 (partial); 1 day late, -10``."""
        if row is None:
            return "nothing submitted"
        text = f"{row.total:g}/{self.maxima[lab]:g} ({row.status})"
        scored = [w for w in row.written if w.question.points]
        if scored:
            text += (f"; written {sum(w.counted for w in scored):g}/{sum(w.question.points for w in scored):g}"
                     + (f" ({len(row.to_mark)} to mark)" if row.to_mark else ""))
        if row.overrides:
            text += "; changed by the instructor: " + ", ".join(f"task {o.task} {o.new:g}" for o in row.overrides)
        if row.late and row.late.days:
            text += f"; {row.late.days} day{'s' if row.late.days != 1 else ''} late, -{row.late.penalty:g}"
        return text

    def status(self, row: Row | None) -> str:
        return row.status if row else NOT_SUBMITTED


def _pick(rows: list[Row], submitted: dict, warnings: list[str], who: str, lab: str) -> Row | None:
    if len(rows) > 1:
        rows = sorted(rows, key=lambda r: (submitted.get(r.submission) is not None,
                                           submitted.get(r.submission) or 0, r.submission))
        warnings.append(f"{who} has {len(rows)} submissions for {lab} ({', '.join(r.submission for r in rows)}): "
                        f"exported {rows[-1].submission}, the latest")
    return rows[-1] if rows else None


def gather(book, labs: list[str], columns: dict[str, str], missing: str, unmarked: str = "blank") -> Table:
    """The table of ``book`` (a :class:`grader.report.class_folder.Book` with a roster) for ``labs``."""
    maxima = {lab: next((r.max_score for r in book.rows if r.lab == lab and r.cells), 0) for lab in labs}
    warnings: list[str] = []
    students = []
    for student in book.roster.students:
        chosen = {}
        for lab in labs:
            mine = [r for r in book.rows if r.lab == lab and r.student == student and r.status != NOT_SUBMITTED]
            chosen[lab] = _pick(mine, book.submitted, warnings, student.student_id, lab)
        students.append((student, chosen))
    return Table(labs, columns, maxima, students, missing, unmarked, warnings)
