"""Per lab: the solution gets full marks, the generated lab runs to the end and gets zero, and
every example submission gets exactly the score its declared mistakes imply (each lab's first examples on every run,
the ones CI's main job grades; every one under ``-m slow``)."""
import ast
import html

import pytest

from grader.author.build import LABS, SOLUTIONS, every_run, example_path, mistakes
from grader.core import safe_text
from grader.core.results import ANSWER
from grader.grade.diagnosis import _shown
from grader.report import feedback
from util.hidden import graded_spec
from util.labs import LABS as DECLARED
from util.labs import folder as lab_folder

pytestmark = pytest.mark.notebook
LAB_NAMES = [name for name, lab in DECLARED.items() if lab.tasks]
EXAMPLE_PARAMS = [pytest.param(name, m, id=f"{name}/{m.name}",
                               marks=() if m in every_run(DECLARED[name]) else pytest.mark.slow)
                  for name in LAB_NAMES for m in mistakes(DECLARED[name])]
"""Every example submission; those CI's main job does not grade (:func:`grader.author.build.every_run`) under
``-m slow``, which grades the whole class."""


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


def _grader_only_texts(lab) -> list[str]:
    """What diagnosed feedback must never show of ``lab``'s grader-only files: every line of its judges
    (``judge*.py``, 30 characters or more, comments and blank lines aside) and every string of its
    ``rubrics.py`` of 20 characters or more (rubric items, model answers, markers' notes)."""
    found = []
    for path in sorted(lab_folder(lab).glob("judge*.py")):
        found += [line.strip() for line in path.read_text().splitlines()
                  if len(line.strip()) >= 30 and not line.strip().startswith("#")]
    rubrics = lab_folder(lab) / "rubrics.py"
    if rubrics.exists():
        found += [node.value for node in ast.walk(ast.parse(rubrics.read_text()))
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) >= 20]
    return found


@pytest.mark.parametrize("lab_name, mistake", EXAMPLE_PARAMS)
def test_diagnosed_feedback_names_the_examples_mistake_and_nothing_grader_only(graded, lab_name, mistake):
    """Each example submission's diagnosed feedback (its own diagnosis.json, from the one grading
    above) names its declared mistake for every task whose hidden cases it fails, and shows no judge line,
    no rubric text and no case of a task it does not explain."""
    lab = DECLARED[lab_name]
    path = example_path(lab, mistake)
    result = graded(path, lab_name)
    diagnosis = feedback.read_diagnosis(graded.folder(path, lab_name))
    page = feedback.render_html(mistake.name, result, diagnosis=diagnosis)
    md = feedback.render(mistake.name, result, diagnosis=diagnosis)
    hidden = {t.task_id for t in result.tasks for c in t.checks if c.hidden and c.status != "passed"}
    assert hidden == {task_id for task_id, checks in mistake.expected_failures.items() if set(checks) - {ANSWER}}
    shown = html.unescape(page)
    for task_id in hidden:
        explained = shown.split(f'id="diagnosed-{task_id}"', 1)[1].split("<h2", 1)[0]
        assert f"<strong>{mistake.name}</strong>: {mistake.description}" in explained, task_id
    if hidden:
        assert f"**{safe_text.markdown(mistake.name)}**" in md
    else:
        assert "What went wrong" not in md  # nothing to explain: the answer check alone failed
    for text in _grader_only_texts(lab):
        assert text not in shown and safe_text.markdown(text) not in md, text
    own = {_shown(graded_spec(lab, t, c)) for t in lab.tasks if t.id in hidden for c in t.cases}
    for task in lab.tasks:
        for case in task.cases:
            spec = _shown(graded_spec(lab, task, case))
            if task.id not in hidden and spec not in own and len(spec) >= 12:
                assert spec not in shown and safe_text.markdown(spec) not in md, (task.id, case.id)
