"""Running the hidden cases inside the graded notebook's kernel, after the notebook has run.

The grader appends one cell that calls :func:`run_cases`. For every case it looks up the student's
function by name in the notebook's namespace, calls it through the task's ``run_case`` and writes
the JSON-able result (or the error) to a file after each case, so a case that hangs or kills the
kernel does not lose the others. Comparison with the references happens later, in the grader.
"""
from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any, Mapping

from util.answers import to_jsonable, write_json


def _error_text(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    student = [f for f in frames if "<ipython-input" in f.filename or f.filename.startswith("/tmp/ipykernel")]
    where = f" (line {student[-1].lineno} of {student[-1].name})" if student else ""
    return f"{type(exc).__name__}: {exc}{where}"


def run_cases(lab_name: str, namespace: Mapping[str, Any], path: str, release: int | None = None) -> None:
    """Run every case of lab ``lab_name`` on the functions in ``namespace``; record results in ``path``.

    ``release``: only the cases that lab release had (``Lab.as_of``), for a notebook built from it.

    Each record is ``{"status": "ok"|"error"|"missing", "value"?, "message"?, "seconds"}`` keyed by
    task id then case id.
    """
    from util import setup
    from util.labs import get_lab

    lab = get_lab(lab_name)
    lab = lab.as_of(release) if release is not None else lab
    out_path = Path(path)
    records: dict[str, dict[str, Any]] = {}
    for task in lab.tasks:
        if not task.cases:
            continue
        records[task.id] = {}
        function = namespace.get(task.function)
        for case in task.cases:
            start = time.perf_counter()
            if not callable(function):
                record = {"status": "missing",
                          "message": f"the notebook defines no function {task.function}()"}
            else:
                try:
                    setup()  # the same seed and threads before every case, whatever the notebook did
                    record = {"status": "ok", "value": to_jsonable(task.run_case(function, case.spec))}
                except Exception as exc:  # the student's code may raise anything
                    record = {"status": "error", "message": _error_text(exc)}
            record["seconds"] = round(time.perf_counter() - start, 3)
            records[task.id][case.id] = record
            write_json(out_path, records)  # after every case: a later hang or crash keeps this one


def cell_source(lab_name: str, path: Path, release: int | None = None) -> str:
    """The code of the cell the grader appends to a notebook (``release``: see :func:`run_cases`)."""
    return ("import util.hidden as _course_hidden\n"
            f"_course_hidden.run_cases({lab_name!r}, globals(), {str(path)!r}"
            + (f", release={int(release)})" if release is not None else ")"))
