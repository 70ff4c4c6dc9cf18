"""Running and timing a student's kernel library where the student's code cannot reach the clock.

The grader's judge (never the student's kernel) calls :func:`judge_library` with the library's bytes.
The student's library runs in a **student process** the grader starts for the judge
(:mod:`util.student_process`, harness :mod:`util.labs.lab8.student_harness`): another user, another
process namespace, a sandbox of its own; it can neither signal, trace nor read the judge or the
baseline. The course's naive kernel (built by the grader's prepare step into the export cache, whose
hash the grader verifies before every submission; built afresh in the judge's own folder only when
that cache is missing) runs in a process of the judge's. Both are pinned to the same single CPU with
``OMP_NUM_THREADS=1``. Inputs go through a memory file the judge fills with fresh random numbers
before every call (so a library cannot remember an earlier answer), and the judge itself:

* checks every result against float64 numpy computed from ITS OWN copies of ``A`` and ``B`` (a library
  that rewrites its inputs gains nothing; ``C`` is filled with NaN before each call, so a kernel that
  accumulates into ``C`` or skips elements fails);
* times each call from its own side of a socket, naive and student calls interleaved, and takes the
  best of ``pairs`` of each (noise only ever adds time); while the naive kernel is timed, every
  process of the student's is stopped by the grader (nothing of it can run beside the baseline);
* refuses a library that loaded a BLAS (by its name) or any file that is neither itself nor one of the
  system's libraries (by where it lies: a copy of a BLAS under another name lies in a folder of the
  student's), that left its CPU, or that used more CPU time than wall time (more than one thread), as the
  grader measures the student process from outside; the process may start no other process;
* reports a crash (the signal), a hang (a per-call deadline), or a C++ exception (its message).
"""
from __future__ import annotations

import mmap
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

import numpy as np

CHILD = r'''
import ctypes, mmap, os, sys
library, name, arena, size, cpu = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
os.sched_setaffinity(0, {cpu})
memory = mmap.mmap(os.open(arena, os.O_RDWR), size)
base = ctypes.addressof(ctypes.c_char.from_buffer(memory))
entry = getattr(ctypes.CDLL(library), "course_entry_" + name)
entry.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 3 + [ctypes.c_char_p, ctypes.c_int]
entry.restype = ctypes.c_int
message = ctypes.create_string_buffer(400)
sys.stdout.write("ready\n")
sys.stdout.flush()
for line in sys.stdin:
    m, k, n, a, b, c = map(int, line.split())
    if entry(base + a, base + b, base + c, m, k, n, message, 400) == 0:
        sys.stdout.write("ok\n")
    else:
        sys.stdout.write("error " + message.value.decode(errors="replace").replace("\n", " ") + "\n")
    sys.stdout.flush()
'''
"""The program each timing process runs: load the library, then one call per line of stdin."""
FORBIDDEN = ("blas", "lapack", "mkl", "dnnl", "torch", "onnxruntime", "eigen")
"""A library that maps a file whose name contains one of these is not the student's own kernel."""
LOAD_SECONDS = 20.0
CALL_SECONDS = 10.0
"""Deadline of one correctness call; a timed call may take 20x the naive kernel's time, at least this."""


CPU_SLACK = (1.15, 0.05)
"""CPU time the student process may use for the wall time ``t`` of its timed calls: ``1.15 t + 0.05`` s (one
thread; a thread that helps on another core, even with its affinity put back between calls, shows here)."""
SYSTEM_FOLDERS = ("/usr/lib/", "/usr/lib64/", "/lib/", "/lib64/", "/usr/local/lib/")
"""Where the system's own libraries lie (the C++ runtime, OpenMP, the C and maths libraries a kernel links)."""


def system_library(path: str) -> bool:
    """Whether ``path`` (a file mapped executable into the student process, as it sees it) is one of the system's
    libraries, not a BLAS or framework: the library's own copy of anything else lies elsewhere (its folder,
    ``/tmp``, a memory file), whatever it is called. The Python installation is not a system folder here: its
    packages bring BLAS (numpy's, torch's)."""
    name = path.rsplit("/", 1)[-1].lower()
    return path.startswith(SYSTEM_FOLDERS) and not path.endswith(" (deleted)") \
        and not any(word in name for word in FORBIDDEN) and "site-packages" not in path \
        and "dist-packages" not in path


class KernelFailure(Exception):
    """The library crashed, hung, raised or could not be loaded; the message says which, where."""


