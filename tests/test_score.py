"""Scoring statuses on small synthetic inputs (no notebook is run)."""
from grader.execute.kernel import CellError, Execution
from grader.judge.score import score
from util.contract import Case, Lab, Task

TASK = Task(id="900.1", title="Thing", answer_points=4, answer="an int", function="f",
            run_case=lambda fn, spec: fn(spec["n"]),
            cases=(Case("small", {"n": 1}, 3), Case("shown", {"n": 2}, 2, hidden=False)))
OTHER = Task(id="900.2", title="Other", answer_points=5, answer="an int")
LAB = Lab(name="lab900", title="Synthetic", notebook="lab900.ipynb", tasks=(TASK, OTHER))
REFS = {"answers": {"900.1": 10, "900.2": 20}, "cases": {"900.1": {"small": 11, "shown": 12}}}
DONE = Execution("completed", 1.0, ())


def _checks(results, task_id):
    return {c.name: c for r in results if r.task_id == task_id for c in r.checks}


def test_everything_right_gets_full_marks():
    cases = {"900.1": {"small": {"status": "ok", "value": 11}, "shown": {"status": "ok", "value": 12}}}
    results = score(LAB, REFS, {"900.1": 10, "900.2": 20}, cases, DONE)
    assert [(r.score, r.max_score, r.status) for r in results] == [(9, 9, "passed"), (5, 5, "passed")]


def test_each_check_keeps_its_own_points():
    cases = {"900.1": {"small": {"status": "ok", "value": 99}, "shown": {"status": "ok", "value": 12}}}
    results = score(LAB, REFS, {"900.1": 10, "900.2": 21}, cases, DONE)
    checks = _checks(results, "900.1")
    assert (checks["answer"].score, checks["small"].score, checks["shown"].score) == (4, 0, 2)
    assert results[1].score == 0 and results[1].checks[0].message.startswith("answer is too large by 1% to 10%")
    assert "20" not in results[1].checks[0].message  # the expected value is never handed over by default


def test_hidden_case_feedback_never_shows_the_expected_value():
    cases = {"900.1": {"small": {"status": "ok", "value": 99}, "shown": {"status": "ok", "value": 13}}}
    checks = _checks(score(LAB, REFS, {}, cases, DONE), "900.1")
    assert "11" not in checks["small"].message and "is too large by a factor between 3 and 10" in checks["small"].message
    assert "12" not in checks["shown"].message and "is too large by 1% to 10%" in checks["shown"].message
    shown = _checks(score(LAB, REFS, {}, cases, DONE, reveal=True), "900.1")  # the instructor asked for them
    assert "expected 12, found 13" in shown["shown"].message and "11" not in shown["small"].message


def test_a_grader_fault_in_one_task_costs_that_task_only(monkeypatch):
    from grader.judge import score as scoring

    real = scoring.compare

    def fragile(expected, actual, *args, **kwargs):
        if expected == 20:
            raise RuntimeError("a bug in the grader")
        return real(expected, actual, *args, **kwargs)

    monkeypatch.setattr(scoring, "compare", fragile)
    cases = {"900.1": {"small": {"status": "ok", "value": 11}, "shown": {"status": "ok", "value": 12}}}
    first, second = score(LAB, REFS, {"900.1": 10, "900.2": 20}, cases, DONE)
    assert (first.score, first.status) == (9, "passed")
    assert (second.score, second.status) == (0, "error")
    assert second.checks[0].message.startswith(scoring.GRADER_FAULT) and "RuntimeError" in second.checks[0].message


def test_hostile_records_and_answers_never_raise():
    deep = []
    for _ in range(5000):
        deep = [deep]
    cases = {"900.1": {"small": {"status": "error", "message": "\ud800" * 3}, "shown": {"status": "ok", "value": 10**400}}}
    checks = _checks(score(LAB, REFS, {"900.1": deep, "900.2": 10**400}, cases, DONE), "900.1")
    assert checks["answer"].status == "failed" and "is a list; expected an integer" in checks["answer"].message
    assert checks["small"].status == "error" and "\\ud800" in checks["small"].message  # shown, valid UTF-8
    assert checks["shown"].status == "failed" and "too large by a factor of 1,000 or more" in checks["shown"].message


def test_missing_answer_and_missing_function():
    cases = {"900.1": {c: {"status": "missing", "message": "the notebook defines no function f()"}
                     for c in ("small", "shown")}}
    checks = _checks(score(LAB, REFS, {}, cases, DONE), "900.1")
    assert checks["answer"].status == "missing" and "submit('900.1'" in checks["answer"].message
    assert checks["small"].status == "missing" and "no function f()" in checks["small"].message


def test_a_raising_cell_is_named_in_its_tasks_feedback():
    execution = Execution("completed", 1.0, (CellError(7, "900.2", "NotImplementedError", "Implement task 900.2: Other"),
                                             CellError(8, "900.2", "NameError", "name 'x' is not defined")))
    [check] = score(LAB, REFS, {"900.1": 10}, {}, execution)[1].checks
    assert check.status == "error" and "cell 7" in check.message and "NotImplementedError" in check.message


def test_case_errors_show_the_students_exception():
    cases = {"900.1": {"small": {"status": "error", "message": "ZeroDivisionError: division by zero"}}}
    checks = _checks(score(LAB, REFS, {"900.1": 10}, cases, DONE), "900.1")
    assert checks["small"].status == "error" and "f() raised ZeroDivisionError" in checks["small"].message
    assert checks["shown"].status == "missing"


def test_timeout_keeps_what_was_exported_before():
    execution = Execution("timeout", 900.0, (), "cell 12 (900.2) ran past its time limit (300 s)", "900.2")
    results = score(LAB, REFS, {"900.1": 10}, {}, execution)
    checks = _checks(results, "900.1")
    assert checks["answer"].status == "passed"
    assert checks["small"].status == "timeout" and results[1].status == "timeout"
    assert "time limit" in results[1].checks[0].message


def test_results_follow_gradescopes_schema():
    from grader.core.results import SubmissionResult
    cases = {"900.1": {"small": {"status": "ok", "value": 11}, "shown": {"status": "ok", "value": 0}}}
    result = SubmissionResult("x.ipynb", "lab900", score(LAB, REFS, {"900.1": 10}, cases, DONE), 1.234, "completed",
                              ("cell 3 (task 900.2) raised KeyError: 'a'",))
    data = result.to_gradescope_dict()
    assert set(data) == {"score", "execution_time", "output", "output_format", "test_output_format",
                         "test_name_format", "tests"}
    assert data["output_format"] == data["test_output_format"] == data["test_name_format"] == "text"  # never HTML
    assert data["score"] == 7 and data["execution_time"] == 1.23 and "cell 3" in data["output"]
    first, second = data["tests"]
    assert set(first) == {"name", "number", "score", "max_score", "status", "output", "visibility", "extra_data"}
    assert (first["name"], first["score"], first["max_score"], first["status"]) == ("Task 900.1: Thing", 7, 9, "failed")
    assert (second["status"], second["extra_data"]["status"]) == ("failed", "missing")
