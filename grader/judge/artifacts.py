"""Files a graded notebook saved for the grader, and the grader-side checks that judge them.

A task whose answer JSON cannot hold (an ONNX model) declares ``grader_check="module:function"``
(``util/contract.py``). In the kernel, its ``run_case`` saves the file with ``util.artifacts``
into ``<answers>/files/``. Before the scratch folder is deleted, :func:`list_files` lists that
folder (sizes and SHA-256, streamed: the grader never holds a file in memory), :func:`verdicts`
has each case's file judged in a confined judge process (:mod:`grader.judge.isolated`), and
:func:`save_files` copies the small files beside ``results.json`` for disputes.

The files come from the student's kernel, so they are untrusted: sizes are bounded, only plain
files with the names the grader expects are listed (never a link), and a check that raises,
crashes, hangs or bloats its process is reported as a problem with that case only.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from grader.core.limits import Deadlines, Limits, format_size
from grader.judge.isolated import judge
from util import labs
from util.artifacts import case_stem
from util.contract import Lab, Task

MAX_FILE_BYTES = 512 * 2**20
"""A saved file larger than this is not judged (AlexNet's tiled model is about 250 MB)."""
MAX_TOTAL_BYTES = 1536 * 2**20
"""At most this much of one notebook's files is judged, in name order."""
MAX_FILES = 256
"""At most this many saved files are listed (a task saves one per case)."""
KEEP_BYTES = 16 * 2**20
"""Files up to this size are copied to the submission's output folder; larger ones are listed by hash."""


@dataclass(frozen=True)
class SavedFile:
    """A file a case saved, as the grader found it (its bytes stay on disk)."""

    name: str
    size: int = 0
    sha256: str = ""
    path: Path | None = None
    """Where it lies (inside the scratch folder, gone once the run is over); ``None``: not judged."""
    reason: str = ""
    """Why it is not judged (too large, over the total), when ``path`` is ``None``."""


def _digest(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def list_files(folder: Path) -> dict[str, SavedFile]:
    """File name -> :class:`SavedFile` for each plain ``case-*`` file in ``folder`` (links never followed)."""
    files: dict[str, SavedFile] = {}
    if not folder.is_dir() or folder.is_symlink():
        return files
    total = 0
    for path in sorted(folder.iterdir())[:MAX_FILES * 4]:
        try:
            info = path.lstat()
        except OSError:
            continue
        if not path.name.startswith("case-") or not stat.S_ISREG(info.st_mode) or len(files) >= MAX_FILES:
            continue
        size = info.st_size
        if size > MAX_FILE_BYTES:
            files[path.name] = SavedFile(path.name, size, reason=f"the saved file is {format_size(size)}, over the "
                                                                 f"{format_size(MAX_FILE_BYTES)} limit")
        elif total + size > MAX_TOTAL_BYTES:
            files[path.name] = SavedFile(path.name, size, reason=f"the notebook saved over "
                                                                 f"{format_size(MAX_TOTAL_BYTES)} of files; this one "
                                                                 "was not judged")
        else:
            try:
                files[path.name] = SavedFile(path.name, size, _digest(path), path)
                total += size
            except OSError as exc:
                files[path.name] = SavedFile(path.name, size, reason=f"the saved file could not be read "
                                                                     f"({exc.strerror})")
    return files


def check_function(task: Task) -> Callable[[Mapping[str, Any], bytes, Any], list[str]]:
    """The callable a task's ``grader_check`` names (``"util.labs.labN.judge:check_x"``)."""
    module, _, name = (task.grader_check or "").partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        raise ValueError(f"task {task.id}: grader_check {task.grader_check!r} names no function "
                         "(expected 'package.module:function')") from None


def check_module(task: Task) -> str:
    """The module a task's ``grader_check`` names, found without importing it (the grader's process
    stays free of what the check imports); a ``ValueError`` if there is none."""
    module, _, name = (task.grader_check or "").partition(":")
    try:
        found = importlib.util.find_spec(module) if module and name.isidentifier() else None
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise ValueError(f"task {task.id}: grader_check {task.grader_check!r} names no function "
                         "(expected 'package.module:function')")
    return module


def _case_file(files: Mapping[str, SavedFile], spec: Mapping[str, Any]) -> SavedFile | None:
    """The file case ``spec`` saved, whatever its suffix (``case-<hash>.onnx``, ``.npz``, ``.so``...)."""
    stem = case_stem(spec)
    found = [name for name in files if name == stem or name.startswith(stem + ".")]
    return files[sorted(found)[0]] if found else None


def verdicts(lab: Lab, cases: Mapping[str, Mapping[str, Any]], files: Mapping[str, SavedFile], *,
             limits: Limits | None = None, deadlines: Deadlines | None = None,
             sandbox: bool | None = None) -> dict[str, dict[str, list[str]]]:
    """Task id -> case id -> problems (empty: passed) for every case of a task with a ``grader_check``.

    Only cases whose kernel record is ``ok`` are judged; the others already failed in the kernel.
    The checks run in a confined judge process (:func:`grader.judge.isolated.judge`), all of this
    notebook's in one (restarted after a case that kills it), each case under ``deadlines.judge``
    (default: the lab's, :meth:`grader.core.limits.Deadlines.resolve`).
    """
    out: dict[str, dict[str, list[str]]] = {}
    jobs, where, folders = [], [], set()
    for task in lab.tasks:
        if not getattr(task, "grader_check", None):
            continue
        check_module(task)  # a declaration naming no module is the course's bug: say so now
        out[task.id] = {}
        records = cases.get(task.id) if isinstance(cases, Mapping) else None
        for case in task.cases:
            record = records.get(case.id) if isinstance(records, Mapping) else None
            if not isinstance(record, Mapping) or record.get("status") != "ok":
                continue
            saved = _case_file(files, case.spec)
            if saved is None:
                out[task.id][case.id] = [f"{task.function}() returned, but no file was saved for this case"]
            elif saved.path is None:
                out[task.id][case.id] = [saved.reason]
            else:
                jobs.append({"check": task.grader_check, "spec": dict(case.spec), "file": str(saved.path),
                             "tolerance": {"rtol": task.tolerance.rtol, "atol": task.tolerance.atol}})
                where.append((task.id, case.id))
                folders.add(saved.path.parent)
    if jobs:
        if len(folders) != 1:
            raise ValueError("the saved files of one notebook must lie in one folder")
        for (task_id, case_id), problems in zip(where, judge(jobs, folders.pop(), limits=limits, sandbox=sandbox,
                                                                   reveal=tuple(labs.judge_paths(lab)),
                                                                   timeout=(deadlines or Deadlines.resolve(lab, limits)).judge)):
            out[task_id][case_id] = problems
    return out


def save_files(files: Mapping[str, SavedFile], folder: Path) -> None:
    """Copy the small files to ``folder`` and list every file (size, SHA-256, kept or not) in ``manifest.json``."""
    if not files:
        return
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for name, saved in files.items():
        if saved.path is None:
            manifest[name] = {"read": False, "reason": saved.reason, "bytes": saved.size}
            continue
        kept = saved.size <= KEEP_BYTES
        if kept:
            try:
                with open(saved.path, "rb") as source, open(folder / name, "wb") as target:
                    shutil.copyfileobj(source, target, 1 << 20)
            except OSError:
                kept = False
        manifest[name] = {"bytes": saved.size, "sha256": saved.sha256, "kept": kept}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