class Child:
    """A kernel library loaded in a fresh Python process pinned to ``cpu``."""

    def __init__(self, library: Path, name: str, arena: "Arena", cpu: int, folder: Path) -> None:
        self.name, self.cpu, self.pending = name, cpu, b""
        self.log = open(folder / f"{name}.stderr", "w+b")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OMP_NUM_THREADS": "1", "LC_ALL": "C"}
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", CHILD, str(library), name, str(arena.path), str(arena.size), str(cpu)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env, cwd=folder,
            start_new_session=True)
        self._line(LOAD_SECONDS, "loading the library")

    def _line(self, seconds: float, doing: str) -> str:
        deadline, fd = time.perf_counter() + seconds, self.process.stdout.fileno()
        while b"\n" not in self.pending:
            left = deadline - time.perf_counter()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.close()
                raise KernelFailure(f"{self.name} did not finish {doing} within {seconds:.0f} s")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise KernelFailure(f"{self.name} {self._death()} while {doing}")
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode(errors="replace")

    def _death(self) -> str:
        try:
            code = self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.close()
            code = None
        self.log.seek(0)
        said = self.log.read()[-400:].decode(errors="replace").strip().splitlines()
        if code is not None and code < 0:
            what = f"crashed ({signal.Signals(-code).name})"
        else:
            what = f"exited (status {code})"
        return what + (f": {said[-1][:200]}" if said else "")

    def call(self, m: int, k: int, n: int, offsets: tuple[int, int, int], seconds: float) -> float:
        """Run one multiplication; return its wall time as the grader saw it."""
        doing = f"{self.name} on {m}x{k} @ {k}x{n}"
        start = time.perf_counter()
        try:
            self.process.stdin.write(f"{m} {k} {n} {offsets[0]} {offsets[1]} {offsets[2]}\n".encode())
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise KernelFailure(f"{self.name} {self._death()}") from None
        line = self._line(seconds, doing)
        elapsed = time.perf_counter() - start
        if line != "ok":
            raise KernelFailure(f"{doing} raised: {line.removeprefix('error ')}"[:300])
        return elapsed

    def cpu_seconds(self) -> float:
        """User + system CPU time of the process, all its threads included (from /proc)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def left_its_cpu(self) -> bool:
        """Whether any thread of the process may now run on another CPU than the one it was given."""
        tasks = Path(f"/proc/{self.process.pid}/task")
        try:
            return any(os.sched_getaffinity(int(tid.name)) != {self.cpu} for tid in tasks.iterdir())
        except (OSError, ValueError):
            return False

    def libraries(self) -> list[str]:
        """Files mapped into the process whose names mark a BLAS or a framework (:data:`FORBIDDEN`)."""
        names = {line.split(None, 5)[5] for line in Path(f"/proc/{self.process.pid}/maps").read_text().splitlines()
                 if len(line.split(None, 5)) == 6}
        return sorted(Path(p).name for p in names if any(word in Path(p).name.lower() for word in FORBIDDEN))

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.process.kill()
        self.process.wait()
        self.log.close()


class Arena:
    """A file both processes map: A, B, C of the largest multiplication, float32, back to back."""

    def __init__(self, folder: Path, sizes: Sequence[Sequence[int]]) -> None:
        self.size = max(4096, 4 * max(m * k + k * n + m * n for m, k, n in sizes))
        self.path = folder / "arena"
        with open(self.path, "wb") as handle:
            handle.truncate(self.size)
        self._fd = os.open(self.path, os.O_RDWR)
        self._memory = mmap.mmap(self._fd, self.size)
        self.floats = np.frombuffer(self._memory, dtype=np.float32)

    @property
    def fd(self) -> int:
        """The arena's descriptor (handed to the student process with its library)."""
        return self._fd

    def fill(self, rng: np.random.Generator, m: int, k: int, n: int):
        """Fresh ``A`` and ``B`` from ``rng``, ``C`` all NaN; returns the judge's own COPIES of ``A`` and
        ``B`` (whatever the kernel writes into the arena), the arena's view of ``C``, and their byte offsets."""
        a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        self.floats[:m * k] = a.ravel()
        self.floats[m * k:m * k + k * n] = b.ravel()
        c = self.floats[m * k + k * n:m * k + k * n + m * n].reshape(m, n)
        c[...] = np.nan
        return a, b, c, (0, 4 * m * k, 4 * (m * k + k * n))

    def close(self) -> None:
        """Close the descriptor (the memory goes with the last view of it)."""
        os.close(self._fd)


