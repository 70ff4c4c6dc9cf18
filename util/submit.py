"""``submit``: the one call a notebook makes per task. It prints the result and exports it.

It never compares the answer with anything: comparison happens in the grader's own process.
It does check the answer's *shape* (the keys a task expects, that it is JSON-able), so a typo is
caught while the student is still in the notebook rather than at grading time.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tabulate import tabulate

from util.answers import (
    AnswerError,
    output_dir,
    read_answers,
    to_jsonable,
    write_answer,
)
from util.display import print_hw_result


def submit(task_id: str, value: Any) -> None:
    """Print ``value`` as a titled block for task ``task_id`` and export it for grading.

    Example::

        submit("1.1", {"total": 6624904, "trainable": 6624904, "non_trainable": 0})

    Raises ``KeyError`` for an unknown task id, ``AnswerError`` when a dict answer lacks a key the
    task expects or holds something JSON cannot store. Re-running the cell overwrites the export.
    """
    from util.labs import find_task

    lab, task = find_task(task_id)
    if task.keys:
        if not isinstance(value, Mapping):
            raise AnswerError(f"task {task_id} expects {task.answer}; got a {type(value).__name__}")
        missing = [k for k in task.keys if k not in value]
        extra = [k for k in value if k not in task.keys]
        if missing or extra:
            raise AnswerError(
                f"task {task_id} expects a dict with keys {', '.join(task.keys)}"
                + (f"; missing: {', '.join(missing)}" if missing else "")
                + (f"; unexpected: {', '.join(map(str, extra))}" if extra else ""))
    exported = to_jsonable(value)
    print_hw_result(task.id, task.title, exported)
    path = write_answer(output_dir(lab.name), task.id, exported)
    print(f"    (exported to {path.name} for grading)")


def _written_state(question, nb) -> str:
    import util.written as written

    if nb is None:
        return "not checked here: python -m grader check"
    answer = written.find(nb, question)
    return f"{answer.words} words" if answer.answered else "not yet"


def progress(lab_name: str, namespace: Mapping[str, Any] | None = None) -> None:
    """Print which tasks of a lab this notebook has exported so far (not whether they are right), and how
    long each written answer is in the notebook as last saved (``namespace``: the caller's globals, which
    say where the notebook is)."""
    import inspect

    import util.written as written
    from util.labs import get_lab

    if namespace is None:
        caller = inspect.currentframe().f_back
        namespace = caller.f_globals if caller is not None else {}
    lab = get_lab(lab_name)
    answers = read_answers(output_dir(lab.name))
    rows = [[t.id, t.title, f"{t.max_points:g}", "exported" if t.id in answers else "not yet",
             f"hidden cases ({t.hidden_points:g} points)" if t.hidden_points else ""] for t in lab.tasks]
    scored = [q for q in lab.written if q.points]
    nb = written.saved_notebook(dict(namespace)) if scored else None
    rows += [[q.id, f"{q.label}, written", f"{q.points:g}", _written_state(q, nb), "marked by hand"] for q in scored]
    # task ids are text: "4.0" must not be printed as the number 4
    print(tabulate(rows, headers=["task", "title", "points", "answer", "grader also runs"], disable_numparse=[0]))
    print(f"{sum(t.id in answers for t in lab.tasks)}/{len(lab.tasks)} tasks exported"
          + ((f", {sum(written.find(nb, q).answered for q in scored)}/{len(scored)} written answers (as last saved)"
              if nb is not None else f", written answers not checked here (this kernel was not told which file its "
              f"notebook is): run python -m grader check {lab.name}") if scored else "")
          + ". Correctness is decided by the grader, on these answers and on hidden inputs"
          + (", and by a TA on the written answers." if scored else "."))
