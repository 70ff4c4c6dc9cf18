"""What each student's score for a lab is, in the words of LTI's assignment and grade services.

:func:`plan` turns the gradebook (the same rows ``python -m grader export`` exports: the latest submission of each
roster student, overrides and the late penalty applied) into one :class:`Score` per student and lab, or a reason
not to send one. AGS's ``gradingProgress`` says how final a score is: ``FullyGraded`` for a lab whose every task
and written answer is marked; for a lab with written answers still to mark, ``unmarked="pending"`` sends
``PendingManual`` (the spec's "final grade is pending, and it does require human intervention") with no
``scoreGiven``, so the LMS shows "needs grading" and no number, and ``unmarked="skip"`` sends nothing for it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from grader.report import gradebook
from grader.report.gradebook import TO_MARK, UNGRADED
from grader.report.lms.table import Table

UNMARKED = ("pending", "skip")
"""A lab with written answers still to mark: sent as ``PendingManual`` with no score, or not sent."""
MISSING = ("zero", "skip")
"""A student with no submission for a lab: sent 0 (``FullyGraded``), or not sent."""


@dataclass(frozen=True)
class Score:
    """One score to post: a student's for one lab."""

    lab: str
    student_id: str
    """The roster's id (the course's name for the student)."""
    user_id: str
    """The LMS's id of the student (AGS's ``userId``), from the registration's ``user_id_column``."""
    given: float | None
    """The points (``scoreGiven``); ``None`` for a pending lab."""
    maximum: float
    """The lab's maximum points (``scoreMaximum``)."""
    progress: str
    """``gradingProgress``: ``FullyGraded`` or ``PendingManual``."""
    comment: str
    """A short feedback text (``84/100 (partial); 1 day late, -10``)."""

    def key(self) -> str:
        """The score's identity in the ledger: one score per lab and student."""
        return f"{self.lab}/{self.student_id}"

    def content(self) -> dict:
        """What is sent, without the time it is sent at: two posts with the same content change nothing."""
        return {k: v for k, v in asdict(self).items() if k not in ("lab", "student_id")}

    def body(self, timestamp: str) -> dict:
        """The AGS score (``application/vnd.ims.lis.v1.score+json``)."""
        body = {"userId": self.user_id, "scoreMaximum": self.maximum, "activityProgress": "Submitted",
                "gradingProgress": self.progress, "timestamp": timestamp, "comment": self.comment}
        if self.given is not None:
            body["scoreGiven"] = self.given
        if self.progress == "FullyGraded":
            body["activityProgress"] = "Completed"
        return body


@dataclass(frozen=True)
class Skipped:
    """A student and lab with nothing sent, and why."""

    lab: str
    student_id: str
    reason: str


def plan(table: Table, user_id_column: str, *, unmarked: str = "pending",
         missing: str = "zero") -> tuple[list[Score], list[Skipped]]:
    """The scores to send for ``table`` (:func:`grader.report.lms.table.gather`'s), and those left out."""
    if unmarked not in UNMARKED or missing not in MISSING:
        raise ValueError(f"unmarked {unmarked!r} / missing {missing!r}: expected one of {UNMARKED} / {MISSING}")
    scores: list[Score] = []
    skipped: list[Skipped] = []
    for student, chosen in table.students:
        user_id = str(getattr(student, user_id_column, "") or "").strip()
        for lab in table.labs:
            row = chosen[lab]
            maximum = gradebook.number(table.maxima[lab])
            if not maximum:
                skipped.append(Skipped(lab, student.student_id, "no graded submission of this lab yet, so its "
                                       "maximum is not known: grade one first"))
            elif not user_id:
                skipped.append(Skipped(lab, student.student_id, f"no LMS user id: the roster's {user_id_column} "
                                       "column is empty for this student; fill it in"))
            elif row is None:
                if missing == "skip":
                    skipped.append(Skipped(lab, student.student_id, "nothing submitted (--missing skip)"))
                else:
                    scores.append(Score(lab, student.student_id, user_id, 0, maximum, "FullyGraded",
                                        "nothing submitted"))
            elif row.status == UNGRADED and row.result is not None and any(
                    "grader could not" in note for note in row.result.notes):
                skipped.append(Skipped(lab, student.student_id, f"{row.submission} could not be graded (a grader "
                                       "fault); grade it again first"))
            elif row.status == TO_MARK:
                if unmarked == "skip":
                    skipped.append(Skipped(lab, student.student_id, f"{row.submission} has written answers still to "
                                           "mark (--unmarked skip)"))
                else:
                    scores.append(Score(lab, student.student_id, user_id, None, maximum, "PendingManual",
                                        table.comment(row, lab)))
            else:
                scores.append(Score(lab, student.student_id, user_id, gradebook.number(row.total), maximum,
                                    "FullyGraded", table.comment(row, lab)))
    return scores, skipped
