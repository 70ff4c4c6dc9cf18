"""Scoring: turning exported answers, hidden-case records and the execution into task results.

A pure function of its inputs (no notebook is run here), so every status and message can be unit
tested with small dictionaries.

Feedback says where an answer differs and how (:func:`grader.judge.compare.describe`), never the
expected value, unless the instructor asks for it (``reveal``, ``grade --show-expected``) and
the check is not on a hidden input. A fault of the grader's own while scoring one task costs that
task only: its checks get status ``error`` with a message starting with :data:`GRADER_FAULT`, and
the other tasks keep their points.
"""
from __future__ import annotations

from typing import Any, Mapping

from grader.core.results import ANSWER, GRADER_FAULT, CheckResult, TaskResult
from grader.core.safe_text import shorten
from grader.execute.kernel import Execution
from grader.judge.compare import compare, describe
from util.contract import Lab, Task


def _why_absent(task: Task, execution: Execution) -> tuple[str, str]:
    """Status and message for an answer the notebook never exported."""
    errors = [e for e in execution.errors if e.task == task.id]
    if errors and errors[0].ename == "MemoryError":  # an allocation over the grader's memory limit
        return "memory", errors[0].describe() + " (the cell ran out of memory: the grader limits each submission)"
    if errors:
        return "error", errors[0].describe()  # the first is the cause; later ones follow from it
    if execution.status != "completed":
        return execution.status, execution.message
    return "missing", (f"no answer was exported: run the cell that calls submit({task.id!r}, ...) "
                       "and make sure it does not raise")


def _answer_check(task: Task, expected: Any, answers: Mapping[str, Any], execution: Execution,
                  reveal: bool = False) -> CheckResult:
    if task.id not in answers:
        status, message = _why_absent(task, execution)
        return CheckResult(ANSWER, status, 0, task.answer_points, message)
    mismatches = compare(expected, answers[task.id], task.tolerance)
    if not mismatches:
        return CheckResult(ANSWER, "passed", task.answer_points, task.answer_points, "")
    return CheckResult(ANSWER, "failed", 0, task.answer_points, describe(mismatches, task.tolerance, reveal=reveal))


def _case_checks(task: Task, expected: Mapping[str, Any], records: Mapping[str, Any],
                 execution: Execution, verdicts: Mapping[str, list[str]] | None = None,
                 reveal: bool = False) -> list[CheckResult]:
    checks = []
    for case in task.cases:
        problems = (verdicts or {}).get(case.id)
        record = records.get(case.id)
        if record is None:
            status = execution.status if execution.status != "completed" else "missing"
            message = execution.message or "the grader's cases did not run (the notebook stopped before them)"
            checks.append(CheckResult(case.id, status, 0, case.points, message, case.hidden))
        elif record["status"] == "missing":
            checks.append(CheckResult(case.id, "missing", 0, case.points, record["message"], case.hidden))
        elif record["status"] == "error" and record["message"].startswith("MemoryError"):
            checks.append(CheckResult(case.id, "memory", 0, case.points,
                                      f"{task.function}() ran out of memory: {record['message']}", case.hidden))
        elif record["status"] == "error":
            checks.append(CheckResult(case.id, "error", 0, case.points,
                                      f"{task.function}() raised {record['message']}", case.hidden))
        elif problems:  # the grader's own check of the file this case saved (task.grader_check)
            checks.append(CheckResult(case.id, "failed", 0, case.points, "; ".join(problems[:3]), case.hidden))
        elif task.grader_check and problems is None:
            checks.append(CheckResult(case.id, "missing", 0, case.points,
                                      "the grader did not receive the model this case saved", case.hidden))
        else:
            mismatches = compare(expected[case.id], record.get("value"), task.tolerance, path="result")
            if mismatches:
                message = describe(mismatches, task.tolerance, reveal=reveal and not case.hidden)
                checks.append(CheckResult(case.id, "failed", 0, case.points, message, case.hidden))
            else:
                checks.append(CheckResult(case.id, "passed", case.points, case.points, "", case.hidden))
    return checks


def grader_fault(task: Task, exc: BaseException) -> TaskResult:
    """Every check of ``task`` as an ``error`` the grader caused (``exc``), worth 0 this time."""
    message = (f"{GRADER_FAULT} judge this task ({type(exc).__name__}: {shorten(str(exc), 300)}); it is not your "
               "fault: the instructors have been told, and it will be graded again")
    checks = [CheckResult(ANSWER, "error", 0, task.answer_points, message)]
    checks += [CheckResult(c.id, "error", 0, c.points, message, c.hidden) for c in task.cases]
    return TaskResult(task.id, task.title, tuple(checks))


def score(lab: Lab, references: Mapping[str, Any], answers: Mapping[str, Any],
          cases: Mapping[str, Mapping[str, Any]], execution: Execution,
          verdicts: Mapping[str, Mapping[str, list[str]]] | None = None, *, reveal: bool = False) -> tuple[TaskResult, ...]:
    """One :class:`TaskResult` per declared task.

    ``references`` is the lab's reference file (``answers`` and ``cases`` sections), ``answers``
    what the notebook exported, ``cases`` the hidden-case records written in the kernel, and
    ``verdicts`` (task id -> case id -> problems) what the grader's own checks of the saved files
    found, for tasks with a ``grader_check`` (``grader.judge.artifacts.verdicts``). ``reveal`` puts the
    expected value in the feedback of checks that are not hidden.
    """
    results = []
    for task in lab.tasks:
        try:
            checks = [_answer_check(task, references["answers"][task.id], answers, execution, reveal)]
            checks += _case_checks(task, references["cases"].get(task.id, {}), cases.get(task.id, {}), execution,
                                   (verdicts or {}).get(task.id), reveal)
            results.append(TaskResult(task.id, task.title, tuple(checks)))
        except Exception as exc:  # a grader bug on one task must not cost the others
            results.append(grader_fault(task, exc))
    return tuple(results)
