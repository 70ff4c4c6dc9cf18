"""Files a graded notebook saved for the grader, and the grader-side checks that judge them.

A task whose answer JSON cannot hold (an ONNX model) declares ``grader_check="module:function"``
(``util/contract.py``). In the kernel, its ``run_case`` saves the model with
``util.artifacts.save_model`` into ``<answers>/files/``; :func:`read_files` reads that folder before
the scratch copy is deleted; :func:`verdicts` calls the check on each case's file in the grader's
own process; :func:`save_files` keeps them beside ``results.json`` for disputes.

The files come from the student's kernel, so they are untrusted: sizes are bounded, only plain
files with the names the grader expects are read, and a check that raises is reported as a problem
with the case, never as a grader crash.
"""
from __future__ import annotations

import hashlib
import importlib
import json
from pathlib import Path
from typing import Any, Callable, Mapping

from util.artifacts import case_stem
from util.contract import Lab, Task

MAX_FILE_BYTES = 512 * 2**20
"""A saved file larger than this is not read (AlexNet's tiled model is about 250 MB)."""
MAX_TOTAL_BYTES = 1536 * 2**20
"""At most this much is read from one notebook's files, in name order."""
KEEP_BYTES = 16 * 2**20
"""Files up to this size are copied to the submission's output folder; larger ones are listed by hash."""


def read_files(folder: Path) -> dict[str, bytes | str]:
    """File name -> bytes for each plain ``case-*`` file in ``folder``; -> a reason (str) when it was not read."""
    files: dict[str, bytes | str] = {}
    if not folder.is_dir() or folder.is_symlink():
        return files
    total = 0
    for path in sorted(folder.iterdir()):
        if not path.name.startswith("case-") or path.is_symlink() or not path.is_file():
            continue
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            files[path.name] = f"the saved file is {size / 2**20:,.0f} MiB, over the {MAX_FILE_BYTES // 2**20} MiB limit"
        elif total + size > MAX_TOTAL_BYTES:
            files[path.name] = f"the notebook saved over {MAX_TOTAL_BYTES // 2**20} MiB of files; this one was not read"
        else:
            try:
                files[path.name] = path.read_bytes()
                total += size
            except OSError as exc:
                files[path.name] = f"the saved file could not be read ({exc.strerror})"
    return files


def check_function(task: Task) -> Callable[[Mapping[str, Any], bytes, Any], list[str]]:
    """The callable a task's ``grader_check`` names (``"util.labs.labN.judge:check_x"``)."""
    module, _, name = (task.grader_check or "").partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        raise ValueError(f"task {task.id}: grader_check {task.grader_check!r} names no function "
                         "(expected 'package.module:function')") from None


def _case_data(files: Mapping[str, bytes | str], spec: Mapping[str, Any]) -> bytes | str | None:
    """The file case ``spec`` saved, whatever its suffix (``case-<hash>.onnx``, ``.npz``, ``.so``...)."""
    stem = case_stem(spec)
    found = [name for name in files if name == stem or name.startswith(stem + ".")]
    return files[sorted(found)[0]] if found else None


def verdicts(lab: Lab, cases: Mapping[str, Mapping[str, Any]],
             files: Mapping[str, bytes | str]) -> dict[str, dict[str, list[str]]]:
    """Task id -> case id -> problems (empty: passed) for every case of a task with a ``grader_check``.

    Only cases whose kernel record is ``ok`` are judged; the others already failed in the kernel.
    """
    out: dict[str, dict[str, list[str]]] = {}
    for task in lab.tasks:
        if not getattr(task, "grader_check", None):
            continue
        check = check_function(task)
        out[task.id] = {}
        for case in task.cases:
            record = cases.get(task.id, {}).get(case.id)
            if not record or record.get("status") != "ok":
                continue
            data = _case_data(files, case.spec)
            if data is None:
                problems = [f"{task.function}() returned, but no model file was saved for this case"]
            elif isinstance(data, str):
                problems = [data]
            else:
                try:
                    problems = list(check(case.spec, data, task.tolerance))
                except Exception as exc:  # a hostile model must not stop the class's grading
                    problems = [f"the grader could not check the model ({type(exc).__name__}: {exc})"[:400]]
            out[task.id][case.id] = problems
    return out


def save_files(files: Mapping[str, bytes | str], folder: Path) -> None:
    """Copy the small files to ``folder`` and list every file (size, SHA-256, kept or not) in ``manifest.json``."""
    if not files:
        return
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for name, data in files.items():
        if isinstance(data, str):
            manifest[name] = {"read": False, "reason": data}
            continue
        kept = len(data) <= KEEP_BYTES
        if kept:
            (folder / name).write_bytes(data)
        manifest[name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "kept": kept}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
