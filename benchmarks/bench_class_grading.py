"""Class-scale grading, measured in one run: parallel throughput, grading overhead, memory per worker.

1. Throughput: 8 submissions of a lab (its example submissions and solution copies) graded with
   ``python -m grader grade -j 1`` and ``-j 2`` (``--force``, fresh output folders), ``--pairs`` times,
   alternated (-j 1, -j 2, -j 2, -j 1, ...: a machine whose load drifts weighs on both alike); prints the
   median wall times and their ratio (target: -j 2 >= 1.85 x the throughput of -j 1 on 2 cores), the serial
   fraction that ratio means by Amdahl's law (s = 2 / ratio - 1: the share of the -j 1 run that two workers
   do not shorten) and the speed-up it projects for ``-j 16`` on 16 cores (1 / (s + (1 - s) / 16)); and where
   the CPU went (the CPU-seconds of the grader's main process, its workers, the kernels and the rest:
   sandboxes, judges), with the cores the -j 1 run kept busy on average: a -j 1 run that already keeps more
   than one core busy leaves -j 2 less to gain on 2 cores, whatever is serial.
2. Overhead: one submission graded (sandbox, limits, hidden cases, scoring, result files) vs the
   same notebook executed by plain nbclient, alternated, medians (target: <= 1.15 x); also graded
   without the sandbox, to show what the sandbox itself costs.
3. Memory: the peak resident memory of the grader's main process, of each worker process and of
   each kernel (with everything it started), sampled every 0.1 s during the -j 2 run.

    python benchmarks/bench_class_grading.py [--lab lab1] [--repeats 3] [--pairs 1] [--throughput-only]

Timings depend on the machine's load: compare ratios from one run, on a quiet machine.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import psutil  # noqa: E402
from timing import graded_run, make_class, plain_run  # noqa: E402

from util.labs import get_lab  # noqa: E402

THROUGHPUT_TARGET, OVERHEAD_TARGET, SUBMISSIONS, PROJECTED_JOBS = 1.85, 1.15, 8, 16


def _role(process: psutil.Process) -> str | None:
    try:
        cmd = " ".join(process.cmdline())
    except psutil.Error:
        return None
    if "ipykernel_launcher" in cmd:
        return "kernel"
    if "multiprocessing" in cmd:
        return "worker"
    return None


def serial_fraction(ratio: float, jobs: int = 2) -> float:
    """Amdahl's serial fraction from the speed-up ``ratio`` of ``jobs`` workers over one: ``s`` with
    ``ratio = 1 / (s + (1 - s) / jobs)``, within 0 and 1."""
    return min(1.0, max(0.0, (jobs / ratio - 1) / (jobs - 1)))


def projected(serial: float, jobs: int) -> float:
    """The speed-up of ``jobs`` workers (on as many cores) that Amdahl's law gives for the fraction ``serial``."""
    return 1 / (serial + (1 - serial) / jobs)


