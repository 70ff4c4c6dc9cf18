"""Per lab: the solution gets full marks, the generated lab runs to the end and gets zero, and
every example submission gets exactly the score its declared mistakes imply."""
import pytest

from grader.author.build import LABS, SOLUTIONS, example_path, mistakes
from grader.core.results import ANSWER
from util.labs import LABS as DECLARED

pytestmark = pytest.mark.notebook
LAB_NAMES = [name for name, lab in DECLARED.items() if lab.tasks]
EXAMPLE_PARAMS = [pytest.param(name, m, id=f"{name}/{m.name}") for name in LAB_NAMES for m in mistakes(DECLARED[name])]


@pytest.mark.parametrize("lab_name", LAB_NAMES)
def test_solution_gets_full_marks(graded, lab_name):
    lab = DECLARED[lab_name]
    result = graded(SOLUTIONS / lab.notebook, lab_name)
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == []
    assert result.score == result.max_score == lab.auto_points and lab.max_points == 100
    assert result.execution_status == "completed" and result.notes == ()
    assert [w.question for w in result.written] == [q.id for q in lab.written]  # found by their headings
    assert all(w.text and w.found == "heading" for w in result.written)  # each with its model answer


@pytest.mark.parametrize("lab_name", LAB_NAMES)
def test_generated_lab_runs_to_the_end_and_gets_zero(graded, lab_name):
    lab = DECLARED[lab_name]
    result = graded(LABS / lab.notebook, lab_name)
    assert result.execution_status == "completed"
    assert result.score == 0 and result.max_score == lab.auto_points
    assert [(w.question, w.text, w.found) for w in result.written] == [(q.id, "", "cell") for q in lab.written]
    for task in result.tasks:
        assert task.status == "error", task.output()
        for check in task.checks:
            assert f"Implement task {task.task_id}" in check.message, (task.task_id, check.name, check.message)


def test_every_lab_has_example_submissions():
    assert {name for name, _ in (p.values for p in EXAMPLE_PARAMS)} == set(LAB_NAMES)


@pytest.mark.parametrize("lab_name, mistake", EXAMPLE_PARAMS)
def test_example_submission_gets_exactly_its_partial_score(graded, lab_name, mistake):
    lab = DECLARED[lab_name]
    result = graded(example_path(lab, mistake), lab_name)
    names = {t.id: {ANSWER, *(c.id for c in t.cases)} for t in lab.tasks}
    for task_id, checks in mistake.expected_failures.items():
        assert set(checks) <= names[task_id], f"{mistake.name} names unknown checks of task {task_id}"
    failed = {(t.task_id, c.name) for t in result.tasks for c in t.checks if c.status != "passed"}
    expected = {(task_id, check) for task_id, checks in mistake.expected_failures.items() for check in checks}
    assert failed == expected
    points = {(t.id, ANSWER): t.answer_points for t in lab.tasks} | {(t.id, c.id): c.points for t in lab.tasks for c in t.cases}
    assert 0 < result.score == lab.auto_points - sum(points[key] for key in expected) < lab.auto_points
    assert all(w.text and w.found == "cell" for w in result.written)  # the model answers, as a student's
    assert all(c.status == "failed" for t in result.tasks for c in t.checks if (t.task_id, c.name) in expected)
