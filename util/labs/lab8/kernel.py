"""Building a matmul kernel with g++ into a shared library and calling it from numpy (ctypes).

A kernel is a C++ function with this signature, row-major float32, ``C`` overwritten::

    void mm_fast(const float* A, const float* B, float* C, int M, int K, int N);   // C = A @ B

:func:`build_library` compiles it with the course's flags (``FLAGS``) together with a small entry
point that turns a C++ exception into an error message instead of killing the Python process, and
caches the result by source hash in a ``build/`` folder next to the source (a rebuild after an edit
takes about 0.3 s). Why not ``torch.utils.cpp_extension``: its cold build of the same kernel takes
about 35 s. :func:`load_matmul` wraps the library in a function ``matmul(a, b, out)`` that checks
shapes, dtypes and memory layout before it hands numpy's pointers to C++.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Callable

import numpy as np

FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17")
"""g++ flags for every kernel, the course's naive one included."""
BUILD_TIMEOUT = 120
NAIVE_SOURCE = """\
// The course's naive kernel: one dot product per element of C, the loops in i-j-k order.
void mm_naive(const float* A, const float* B, float* C, int M, int K, int N) {
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float sum = 0.0f;
      for (int k = 0; k < K; ++k) sum += A[(long)i * K + k] * B[(long)k * N + j];
      C[(long)i * N + j] = sum;
    }
}
"""
"""The baseline every speed-up is measured against (compiled with the same ``FLAGS``)."""
ENTRY = """
#include <cstring>
#include <exception>
void {name}(const float* A, const float* B, float* C, int M, int K, int N);
extern "C" int course_entry_{name}(const float* A, const float* B, float* C, int M, int K, int N,
                                   char* message, int capacity) {{
  try {{
    {name}(A, B, C, M, K, N);
    return 0;
  }} catch (const std::exception& error) {{
    std::strncpy(message, error.what(), capacity - 1);
  }} catch (...) {{
    std::strncpy(message, "a C++ exception that is not a std::exception", capacity - 1);
  }}
  message[capacity - 1] = 0;
  return 1;
}}
"""
"""Appended to every kernel: ``course_entry_<name>`` calls it and reports a C++ exception's message."""
MESSAGE_BYTES = 400


class KernelBuildError(RuntimeError):
    """g++ failed; the message is its output, trimmed to the first errors."""


def _trim(text: str, source: Path, lines: int = 20) -> str:
    kept = [line.replace(str(source.parent) + os.sep, "") for line in text.splitlines() if line.strip()]
    first = next((i for i, line in enumerate(kept) if re.search(r"\berror\b", line)), 0)
    return "\n".join(kept[first:first + lines])


def build_library(source: str | os.PathLike, name: str = "mm_fast", build_dir: str | os.PathLike | None = None) -> Path:
    """Compile the kernel ``name`` in the C++ file ``source`` into a shared library; return its path.

    The library lands in ``<folder of source>/build/`` (or ``build_dir``), named after a hash of the
    source, the entry point and the flags, so an unchanged source is not compiled again. Raises
    :class:`KernelBuildError` with g++'s messages when the source does not compile.
    """
    source = Path(source).resolve()
    if not source.is_file():
        raise FileNotFoundError(f"there is no C++ file {str(source)!r}; the kernel lives in kernel/mm_fast.cpp "
                                "next to the notebook")
    if shutil.which("g++") is None:
        raise KernelBuildError("g++ is not installed here (Debian/Ubuntu: apt-get install g++)")
    code = source.read_text(encoding="utf-8") + "\n" + ENTRY.format(name=name)
    digest = hashlib.sha256("\0".join([code, *FLAGS]).encode()).hexdigest()[:16]
    folder = Path(build_dir) if build_dir else source.parent / "build"
    library = folder / f"{name}_{digest}.so"
    if library.is_file():
        return library
    folder.mkdir(parents=True, exist_ok=True)
    unit = folder / f"{name}_{digest}.cpp"
    unit.write_text(code, encoding="utf-8")
    partial = library.with_suffix(f".{os.getpid()}.tmp")
    try:
        done = subprocess.run(["g++", *FLAGS, str(unit), "-o", str(partial)], capture_output=True, text=True,
                              timeout=BUILD_TIMEOUT, env={**os.environ, "LC_ALL": "C"})
    except subprocess.TimeoutExpired:
        raise KernelBuildError(f"g++ took more than {BUILD_TIMEOUT} s and was stopped") from None
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        raise KernelBuildError(f"{source.name} does not compile:\n" + _trim(done.stderr.replace(str(unit), source.name),
                                                                          source))
    os.replace(partial, library)
    return library


