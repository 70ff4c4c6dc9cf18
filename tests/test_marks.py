"""The marks of written answers: stored in transactions, scored by the rubric as it is now, kept through a
regrade (flagged "to re-mark" when the text changed), and several markers at once lose nothing."""
from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from dataclasses import replace

import pytest
import writtenlab

from grader.core.results import WrittenAnswer
from grader.mark import state
from grader.mark.api import Desk, Refused
from grader.mark.store import Conflict, Mark, Store, load
from util.rubric import Item, Rubric


def _rubrics():
    from util.labs import rubrics
    return rubrics(writtenlab.LAB)


def test_a_mark_is_stored_with_its_items_not_their_points_and_its_version_grows(tmp_path):
    with Store(tmp_path) as store:
        first = store.save(Mark("amy", "902.Q1", "s1", ("A", "B"), 0.5, "good", "ta1"), 0)
        assert (first.version, first.items, first.adjust, first.comment, first.marker) == (1, ("A", "B"), 0.5, "good", "ta1")
        second = store.save(replace(first, items=("A",)), 1)
        assert second.version == 2 and store.get("amy", "902.Q1", "s1").items == ("A",)
    assert [(m.submission, m.items, m.version) for m in load(tmp_path)] == [("amy", ("A",), 2)]
    columns = [row[1] for row in sqlite3.connect(tmp_path / "marks.sqlite").execute("PRAGMA table_info(marks)")]
    assert "points" not in columns and "items" in columns


def test_a_mark_changed_by_another_marker_is_never_overwritten_silently(tmp_path):
    with Store(tmp_path) as one, Store(tmp_path) as two:
        one.save(Mark("amy", "902.Q1", "s1", ("A",)), 0)
        with pytest.raises(Conflict) as refused:
            two.save(Mark("amy", "902.Q1", "s1", ("B",)), 0)  # it saw no mark: one's is newer
        assert refused.value.current.items == ("A",)
        assert two.save(Mark("amy", "902.Q1", "s1", ("B",)), 1).version == 2  # having seen one's, it may replace it


def test_a_batch_of_marks_is_written_whole_or_not_at_all(tmp_path):
    with Store(tmp_path) as store:
        store.save(Mark("bob", "902.Q1", "s2", ("A",)), 0)
        with pytest.raises(Conflict):
            store.save_all([(Mark("amy", "902.Q1", "s1", ("A",)), 0), (Mark("bob", "902.Q1", "s2", ("B",)), 0)])
        assert store.get("amy", "902.Q1", "s1") is None and store.get("bob", "902.Q1", "s2").items == ("A",)


def test_a_mark_refuses_an_adjustment_that_is_not_a_number_of_points():
    for bad in (float("nan"), float("inf"), 1e9):
        with pytest.raises(ValueError, match="adjustment"):
            Mark("amy", "902.Q1", "s", adjust=bad)


def _writer(path: str, name: str, count: int) -> None:
    from pathlib import Path
    with Store(Path(path)) as store:
        for k in range(count):
            store.save(Mark(f"{name}-{k}", "902.Q1", "sha", ("A",), marker=name), 0)


def test_two_markers_writing_at_once_lose_no_mark(tmp_path):
    Store(tmp_path).close()
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_writer, args=(str(tmp_path), name, 60)) for name in ("ta1", "ta2")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    marks = load(tmp_path)
    assert len(marks) == 120 and {m.marker for m in marks} == {"ta1", "ta2"}


def test_two_pages_marking_the_same_answer_at_once_keep_one_mark_and_tell_the_other(tmp_path):
    with writtenlab.class_of(tmp_path, {"amy": ("It is 41 because.", "All.")}) as out, Store(out) as store:
        desk = Desk(out, store)
        [answer] = [a for a in desk.answers("902.Q1")["answers"]]
        outcomes = []

        def mark(items):
            try:
                outcomes.append(desk.save("902.Q1", answer["id"], {"sha256": answer["sha256"], "items": items,
                                                                   "version": 0})["mark"]["items"])
            except Conflict as exc:
                outcomes.append(("conflict", exc.current.items))

        threads = [threading.Thread(target=mark, args=(items,)) for items in (["A"], ["B"])]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        saved = [o for o in outcomes if not isinstance(o, tuple)]
        [refused] = [o for o in outcomes if isinstance(o, tuple)]
        assert len(saved) == 1 and refused == ("conflict", tuple(saved[0]))
        assert store.get("amy", "902.Q1", answer["sha256"]).items == tuple(saved[0])


