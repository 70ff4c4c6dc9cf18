"""One submission's grading job, as a local pool and a Dask cluster both run it.

:func:`grade_one` grades a submission into its result folder and records it, and never raises: a
grader fault becomes the submission's row (:func:`grader_fault`) and is graded again on the next run
(:func:`faulty`). :func:`prepare` fills each lab's export caches before its first job, wherever the
jobs run. :mod:`grader.grade.batch` (local processes) and :mod:`grader.grade.cluster` (Dask
workers) build on these and on nothing of each other.
"""
from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

from grader.core import records
from grader.core.limits import Limits
from grader.core.results import GRADER_FAULT, SubmissionResult
from grader.core.safe_text import plain
from grader.execute import caches
from grader.grade import resume
from grader.grade.collect import Submission
from grader.grade.submission import grade_submission, unreadable
from util.answers import write_json
from util.labs import LABS, get_lab

UNKNOWN_LAB = "unknown"
"""The lab of a row whose lab cannot be told."""


def prepare(lab_names: set[str], *, timeout: int = 600) -> None:
    """Fill and verify the export caches for each lab, outside the sandbox (:mod:`grader.execute.caches`).

    Files that do not match what was recorded when they were written are deleted first; then each
    lab's ``prepare`` hook builds what is missing. A failing hook only costs time (each kernel then
    exports for itself), so it is reported and grading goes on.
    """
    caches.verify()  # before any hook runs: what the grader did not record is deleted, then rebuilt
    for name in sorted(lab_names):
        lab = get_lab(name)
        if not lab.prepare:
            continue
        print(f"grader: preparing {name}: exporting the models its notebook loads into the shared caches "
              "(a minute or two the first time, seconds once cached)...", file=sys.stderr, flush=True)
        start = time.monotonic()
        failure = caches.prepare(lab, timeout=timeout)
        if failure is not None:
            print(f"grader: warning: preparing {name} ({lab.prepare}) failed, kernels will export models themselves: "
                  + failure, file=sys.stderr)
        else:
            print(f"grader: prepared {name} in {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)


def not_graded(path: Path, reason: str, lab: str | None = None) -> SubmissionResult:
    """The row of a submission that is not read at all: every task of ``lab`` missing, or no task."""
    if lab in LABS:
        return unreadable(path, get_lab(lab), reason)
    return SubmissionResult(str(path), UNKNOWN_LAB, (), 0.0, "missing", (reason,))


def grader_fault(sub: Submission, exc: BaseException) -> SubmissionResult:
    """The row of a submission the grader failed on (``exc``): every task missing, saying it is the
    grader's fault; recorded to be graded again on the next run."""
    lab = get_lab(sub.lab)
    message = (f"{GRADER_FAULT} grade this notebook ({type(exc).__name__}: {plain(exc, 300)}); it is "
               "not your fault: the instructors have been told, and it will be graded again")
    return replace(unreadable(sub.path, lab, message), execution_status="crash")


def faulty(result: SubmissionResult) -> bool:
    """Whether the grader failed on this submission or on one of its tasks (then it is graded again)."""
    return (any(note.startswith(GRADER_FAULT) for note in result.notes)
            or any(c.message.startswith(GRADER_FAULT) for t in result.tasks for c in t.checks))


def grade_one(sub: Submission, out: Path, limits: Limits, sandbox: bool | None,
              key: dict[str, str], reveal: bool = False) -> SubmissionResult:
    """Grade ``sub`` into ``out/<name>/`` and record it (a grader fault is recorded to be retried);
    never raises."""
    folder = out / sub.name
    lab = get_lab(sub.lab)
    try:
        result = grade_submission(sub.path, lab, folder, limits=limits, sandbox=sandbox, reveal=reveal)
    except Exception as exc:  # a grader bug on one notebook must not stop the class
        result = grader_fault(sub, exc)
        write_json(folder / "results.json", result.to_gradescope_dict())
    records.save(folder, key, result, source=sub.path, submitted=resume.submitted_at(sub.path, lab),
                 retry=faulty(result))
    return result
