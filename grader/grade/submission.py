"""Grading submissions: run each notebook, score it, write its results and the class gradebook.

Per submission, ``<out>/<name>/`` gets ``results.json`` (Gradescope's schema), ``answers.json``
(task id -> exported value), ``cases.json`` (what the student's functions returned on the hidden
inputs; for disputes, never shown to students), ``facts.json`` (what the grader's own checks measured,
when they report it), ``diagnosis.json`` (what went wrong on each failed hidden case, shown only when the class
allows diagnosed feedback), ``executed.ipynb``, ``feedback.md`` (for the
student) and, when the kernel wrote any, ``kernel.log`` (the first and last bytes of its standard
output and error, for the instructor). Grading a whole class (parallel, resumable, gradebook, statistics) is :mod:`grader.grade.batch`.
"""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from grader.core import files, notebook, releases
from grader.core.limits import Limits, format_size
from grader.core.results import ANSWER, CheckResult, SubmissionResult, TaskResult, WrittenAnswer
from grader.core.safe_text import file_name, json_value, plain
from grader.grade.collect import refusal
from grader.grade.diagnosis import diagnose
from grader.grade.run import run_notebook
from grader.judge import references
from grader.judge.exports import HIDDEN
from grader.judge.score import score
from grader.report import feedback, leaderboard
from util import written
from util.answers import write_json
from util.contract import Lab

KERNEL_LOG = "kernel.log"
"""The first and last bytes the kernel wrote to its standard output and error (:mod:`grader.execute.drain`),
escaped; written only when it wrote any. For the instructor's diagnosis of a crash, never graded."""
FACTS = "facts.json"
"""Task id -> case id -> what the grader's checks of the saved files measured (``grader.grade.run.Run.facts``):
the figures disputes show and leaderboards rank; written only when a check reported any."""
DIAGNOSIS = feedback.DIAGNOSIS
"""Per failed hidden case: its input, the student's value, the expected value and the declared mistakes its
task's failures match (:mod:`grader.grade.diagnosis`); written only when a hidden case failed."""
TOO_LARGE = "too large"
"""The execution status of a notebook file over ``--max-notebook``: not read, not run."""


def unreadable(path: Path, lab: Lab, message: str) -> SubmissionResult:
    """Every task missing, with the reason: a bad file must not stop the class's grading."""
    tasks = tuple(TaskResult(t.id, t.title, tuple(
        [CheckResult(ANSWER, "missing", 0, t.answer_points, message)]
        + [CheckResult(c.id, "missing", 0, c.points, message, c.hidden) for c in t.cases])) for t in lab.tasks)
    return SubmissionResult(str(path), lab.name, tasks, 0.0, "missing", (message,))


def _whyunreadable(path: Path, error: Exception) -> str:
    """What is wrong with a submission that is not a notebook, in a student's words."""
    name = file_name(path.name)
    if path.is_dir():
        try:
            found = sorted(file_name(e.name) for e in os.scandir(path) if not e.name.startswith("."))
        except OSError:
            found = []
        return (f"no notebook (.ipynb) was found in {name}/" + (f" (it holds: {', '.join(found[:8])})" if found
                                                                 else " (it is empty)")
                + "; submit the .ipynb file itself")
    if path.exists() and path.suffix != ".ipynb":
        return (f"{name} is not a Jupyter notebook (a {file_name(path.suffix) or 'file without extension'} "
                "file); submit the .ipynb file itself, not an export or a script")
    if path.exists() and path.stat().st_size == 0:
        return f"{name} is empty (0 bytes): it was saved or uploaded incompletely; submit the notebook again"
    return str(error)


def _graded_as(nb, path: Path, lab: Lab) -> tuple[str, ...]:
    """A note when the notebook says it belongs to another lab than the one it is graded as."""
    own = notebook.lab_name(nb, path)
    if own and own != lab.name:
        return (f"this notebook is {own} (by its {'metadata' if notebook.metadata_lab(nb) else 'name'})"
                f" but was graded as {lab.name}: check that you submitted the right notebook",)
    return ()


def written_answers(nb, lab: Lab) -> tuple[WrittenAnswer, ...]:
    """The answers to ``lab``'s written questions in ``nb`` (the notebook's JSON), as received: read from
    the file, never from the kernel (:func:`util.written.find`), cleaned and bounded."""
    found = (written.find(nb, question) for question in lab.written)
    return tuple(WrittenAnswer(answer.question, answer.text, answer.found) for answer in found)


def _refused(tasks: tuple[TaskResult, ...], refused: dict[str, str], answers: dict) -> tuple[TaskResult, ...]:
    """Tasks whose exported answer the grader refused to read (too large, a link, too deep...): the
    answer check fails, saying why."""
    out = []
    for task in tasks:
        reason = refused.get(task.task_id)
        if reason is not None and task.task_id not in answers:
            checks = tuple(CheckResult(ANSWER, "failed", 0, c.max_score,
                                       f"the exported answer was not read: {reason}; export what the task asks "
                                       "for, as plain numbers, lists and dicts") if c.name == ANSWER else c
                           for c in task.checks)
            task = TaskResult(task.task_id, task.title, checks)
        out.append(task)
    return tuple(out)


