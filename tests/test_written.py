"""Written questions: their declaration, the answer cell, reading an answer back from any saved notebook, and
their rubrics. Declarations and notebooks are built in memory; no kernel runs."""
from __future__ import annotations

import json

import pytest
import writtenlab
from hypothesis import given, settings
from hypothesis import strategies as st

from util import written
from util.contract import Lab, Release, Task, Written
from util.labs import GRADER_ONLY, LABS, PACKAGES, grader_only, is_rubric, judge_paths, rubrics
from util.rubric import Item, Rubric, problems

LAB = writtenlab.LAB


def test_a_written_question_is_part_of_its_tasks_points_and_the_labs():
    first, second = LAB.tasks
    assert (first.auto_points, first.max_points, second.auto_points, second.max_points) == (3, 5, 4, 5)
    assert (LAB.max_points, LAB.auto_points) == (10, 7)
    assert [q.id for q in LAB.written] == ["902.Q1", "902.Q2", "902.P"]
    assert [q.label for q in LAB.written] == ["Q1", "Q2", "P"]


def test_a_question_added_by_a_release_is_not_asked_of_an_earlier_one_and_its_points_go_back_to_the_answer():
    old = LAB.as_of(1)
    assert [q.id for q in old.written] == ["902.Q1", "902.P"]
    assert [(t.answer_points, t.max_points) for t in old.tasks] == [(3, 5), (5, 5)]
    assert old.max_points == LAB.max_points == 10 and old.auto_points == 8
    assert LAB.written_since(1) == ("902.Q2",) and LAB.written_since(2) == ()


@pytest.mark.parametrize("kwargs, why", [
    ({"id": "Q6"}, "its id is '<lab number>.<label>'"),
    ({"id": "10."}, "its id is '<lab number>.<label>'"),
    ({"points": -1}, "points >= 0"),
    ({"words": (50, 10)}, "0 <= low <= high"),
    ({"prompt": "  "}, "needs a prompt"),
])
def test_a_written_question_is_refused_when_malformed(kwargs, why):
    with pytest.raises(ValueError, match=why):
        Written(**{"id": "10.Q6", "prompt": "Why?", "points": 2, **kwargs})


def test_a_lab_refuses_a_question_of_another_lab_a_duplicate_or_an_undeclared_release():
    with pytest.raises(ValueError, match="must be numbered in lab 5"):
        Task("5.1", "T", 1, "x", written=(Written("6.Q1", "Why?", 1),))
    task = Task("5.1", "T", 1, "x", written=(Written("5.Q1", "Why?", 1),))
    with pytest.raises(ValueError, match="share an id"):
        Lab("lab5", "L", "l.ipynb", (task, Task("5.2", "U", 1, "y", written=(Written("5.Q1", "How?", 1),))))
    with pytest.raises(ValueError, match=r"5.Q2 \(since 2\)"):
        Lab("lab5", "L", "l.ipynb", (Task("5.1", "T", 1, "x", written=(Written("5.Q2", "Why?", 1, since=2),)),))
    Lab("lab5", "L", "l.ipynb", (Task("5.1", "T", 1, "x", written=(Written("5.Q2", "Why?", 1, since=2),)),),
        releases=(Release(1, "2026-01-01", "first"), Release(2, "2026-01-02", "Q2")))


def test_the_answer_cell_names_its_question_points_and_length():
    q1 = writtenlab.Q1
    assert written.answer_cell_source(q1) == ("#### Answer to Q1 (2 points, graded by hand; 3-40 words)\n\n"
                                              "_Type your answer here, in place of this line._")
    assert written.cell_metadata(q1) == {"course": {"written": "902.Q1"}}
    assert written.heading(writtenlab.Q2).startswith("#### Answer to Q2 (1 point, graded by hand")
    assert written.heading_label(written.heading(q1)) == "Q1"


def _nb(*cells) -> dict:
    return json.loads(json.dumps(writtenlab.new_notebook(cells=list(cells))))


def test_an_answer_is_read_from_its_cell_less_the_heading_and_the_placeholder():
    nb = json.loads(json.dumps(writtenlab.notebook("Forty-one, because\nthe task says so.", None)))
    q1, q2 = written.find(nb, writtenlab.Q1), written.find(nb, writtenlab.Q2)
    assert (q1.text, q1.found, q1.words, q1.cell) == ("Forty-one, because\nthe task says so.", "cell", 6, 2)
    assert (q2.text, q2.found, q2.answered) == ("", "cell", False)
    assert written.problem(q2, writtenlab.Q2) == ("the answer to Q2 is still empty: replace the placeholder line "
                                                  "with your answer")
    assert written.problem(q1, writtenlab.Q1) is None


def test_an_answer_whose_metadata_was_lost_is_found_by_its_heading():
    nb = json.loads(json.dumps(writtenlab.notebook("By its heading.", "Yes.", metadata=False)))
    answer = written.find(nb, writtenlab.Q1)
    assert (answer.text, answer.found) == ("By its heading.", "heading")


def test_markdown_cells_added_below_the_answer_cell_belong_to_the_answer_until_code_or_a_heading():
    cells = [writtenlab.answer_cell(writtenlab.Q1, None), writtenlab.new_markdown_cell("First part."),
             writtenlab.new_markdown_cell(["Second ", "part."]), writtenlab.new_code_cell("x = 1"),
             writtenlab.new_markdown_cell("Not the answer.")]
    assert written.find(_nb(*cells), writtenlab.Q1).text == "First part.\n\nSecond part."
    cells[3] = writtenlab.new_markdown_cell("## Task 902.2: Second (5 points)")
    assert written.find(_nb(*cells), writtenlab.Q1).text == "First part.\n\nSecond part."


