"""Where exported models (ONNX, TorchScript) are cached, shared by every notebook and the grader.

Each kind has a shared folder, ``<repo>/build/<kind>`` (or the folder named by its environment
variable). Outside the grader it is read and written. Inside the grader's sandbox the repository is
read-only: the shared folder is still *read* (the grader fills it before grading, see
``Lab.prepare``), and a model missing from it is exported into the temp folder instead.

The grader keeps a ``manifest.json`` in each shared folder: the size and SHA-256 of every file
it trusts, recorded by :func:`store` or, for the files a lab's ``prepare`` hook has just exported,
by :func:`record_new`. :func:`verify` checks the folder against it and deletes any file that does
not match, or that the grader never recorded: the grader runs it before each submission, so a
model replaced by anyone is rebuilt, never used.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterator

REPO = Path(__file__).resolve().parents[1]
KINDS = {"onnx": "COURSE_ONNX_CACHE", "torchscript": "COURSE_TORCHSCRIPT_CACHE"}
"""Cache kind -> the environment variable that moves its shared folder."""


def shared_dir(kind: str) -> Path:
    """The shared cache folder of ``kind`` (it may not exist yet, and may be read-only)."""
    root = os.environ.get(KINDS[kind])
    return Path(root) if root else REPO / "build" / kind


def writable_dir(kind: str) -> Path:
    """Where a new export of ``kind`` is written: the shared folder, or the temp folder when the
    shared one cannot be written (a read-only checkout, the grader's sandbox)."""
    path = shared_dir(kind)
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK):
            raise PermissionError(path)
    except OSError:
        path = Path(tempfile.gettempdir()) / f"course-{kind}-cache"
        path.mkdir(parents=True, exist_ok=True)
    return path


def find(kind: str, file_name: str) -> Path | None:
    """The cached file called ``file_name``, from the shared folder first, else ``None``."""
    for folder in dict.fromkeys((shared_dir(kind), writable_dir(kind))):
        if (folder / file_name).is_file():
            return folder / file_name
    return None


def shared_dirs() -> list[Path]:
    """Every shared cache folder that exists (the grader binds them read-only into the sandbox)."""
    return [shared_dir(kind) for kind in KINDS if shared_dir(kind).is_dir()]


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
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _signature(info: os.stat_result) -> tuple[int, int, int, int]:
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)


def store(kind: str, file_name: str, write: Callable[[Path], None]) -> Path:
    """Write a cache file of ``kind`` atomically (``write(path)`` fills a temporary file, which is
    then renamed) and record its size and hash; returns its path. Parallel writers never expose
    half a file."""
    folder = writable_dir(kind)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)
        entry = {"bytes": os.path.getsize(tmp), "sha256": _digest(Path(tmp))}
        with _locked(folder) as manifest:
            os.replace(tmp, folder / file_name)
            manifest[file_name] = entry
            _verified[str(folder / file_name)] = _signature(os.stat(folder / file_name))
    finally:
        Path(tmp).unlink(missing_ok=True)
    return folder / file_name


def record_new(kind: str) -> list[str]:
    """Record size and SHA-256 of the plain files of ``kind``'s shared folder that have no record yet;
    return their names. The grader calls it right after a lab's ``prepare`` hook (which it ran
    itself, after :func:`verify` had deleted every file it had not recorded) to trust what it built."""
    folder = shared_dir(kind)
    if not folder.is_dir():
        return []
    added = []
    with _locked(folder) as manifest:
        for path in sorted(folder.iterdir()):
            if (path.name in (MANIFEST, _LOCK) or path.name.endswith(".tmp") or path.name in manifest
                    or path.is_symlink() or not path.is_file()):
                continue
            info = path.stat()
            manifest[path.name] = {"bytes": info.st_size, "sha256": _digest(path)}
            _verified[str(path)] = _signature(info)
            added.append(path.name)
    return added


def verify(kind: str) -> list[str]:
    """Check the shared folder of ``kind`` against its manifest; delete (and return the names of)
    files whose size or SHA-256 differ, that no :func:`store` recorded, or that are not plain files
    (a name ends in "(could not be deleted)" where this process may not delete it).

    A file unchanged (size, times, inode) since this process last verified it is not hashed again.
    """
    folder = shared_dir(kind)
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
                    and entry.get("bytes") == info.st_size and entry.get("sha256") == _digest(path))
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
