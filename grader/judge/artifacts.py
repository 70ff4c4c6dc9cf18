"""Files a graded notebook saved for the grader, and the grader-side checks that judge them.

A task whose answer JSON cannot hold (an ONNX model) declares ``grader_check="module:function"``
(``util/contract.py``). In the kernel, its ``run_case`` saves the file with ``util.artifacts``
into ``<answers>/files/``, named ``util.artifacts.case_file(spec, suffix)``. Before the scratch
folder is deleted, :func:`declared` says which files the lab's cases declare (a case of a task
with a ``grader_check`` whose kernel record is ``ok``), :func:`list_files` finds those in the
folder (sizes and SHA-256, streamed: the grader never holds a file in memory), :func:`verdicts`
has each case's file judged in a confined judge process (:mod:`grader.judge.isolated`), and
:func:`save_files` copies the small judged files beside ``results.json`` for disputes.

The files come from the student's kernel, so they are untrusted, and what they may cost is
bounded before anything is read or copied, whatever kind of file a lab saves
(:class:`grader.core.limits.Limits`): at most ``saved_files`` files, each at most ``saved_file``
bytes, ``saved_total`` in all are judged, in case order; a case over a bound fails, unjudged, with
a message saying the bound. Anything else in the folder (a file no case declares, a second file
for one case, a link, a folder, a FIFO) is neither judged nor kept, only counted
(:attr:`Listing.undeclared`, a note in the results). Of the judged files, at most
:data:`KEEP_FILE` each and ``kept_saved`` in all are copied; every one is listed by size and
SHA-256 in ``manifest.json``. A check that raises, crashes, hangs or bloats its process is reported
as a problem with that case only.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from grader.core.limits import Deadlines, Limits, format_size
from grader.judge.isolated import Judged, judge_all
from util import labs
from util.artifacts import case_stem
from util.contract import Case, Lab, Task
from util.hidden import graded_spec, with_files

KEEP_FILE = 16 * 2**20
"""Judged files up to this size may be copied to the submission's results folder (``Limits.kept_saved``
bounds them all together); larger ones are listed by size and SHA-256 only."""
SUFFIX = re.compile(r"(\.[A-Za-z0-9_+-]{1,16}){0,3}")
"""What may follow a case's stem in its file's name (``.onnx``, ``.npz``, ``.so``, ``.tar.gz``):
any kind of file a lab saves, never a name a terminal or a file system would trip on."""
STEM = len(case_stem({}))
"""Length of a case file's stem, ``case-`` and 16 hex digits (:func:`util.artifacts.case_stem`)."""
DO_ONLY = "return only what the task asks for, as the lab's helpers save it"


@dataclass(frozen=True)
class SavedFile:
    """A file a case saved, as the grader found it (its bytes stay on disk)."""

    name: str
    size: int = 0
    sha256: str = ""
    path: Path | None = None
    """Where it lies (inside the scratch folder, gone once the run is over); ``None``: not judged."""
    reason: str = ""
    """Why it is not judged (over a bound, unreadable), when ``path`` is ``None``: the case's failure."""
    inode: tuple[int, int] = (0, 0)
    """(device, inode) of the file that was hashed: the copy for disputes is taken from that file only."""


@dataclass(frozen=True)
class Listing:
    """What the grader found in a notebook's saved-files folder."""

    files: dict[str, SavedFile] = field(default_factory=dict)
    """File name -> the file a declared case saved (judged, or why not), in case order."""
    undeclared: int = 0
    """Entries of the folder that no case declares (another name, a second file for one case, a link,
    a folder...): neither judged nor kept."""
    undeclared_bytes: int = 0
    """Their sizes together (as ``lstat`` gives them; a folder's contents are not counted)."""

    def note(self) -> str | None:
        """For the results' notes: what was left unjudged, or ``None``."""
        if not self.undeclared:
            return None
        files = "file" if self.undeclared == 1 else "files"
        return (f"{self.undeclared:,} {files} ({format_size(self.undeclared_bytes)}) among the files saved for "
                "the grader's checks belong to no hidden case: neither judged nor kept (only the file each "
                "case saves through the lab's helpers counts)")


