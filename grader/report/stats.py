"""Per-task class statistics: mean score, pass rate and the most common failure, per lab.

For instructors: a task most of the class fails for the same reason is usually a task (or a
reference) to look at, not a class to blame. The statistics describe the autograder's judgement:
they count every graded submission once, before manual overrides and late penalties; submissions
that could not be graded at all (status ``ungraded``) are left out.

Each written question gets a row too (its id in the ``task`` column), over the answers marked so far
(:mod:`grader.mark.state`): its mean, how many got every point and, as its "most common failure", the
rubric item most often not earned (the item analysis a question's author needs).

Failures are grouped by their kind: the status, the check, and the message with its numbers
masked (so "expected 9,216 found 18,432" and "expected 9,216 found 4,608" are one kind). The
file shows a real message of the most common kind (the first seen), whole: never a masked one.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate

from grader.core import files, safe_text
from grader.core.results import SubmissionResult

HEADERS = ["lab", "task", "title", "submissions", "mean", "max", "full marks", "pass rate %",
           "most common failure", "count"]


@dataclass(frozen=True)
class TaskStats:
    """How the class did on one task."""

    lab: str
    task_id: str
    title: str
    submissions: int
    """Submissions graded for this lab."""
    mean: float
    """Mean points."""
    max_score: float
    """Points the task is worth."""
    full_marks: int
    """Submissions with every point of the task."""
    pass_rate: float
    """Fraction of submissions that passed every check of the task (``full_marks / submissions``)."""
    common_failure: str
    """``status: check: message`` of the most frequent kind of failing check: one real example."""
    common_failure_count: int
    """How many submissions had a failure of that kind."""

    def row(self) -> list:
        return [self.lab, self.task_id, self.title, self.submissions, round(self.mean, 2), self.max_score,
                self.full_marks, round(100 * self.pass_rate, 1), self.common_failure, self.common_failure_count]


_NUMBER = re.compile(r"(?<![\w.])-?\d[\d,._]*(?:[eE][+-]?\d+)?")
"""A number standing alone (``-1,234.5e-3``), not one inside a name (``bfloat16``, ``conv2``)."""


def failure_kind(status: str, name: str, message: str) -> str:
    """What makes failures alike: status, check and message with the numbers masked."""
    return f"{status}: {_NUMBER.sub('N', name)}: {_NUMBER.sub('N', ' '.join(message.split()))}"


def compute(results: list[tuple[str, SubmissionResult]]) -> list[TaskStats]:
    """Statistics for every (lab, task) seen in ``results``, in order."""
    by_task: dict[tuple[str, str], list] = {}
    for _, result in results:
        for task in result.tasks:
            by_task.setdefault((result.lab, task.task_id), []).append(task)
    out = []
    for (lab, task_id), tasks in by_task.items():
        kinds, example = Counter(), {}
        for task in tasks:  # one count per submission: its first failing check
            check = next((c for c in task.checks if c.status != "passed"), None)
            if check is not None:
                kind = failure_kind(check.status, check.name, check.message)
                kinds[kind] += 1
                example.setdefault(kind, f"{check.status}: {check.name}: {' '.join(check.message.split())}")
        common, count = kinds.most_common(1)[0] if kinds else ("", 0)
        full = sum(t.status == "passed" for t in tasks)
        out.append(TaskStats(lab, task_id, tasks[0].title, len(tasks), sum(t.score for t in tasks) / len(tasks),
                             tasks[0].max_score, full, full / len(tasks), example.get(common, ""), count))
    return out


def compute_written(rows: list[tuple[str, tuple, dict]]) -> list[TaskStats]:
    """Statistics for every written question worth points, from ``(lab, marked answers, its rubrics)`` per
    submission (:class:`grader.mark.state.Marked`): the mean over the answers with points (marked, kept for
    re-marking, or left empty), never over those still to mark; the items missed over the marked ones.
    Submissions the grader received no answer from (a file it could not read) are left out."""
    by_question: dict[tuple[str, str], list] = {}
    rubrics: dict[str, dict] = {}
    for lab, written, lab_rubrics in rows:
        rubrics[lab] = lab_rubrics
        for marked in written:
            if marked.question.points and marked.answer is not None:
                by_question.setdefault((lab, marked.question.id), []).append(marked)
    out = []
    for (lab, question_id), answers in by_question.items():
        question = answers[0].question
        scored = [a for a in answers if a.points is not None]
        waiting = len(answers) - len(scored)
        full = sum(a.points >= question.points for a in scored)
        missed = Counter(item.id for a in scored if a.mark is not None for item in _positive(rubrics[lab].get(question_id))
                         if item.id not in {applied.id for applied in a.applied})
        common, count = missed.most_common(1)[0] if missed else ("", 0)
        item = rubrics[lab][question_id].item(common) if common else None
        out.append(TaskStats(lab, question_id, f"{question.label} (graded by hand" + (f"; {waiting} to mark)" if waiting
                                                                                       else ")"),
                             len(scored), sum(a.points for a in scored) / len(scored) if scored else 0.0,
                             question.points, full, full / len(scored) if scored else 0.0,
                             f"not earned: rubric item {item.id} ({item.text})" if item else "", count))
    return out


def _positive(rubric) -> tuple:
    return tuple(item for item in rubric.items if item.points > 0) if rubric is not None else ()


def _words(text: str, width: int) -> str:
    """``text`` cut at a word boundary to at most ``width`` characters, marked with ``...``."""
    if len(text) <= width:
        return text
    cut = text[:width - 3].rsplit(" ", 1)[0]
    return (cut if len(cut) > width // 2 else text[:width - 3]) + "..."


def render(stats: list[TaskStats], width: int = 70) -> str:
    """A terminal table (failures shortened at a word boundary to fit)."""
    rows = [[s.lab, s.task_id, s.title, s.submissions, f"{s.mean:.2f}", f"{s.max_score:g}", s.full_marks,
             f"{s.pass_rate:.0%}", _words(safe_text.terminal(s.common_failure), width), s.common_failure_count]
            for s in stats]
    return tabulate(rows, headers=HEADERS, disable_numparse=True)


def write_csv(path: Path, stats: list[TaskStats]) -> Path:
    """``statistics.csv``: :data:`HEADERS`, numbers as numbers (pass rate in percent)."""
    return files.write_csv(path, HEADERS, [s.row() for s in stats])
