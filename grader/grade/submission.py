"""Grading submissions: run each notebook, score it, write its results and the class gradebook.

Per submission, ``<out>/<name>/`` gets ``results.json`` (Gradescope's schema), ``answers.json``
(task id -> exported value), ``cases.json`` (what the student's functions returned on the hidden
inputs; for disputes, never shown to students), ``executed.ipynb`` and ``feedback.md`` (for the
student). Grading a whole class (parallel, resumable, gradebook, statistics) is :mod:`grader.grade.batch`.
"""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Iterable

from grader import notebook
from grader.execute.limits import Limits, format_size
from grader.execute.scratch import MAX_EXPORT_BYTES, run_notebook
from grader.judge import references
from grader.judge.score import score
from grader.report import feedback
from grader.report.results import ANSWER, CheckResult, SubmissionResult, TaskResult
from util.answers import write_json
from util.contract import Lab
from util.labs import get_lab


TOO_LARGE = "too large"
"""The execution status of a notebook file over ``--max-notebook``: not read, not run."""


def _unreadable(path: Path, lab: Lab, message: str) -> SubmissionResult:
    """Every task missing, with the reason: a bad file must not stop the class's grading."""
    tasks = tuple(TaskResult(t.id, t.title, tuple(
        [CheckResult(ANSWER, "missing", 0, t.points, message)]
        + [CheckResult(c.id, "missing", 0, c.points, message, c.hidden) for c in t.cases])) for t in lab.tasks)
    return SubmissionResult(str(path), lab.name, tasks, 0.0, "missing", (message,))


def _why_unreadable(path: Path, error: Exception) -> str:
    """What is wrong with a submission that is not a notebook, in a student's words."""
    if path.is_dir():
        found = sorted(p.name for p in path.iterdir() if not p.name.startswith("."))[:8]
        return (f"no notebook (.ipynb) was found in {path.name}/" + (f" (it holds: {', '.join(found)})" if found
                                                                      else " (it is empty)")
                + "; submit the .ipynb file itself")
    if path.exists() and path.suffix != ".ipynb":
        return (f"{path.name} is not a Jupyter notebook (a {path.suffix or 'file without extension'} file); "
                "submit the .ipynb file itself, not an export or a script")
    if path.exists() and path.stat().st_size == 0:
        return f"{path.name} is empty (0 bytes): it was saved or uploaded incompletely; submit the notebook again"
    return str(error)


def _graded_as(nb, path: Path, lab: Lab) -> tuple[str, ...]:
    """A note when the notebook says it belongs to another lab than the one it is graded as."""
    own = notebook.lab_name(nb, path)
    if own and own != lab.name:
        return (f"this notebook is {own} (by its {'metadata' if nb.get('metadata', {}).get('course') else 'name'})"
                f" but was graded as {lab.name}: check that you submitted the right notebook",)
    return ()


def _oversized(tasks: tuple[TaskResult, ...], oversized: dict[str, int]) -> tuple[TaskResult, ...]:
    """Tasks whose exported answer was too large to read: the answer check fails, saying so."""
    out = []
    for task in tasks:
        size = oversized.get(task.task_id)
        if size is not None:
            checks = tuple(CheckResult(ANSWER, "failed", 0, c.max_score,
                                       f"the exported answer is {format_size(size)}; the grader reads at most "
                                       f"{format_size(MAX_EXPORT_BYTES)} per answer: export what the task asks "
                                       "for, not the raw data") if c.name == ANSWER else c for c in task.checks)
            task = TaskResult(task.task_id, task.title, checks)
        out.append(task)
    return tuple(out)


def resolve_lab(path: Path, lab_name: str | None) -> Lab:
    """The lab to grade ``path`` against: ``lab_name`` if given, else the notebook's own metadata."""
    if lab_name:
        return get_lab(lab_name)
    try:
        nb = notebook.read(path) if not path.is_dir() else None
    except (ValueError, OSError):  # unreadable: still graded (as 0, with the reason) if its name tells the lab
        nb = None
    found = notebook.lab_name(nb, path)
    if not found and path.is_dir():  # a student folder without a notebook: its files' names may tell
        found = next(filter(None, (notebook.lab_name(None, p) for p in sorted(path.iterdir()))), None)
    if not found:
        raise ValueError(f"{path}: cannot tell which lab this is (no course.lab metadata and the file name "
                         "does not start with labN); pass --lab")
    return get_lab(found)