def declared(lab: Lab, cases: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Case file stem (:func:`util.artifacts.case_stem`) -> (task id, case id), in task and case order,
    for every case of a task with a ``grader_check`` whose kernel record is ``ok``: the only files
    the grader judges or keeps (the other cases already failed in the kernel)."""
    out: dict[str, tuple[str, str]] = {}
    for task in lab.tasks:
        if getattr(task, "grader_check", None):
            for case in task.cases:
                if _ran(cases, task, case):
                    out.setdefault(case_stem(with_files(lab, graded_spec(lab, task, case))), (task.id, case.id))
    return out


def _ran(cases: Mapping[str, Any], task: Task, case: Case) -> bool:
    """Whether the kernel's record of ``case`` (whatever the kernel wrote) says it returned (``ok``)."""
    records = cases.get(task.id) if isinstance(cases, Mapping) else None
    record = records.get(case.id) if isinstance(records, Mapping) else None
    return isinstance(record, Mapping) and record.get("status") == "ok"


def _open(path: Path) -> int:
    """A descriptor on the plain file at ``path``: never through a link, never blocking on a FIFO
    (``OSError`` for anything that is not a plain file)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(0, "not a plain file")
    return fd


def _hashed(path: Path, name: str) -> SavedFile:
    """``path`` with its size and SHA-256, read once from one descriptor."""
    fd = _open(path)
    try:
        info = os.fstat(fd)
        with os.fdopen(os.dup(fd), "rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
        return SavedFile(name, info.st_size, digest, path, inode=(info.st_dev, info.st_ino))
    finally:
        os.close(fd)


def list_files(folder: Path, stems: Mapping[str, Any], limits: Limits | None = None) -> Listing:
    """The files in ``folder`` that the cases ``stems`` declare (:func:`declared`), each hashed or
    refused with the bound it broke (:class:`grader.core.limits.Limits`), in the order of ``stems``;
    every other entry counted, unread. The folder is read entry by entry (a million entries cost
    time, never memory) and links are never followed."""
    limits = limits or Limits()
    found: dict[str, list[tuple[str, int]]] = {}
    undeclared = undeclared_bytes = 0
    if not folder.is_dir() or folder.is_symlink():
        return Listing()
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    undeclared += 1
                    continue
                stem, rest = entry.name[:STEM], entry.name[STEM:]
                if stem in stems and SUFFIX.fullmatch(rest) and stat.S_ISREG(info.st_mode):
                    found.setdefault(stem, []).append((entry.name, info.st_size))
                else:
                    undeclared += 1
                    undeclared_bytes += info.st_size
    except OSError:
        pass
    files: dict[str, SavedFile] = {}
    total = 0
    for stem in stems:
        if stem not in found:
            continue
        (name, size), *others = sorted(found[stem])  # one file per case: the others are extras
        undeclared += len(others)
        undeclared_bytes += sum(s for _, s in others)
        if len(files) >= limits.saved_files:
            files[name] = SavedFile(name, size, reason=(
                f"the hidden cases saved more than {limits.saved_files} files for the grader's checks, the most it "
                f"reads: this case's was not judged; {DO_ONLY}"))
        elif size > limits.saved_file:
            files[name] = SavedFile(name, size, reason=(
                f"the file this case saved is {format_size(size)}, over the {format_size(limits.saved_file)} the "
                f"grader reads per file: it was not judged; {DO_ONLY}"))
        elif total + size > limits.saved_total:
            files[name] = SavedFile(name, size, reason=(
                f"the hidden cases saved more than {format_size(limits.saved_total)} of files in all, the most the "
                f"grader reads, and this case's file ({format_size(size)}) was past it: it was not judged; {DO_ONLY}"))
        else:
            try:
                files[name] = _hashed(folder / name, name)
                total += files[name].size
            except OSError as exc:
                files[name] = SavedFile(name, size, reason=f"the file this case saved could not be read "
                                                           f"({exc.strerror or exc}); {DO_ONLY}")
    return Listing(files, undeclared, undeclared_bytes)


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
    found = [name for name in files if name[:STEM] == stem and SUFFIX.fullmatch(name[STEM:])]
    return files[sorted(found)[0]] if found else None


def verdicts(lab: Lab, cases: Mapping[str, Mapping[str, Any]], files: Listing | Mapping[str, SavedFile], *,
             limits: Limits | None = None, deadlines: Deadlines | None = None,
             sandbox: bool | None = None) -> dict[str, dict[str, list[str]]]:
    """Task id -> case id -> problems (empty: passed): :func:`judged` without the facts."""
    found = judged(lab, cases, files, limits=limits, deadlines=deadlines, sandbox=sandbox)
    return {task: {case: verdict.problems for case, verdict in by_case.items()} for task, by_case in found.items()}


def judged(lab: Lab, cases: Mapping[str, Mapping[str, Any]], files: Listing | Mapping[str, SavedFile], *,
           limits: Limits | None = None, deadlines: Deadlines | None = None,
           sandbox: bool | None = None) -> dict[str, dict[str, Judged]]:
    """Task id -> case id -> :class:`grader.judge.isolated.Judged` (its problems, empty when it passed, and what
    the check measured) for every case of a task with a ``grader_check``.

    Only cases whose kernel record is ``ok`` are judged (:func:`declared`); the others already failed in
    the kernel. A case whose file broke a bound (:func:`list_files`) fails with the reason, unjudged.
    Each job carries what the case returned in the kernel (its record's ``value``, compared with the
    reference afterwards): a check that takes a ``returned`` argument can require it to be what the saved
    file holds, so a value computed beside the student's code cannot differ from the file judged.
    The checks run in a confined judge process (:func:`grader.judge.isolated.judge`), all of this
    notebook's in one (restarted after a case that kills it), each case under ``deadlines.judge``
    (default: the lab's, :meth:`grader.core.limits.Deadlines.resolve`).
    """
    files = files.files if isinstance(files, Listing) else files
    out: dict[str, dict[str, Judged]] = {}
    jobs, where, folders = [], [], set()
    for task in lab.tasks:
        if not getattr(task, "grader_check", None):
            continue
        check_module(task)  # a declaration naming no module is the course's bug: say so now
        out[task.id] = {}
        for case in task.cases:
            if not _ran(cases, task, case):  # failed in the kernel already
                continue
            spec = graded_spec(lab, task, case)  # as this term ran it
            saved = _case_file(files, with_files(lab, spec))
            if saved is None:
                out[task.id][case.id] = Judged([f"{task.function}() returned, but no file was saved for this case"])
            elif saved.path is None:
                out[task.id][case.id] = Judged([saved.reason])
            else:
                jobs.append({"check": task.grader_check, "spec": spec, "file": str(saved.path),
                             "tolerance": {"rtol": task.tolerance.rtol, "atol": task.tolerance.atol},
                             "returned": cases[task.id][case.id].get("value")})
                where.append((task.id, case.id))
                folders.add(saved.path.parent)
    if jobs:
        if len(folders) != 1:
            raise ValueError("the saved files of one notebook must lie in one folder")
        for (task_id, case_id), verdict in zip(where, judge_all(jobs, folders.pop(), limits=limits, sandbox=sandbox,
                                                                      reveal=tuple(labs.judge_paths(lab)),
                                                                      timeout=(deadlines or Deadlines.resolve(lab, limits)).judge)):
            out[task_id][case_id] = verdict
    return out


def _copy(saved: SavedFile, target: Path) -> bool:
    """Copy the very file that was hashed to ``target``; whether it was (a file swapped since, or
    grown past what was hashed, is not copied)."""
    try:
        fd = _open(saved.path)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != saved.inode or info.st_size != saved.size:
            return False
        with os.fdopen(os.dup(fd), "rb") as source, open(target, "wb") as out:
            left = saved.size
            while left > 0:
                chunk = source.read(min(left, 1 << 20))
                if not chunk:
                    break
                out.write(chunk)
                left -= len(chunk)
        return True
    except OSError:
        target.unlink(missing_ok=True)
        return False
    finally:
        os.close(fd)


def save_files(files: Listing | Mapping[str, SavedFile], folder: Path, limits: Limits | None = None) -> None:
    """Copy judged files to ``folder`` while they fit (each at most :data:`KEEP_FILE`, all together at
    most ``limits.kept_saved``, in case order) and list every declared file (size, SHA-256, kept or
    not, or why it was not judged), and how many others were left, in ``manifest.json``."""
    limits = limits or Limits()
    listing = files if isinstance(files, Listing) else Listing(dict(files))
    if not listing.files and not listing.undeclared:
        return
    folder.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {}
    kept_total = 0
    for name, saved in listing.files.items():
        if saved.path is None:
            manifest[name] = {"read": False, "reason": saved.reason, "bytes": saved.size}
            continue
        kept = saved.size <= min(KEEP_FILE, limits.kept_saved) and kept_total + saved.size <= limits.kept_saved
        kept = kept and _copy(saved, folder / name)
        kept_total += saved.size if kept else 0
        manifest[name] = {"bytes": saved.size, "sha256": saved.sha256, "kept": kept}
    if listing.undeclared:
        manifest["undeclared"] = {"files": listing.undeclared, "bytes": listing.undeclared_bytes,
                                  "kept": False, "reason": "no hidden case declares them"}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