def _naive_name() -> str:
    """The naive kernel's file name in the ``native`` cache: it changes with the source, the flags,
    the compiler and the CPU (``-march=native`` code runs only where it was built)."""
    try:
        compiler = subprocess.run(["g++", "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        compiler = "no g++"
    try:
        cpu = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    except OSError:
        cpu = ""
    parts = [NAIVE_SOURCE, ENTRY, *FLAGS, compiler, cpu]
    return f"mm_naive_{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:16]}.so"


def cached_naive() -> Path | None:
    """The naive kernel the grader's prepare step built into the ``native`` export cache (its size and
    hash verified by the grader before every submission; read-only to everything it grades), or ``None``."""
    from util import export_cache

    return export_cache.find("native", _naive_name())


def prepare_naive() -> Path:
    """Build the naive kernel into the ``native`` export cache (the grader's prepare step, outside any sandbox)."""
    import tempfile

    from util import export_cache

    found = cached_naive()
    if found is not None:
        return found
    with tempfile.TemporaryDirectory(prefix="naive-") as tmp:
        built = build_naive(tmp)
        return export_cache.store("native", _naive_name(), built.read_bytes(), stale="mm_naive_*.so")


def build_naive(build_dir: str | os.PathLike) -> Path:
    """The course's naive kernel (``NAIVE_SOURCE``) as a library in ``build_dir``."""
    folder = Path(build_dir)
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "mm_naive.cpp"
    if not source.is_file() or source.read_text() != NAIVE_SOURCE:
        source.write_text(NAIVE_SOURCE)
    return build_library(source, "mm_naive", folder)


def load_matmul(library: str | os.PathLike, name: str = "mm_fast") -> Callable[..., np.ndarray]:
    """``matmul(a, b, out)``: ``out = a @ b`` computed by the kernel ``name`` in ``library``.

    ``a`` (M x K), ``b`` (K x N) and ``out`` (M x N) must be float32 and C-contiguous (row-major,
    no gaps): a transposed view is not, and copying it on every call would defeat the point, so
    this raises ``ValueError`` instead. A C++ exception in the kernel becomes a ``RuntimeError``.
    """
    entry = getattr(ctypes.CDLL(str(Path(library).resolve())), f"course_entry_{name}")
    entry.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 3 + [ctypes.c_char_p, ctypes.c_int]
    entry.restype = ctypes.c_int

    def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
        for label, array in (("a", a), ("b", b), ("out", out)):
            if not isinstance(array, np.ndarray) or array.dtype != np.float32 or array.ndim != 2:
                raise ValueError(f"{name}: {label} must be a 2-D float32 numpy array")
            if not array.flags.c_contiguous:
                raise ValueError(f"{name}: {label} is not C-contiguous (a transposed view?); the kernel reads "
                                 "memory row by row: make it contiguous once, outside the timed loop")
        (m, k), (k2, n) = a.shape, b.shape
        if k != k2 or out.shape != (m, n):
            raise ValueError(f"{name}: cannot multiply {list(a.shape)} by {list(b.shape)} into {list(out.shape)}")
        message = ctypes.create_string_buffer(MESSAGE_BYTES)
        if entry(a.ctypes.data, b.ctypes.data, out.ctypes.data, m, k, n, message, MESSAGE_BYTES):
            raise RuntimeError(f"{name} raised: {message.value.decode(errors='replace')}")
        return out

    matmul.__name__ = name
    return matmul


ODD_SIZES = ((3, 5, 7), (33, 17, 65), (70, 1, 9), (2, 64, 1))
"""Sizes of the notebook's own correctness check: odd, tiny, and with K = 1."""


def poisoned_product(matmul: Callable, m: int, k: int, n: int, seed: int = 0):
    """``(C, expected)``: ``matmul`` on random ``m x k`` and ``k x n`` inputs into a NaN-filled ``C``,
    and the float64 product of the same inputs."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, dtype=np.float32)
    matmul(a, b, c)
    return c, a.astype(np.float64) @ b.astype(np.float64)


def kernel_report(matmul: Callable) -> dict:
    """Task 8.4's answer: the 2x3 @ 3x2 hand example and whether each of :data:`ODD_SIZES` is right.

    The hand example is ``[[1, 2, 3], [4, 5, 6]] @ [[7, 8], [9, 10], [11, 12]] = [[58, 64], [139, 154]]``
    (an element that is not a finite number is reported as None). A size is right when every element
    is within ``1e-4 + 1e-4 |expected|`` of float64, ``C`` having been filled with NaN first.
    """
    a = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    b = np.arange(7, 13, dtype=np.float32).reshape(3, 2)
    c = np.full((2, 2), np.nan, dtype=np.float32)
    matmul(a, b, c)
    hand = [[float(v) if np.isfinite(v) else None for v in row] for row in c]
    right = {}
    for m, k, n in ODD_SIZES:
        found, expected = poisoned_product(matmul, m, k, n)
        right[f"{m}x{k}x{n}"] = bool(np.all(np.abs(found - expected) <= 1e-4 + 1e-4 * np.abs(expected)))
    return {"hand_example": hand, "odd_sizes_correct": right}


def time_pairs(first: Callable, second: Callable, m: int, k: int, n: int, pairs: int = 5,
               seed: int = 0) -> tuple[float, float]:
    """Best wall time of ``first`` and of ``second`` on one ``m x k x n`` product, over ``pairs``
    interleaved calls (first, second, first, ...). Interleaving spreads a burst of load from other
    programs over both; the best of several calls drops the bursts, since noise only adds time."""
    import time

    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    c = np.empty((m, n), dtype=np.float32)
    best = [float("inf"), float("inf")]
    for _ in range(pairs):
        for index, kernel in enumerate((first, second)):
            start = time.perf_counter()
            kernel(a, b, c)
            best[index] = min(best[index], time.perf_counter() - start)
    return best[0], best[1]