def grade_submission(path: Path, lab: Lab, out_dir: Path | None = None, *, cell_timeout: int | None = None,
                     notebook_timeout: int | None = None, limits: Limits | None = None,
                     sandbox: bool | None = None) -> SubmissionResult:
    """Grade one notebook against ``lab``; write its files under ``out_dir`` when given.

    The time limits default to the lab's declared ``cell_timeout`` and ``notebook_timeout``;
    ``limits`` bounds memory, processes, file size and output (:class:`grader.execute.limits.Limits`);
    ``sandbox`` forces the bubblewrap sandbox on or off (default: on where it works).
    A file that is not a readable notebook is graded 0 with the reason; it never raises for that.
    """
    refs = references.load(lab)
    try:
        if path.is_dir():
            raise IsADirectoryError(path)
        nb = notebook.read(path, (limits or Limits()).notebook_size)
    except (FileNotFoundError, ValueError, OSError) as exc:
        result = _unreadable(path, lab, _why_unreadable(path, exc))
        if isinstance(exc, notebook.NotebookTooLarge):  # refused before anything ran
            result = replace(result, execution_status=TOO_LARGE)
        if out_dir:
            write_json(out_dir / "results.json", result.to_gradescope_dict())
            _write_feedback(out_dir, result)
        return result
    run = run_notebook(nb, lab, cell_timeout=cell_timeout, notebook_timeout=notebook_timeout, limits=limits,
                       sandbox=sandbox, source_dir=path.parent,
                       files_out=out_dir / "files" if out_dir else None)  # the files the grader judged, for disputes
    tasks = _oversized(score(lab, refs, run.answers, run.cases, run.execution, run.verdicts), run.oversized)
    notes = _graded_as(nb, path, lab) + tuple(e.describe() for e in run.execution.errors if e.task != "hidden")
    if run.execution.status != "completed":
        notes += (run.execution.message,)
    if "hidden cases" in run.oversized:
        notes += (f"the hidden cases' results were {format_size(run.oversized['hidden cases'])}, too large to "
                  "read; return what each task asks for",)
    if run.execution.output_dropped:
        notes += (f"{format_size(run.execution.output_dropped)} of printed output was dropped (output is "
                  "kept up to a limit; it is never graded)",)
    result = SubmissionResult(str(path), lab.name, tasks, run.execution.seconds, run.execution.status, notes)
    if out_dir:
        write_json(out_dir / "results.json", result.to_gradescope_dict())
        write_json(out_dir / "answers.json", run.answers)
        write_json(out_dir / "cases.json", run.cases)
        (out_dir / "executed.ipynb").write_text(notebook.dumps(run.notebook), encoding="utf-8")
        _write_feedback(out_dir, result)
    return result


def _write_feedback(out_dir: Path, result: SubmissionResult) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "feedback.md").write_text(feedback.render(out_dir.name, result), encoding="utf-8")


def _hidden(path: Path) -> bool:
    return path.name.startswith((".", "_"))  # .ipynb_checkpoints, __pycache__, .git


def find_submissions(paths: Iterable[Path]) -> list[Path]:
    """What to grade: every file named directly (whatever it is), every notebook under a folder,
    and every student folder (a subfolder of a named folder) that holds no notebook at all, so a
    student who uploaded a ``.py`` or nothing still gets a row saying so."""
    found: list[Path] = []
    for path in paths:
        if not path.is_dir():
            found.append(path)
            continue
        found += sorted(p for p in path.rglob("*.ipynb")
                        if not any(_hidden(Path(part)) for part in p.relative_to(path).parts))
        found += sorted(sub for sub in path.iterdir() if sub.is_dir() and not _hidden(sub)
                        and not any(sub.rglob("*.ipynb")))
    return list(dict.fromkeys(found))


def output_names(paths: list[Path]) -> list[str]:
    """A distinct folder name per submission: its file name's stem, or, for stems that several
    submissions share, the path from their common folder (``alice__labN``; ``labN__x/x.ipynb`` -> ``labN__x``)."""
    if not paths:
        return []
    stems = [p.stem for p in paths]
    if len(set(stems)) == len(stems):
        return stems
    common = Path(os.path.commonpath([str(p.resolve().parent) for p in paths]))

    def long_name(path: Path, dedupe: bool) -> str:
        parts = list(path.resolve().relative_to(common).with_suffix("").parts)
        if dedupe and len(parts) >= 2 and parts[-2] == parts[-1]:  # a folder named like its notebook
            parts.pop()
        return "__".join(parts)

    names = [stem if stems.count(stem) == 1 else long_name(p, True) for p, stem in zip(paths, stems)]
    return names if len(set(names)) == len(names) else [long_name(p, False) for p in paths]
