"""One graded run of a notebook: a scratch copy, a fresh kernel, the hidden cases, the exports.

Grading and reference regeneration both go through :func:`run_notebook`, so the references are
produced by exactly the path that grades the students.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import nbformat

from grader import REPO
from grader.execute import caches, launch
from grader.execute import sandbox as sandboxing
from grader.execute import disk
from grader.execute.disk import Scratch
from grader.execute.kernel import Execution, execute
from grader.execute.limits import Limits
from grader.judge import artifacts
from grader.judge.artifacts import SavedFile
from grader.judge.exports import read_exports
from grader.report.results import GRADER_FAULT
from util import export_cache, labs
from util.answers import OUTPUT_DIR_ENV
from util.artifacts import FILES_DIR
from util.contract import Lab
from util.hidden import cell_source



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
    files: dict[str, SavedFile] = field(default_factory=dict)
    """Files the hidden cases saved for the grader's own checks (``grader.judge.artifacts.list_files``);
    their paths are gone once the run is over (``files_out`` keeps copies)."""
    verdicts: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    """Task id -> case id -> problems the grader's checks found in the saved files (judged before the
    scratch folder went, :func:`grader.judge.artifacts.verdicts`)."""
    refused: dict[str, str] = field(default_factory=dict)
    """Task id (or ``hidden cases``) -> why its export was not read (:func:`grader.judge.exports.read_exports`)."""


PASSED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES",
              "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", labs.LAB_DIRS_ENV) + tuple(export_cache.KINDS.values())
"""The grader's variables a kernel gets, when they are set: where programs and libraries are, the
locale, which GPU, where the export caches and any extra lab folders are. Nothing else of the
grader's environment (a token, a password, a cloud credential, where the references are) reaches
student code."""


def _base_env() -> dict[str, str]:
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    env.setdefault("PATH", os.defpath)
    env.setdefault("LANG", "C.UTF-8")
    env["PYTHONHASHSEED"] = "0"
    env["OMP_NUM_THREADS"] = "1"
    env["USER"] = env["LOGNAME"] = "student"  # getpass.getuser() works for a user without an account
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return env


def judge_env(scratch: Path, sandboxed: bool) -> dict[str, str]:
    """A judge process's whole environment (:mod:`grader.judge.isolated`): :data:`PASSED_ENV`, one
    thread, this repository importable, ``HOME`` and ``TMPDIR`` in its scratch folder."""
    return {**_base_env(), "HOME": str(scratch / disk.HOME), "TMPDIR": "/tmp" if sandboxed else str(scratch / disk.TMP)}


def kernel_env(output_dir: Path) -> dict[str, str]:
    """The graded kernel's whole environment: :data:`PASSED_ENV`, plus answers go to ``output_dir``;
    one thread; this repository importable (before the grader's own ``PYTHONPATH``). The executor adds ``HOME`` and ``TMPDIR`` (both in the
    scratch folder).

    Plots use ipykernel's inline backend (headless), so ``executed.ipynb`` keeps the figures.
    """
    env = _base_env()
    env[OUTPUT_DIR_ENV] = str(output_dir)
    env["NETRON_PORT"] = "0"  # util.netron_view picks a free port: kernels graded side by side never clash
    return env


def copy_support(lab: Lab, source_dir: Path | None, scratch: Path) -> None:
    """Copy ``lab.support`` from ``source_dir`` into ``scratch``, without build products or links.

    ``build/`` folders (a student's compiled objects) stay behind, so the grader always builds from
    source. Links are copied as links, never followed, and a support path that is itself a link is
    skipped: a submission cannot make the grader read a file outside it. A missing path is left
    missing; the notebook's own error then says what is missing.
    """
    if source_dir is None:
        return
    skip = shutil.ignore_patterns("build", "__pycache__", ".ipynb_checkpoints")
    for name in lab.support:
        source = source_dir / name
        if source.is_symlink() or not source.exists():
            continue
        if source.is_dir():
            shutil.copytree(source, scratch / name, symlinks=True, ignore=skip)
        else:
            shutil.copy2(source, scratch / name)


def run_notebook(nb: nbformat.NotebookNode, lab: Lab, *, cell_timeout: int | None = None,
                 notebook_timeout: int | None = None, limits: Limits | None = None,
                 sandbox: bool | None = None, source_dir: Path | None = None, files_out: Path | None = None) -> Run:
    """Execute ``nb`` (a copy is made) for ``lab`` in a scratch folder, then its hidden cases, then
    the grader's own checks of the files they saved (in a judge process, before the folder goes).

    ``source_dir`` is the notebook's folder: the lab's support files (``Lab.support``, e.g. a C++
    project) are copied from there into the scratch folder first (:func:`copy_support`).
    ``files_out``: where to keep the saved files (the small ones) and their manifest, for disputes.

    Time limits: ``cell_timeout`` / ``notebook_timeout`` if given, else ``limits``', else the lab's.
    ``limits`` also bounds memory, processes, file size and output; ``sandbox`` forces the
    bubblewrap sandbox on or off (default: on where it works, see :mod:`grader.execute.sandbox`).
    """
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    limits = limits or Limits()
    limits = replace(limits, cell_timeout=cell_timeout or limits.cell_timeout or lab.cell_timeout,
                     notebook_timeout=notebook_timeout or limits.notebook_timeout or lab.notebook_timeout)
    sandboxed = sandboxing.available() if sandbox is None else sandbox
    caches.ensure(lab)  # no submission is graded against a tampered export
    work = Scratch.create(lab.name, disk=limits.disk, owner=launch.student_ids(sandboxed))
    scratch = work.path
    try:
        copy_support(lab, source_dir, scratch)
        answers_dir, cases_path = scratch / "answers", scratch / "cases.json"
        try:
            execution = execute(
                nb, work, kernel_env(answers_dir),
                cell_timeout=limits.cell_timeout, notebook_timeout=limits.notebook_timeout,
                extra_cells=(cell_source(lab.name, cases_path),) if any(t.cases for t in lab.tasks) else (),
                extra_timeout=lab.hidden_timeout, limits=limits, sandbox=sandboxed)
        except Exception as exc:  # a grader bug while running: what was exported before still counts
            execution = Execution("crash", 0.0, (), f"{GRADER_FAULT} run this notebook to the end ({type(exc).__name__}: "
                                  f"{str(exc)[:300]}); it is not your fault: answers exported before still count, "
                                  "and it will be graded again")
        exports = read_exports(answers_dir, cases_path)  # bounded, links not followed, shapes checked
        files = artifacts.list_files(answers_dir / FILES_DIR)  # judged now: the scratch folder goes below
        verdicts = artifacts.verdicts(lab, exports.cases, files, limits=limits, sandbox=sandboxed)
        if files_out is not None:
            artifacts.save_files(files, files_out)
        return Run(exports.answers, exports.cases, execution, nb, files=files, verdicts=verdicts, refused=exports.refused)
    finally:
        work.remove()