def grade_submission(path: Path, lab: Lab, out_dir: Path | None = None, *, limits: Limits | None = None,
                     sandbox: bool | None = None, reveal: bool = False) -> SubmissionResult:
    """Grade one notebook against ``lab``; write its files under ``out_dir`` when given.

    ``limits`` bounds memory, processes, file size and output and may override the lab's time
    limits (:class:`grader.core.limits.Limits`, :class:`grader.core.limits.Deadlines`);
    ``sandbox`` forces the bubblewrap sandbox on or off (default: on where it works);
    ``reveal`` puts expected values in the feedback of checks that are not hidden.
    A notebook built from an earlier release of ``lab`` is graded as that release was, and told so
    (:mod:`grader.core.releases`).
    A file that is not a readable notebook (a link, a FIFO, not JSON) is graded 0 with the reason;
    it never raises for that.
    """
    refs = references.load(lab)
    refused = refusal(path)  # a link, a FIFO, a device: never read
    try:
        if refused:
            raise ValueError(refused)
        if path.is_dir():
            raise IsADirectoryError(path)
        nb = notebook.read(path, (limits or Limits()).notebook_size)
    except (FileNotFoundError, ValueError, OSError) as exc:
        result = unreadable(path, lab, _whyunreadable(path, exc))
        if isinstance(exc, notebook.NotebookTooLarge):  # refused before anything ran
            result = replace(result, execution_status=TOO_LARGE)
        if out_dir:
            write_json(out_dir / "results.json", result.to_gradescope_dict())
            (out_dir / DIAGNOSIS).unlink(missing_ok=True)  # nothing ran: an earlier diagnosis no longer holds
            _write_feedback(out_dir, result)
        return result
    built = releases.built_from(nb, lab)  # graded as its release was: the cases it was told of
    graded = lab.as_of(built.release)
    run = run_notebook(nb, graded, limits=limits,
                       sandbox=sandbox, source_dir=path.parent,
                       files_out=out_dir / "files" if out_dir else None)  # the files the grader judged, for disputes
    tasks = _refused(score(graded, refs, run.answers, run.cases, run.execution, run.verdicts, reveal=reveal),
                     run.refused, run.answers)
    release_note = releases.note(lab, built)
    notes = ((release_note,) if release_note else ()) + _graded_as(nb, path, lab)
    notes += tuple(e.describe() for e in run.execution.errors if e.task != "hidden")
    if run.execution.status != "completed":
        notes += (run.execution.message,)
    if HIDDEN in run.refused:
        notes += (f"the hidden cases' results were not read: {run.refused[HIDDEN]}; return what each task asks for",)
    if run.files.note():
        notes += (run.files.note(),)
    if run.execution.output_dropped:
        notes += (f"{format_size(run.execution.output_dropped)} of printed output was dropped (output is "
                  "kept up to a limit; it is never graded)",)
    result = SubmissionResult(str(path), lab.name, tasks, run.execution.seconds, run.execution.status, notes,
                              built.release, written_answers(nb, graded), _leaderboard(lab, run.facts, tasks))
    if out_dir:
        write_json(out_dir / "results.json", result.to_gradescope_dict())
        write_json(out_dir / "answers.json", json_value(run.answers))  # valid UTF-8, whatever the strings hold
        write_json(out_dir / "cases.json", json_value(run.cases))
        if run.facts:  # what the grader measured of the saved files (disputes, leaderboards)
            write_json(out_dir / FACTS, json_value(run.facts))
        found = diagnose(graded, tasks, run.cases, refs)
        if found:  # shown to the student only when the class allows it (feedback: diagnosed)
            write_json(out_dir / DIAGNOSIS, found)
        else:  # one left from an earlier grading would explain failures this one does not have
            (out_dir / DIAGNOSIS).unlink(missing_ok=True)
        (out_dir / "executed.ipynb").write_text(notebook.dumps(run.notebook), encoding="utf-8", errors="replace")
        if run.execution.stdio.total:  # what the kernel wrote below its messages: for the instructor only
            files.write_text(out_dir / KERNEL_LOG, plain(run.execution.stdio.text(), 1 << 20))
        _write_feedback(out_dir, result)
    return result


def _leaderboard(lab: Lab, facts: dict, tasks: tuple[TaskResult, ...]) -> tuple[tuple[str, float, str], ...]:
    """The lab's leaderboard figure as the grader measured it (Gradescope's ``leaderboard``), if it has one."""
    board = lab.leaderboard
    task = next((t for t in tasks if board is not None and t.task_id == board.task), None)
    found = leaderboard.figure(board, facts, {c.name: c.status for c in task.checks}) if task else None
    return ((board.title, found[0], "desc" if board.higher_is_better else "asc"),) if found else ()


def _write_feedback(out_dir: Path, result: SubmissionResult) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "feedback.md").write_text(feedback.render(out_dir.name, result), encoding="utf-8")
