"""Rubrics for written questions: items worth points, a text the student reads, a note only markers read.

A lab's rubrics live in ``util/labs/labN/rubrics.py`` as ``RUBRICS = {"10.Q6": Rubric(...)}``, a
grader-only file (``util.labs.GRADER_ONLY``): the students' copy, graded kernels and judges never see it.
Items are PrairieLearn's: each is worth points (negative for a deduction), the student reads its text in
their feedback when it is applied, and its note guides markers only::

    RUBRICS = {
        "10.Q6": Rubric(items=(
            Item("A", 1, "Names the weights as the bytes every token shares", note="'read once' is enough"),
            Item("B", 1, "Says MACs grow with L while those bytes do not"),
            Item("X", -1, "Claims the KV cache dominates prefill's bytes"),
        )),
    }

A mark stores the ids of the items applied, never their points: points come from the rubric as it is
now (:meth:`Rubric.score`), so editing an item's points re-scores every answer that has it, and a
regrade or a restart cannot leave an old value behind.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from util.contract import Lab


@dataclass(frozen=True)
class Item:
    """One rubric item."""

    id: str
    """Stable short name (``"A"``, ``"units"``): marks keep it, so renaming an item orphans its marks."""
    points: float
    """Points it adds (negative: takes off)."""
    text: str
    """What the student reads in their feedback when the item is applied."""
    note: str = ""
    """For markers only (what to accept, a common near miss); never shown to students."""


@dataclass(frozen=True)
class Rubric:
    """How one written question is marked: items applied by a marker, from a starting score.

    The score of a mark is ``start + the points of the items applied + the marker's adjustment``, kept
    between 0 and the question's points. Positive scoring starts at 0 with positive items (the default);
    negative scoring starts at the question's points with deductions."""

    items: tuple[Item, ...]
    """In the order the marking page lists them (keys 1-9 apply the first nine)."""
    start: float = 0.0
    """The score before any item (0, or the question's points for negative scoring)."""
    notes: str = ""
    """For markers only: what the question is after, in a sentence or two."""

    def item(self, item_id: str) -> Item | None:
        """The item called ``item_id``, or ``None``."""
        return next((i for i in self.items if i.id == item_id), None)

    def best(self) -> float:
        """The highest score the items can reach (all positive items, no deduction)."""
        return self.start + sum(i.points for i in self.items if i.points > 0)

    def score(self, items: Iterable[str], adjust: float, points: float) -> float:
        """The points of a mark applying ``items`` (ids; unknown ones count 0) with the free ``adjust``,
        for a question worth ``points``: between 0 and ``points``."""
        chosen = {i.id: i.points for i in self.items}
        total = self.start + sum(chosen.get(item_id, 0.0) for item_id in dict.fromkeys(items)) + adjust
        return round(min(max(total, 0.0), points), 6)


def problems(lab: Lab, rubrics: Mapping[str, Rubric]) -> list[str]:
    """What is wrong with ``lab``'s rubrics against its declaration (empty when nothing): every question
    worth points has a rubric whose best score is exactly its points, items have unique ids, and no
    rubric names a question the lab does not ask."""
    questions = {q.id: q for q in lab.written}
    found = [f"{lab.name}: rubrics.py has a rubric for {qid}, which is not a written question of the lab"
             for qid in rubrics if qid not in questions]
    for qid, question in questions.items():
        rubric = rubrics.get(qid)
        if rubric is None:
            if question.points:
                found.append(f"{lab.name}: written question {qid} ({question.points:g} points) has no rubric: add "
                             f"RUBRICS[{qid!r}] = Rubric(items=(Item(...), ...)) to its rubrics.py")
            continue
        ids = [i.id for i in rubric.items]
        if len(ids) != len(set(ids)) or not all(ids):
            found.append(f"{lab.name}: the rubric of {qid} needs unique, non-empty item ids; found {ids}")
        if rubric.best() != question.points:
            found.append(f"{lab.name}: the rubric of {qid} reaches {rubric.best():g} points at best (start "
                         f"{rubric.start:g} plus its positive items) but the question is worth {question.points:g}")
    return found
