"""Where each written answer of a submission stands, and what it is worth: the marks scored by the rubric.

For each written question a submission's release asked (:meth:`util.contract.Lab.as_of`), :func:`assess`
combines the answer the grader received (:class:`grader.core.results.WrittenAnswer`), the marks stored
for it (:mod:`grader.mark.store`) and the question's rubric as it is now (:mod:`util.rubric`) into a
:class:`Marked`, in one of :data:`STATES`:

* ``marked``: a mark for the answer's current text; its points count;
* ``to re-mark``: a mark for an earlier text of the answer (the student changed it and was graded
  again): the mark is kept and its points still count, until a marker marks the new text;
* ``to mark``: an answer nobody has marked; it counts nothing yet;
* ``no answer``: nothing was written (or no answer cell found) and nobody marked it: 0 points, nothing to do;
* ``practice``: a question worth no points, never marked.

Points always come from the rubric as it is now, so editing an item's points re-scores every mark that
applies it. An item id the rubric no longer has counts 0 and is reported (:attr:`Marked.unknown`).
"""
from __future__ import annotations

import hashlib
import hmac
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Mapping

from grader.core.results import WrittenAnswer
from grader.mark.store import Mark
from util.contract import Lab, Written
from util.rubric import Item, Rubric

MARKED, TO_REMARK, TO_MARK, UNANSWERED, PRACTICE = "marked", "to re-mark", "to mark", "no answer", "practice"
STATES = (MARKED, TO_REMARK, TO_MARK, UNANSWERED, PRACTICE)
PENDING = (TO_MARK, TO_REMARK)
"""States a marker still has to look at: a lab's total is not final while one of its answers is in them."""
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


@dataclass(frozen=True)
class Marked:
    """One written answer of one submission: its state and its points."""

    question: Written
    task_id: str
    """The task the question belongs to."""
    answer: WrittenAnswer | None
    """As the grader received it (``None``: nothing was read, e.g. the file was not a notebook)."""
    state: str
    """One of :data:`STATES`."""
    mark: Mark | None = None
    """The mark counted (for ``to re-mark``, the one of an earlier text)."""
    points: float | None = None
    """The points it counts (``None`` while ``to mark``)."""
    applied: tuple[Item, ...] = ()
    """The rubric items the mark applies, as the rubric now declares them."""
    unknown: tuple[str, ...] = ()
    """Item ids of the mark that the rubric no longer has (they count 0)."""

    @property
    def counted(self) -> float:
        """Points toward the lab's total (0 while ``to mark``)."""
        return self.points or 0.0

    @property
    def pending(self) -> bool:
        return self.state in PENDING

    @property
    def sha256(self) -> str:
        return self.answer.sha256 if self.answer is not None else EMPTY_SHA256


def questions(lab: Lab | None, release: int | None) -> tuple[tuple[str, Written], ...]:
    """(task id, question) for each written question ``lab`` asked at ``release`` (the current release
    when ``None``); none for a lab the registry does not know."""
    if lab is None:
        return ()
    graded = lab.as_of(release) if release else lab
    return tuple((task.id, question) for task in graded.tasks for question in task.written)


def index(marks: Iterable[Mark]) -> dict[tuple[str, str], list[Mark]]:
    """(submission, question) -> its marks, in the order given (newest first from the store)."""
    found: dict[tuple[str, str], list[Mark]] = defaultdict(list)
    for mark in marks:
        found[(mark.submission, mark.question)].append(mark)
    return found


def score(mark: Mark, question: Written, rubric: Rubric | None) -> tuple[float, tuple[Item, ...], tuple[str, ...]]:
    """(points, items applied, unknown item ids) of ``mark`` under ``rubric`` as it is now."""
    rubric = rubric or Rubric(items=())
    applied = tuple(item for item_id in mark.items if (item := rubric.item(item_id)) is not None)
    unknown = tuple(item_id for item_id in mark.items if rubric.item(item_id) is None)
    return rubric.score(mark.items, mark.adjust, question.points), applied, unknown


def assess(submission: str, asked: Iterable[tuple[str, Written]], answers: Iterable[WrittenAnswer],
           marks: Mapping[tuple[str, str], list[Mark]], rubrics: Mapping[str, Rubric]) -> tuple[Marked, ...]:
    """A :class:`Marked` for each question ``asked`` (:func:`questions`) of ``submission``, from the
    ``answers`` its result holds, the stored ``marks`` (:func:`index`) and the lab's ``rubrics``."""
    received = {answer.question: answer for answer in answers}
    out = []
    for task_id, question in asked:
        answer = received.get(question.id)
        sha = answer.sha256 if answer is not None else EMPTY_SHA256
        stored = marks.get((submission, question.id), [])
        mark = next((m for m in stored if m.sha256 == sha), None)
        state = MARKED
        if not question.points:
            out.append(Marked(question, task_id, answer, PRACTICE, points=0.0))
            continue
        if mark is None and stored:
            mark, state = stored[0], TO_REMARK
        if mark is not None:
            points, applied, unknown = score(mark, question, rubrics.get(question.id))
            out.append(Marked(question, task_id, answer, state, mark, points, applied, unknown))
        elif answer is None or not answer.text:
            out.append(Marked(question, task_id, answer, UNANSWERED, points=0.0))
        else:
            out.append(Marked(question, task_id, answer, TO_MARK))
    return tuple(out)


def pseudonym(secret: bytes, question: str, submission: str) -> str:
    """The name a marker sees for ``submission``'s answer to ``question``: 10 hex digits of an HMAC keyed
    by the class's secret, different for each question, so answers are shown anonymously, in an order
    (sorted by pseudonym) that is stable for a question and unrelated to the students' names."""
    return hmac.new(secret, f"{question}\0{submission}".encode("utf-8", "surrogatepass"),
                    hashlib.sha256).hexdigest()[:10]
