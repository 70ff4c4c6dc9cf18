"""One graded run of a notebook: a scratch copy, a fresh kernel, the hidden cases, the exports, the
grader's verdicts on the files they saved.

This is where the groups meet: :mod:`grader.execute` runs the kernel, :mod:`grader.judge` reads
what it exported and judges what it saved. Grading (:mod:`grader.grade.submission`) and reference
regeneration (:mod:`grader.author.regen`) both go through :func:`run_notebook`, so the references
are produced by exactly the path that grades the students.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from grader.core.limits import Deadlines, Limits
from grader.core.results import GRADER_FAULT
from grader.execute import caches, confinement
from grader.execute.disk import Scratch
from grader.execute.kernel import Execution, execute
from grader.execute.scratch import copy_support, kernel_env
from grader.judge import artifacts
from grader.judge.artifacts import Listing
from grader.judge.exports import read_exports
from util.artifacts import FILES_DIR
from util.contract import Lab
from util.hidden import case_specs, cell_source


@dataclass(frozen=True)
class Run:
    """What one run of a notebook produced."""

    answers: dict[str, Any]
    """Task id -> exported answer."""
    cases: dict[str, dict[str, Any]]
    """Task id -> case id -> record written by ``util.hidden.run_cases``."""
    execution: Execution
    """How the execution went."""
    notebook: nbformat.NotebookNode
    """The executed notebook, with outputs (for instructors to read)."""
    files: Listing = field(default_factory=Listing)
    """Files the hidden cases saved for the grader's own checks, and how many others the folder held
    (``grader.judge.artifacts.list_files``); their paths are gone once the run is over (``files_out``
    keeps copies of the small ones)."""
    verdicts: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    """Task id -> case id -> problems the grader's checks found in the saved files (judged before the
    scratch folder went, :func:`grader.judge.artifacts.verdicts`)."""
    refused: dict[str, str] = field(default_factory=dict)
    """Task id (or ``hidden cases``) -> why its export was not read (:func:`grader.judge.exports.read_exports`)."""
    facts: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    """Task id -> case id -> what the grader's check of the saved file measured (a speed-up and its band):
    for the instructor's records, disputes and leaderboards, never a verdict."""


def _passable(root: Path, folder: Path) -> None:
    """Let other users pass through ``root`` down to ``folder`` (the kernel is over): a root grader's
    judge runs as a user of its own, and without the sandbox it reaches the saved files only so. Nothing
    becomes writable; what the student's code made unreadable stays so (and fails its own cases)."""
    target = root
    for part in ("", *folder.relative_to(root).parts):
        target = target / part if part else target
        try:
            if target.is_dir() and not target.is_symlink():
                os.chmod(target, target.stat().st_mode | 0o011)
        except OSError:
            continue


def run_notebook(nb: nbformat.NotebookNode, lab: Lab, *, limits: Limits | None = None, sandbox: bool | None = None,
                 source_dir: Path | None = None, files_out: Path | None = None) -> Run:
    """Execute ``nb`` (a copy is made) for ``lab`` in a scratch folder, then its hidden cases, then
    the grader's own checks of the files they saved (in a judge process, before the folder goes).
    The hidden cases are those of ``lab``'s release (``lab.as_of(n)`` for a notebook built from release n).

    ``source_dir`` is the notebook's folder: the lab's support files (``Lab.support``, e.g. a C++
    project) are copied from there into the scratch folder first (:func:`copy_support`).
    ``files_out``: where to keep the saved files (the small ones, within ``limits.kept_saved``) and their
    manifest, for disputes.

    ``limits`` bounds memory, processes, file size and output, and overrides the lab's time limits
    (:meth:`grader.core.limits.Deadlines.resolve`); ``sandbox`` forces the bubblewrap sandbox on or
    off (default: on where it works, :mod:`grader.execute.confinement`).
    """
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    limits = limits or Limits()
    deadlines = Deadlines.resolve(lab, limits)
    sandboxed = confinement.available() if sandbox is None else sandbox
    caches.ensure(lab)  # no submission is graded against a tampered export
    work = Scratch.create(lab.name, disk=limits.disk, owner=confinement.student_ids(sandboxed))
    scratch = work.path
    try:
        copy_support(lab, source_dir, scratch)
        answers_dir, cases_path = scratch / "answers", scratch / "cases.json"
        try:
            execution = execute(
                nb, work, kernel_env(answers_dir), deadlines=deadlines,
                extra_cells=(cell_source(lab.name, cases_path, case_specs(lab), lab.release),)
                if any(t.cases for t in lab.tasks) else (),
                limits=limits, sandbox=sandboxed)
        except Exception as exc:  # a grader bug while running: what was exported before still counts
            execution = Execution("crash", 0.0, (), f"{GRADER_FAULT} run this notebook to the end ({type(exc).__name__}: "
                                  f"{str(exc)[:300]}); it is not your fault: answers exported before still count, "
                                  "and it will be graded again")
        exports = read_exports(answers_dir, cases_path)  # bounded, links not followed, shapes checked
        # only the files the cases declare, bounded before anything is read; judged now: the scratch folder goes below
        files = artifacts.list_files(answers_dir / FILES_DIR, artifacts.declared(lab, exports.cases), limits)
        _passable(work.path, answers_dir / FILES_DIR)  # the judge runs as a user of its own
        judged = artifacts.judged(lab, exports.cases, files, limits=limits, deadlines=deadlines, sandbox=sandboxed)
        verdicts = {task: {case: j.problems for case, j in by_case.items()} for task, by_case in judged.items()}
        facts = {task: {case: j.facts for case, j in by_case.items() if j.facts} for task, by_case in judged.items()}
        if files_out is not None:
            artifacts.save_files(files, files_out, limits)
        return Run(exports.answers, exports.cases, execution, nb, files=files, verdicts=verdicts, refused=exports.refused,
                   facts={task: found for task, found in facts.items() if found})
    finally:
        work.remove()
