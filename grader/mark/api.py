"""What the marking page asks of a class folder, as plain data: no HTTP here (:mod:`grader.mark.server`
carries it), so every answer the page can get is tested directly.

A :class:`Desk` is one class folder opened for marking: its graded records (``grading.json``, read again
by :meth:`Desk.refresh`), its marks (:mod:`grader.mark.store`) and each lab's rubrics. Answers are shown
under a pseudonym (:func:`grader.mark.state.pseudonym`), in the pseudonym's order; the submission's name
is given only when a marker asks for it (:meth:`Desk.name`). Every text that comes from a student goes
out as a JSON string, which the page puts into the document as text, never as HTML.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.core import records as stored_records
from grader.core.records import Previous
from grader.mark import state
from grader.mark.state import Marked
from grader.mark.store import MAX_ADJUST, Mark, Store
from util.contract import Lab, Written
from util.labs import LABS, rubrics
from util.rubric import Rubric


class Refused(ValueError):
    """A request the desk cannot honour; the message says why, for the marker."""


def _rubric(rubric: Rubric | None) -> dict[str, Any]:
    rubric = rubric or Rubric(items=())
    return {"start": rubric.start, "notes": rubric.notes,
            "items": [{"id": i.id, "points": i.points, "text": i.text, "note": i.note} for i in rubric.items]}


def _mark(mark: Mark | None) -> dict[str, Any] | None:
    if mark is None:
        return None
    return {"items": list(mark.items), "adjust": mark.adjust, "comment": mark.comment, "version": mark.version,
            "sha256": mark.sha256}


@dataclass
class Desk:
    """One class folder, open for marking by ``marker`` (a name kept with each mark; never shown to students)."""

    out: Path
    store: Store
    marker: str = ""
    records: dict[str, Previous] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.secret = self.store.secret()
        self.refresh()

    def refresh(self) -> None:
        """Read the class's records again (a regrade may have replaced some)."""
        self.records = stored_records.load_all(self.out)

    def question(self, question_id: str) -> tuple[Lab, Written]:
        for lab in LABS.values():
            for question in lab.written:
                if question.id == question_id and question.points:
                    return lab, question
        raise Refused(f"there is no written question {question_id!r} worth points; pick one from the list")

    def listed(self, lab: Lab, question: Written) -> list[tuple[str, str, Marked]]:
        """(pseudonym, submission, marked) for every submission asked ``question``, in pseudonym order."""
        marks = state.index(self.store.marks(question.id))
        rubric = rubrics(lab)
        found = []
        for name, record in self.records.items():
            if record.result.lab != lab.name:
                continue
            asked = [(t, q) for t, q in state.questions(lab, record.result.release) if q.id == question.id]
            if asked:
                [marked] = state.assess(name, asked, record.result.written, marks, rubric)
                found.append((state.pseudonym(self.secret, question.id, name), name, marked))
        return sorted(found)

    def overview(self) -> list[dict[str, Any]]:
        """Every written question worth points with answers in the class: its lab, prompt, points, and how
        many answers are in each state."""
        self.refresh()
        out = []
        for lab in LABS.values():
            for question in lab.written:
                if not question.points:
                    continue
                answers = self.listed(lab, question)
                if answers:
                    counts = {s: sum(m.state == s for _, _, m in answers) for s in state.STATES}
                    out.append({"lab": lab.name, "title": lab.title, "question": question.id, "label": question.label,
                                "points": question.points, "answers": len(answers), "counts": counts})
        return out

    def answers(self, question_id: str) -> dict[str, Any]:
        """The question, its rubric and every answer to it (anonymous, in a stable order), the class's records
        read again (a regrade since shows)."""
        lab, question = self.question(question_id)
        self.refresh()
        listed = []
        for pseudonym, _, marked in self.listed(lab, question):
            answer = marked.answer
            listed.append({"id": pseudonym, "text": answer.text if answer else "", "words": answer.words if answer else 0,
                           "found": answer.found if answer else "none", "sha256": marked.sha256,
                           "state": marked.state, "points": marked.points, "mark": _mark(marked.mark)})
        return {"lab": lab.name, "question": question.id, "label": question.label, "prompt": question.prompt,
                "points": question.points, "words": list(question.words),
                "rubric": _rubric(rubrics(lab).get(question.id)), "answers": listed}

    def _find(self, question_id: str, answer_id: str) -> tuple[Lab, Written, str, Marked]:
        lab, question = self.question(question_id)
        for pseudonym, name, marked in self.listed(lab, question):
            if pseudonym == answer_id:
                return lab, question, name, marked
        raise Refused(f"no answer {answer_id!r} to {question_id}: it may have been regraded away; reload the page")

    def name(self, question_id: str, answer_id: str) -> dict[str, str]:
        """Whose answer it is (on demand: the page shows answers anonymously)."""
        _, _, name, _ = self._find(question_id, answer_id)
        record = self.records[name]
        return {"submission": name, "source": Path(record.source).name if record.source else ""}

    def save(self, question_id: str, answer_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Store a mark for one answer: ``body`` holds the answer's ``sha256`` as the page saw it, the rubric
        ``items`` applied, the ``adjust``-ment, the ``comment`` and the ``version`` of the mark the page saw
        (0 for none; also when the mark shown was an earlier text's, which stays as it was). Refused when the answer changed since (a regrade) or an item is not the rubric's;
        :class:`grader.mark.store.Conflict` when another marker changed the mark meanwhile."""
        lab, question, name, marked = self._find(question_id, answer_id)
        if body.get("sha256") != marked.sha256:
            raise Refused("this answer changed since the page loaded it (the submission was graded again): reload")
        items = body.get("items", [])
        rubric = rubrics(lab).get(question.id) or Rubric(items=())
        if not isinstance(items, list) or not all(isinstance(i, str) and rubric.item(i) for i in items):
            raise Refused(f"items must be ids of {question.id}'s rubric ({', '.join(i.id for i in rubric.items)})")
        adjust, version, comment = body.get("adjust", 0), body.get("version", 0), body.get("comment", "")
        if isinstance(adjust, bool) or not isinstance(adjust, (int, float)) or not math.isfinite(adjust) \
                or abs(adjust) > MAX_ADJUST:
            raise Refused(f"the adjustment must be a number of points between -{MAX_ADJUST:g} and {MAX_ADJUST:g}")
        if isinstance(version, bool) or not isinstance(version, int) or not isinstance(comment, str):
            raise Refused("version must be a whole number and comment a text")
        saved = self.store.save(Mark(name, question.id, marked.sha256, tuple(items), adjust, comment, self.marker),
                                version)
        points, _, _ = state.score(saved, question, rubric)
        return {"id": answer_id, "state": state.MARKED, "points": points, "mark": _mark(saved)}
