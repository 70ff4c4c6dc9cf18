"""The export caches as the grader keeps them: built by the grader, shown read-only, verified before use.

Each lab's ``prepare`` hook (``Lab.prepare``) exports the models its notebook and hidden cases
load into the shared caches (``build/onnx``, ``build/torchscript``; :mod:`util.export_cache`). The
grader runs it outside the sandbox, in a subprocess (torch stays out of the grader's memory),
before grading the lab. Kernels see the caches read-only and cannot remount them.

The grader records each file's size and SHA-256 right after the hook that exported it ran
(having deleted, just before, every file it had not recorded). Before each submission,
:func:`ensure` checks every cache file against its record (cheap: a file unchanged since its last
check is not hashed again).
A file that differs, or that no export wrote, is deleted and the lab's hook runs again, so no
submission is graded against a tampered model, whoever tampered with it (a kernel graded without
the sandbox, a person, a disk error).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from grader import REPO
from util import export_cache
from util.contract import Lab


def verify() -> list[str]:
    """Names of the cache files that did not match their record and were deleted (every kind)."""
    return [f"{kind}/{name}" for kind in export_cache.KINDS for name in verify_kind(kind)]


def prepare(lab: Lab, *, timeout: int = 600) -> str | None:
    """Run ``lab``'s ``prepare`` hook in a subprocess; ``None`` when it worked (or there is none),
    else why not. A failing hook only costs time: each kernel then exports for itself."""
    if not lab.prepare:
        return None
    module, function = lab.prepare.split(":")
    code = f"import importlib, util.labs; importlib.import_module({module!r}).{function}()"
    try:
        done = subprocess.run([sys.executable, "-c", code], cwd=str(REPO), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    finally:  # what the hook exported (verify() deleted every file not recorded before it ran)
        for kind in export_cache.KINDS:
            record_new(kind)
    return " ".join(done.stderr.strip().splitlines()[-1:]) or f"exit code {done.returncode}" if done.returncode else None


def ensure(lab: Lab) -> list[str]:
    """Make the caches safe for grading ``lab``: verify them, and rebuild what had to be deleted.

    Returns the deleted files' names (empty when all was well); a failure to rebuild is printed
    as a warning (kernels then export for themselves).
    """
    removed = verify()
    if removed:
        print(f"grader: warning: {len(removed)} export cache file(s) were not written by the grader's own "
              f"preparation or no longer match the size and hash it recorded (an export made by a notebook or "
              f"regen outside the grader, or a changed file), and were deleted: {', '.join(removed[:5])}"
              f"{' ...' if len(removed) > 5 else ''}; rebuilding", file=sys.stderr)
        failure = prepare(lab)
        if failure:
            print(f"grader: warning: preparing {lab.name} ({lab.prepare}) failed, kernels will export models "
                  f"themselves: {failure}", file=sys.stderr)
    return removed


MANIFEST = "manifest.json"
"""File name -> ``{"bytes": size, "sha256": hex}`` for every file :func:`store` wrote in a folder."""
_LOCK = ".manifest.lock"
_verified: dict[str, tuple[int, int, int, int]] = {}
"""Path -> (size, mtime, ctime, inode) when this process last found it matching the manifest."""


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[dict]:
    """The folder's manifest, under an exclusive lock (graders side by side); saved if changed.

    A folder this process may not write is read as it is (nothing can be locked, deleted or saved).
    """
    try:
        lock = open(folder / _LOCK, "a")
    except OSError:
        lock = None
    try:
        if lock is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            manifest = json.loads((folder / MANIFEST).read_text())
            manifest = manifest if isinstance(manifest, dict) else {}
        except (OSError, ValueError):
            manifest = {}
        before = json.dumps(manifest, sort_keys=True)
        yield manifest
        if lock is not None and json.dumps(manifest, sort_keys=True) != before:
            fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
            with os.fdopen(fd, "w") as handle:
                json.dump(manifest, handle, indent=1, sort_keys=True)
            os.chmod(tmp, 0o644)
            os.replace(tmp, folder / MANIFEST)
    finally:
        if lock is not None:
            lock.close()


def _digest(path: Path) -> str:
    """The file's SHA-256, or "" when this process cannot read it (then it matches no record)."""
    try:
        with open(path, "rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return ""


def _signature(info: os.stat_result) -> tuple[int, int, int, int]:
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def store(kind: str, file_name: str, write: Callable[[Path], None]) -> Path:
    """Write a cache file of ``kind`` atomically (:func:`util.export_cache.store`: parallel writers
    never expose half a file) and record its size and hash; returns its path."""
    path = export_cache.store(kind, file_name, write)
    entry = {"bytes": os.path.getsize(path), "sha256": _digest(path)}
    with _locked(path.parent) as manifest:
        manifest[file_name] = entry
        _verified[str(path)] = _signature(os.stat(path))
    return path


def record_new(kind: str) -> list[str]:
    """Record size and SHA-256 of the plain files of ``kind``'s shared folder that have no record yet;
    return their names. The grader calls it right after a lab's ``prepare`` hook (which it ran
    itself, after :func:`verify` had deleted every file it had not recorded) to trust what it built."""
    folder = export_cache.shared_dir(kind)
    if not folder.is_dir():
        return []
    added = []
    with _locked(folder) as manifest:
        for path in sorted(folder.iterdir()):
            if (path.name in (MANIFEST, _LOCK) or path.name.endswith(".tmp") or path.name in manifest
                    or path.is_symlink() or not path.is_file()):
                continue
            info, digest = path.stat(), _digest(path)
            if not digest:  # unreadable here: not trusted, so verify() deletes it
                continue
            manifest[path.name] = {"bytes": info.st_size, "sha256": digest}
            _verified[str(path)] = _signature(info)
            added.append(path.name)
    return added


def verify_kind(kind: str) -> list[str]:
    """Check the shared folder of ``kind`` against its manifest; delete (and return the names of)
    files whose size or SHA-256 differ, that no :func:`store` recorded, or that are not plain files
    (a name ends in "(could not be deleted)" where this process may not delete it).

    A file unchanged (size, times, inode) since this process last verified it is not hashed again.
    """
    folder = export_cache.shared_dir(kind)
    if not folder.is_dir():
        return []
    removed = []
    with _locked(folder) as manifest:
        for path in sorted(folder.iterdir()):
            if path.name in (MANIFEST, _LOCK) or path.name.endswith(".tmp"):
                continue
            info = path.lstat()
            entry = manifest.get(path.name)
            if not path.is_symlink() and path.is_file() and _verified.get(str(path)) == _signature(info):
                continue
            good = (isinstance(entry, dict) and not path.is_symlink() and path.is_file()
                    and entry.get("bytes") == info.st_size and entry.get("sha256") == _digest(path) != "")
            if good:
                _verified[str(path)] = _signature(info)
                continue
            removed.append(path.name)
            manifest.pop(path.name, None)
            _verified.pop(str(path), None)
            try:
                if path.is_dir() and not path.is_symlink():
                    import shutil
                    shutil.rmtree(path)
                else:
                    path.unlink(missing_ok=True)
            except OSError:  # not ours to delete: the caller says so
                removed[-1] += " (could not be deleted)"
        for name in [n for n in manifest if not (folder / n).exists()]:
            del manifest[name]
    return removed