def _assess(submission, answers, marks, rubrics, release=2):
    return state.assess(submission, state.questions(writtenlab.LAB, release), answers, state.index(marks), rubrics)


def test_each_answer_is_marked_to_mark_to_re_mark_unanswered_or_practice(tmp_path):
    with writtenlab.registered(tmp_path):
        rubrics = _rubrics()
        answers = (WrittenAnswer("902.Q1", "It is 41."), WrittenAnswer("902.Q2", ""), WrittenAnswer("902.P", ""))
        q1, q2, practice = _assess("amy", answers, [], rubrics)
        assert (q1.state, q1.points, q2.state, q2.points, practice.state) == ("to mark", None, "no answer", 0.0,
                                                                              "practice")
        marks = [Mark("amy", "902.Q1", answers[0].sha256, ("A", "B"), comment="fine", version=1)]
        q1, _, _ = _assess("amy", answers, marks, rubrics)
        assert (q1.state, q1.points, [i.text for i in q1.applied]) == ("marked", 2, ["Names the number", "Says why"])
        changed = (WrittenAnswer("902.Q1", "It is 41, since the task says so."),) + answers[1:]
        q1, _, _ = _assess("amy", changed, marks, rubrics)
        assert (q1.state, q1.points, q1.mark.comment) == ("to re-mark", 2, "fine")  # kept, and flagged
        old = _assess("amy", answers[:1] + answers[2:], [], rubrics, release=1)
        assert [w.question.id for w in old] == ["902.Q1", "902.P"]  # release 1 never asked Q2


def test_editing_a_rubric_items_points_re_scores_every_mark_that_applies_it(tmp_path):
    with writtenlab.registered(tmp_path):
        answers = (WrittenAnswer("902.Q1", "It is 41."),)
        marks = [Mark("amy", "902.Q1", answers[0].sha256, ("A", "X"), version=1)]
        rubric = _rubrics()["902.Q1"]
        before = _assess("amy", answers, marks, {"902.Q1": rubric})[0]
        edited = Rubric(items=(Item("A", 2, "Names the number"), Item("X", -0.5, "Claims it is 42")))
        after = _assess("amy", answers, marks, {"902.Q1": edited})[0]
        assert (before.points, after.points) == (0, 1.5)
        removed = _assess("amy", answers, marks, {"902.Q1": Rubric(items=(Item("A", 2, "a"),))})[0]
        assert (removed.points, removed.unknown) == (2, ("X",))


def test_the_pseudonyms_hide_the_submission_and_order_answers_stably_per_question():
    names = [f"student{k}" for k in range(40)]
    order = sorted(names, key=lambda n: state.pseudonym(b"k" * 16, "902.Q1", n))
    assert order == sorted(names, key=lambda n: state.pseudonym(b"k" * 16, "902.Q1", n))  # stable
    assert order != names and order != sorted(names, key=lambda n: state.pseudonym(b"k" * 16, "902.Q2", n))
    assert all(n not in state.pseudonym(b"k" * 16, "902.Q1", n) for n in names)


def test_the_desk_refuses_an_unknown_item_or_an_answer_that_changed_since(tmp_path):
    with writtenlab.class_of(tmp_path, {"amy": ("It is 41 because.", "All.")}) as out, Store(out) as store:
        desk = Desk(out, store)
        [answer] = desk.answers("902.Q1")["answers"]
        with pytest.raises(Refused, match="items must be ids of 902.Q1's rubric"):
            desk.save("902.Q1", answer["id"], {"sha256": answer["sha256"], "items": ["Z"], "version": 0})
        with pytest.raises(Refused, match="changed since the page loaded it"):
            desk.save("902.Q1", answer["id"], {"sha256": "0" * 64, "items": ["A"], "version": 0})
        with pytest.raises(Refused, match="no written question '902.P' worth points"):
            desk.answers("902.P")
        assert store.marks() == []