def grade_class(folder: Path, jobs: int) -> tuple[float, dict[str, int], dict[str, float]]:
    """Wall seconds of ``grade -j jobs``, the peak RSS (bytes) per role and the CPU-seconds per role (every process
    of the run, sampled every 0.1 s: a process that lives less than that is missed)."""
    out = Path(tempfile.mkdtemp(prefix=f"bench-j{jobs}-"))
    command = [sys.executable, "-m", "grader", "grade", str(folder), "--out", str(out), "-j", str(jobs),
               "--no-progress", "--force"]
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    root = psutil.Process(process.pid)
    peaks: dict[int, tuple[str, int]] = {}
    cpu: dict[int, tuple[str, float]] = {}
    while process.poll() is None:
        try:
            members = [(root, "main")] + [(p, _role(p)) for p in root.children(recursive=True)]
        except psutil.Error:
            members = []
        kernels_rss: dict[int, int] = {}
        for member, role in members:
            try:
                times = member.cpu_times()
                cpu[member.pid] = (cpu.get(member.pid, (role or "other", 0))[0], times.user + times.system)
            except psutil.Error:
                pass
            try:
                rss = member.memory_info().rss
            except psutil.Error:
                continue
            if role == "kernel":  # a kernel with everything it started
                try:
                    rss += sum(c.memory_info().rss for c in member.children(recursive=True))
                except psutil.Error:
                    pass
                kernels_rss[member.pid] = rss
            elif role in ("main", "worker"):
                peaks[member.pid] = (role, max(rss, peaks.get(member.pid, (role, 0))[1]))
        for pid, rss in kernels_rss.items():
            peaks[pid] = ("kernel", max(rss, peaks.get(pid, ("kernel", 0))[1]))
        time.sleep(0.1)
    seconds = time.perf_counter() - start
    if process.returncode != 0:
        sys.exit(f"grade -j {jobs} failed:\n{process.stderr.read()[-2000:]}")
    shutil.rmtree(out, ignore_errors=True)
    by_role: dict[str, int] = {}
    for role, rss in peaks.values():
        by_role[role] = max(by_role.get(role, 0), rss)
    cpu_by_role: dict[str, float] = {}
    for role, used in cpu.values():
        cpu_by_role[role] = cpu_by_role.get(role, 0.0) + used
    return seconds, by_role, cpu_by_role


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab", default="lab1")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=1, help="-j 1 and -j 2 runs, alternated (default 1)")
    parser.add_argument("--throughput-only", action="store_true", help="skip the overhead measurement")
    args = parser.parse_args()
    solution = REPO / "solutions" / get_lab(args.lab).notebook
    print(f"cores: {os.cpu_count()}, lab: {args.lab}, load average: {os.getloadavg()[0]:.2f}")

    walls: dict[int, list[float]] = {1: [], 2: []}
    cpu: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory() as folder:
        make_class(args.lab, Path(folder), SUBMISSIONS)
        for pair in range(args.pairs):
            for jobs in ((1, 2) if pair % 2 == 0 else (2, 1)):
                seconds, peaks, used = grade_class(Path(folder), jobs)
                walls[jobs].append(seconds)
                cpu[jobs].append(used)
                if jobs == 2:
                    memory = peaks
    serial, parallel = statistics.median(walls[1]), statistics.median(walls[2])
    ratio = serial / parallel
    fraction = serial_fraction(ratio)
    print(f"\n{SUBMISSIONS} submissions, -j 1: {serial:6.1f} s  ({SUBMISSIONS / serial * 60:.1f} per minute)"
          f"  [{', '.join(f'{w:.1f}' for w in walls[1])}]")
    print(f"{SUBMISSIONS} submissions, -j 2: {parallel:6.1f} s  ({SUBMISSIONS / parallel * 60:.1f} per minute)"
          f"  [{', '.join(f'{w:.1f}' for w in walls[2])}]")
    print(f"throughput -j 2 / -j 1: {ratio:.2f}x  (target >= {THROUGHPUT_TARGET}) -> "
          f"{'OK' if ratio >= THROUGHPUT_TARGET else 'UNDER'}")
    print(f"serial fraction (Amdahl, from -j 1 and -j 2): {fraction:.3f}; projected -j {PROJECTED_JOBS} on "
          f"{PROJECTED_JOBS} cores: {projected(fraction, PROJECTED_JOBS):.1f}x")
    for jobs in (1, 2):
        used = cpu[jobs][0]
        print(f"CPU-seconds, -j {jobs} (first run): " + ", ".join(f"{role} {s:.1f}" for role, s in sorted(used.items()))
              + f"; {sum(used.values()):.1f} in all, {sum(used.values()) / walls[jobs][0]:.2f} cores busy on average")
    print("peak resident memory during -j 2: " + ", ".join(
        f"{role} {rss / 2**20:.0f} MiB" for role, rss in sorted(memory.items())))
    if args.throughput_only:
        return

    plain_run(solution)  # warm the file cache so the first timed run is not penalised
    times: dict[str, list[float]] = {"plain": [], "graded": [], "graded, no sandbox": []}
    for _ in range(args.repeats):
        times["plain"].append(plain_run(solution))
        times["graded"].append(graded_run(solution, args.lab, None))
        times["graded, no sandbox"].append(graded_run(solution, args.lab, False))
    medians = {name: statistics.median(values) for name, values in times.items()}
    print()
    for name, values in times.items():
        print(f"{name:20s} median {medians[name]:6.2f} s  ({', '.join(f'{v:.2f}' for v in values)})")
    overhead = medians["graded"] / medians["plain"]
    print(f"grading overhead (sandboxed) / plain nbclient: {overhead:.3f}  (target <= {OVERHEAD_TARGET}) -> "
          f"{'OK' if overhead <= OVERHEAD_TARGET else 'OVER'}")
    print(f"sandbox alone: {medians['graded'] / medians['graded, no sandbox']:.3f}x")


if __name__ == "__main__":
    main()
