"""Moving a submission to a cluster worker, and its result folder back, byte for byte.

On a cluster the worker's disk is not the instructor's. What grading reads of a submission (the
notebook, and the lab's support files beside it as :func:`grader.execute.scratch.copy_support`
copies them, e.g. labN's ``cpp/``) travels as a *parcel*, a gzipped tar archive. The worker unpacks
it under a private root **at the path the instructor named**: ``/home/prof/class/amy/labN.ipynb``
becomes ``ROOT/home/prof/class/amy/labN.ipynb``, ``class/amy/labN.ipynb`` becomes
``ROOT/class/amy/labN.ipynb``. It grades that copy with the function a local run uses, into a
folder of its own, and sends back every file of the result folder with its mode. On the way back
the root is cut from the text files (JSON, Markdown, HTML, notebooks, CSV), so paths in them read
exactly as in a local run; the instructor's process then writes the files as they came
(:func:`write`), the resume record last.

Sizes are bounded both ways (:data:`MAX_PARCEL`, :data:`MAX_RESULT`): a parcel or a result folder
over its bound is refused with an error saying which, never sent half.
"""
from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from grader.core import records
from grader.core.limits import format_size
from grader.execute.scratch import copy_support
from util.contract import Lab

MAX_PARCEL = 64 * 2**20
"""Largest parcel (compressed) sent to a worker: a notebook is refused over 32 MiB anyway."""
MAX_RESULT = 256 * 2**20
"""Largest result folder (all its files together) a worker sends back."""
TEXT_SUFFIXES = (".json", ".md", ".html", ".ipynb", ".csv", ".txt", ".log")
"""Result files whose paths are rewritten on the way back; every other file (models the grader
judged, under ``files/``) comes back untouched."""


class TooLarge(ValueError):
    """A parcel or a result folder over its bound."""


def shippable(path: Path) -> bool:
    """Whether ``path`` is graded on a worker: a file. A folder without a notebook, or a path that
    is not there, is graded in the instructor's process (no kernel runs for them)."""
    return path.is_file()


def pack(path: Path, lab: Lab, limit: int = MAX_PARCEL) -> bytes:
    """The parcel of the submission ``path``: the file itself and ``lab``'s support files beside it."""
    with tempfile.TemporaryDirectory(prefix="grader-parcel-") as tmp:
        shutil.copy2(path, Path(tmp) / path.name)
        copy_support(lab, path.parent, Path(tmp))
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
            for entry in sorted(Path(tmp).iterdir()):
                tar.add(entry, arcname=entry.name)
    if buffer.tell() > limit:
        raise TooLarge(f"{path.name} and its support files are {format_size(buffer.tell())} compressed; "
                       f"a cluster worker is sent at most {format_size(limit)}")
    return buffer.getvalue()


@dataclass(frozen=True)
class Root:
    """A private folder on a worker under which a submission sits at the path the instructor named."""

    base: Path
    """The folder itself (under the worker's temporary folder; only letters and digits in its name)."""
    prefix: str
    """What a local path starts with where the instructor's path starts: cut on the way back."""
    path: Path
    """The submission's path on the worker: ``prefix`` followed by the instructor's path."""

    @classmethod
    def make(cls, instructor_path: Path, temp: Path | None = None) -> "Root":
        """A new root for ``instructor_path`` (relative paths with ``..`` included: the root is that
        many folders deep, so the copy stays inside it)."""
        base = Path(temp or tempfile.gettempdir()) / f"grader{uuid.uuid4().hex}"
        depth = sum(part == ".." for part in instructor_path.parts)
        top = base.joinpath(*["up"] * depth) if depth else base
        top.mkdir(parents=True, mode=0o700)
        if instructor_path.is_absolute():
            return cls(base, str(top), Path(str(top) + str(instructor_path)))
        return cls(base, str(top) + os.sep, top / instructor_path)

    def unpack(self, parcel: bytes) -> Path:
        """Unpack ``parcel`` beside the submission's path; returns that path."""
        folder = Path(os.path.normpath(self.path.parent))
        folder.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(parcel), mode="r:gz") as tar:
            tar.extractall(folder, filter="tar")  # links stay links; nothing lands outside the folder
        return self.path

    def unroot(self, data: bytes) -> bytes:
        """``data`` with every path under the root written as the instructor's path."""
        return data.replace(self.prefix.encode(), b"")

    def collect(self, folder: Path, limit: int = MAX_RESULT) -> dict[str, tuple[int, bytes]]:
        """Every file under ``folder``: relative POSIX path -> (mode, bytes), paths un-rooted in text files."""
        files: dict[str, tuple[int, bytes]] = {}
        total = 0
        for file in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
            data = file.read_bytes()
            total += len(data)
            if total > limit:
                raise TooLarge(f"the result folder holds more than {format_size(limit)}; a cluster worker "
                               "sends back at most that")
            if file.suffix in TEXT_SUFFIXES:
                data = self.unroot(data)
            files[file.relative_to(folder).as_posix()] = (file.stat().st_mode & 0o777, data)
        return files

    def remove(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


def write(folder: Path, files: dict[str, tuple[int, bytes]]) -> None:
    """Write what :meth:`Root.collect` returned into ``folder``, each file atomically and with its
    mode, the resume record last (its presence means the other files are complete)."""
    for name in sorted(files, key=lambda n: (n == records.RECORD, n)):
        mode, data = files[name]
        target = folder / name
        if target.resolve().is_relative_to(folder.resolve()) is False:
            raise ValueError(f"{name}: a result file outside its folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(tmp, mode)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
