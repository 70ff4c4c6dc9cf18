"""Building a lab's C++ with CMake against the libtorch inside the pinned torch wheel.

The torch wheel ships libtorch (headers in ``torch/include``, libraries in ``torch/lib``), so no
separate download is needed. The C++ project's ``CMakeLists.txt`` links ``torch_cpu`` and ``c10``
directly with C++20 and an rpath to ``torch/lib``: ``find_package(Torch)`` would fail on the CUDA
wheel without a CUDA toolkit, and the course containers have none.

:func:`build` configures once and then rebuilds incrementally in a build folder that is kept
between runs (``<source>/build`` by default), so editing one file recompiles only that file.
A failed build raises :class:`CppBuildError` whose message is the compiler's, trimmed to the
errors and relative to the source folder::

    >>> result = build("cpp")            # about 10-20 s the first time, about 1 s when nothing changed
    >>> result.binary
    PosixPath('.../cpp/build/analyzer')
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

BUILD_TIMEOUT = 300
"""Seconds a configure or build step may take before it is stopped."""
MAX_ERROR_LINES = 25
"""Lines of compiler output kept in a :class:`CppBuildError` (the first errors are the useful ones)."""
_TOOLS = {"cmake": "cmake", "make": "make", "c++": "g++"}


class CppBuildError(RuntimeError):
    """The C++ did not build. The message is what the compiler said, trimmed, or what is missing."""


@dataclass(frozen=True)
class BuildResult:
    """A successful build."""

    binary: Path
    """The executable that was built."""
    seconds: float
    """Wall time of configure and build together."""
    compiled: bool
    """Whether anything was recompiled (False: the build folder was already up to date)."""


def torch_dir() -> Path:
    """The installed torch package folder (found without importing torch)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise CppBuildError("the torch package is not installed in this Python; run "
                            "`pip install -r requirements.txt` first")
    return Path(spec.origin).resolve().parent


def missing_tools() -> list[str]:
    """Names of the build tools not found on ``PATH`` (empty when all are there)."""
    return [name for name, exe in _TOOLS.items() if shutil.which(exe) is None]


def trim_compiler_output(text: str, source_dir: Path, max_lines: int = MAX_ERROR_LINES) -> str:
    """The part of a build log a student needs: error lines with their context, paths shortened.

    Keeps the lines from the first ``error`` (or the last lines when there is none), drops make's
    and CMake's progress lines, and writes paths under ``source_dir`` relative to it.
    """
    prefix = str(source_dir.resolve()) + os.sep
    lines = [line.replace(prefix, "") for line in text.splitlines()]
    noise = re.compile(r"^(\[\s*\d+%\]|make(\[\d+\])?: |gmake(\[\d+\])?: |-- |Consolidate compiler generated)")
    lines = [line for line in lines if line.strip() and not noise.match(line)]
    first = next((i for i, line in enumerate(lines) if re.search(r"\berror\b", line, re.I)), None)
    if first is None:
        kept = lines[-max_lines:]
    else:
        start = first
        while start > 0 and first - start < 3 and ("In function" in lines[start - 1]
                                                  or "In member function" in lines[start - 1]
                                                  or lines[start - 1].startswith("In file included")):
            start -= 1
        kept = lines[start:start + max_lines]
    more = len(lines) - len(kept)
    return "\n".join(kept) + (f"\n... ({more} more lines)" if first is not None and more > 0 else "")


def source_fingerprint(source_dir: Path) -> str:
    """A hash of every file under ``source_dir`` (its ``build`` folder excluded): changes with any edit."""
    digest = hashlib.sha256()
    for path in sorted(p for p in source_dir.rglob("*") if p.is_file() and "build" not in
                       p.relative_to(source_dir).parts[:1]):
        digest.update(str(path.relative_to(source_dir)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _run(command: list[str], what: str, source_dir: Path) -> str:
    try:
        # LC_ALL=C: plain ASCII quotes in the compiler's messages, whatever the locale
        done = subprocess.run(command, capture_output=True, text=True, timeout=BUILD_TIMEOUT,
                              env={**os.environ, "LC_ALL": "C"})
    except subprocess.TimeoutExpired:
        raise CppBuildError(f"{what} took longer than {BUILD_TIMEOUT} s and was stopped") from None
    if done.returncode != 0:
        log = trim_compiler_output(done.stdout + "\n" + done.stderr, source_dir)
        raise CppBuildError(f"{what} failed:\n{log}")
    return done.stdout


def _configured_for(build_dir: Path) -> Path | None:
    """The source folder an existing build folder was configured for (None if not configured)."""
    cache = build_dir / "CMakeCache.txt"
    if not cache.exists():
        return None
    match = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$", cache.read_text(errors="replace"), re.M)
    return Path(match.group(1)).resolve() if match else None


def build(source_dir: str | Path, build_dir: str | Path | None = None, *, target: str = "analyzer",
          jobs: int = 2) -> BuildResult:
    """Configure (first time only) and build ``target`` of the CMake project in ``source_dir``.

    ``build_dir`` defaults to ``<source_dir>/build`` and is kept between calls: a second build
    recompiles only what changed. A build folder configured for another source folder (a copied
    or moved project) is reset. Raises :class:`CppBuildError` with the trimmed compiler output.
    """
    source_dir = Path(source_dir).resolve()
    build_dir = Path(build_dir).resolve() if build_dir else source_dir / "build"
    if not (source_dir / "CMakeLists.txt").exists():
        raise CppBuildError(f"{source_dir} has no CMakeLists.txt: the C++ folder must sit next to the notebook "
                            "(submit the notebook together with its cpp/ folder)")
    missing = missing_tools()
    if missing:
        raise CppBuildError(f"cannot build C++ here: {', '.join(missing)} not found on PATH. Install them "
                            "(Debian/Ubuntu: apt-get install cmake g++ make) and run the cell again")
    start = time.perf_counter()
    if _configured_for(build_dir) not in (None, source_dir):
        shutil.rmtree(build_dir)
    if _configured_for(build_dir) is None:
        _run(["cmake", "-S", str(source_dir), "-B", str(build_dir), f"-DTORCH_DIR={torch_dir()}",
              "-DCMAKE_BUILD_TYPE=", "-DCMAKE_CXX_COMPILER=" + shutil.which("g++")],
             "configuring the C++ project (cmake)", source_dir)
    binary = build_dir / target
    before = binary.stat().st_mtime_ns if binary.exists() else None
    _run(["cmake", "--build", str(build_dir), "--target", target, "-j", str(jobs)],
         "compiling the C++", source_dir)
    if not binary.exists():
        raise CppBuildError(f"the build finished but {binary} is missing: does CMakeLists.txt still define "
                            f"the executable {target!r}?")
    return BuildResult(binary, time.perf_counter() - start, binary.stat().st_mtime_ns != before)