def test_a_missing_or_out_of_range_answer_is_named_in_the_students_words():
    none = written.find(_nb(writtenlab.new_markdown_cell("nothing here")), writtenlab.Q1)
    assert none.found == "none" and "restore the cell headed 'Answer to Q1'" in written.problem(none, writtenlab.Q1)
    short = written.find(_nb(writtenlab.answer_cell(writtenlab.Q1, "Two words")), writtenlab.Q1)
    assert written.problem(short, writtenlab.Q1) == ("the answer to Q1 has 2 words; 3-40 are asked (it is marked "
                                                     "all the same)")


notebook_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=30),
                             lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                          max_size=4), max_leaves=30)
cells = st.lists(st.fixed_dictionaries({"cell_type": st.sampled_from(["markdown", "code", "raw", 3]),
                                        "source": st.text(max_size=80) | st.lists(st.text(max_size=20), max_size=3)
                                        | notebook_json,
                                        "metadata": notebook_json | st.just({"course": {"written": "902.Q1"}})}),
                 max_size=6)


@settings(max_examples=300, deadline=None)
@given(st.one_of(notebook_json, st.builds(lambda c: {"cells": c}, cells)))
def test_reading_an_answer_never_raises_whatever_the_notebook_holds(nb):
    answer = written.find(nb, writtenlab.Q1)
    assert answer.found in written.FOUND and isinstance(answer.text, str)
    assert written.PLACEHOLDER not in answer.text


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1).filter(lambda t: t.strip() and not t.lstrip().startswith("#")))
def test_any_text_typed_in_place_of_the_placeholder_is_read_back_as_typed(text):
    nb = _nb(writtenlab.answer_cell(writtenlab.Q1, text))
    assert written.find(nb, writtenlab.Q1).text == text.strip().replace(written.PLACEHOLDER, "").strip()


def test_the_rubrics_are_grader_only_and_no_judge_sees_them():
    assert "rubric*" in GRADER_ONLY
    assert grader_only(writtenlab.FOLDER / "lab902" / "rubrics.py") and is_rubric(writtenlab.FOLDER / "lab902" / "rubrics.py")
    assert all(not is_rubric(path) for lab in LABS.values() for path in judge_paths(lab))


def test_a_rubric_scores_items_by_their_current_points_within_zero_and_the_questions_points():
    rubric = Rubric(items=(Item("A", 2, "a"), Item("B", 1, "b"), Item("X", -2, "x")))
    assert rubric.best() == 3
    assert rubric.score(["A", "B"], 0, 3) == 3
    assert rubric.score(["A", "B"], 1, 3) == 3  # never above the question's points
    assert rubric.score(["X"], 0, 3) == 0  # never below 0
    assert rubric.score(["A", "X", "gone"], 0.5, 3) == 0.5  # an unknown item counts 0
    assert rubric.score(["A", "A"], 0, 3) == 2  # an item counts once
    negative = Rubric(items=(Item("late", -1, "l"),), start=3)
    assert negative.best() == 3 and negative.score(["late"], 0, 3) == 2


def test_the_rubrics_must_match_the_declaration(tmp_path):
    with writtenlab.registered(tmp_path):
        assert problems(LAB, rubrics(LAB)) == []
    wrong = {"902.Q1": Rubric(items=(Item("A", 1, "a"), Item("A", 3, "b"))), "902.Q9": Rubric(items=())}
    found = problems(LAB, wrong)
    assert found == ["lab902: rubrics.py has a rubric for 902.Q9, which is not a written question of the lab",
                     "lab902: the rubric of 902.Q1 needs unique, non-empty item ids; found ['A', 'A']",
                     "lab902: the rubric of 902.Q1 reaches 4 points at best (start 0 plus its positive items) but "
                     "the question is worth 2",
                     "lab902: written question 902.Q2 (1 points) has no rubric: add RUBRICS['902.Q2'] = "
                     "Rubric(items=(Item(...), ...)) to its rubrics.py"]


@pytest.mark.parametrize("lab_name", list(LABS))
def test_every_labs_rubrics_match_its_written_questions(lab_name):
    assert problems(LABS[lab_name], rubrics(LABS[lab_name])) == []


@pytest.mark.parametrize("lab_name", [name for name in LABS if PACKAGES[name].startswith("util.labs.")])
def test_every_course_lab_asks_written_questions_worth_5_to_15_percent_of_its_points(lab_name):
    """Explanations are graded in every lab, as in the courses this one is compared with, without crowding out
    what the autograder checks."""
    lab = LABS[lab_name]
    share = sum(q.points for q in lab.written) / lab.max_points
    assert 0.05 <= share <= 0.15, f"{lab_name}: written questions are {share:.0%} of its points; 5-15 % is asked"


def test_editing_a_rubric_neither_regrades_a_class_nor_makes_references_stale():
    """Marks are scored when the class's files are built: a rubric is no input of the autograder's."""
    from grader.grade import resume
    from util.labs import PLUMBING, source_files

    lab = LABS["lab10"]
    assert not [p for p in resume._code_files(lab) if is_rubric(p)]
    assert not [p for p in source_files(lab) if is_rubric(p) or p.name in ("rubric.py", "written.py")]
    assert {"util/rubric.py", "util/written.py"} <= set(PLUMBING)
