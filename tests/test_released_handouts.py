"""A notebook a student finished from an earlier release of a handout, graded today, gets the same score as
the same work in today's handout: 100, as the solution does (``test_labs.py``), and its feedback says which
release it was built from, what changed since, and how it was graded.

The submissions in ``tests/released/`` are frozen copies of what students held: the handout of an earlier
release with correct work in it, i.e. that commit's solution with the solution markers removed and no
outputs (``git show COMMIT:solutions/...``; lab 4 with its ``cpp/`` folder), unstamped as notebooks were
then. They are test fixtures rather than ``grader/examples/`` because the build regenerates the examples
from today's solutions (and ``build --check`` deletes anything else there), while these must never change:

* ``lab1_release1``: lab 1 of commit 7822feb, before the hidden case ``tiny_tied`` (release 2). Graded as
  release 1, its 1.4 no longer loses 6 points to a transposed convolution its handout never described;
* ``lab4_release1``: lab 4 of commit f44527c, importing ``util.cpp_analyzer`` and ``util.torchscript`` (moved
  in release 2) and counting as release 1 did (no ``tiny_tied``, release 3): it scored 4 before the names
  resolved from their old place;
* ``lab7_release1``: lab 7 of commit 1eb84ea, whose task 7.3 was ``convert(..., cast_params=True)`` (release 2
  made it ``convert_fp16_params``): graded by release 1's declaration of the task;
* ``lab10_release1``: lab 10 of commit a196ac2 (stamped release 1, as the build then stamped it), before its
  questions Q1-Q9 got answer cells and 9 points marked by hand (release 2): graded as release 1, its exported
  answers keep those points and it is asked no written question.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.core.results import SubmissionResult
from grader.grade.submission import grade_submission
from util.labs import get_lab

pytestmark = pytest.mark.notebook
RELEASED = Path(__file__).resolve().parent / "released"
SUBMISSIONS = {"lab1": "lab1_release1/lab1_pytorch_analysis.ipynb", "lab4": "lab4_release1/lab4_libtorch.ipynb",
               "lab7": "lab7_release1/lab7_mixed_precision.ipynb",
               "lab10": "lab10_release1/lab10_transformer_costs.ipynb"}
_graded: dict[str, tuple[SubmissionResult, Path]] = {}


def _grade(lab_name: str, tmp_path_factory) -> tuple[SubmissionResult, Path]:
    if lab_name not in _graded:
        out = tmp_path_factory.mktemp(f"released-{lab_name}")
        _graded[lab_name] = (grade_submission(RELEASED / SUBMISSIONS[lab_name], get_lab(lab_name), out), out)
    return _graded[lab_name]


@pytest.mark.parametrize("lab_name", sorted(SUBMISSIONS))
def test_a_notebook_of_an_earlier_release_with_correct_work_gets_full_marks_as_that_release(lab_name,
                                                                                       tmp_path_factory):
    lab = get_lab(lab_name)
    result, out = _grade(lab_name, tmp_path_factory)
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == []
    assert result.execution_status == "completed" and result.score == result.max_score == lab.max_points == 100
    assert result.release == 1 < lab.release
    [note] = result.notes  # nothing else went wrong
    assert note.startswith(f"Your notebook was built from release 1 of {lab_name}")
    assert f"the lab is now at release {lab.release}" in note
    assert note in (out / "feedback.md").read_text(encoding="utf-8")
    record = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert record["extra_data"] == {"release": 1}


def test_lab1_release_1_is_graded_without_the_case_added_in_release_2(tmp_path_factory):
    result, out = _grade("lab1", tmp_path_factory)
    cases = json.loads((out / "cases.json").read_text(encoding="utf-8"))
    assert sorted(cases) == ["1.1", "1.2", "1.3", "1.4", "1.5"]
    assert not any("tiny_tied" in case for ran in cases.values() for case in ran)  # never run
    points = {t.task_id: {c.name: c.max_score for c in t.checks} for t in result.tasks}
    assert points["1.4"] == {"answer": 16, "resnet18@1x3x224x224": 6, "mobilenet_v3_small@1x3x160x160": 6,
                             "squeezenet1_1@1x3x128x128": 6, "tiny_grouped@2x4x16x16": 6}  # release 1's points
    assert "tiny_tied and tiny_tied@2x4x16x16, in tasks 1.1, 1.2, 1.3, 1.4 and 1.5) were not run" in result.notes[0]


def test_lab4_release_1_imports_the_moved_names_from_their_old_place(tmp_path_factory):
    result, out = _grade("lab4", tmp_path_factory)
    source = (RELEASED / SUBMISSIONS["lab4"]).read_text(encoding="utf-8")
    assert "from util.cpp_analyzer import Analyzer" in source and "from util.torchscript import" in source
    executed = (out / "executed.ipynb").read_text(encoding="utf-8")
    assert "util.cpp_analyzer has moved to util.labs.lab4.cpp_analyzer" in executed  # the warning, under the cell
    assert "util.torchscript has moved to util.labs.lab4.torchscript" in executed
    assert "util.cpp_analyzer is now util.labs.lab4.cpp_analyzer" in result.notes[0]  # release 2's changelog


def test_lab7_release_1_is_graded_by_release_1s_declaration_of_task_7_3(tmp_path_factory):
    result, _ = _grade("lab7", tmp_path_factory)
    source = (RELEASED / SUBMISSIONS["lab7"]).read_text(encoding="utf-8")
    assert "convert_fp16_params" not in source and "cast_params=True" in source
    [task] = [t for t in result.tasks if t.task_id == "7.3"]
    assert [c.status for c in task.checks] == ["passed"] * 3
    assert "task 7.3 called your functions as release 1 asked" in result.notes[0]


def test_lab10_release_1_is_asked_no_written_question_and_its_answers_keep_their_points(tmp_path_factory):
    result, out = _grade("lab10", tmp_path_factory)
    assert result.written == ()
    points = {t.task_id: next(c.max_score for c in t.checks if c.name == "answer") for t in result.tasks}
    assert points == {"10.1": 3, "10.2": 4, "10.3": 2, "10.4": 3, "10.5": 5, "10.6": 5}  # release 1's
    assert "the written questions added since (10.Q1, 10.Q2, 10.Q3, 10.Q4, 10.Q5, 10.Q6, 10.Q7, 10.Q8, 10.Q9 and " \
           "10.Wrap-up) were not asked of you" in result.notes[0]
    feedback = (out / "feedback.md").read_text(encoding="utf-8")
    assert "**Score: 100 / 100**\n" in feedback and "Written answers" not in feedback