def wrong_elements(c: np.ndarray, a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> str | None:
    """A sentence about the elements of ``c`` that are not ``a @ b`` within the tolerance (float64), or None."""
    expected = a.astype(np.float64) @ b.astype(np.float64)
    bad = ~(np.abs(c - expected) <= atol + rtol * np.abs(expected))
    if not bad.any():
        return None
    i, j = (int(v) for v in np.argwhere(bad)[0])
    return (f"{int(bad.sum()):,} of {c.size:,} elements of C are wrong, e.g. C[{i}, {j}] = {float(c[i, j]):.6g} "
            f"instead of {expected[i, j]:.6g}")


class StudentKernel:
    """The student's library in a student process (see the module's docstring), called like :class:`Child`."""

    def __init__(self, library: bytes, arena: "Arena", cpu: int) -> None:
        from util.student_process import ChannelError, StudentProcess

        self.name, self.cpu = "mm_fast", cpu
        try:
            self.process = StudentProcess.start("util.labs.lab8.student_harness:serve", cpu=cpu, max_data=1 << 16,
                                                seconds=600)
        except ChannelError as exc:
            raise KernelFailure(f"the grader could not start a process for mm_fast ({exc})") from None
        try:
            before = self.process.stats()  # what the harness maps before the library
            self.before, self.before_executables = set(before["libraries"]), set(before["executables"])
            self.process.send({"load": "mm_fast"}, data=library, fds=(arena.fd,))
            reply, _ = self.process.receive(timeout=LOAD_SECONDS)  # sent before any code of the library ran
        except ChannelError:
            raise KernelFailure(f"mm_fast {self._death()} while loading the library") from None
        self.path = reply.get("library") if isinstance(reply.get("library"), str) else None
        self._answer(LOAD_SECONDS, "loading the library", expect="ready")

    def _death(self) -> str:
        from util.student_process import ChannelError

        try:
            code = self.process.stats().get("exit")
        except ChannelError:
            code = None
        if isinstance(code, int) and code > 128:
            try:
                return f"crashed ({signal.Signals(code - 128).name})"
            except ValueError:
                return f"crashed (signal {code - 128})"
        return f"exited (status {code})" if code is not None else "stopped answering"

    def _answer(self, seconds: float, doing: str, expect: str = "ok") -> None:
        from util.student_process import ChannelError

        try:
            reply, _ = self.process.receive(timeout=seconds)
        except ChannelError as exc:
            if "time allowed" in str(exc):
                raise KernelFailure(f"mm_fast did not finish {doing} within {seconds:.0f} s") from None
            raise KernelFailure(f"mm_fast {self._death()} while {doing}") from None
        if reply.get(expect) is True:
            return
        error = reply.get("error")
        raise KernelFailure(f"{doing} raised: {str(error)[:250]}" if isinstance(error, str)
                            else f"mm_fast answered something unexpected while {doing}")

    def call(self, m: int, k: int, n: int, offsets: tuple[int, int, int], seconds: float) -> float:
        """Run one multiplication; return its wall time as the judge saw it."""
        from util.student_process import ChannelError

        doing = f"mm_fast on {m}x{k} @ {k}x{n}"
        start = time.perf_counter()
        try:
            self.process.send({"call": [m, k, n, *offsets]})
        except ChannelError:
            raise KernelFailure(f"mm_fast {self._death()}") from None
        self._answer(seconds, doing)
        return time.perf_counter() - start

    def stats(self) -> dict:
        """The grader's measurement of the student process (CPU seconds, CPUs, libraries)."""
        return self.process.stats()

    def close(self) -> None:
        self.process.close()


def naive_library(folder: Path) -> Path:
    """The course's naive kernel: from the export cache the grader filled and verified (the prepare step),
    else built afresh in ``folder`` (the judge's own)."""
    from util.labs.lab8.kernel import build_naive, cached_naive

    return cached_naive() or build_naive(folder / "naive")


def judge_library(library: bytes, *, check: Sequence[Sequence[int]] = (), timed: Sequence[Sequence[int]] = (),
                  pairs: int = 5, min_speedup: float = 3.0, seed: int = 0, rtol: float = 1e-4,
                  atol: float = 1e-4) -> tuple[list[str], dict[str, float]]:
    """Problems with the ``mm_fast`` in ``library`` (empty: passed) and what was measured.

    ``check``: sizes ``(M, K, N)`` multiplied once each and compared with float64. ``timed``: a
    sequence of sizes run as one workload, ``pairs`` times interleaved with the naive kernel; every
    timed result is checked too. Passes when the best naive workload time is at least
    ``min_speedup`` times the best of the student's, and the naive kernel's CPU time over all the pairs at
    least ``min_speedup`` times the student process's (every thread counted: on a busy machine extra threads
    take a larger share of the cores, which a wall-time ratio would credit). Runs in a grader's judge process (or under
    ``grader.judge.isolated.serving()``): the student's library runs in a student process.
    """
    from util.judging import secret

    rng = secret.generator("lab8", "matrices", seed)  # inputs no library can know beforehand
    measured: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="lab8-judge-") as tmp:
        folder = Path(tmp)
        arena = Arena(folder, [*check, *timed])
        cpu = max(os.sched_getaffinity(0))
        fast = naive = None
        try:
            fast = StudentKernel(library, arena, cpu)
            for m, k, n in check:
                a, b, c, offsets = arena.fill(rng, m, k, n)
                fast.call(m, k, n, offsets, CALL_SECONDS)
                wrong = wrong_elements(c, a, b, rtol, atol)
                if wrong:
                    return [f"mm_fast on {m}x{k} @ {k}x{n}: {wrong}"], measured
            if not timed:
                return [], measured
            naive = Child(naive_library(folder), "mm_naive", arena, cpu, folder)
            best = {"naive": float("inf"), "fast": float("inf")}
            cpu_before, fast_wall, naive_cpu = fast.stats()["cpu_seconds"], 0.0, naive.cpu_seconds()
            for _ in range(pairs):
                spent = {"naive": 0.0, "fast": 0.0}
                for m, k, n in timed:
                    a, b, c, offsets = arena.fill(rng, m, k, n)
                    fast.process.pause()  # nothing of the student's runs while the baseline is timed
                    try:
                        spent["naive"] += (t_naive := naive.call(m, k, n, offsets, 60.0))
                    finally:
                        fast.process.resume()
                    a, b, c, offsets = arena.fill(rng, m, k, n)
                    spent["fast"] += fast.call(m, k, n, offsets, max(CALL_SECONDS, 20 * t_naive))
                    wrong = wrong_elements(c, a, b, rtol, atol)
                    if wrong:
                        return [f"mm_fast on {m}x{k} @ {k}x{n} (timed): {wrong}"], measured
                    if fast.stats()["cpus"] != [cpu]:
                        return ["mm_fast changed its CPU affinity: it is timed on one core, with one thread"], measured
                best = {key: min(best[key], spent[key]) for key in best}
                fast_wall += spent["fast"]
            after = fast.stats()
            used = after["cpu_seconds"] - cpu_before
            naive_cpu = naive.cpu_seconds() - naive_cpu
            loaded = sorted(name for name in set(after["libraries"]) - fast.before  # what the library brought in
                            if any(word in name.lower() for word in FORBIDDEN))
            foreign = sorted(path for path in set(after["executables"]) - fast.before_executables
                             if path != fast.path and not system_library(path))
        except KernelFailure as failure:
            return [str(failure)], measured
        finally:
            for child in (fast, naive):
                if child is not None:
                    child.close()
            arena.close()
    measured = {"naive_s": best["naive"], "fast_s": best["fast"], "speedup": best["naive"] / best["fast"],
                "cpu_speedup": naive_cpu / max(used, 1e-3)}
    problems = []
    if loaded:
        problems.append(f"the library loaded {loaded[0]}: the kernel must be your own code, not a BLAS")
    if foreign:
        problems.append(f"the library loaded {foreign[0]}, which is neither itself nor one of the system's libraries: "
                        "the kernel must be your own code, in the library the notebook builds")
    if used > CPU_SLACK[0] * fast_wall + CPU_SLACK[1]:
        problems.append(f"mm_fast used {used:.2f} s of CPU time in {fast_wall:.2f} s: it is timed with one thread")
    if measured["speedup"] >= min_speedup and measured["cpu_speedup"] < min_speedup:
        problems.append(f"mm_fast used {measured['cpu_speedup']:.1f}x less CPU time than the naive kernel ({used:.2f} s "
                        f"against {naive_cpu:.2f} s, every thread of it counted); it must be at least {min_speedup:g}x "
                        "on one thread")
    if measured["speedup"] < min_speedup:
        problems.append(f"mm_fast is {measured['speedup']:.1f}x as fast as the naive kernel (best of {pairs}: naive "
                        f"{best['naive']:.3f} s, yours {best['fast']:.3f} s); it must be at least {min_speedup:g}x")
    return problems, measured
