"""What went wrong on each failed hidden case, worked out when a submission is graded and kept for later.

A summary ("2 of 4 values differ, a factor 1.5 to 3 too large") tells a student that a case failed, not
what to do about it. When the course allows it (the class setting ``feedback: diagnosed``, from a date:
after the deadline), the student's feedback shows, per failed hidden case, the case's **input** (as this
term graded it; a file it read by name only), the student's **value**, what was **expected** (the reference
value where the case compares values; where a judge decided, the property that failed, which is the
check's message already), and, where the task's failures match one of the lab's declared mistakes
(``mistakes.py``: the example submissions), that **mistake's name and description** as a hint.

This module only gathers it, at grading time, where the references and the grader-only cases are at hand,
into ``diagnosis.json`` beside the result: an instructor's file, shown to students only through the feedback
and only when the class setting says so (:mod:`grader.report.feedback`). Never the judge's code, another
student's data or a reference the course keeps grader-only beyond the expected value of the case itself.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from grader.core.results import ANSWER, TaskResult
from grader.core.safe_text import json_value
from util import labs
from util.contract import Lab
from util.hidden import FILE_KEY, graded_spec

MAX_TEXT = 600
"""Longest text kept for one input, value or expected value (the rest is cut, and says so)."""


def _shown(value: Any) -> str:
    """``value`` as compact JSON, a file a case reads shown by its name, cut at :data:`MAX_TEXT`."""
    def names(item: Any) -> Any:
        if isinstance(item, dict):
            if set(item) == {FILE_KEY}:
                return f"<file {str(item[FILE_KEY]).rsplit('/', 1)[-1]}>"
            return {k: names(v) for k, v in item.items()}
        if isinstance(item, list):
            return [names(v) for v in item]
        return item

    text = json.dumps(json_value(names(value)), sort_keys=True, separators=(", ", ": "))
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f"... ({len(text) - MAX_TEXT:,} more characters)"


def mistakes_like(lab: Lab, task: TaskResult) -> list[dict[str, str]]:
    """The lab's declared mistakes whose failures on ``task`` are exactly the task's failed checks (name and
    description), in declaration order; none when the task passed."""
    failed = {c.name for c in task.checks if c.status != "passed"}
    module = labs.part(lab, "mistakes") if failed else None
    found = []
    for mistake in getattr(module, "MISTAKES", ()):
        declared = set(mistake.expected_failures.get(task.task_id, ()))
        if declared and declared == failed:
            found.append({"name": mistake.name, "hint": mistake.description})
    return found


def diagnose(lab: Lab, tasks: tuple[TaskResult, ...], cases: Mapping[str, Mapping[str, Any]],
             references: Mapping[str, Any]) -> dict[str, Any]:
    """Task id -> ``{"cases": [...], "mistakes": [...]}`` for every task with a failed hidden case: per case its
    id, input, the student's value (or the error), the expected value (``None`` where a judge decided), the
    check's message; and the declared mistakes its failures match (:func:`mistakes_like`)."""
    out: dict[str, Any] = {}
    for result in tasks:
        task = lab.task(result.task_id)
        failed = [c for c in result.checks if c.name != ANSWER and c.status != "passed"]
        if not failed:
            continue
        rows = []
        declared = {case.id: case for case in task.cases}
        for check in failed:
            case = declared.get(check.name)
            if case is None:
                continue
            record = (cases.get(task.id) or {}).get(case.id) or {}
            expected = None if task.grader_check else (references.get("cases", {}).get(task.id) or {}).get(case.id)
            rows.append({"case": case.id, "input": _shown(graded_spec(lab, task, case)),
                         "value": _shown(record["value"]) if "value" in record else None,
                         "raised": record.get("message") or None if record.get("status") != "ok" else None,
                         "expected": _shown(expected) if expected is not None else None,
                         "found": check.message})
        out[task.id] = {"cases": rows, "mistakes": mistakes_like(lab, result)}
    return out
