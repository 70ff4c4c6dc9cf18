"""What a confined process finds when it starts: its whole environment and, in its scratch folder,
the submission's support files.

A graded kernel (:func:`kernel_env`) and a judge process (:func:`judge_env`) start from the same
allowlist of the grader's variables (:data:`PASSED_ENV`); nothing else of the grader's environment
reaches them. :func:`copy_support` puts a lab's support files (a C++ project) next to the notebook.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from grader import REPO
from grader.execute import disk
from util import export_cache, labs
from util.answers import OUTPUT_DIR_ENV
from util.contract import Lab

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
