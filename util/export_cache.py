"""Where exported models (ONNX, TorchScript) and the course's compiled baselines are cached, shared by every notebook and the grader.

Each kind has a shared folder, ``<repo>/build/<kind>`` (or the folder named by its environment
variable). Outside the grader it is read and written. Inside the grader's sandbox the repository is
read-only: the shared folder is still *read* (the grader fills it before grading, see
``Lab.prepare``), and a model missing from it is exported into the temp folder instead.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable

from util.atomic import write_atomic

REPO = Path(__file__).resolve().parents[1]
KINDS = {"onnx": "COURSE_ONNX_CACHE", "torchscript": "COURSE_TORCHSCRIPT_CACHE", "native": "COURSE_NATIVE_CACHE"}
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


def store(kind: str, file_name: str, content: bytes | Callable[[Path], None], *, stale: str | None = None) -> Path:
    """Write a new export of ``kind`` as ``file_name`` in :func:`writable_dir` and return its path.

    ``content`` is the file's bytes, or a function that writes the file at the path it is given
    (``torch.jit.ScriptModule.save``). The file appears at once and whole (written to a temporary
    name, then renamed: graders running side by side never read half a file) and readable by
    every user (the grader's kernels run as another user). Files matching the glob ``stale``
    (exports of the same model by older code or package versions) are then deleted.
    """
    folder = writable_dir(kind)
    path = write_atomic(folder / file_name, content, mode=0o644)  # mkstemp makes it 0600
    for old in folder.glob(stale) if stale else ():
        if old != path:
            old.unlink(missing_ok=True)
    return path
