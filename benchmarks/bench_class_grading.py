"""Class-scale grading, measured in one run: parallel throughput, grading overhead, memory per worker.

1. Throughput: 8 submissions of a lab (its example submissions and solution copies) graded with
   ``python -m grader grade -j 1`` and ``-j 2`` (``--force``, fresh output folders); prints the
   wall times and their ratio (target: -j 2 >= 1.7 x the throughput of -j 1 on 2 cores).
2. Overhead: one submission graded (sandbox, limits, hidden cases, scoring, result files) vs the
   same notebook executed by plain nbclient, alternated, medians (target: <= 1.15 x); also graded
   without the sandbox, to show what the sandbox itself costs.
3. Memory: the peak resident memory of the grader's main process, of each worker process and of
   each kernel (with everything it started), sampled every 0.1 s during the -j 2 run.

    python benchmarks/bench_class_grading.py [--lab lab1] [--repeats 3]

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

THROUGHPUT_TARGET, OVERHEAD_TARGET, SUBMISSIONS = 1.7, 1.15, 8


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


def grade_class(folder: Path, jobs: int) -> tuple[float, dict[str, int]]:
    """Wall seconds of ``grade -j jobs`` and the peak RSS (bytes) per role."""
    out = Path(tempfile.mkdtemp(prefix=f"bench-j{jobs}-"))
    command = [sys.executable, "-m", "grader", "grade", str(folder), "--out", str(out), "-j", str(jobs),
               "--no-progress", "--force"]
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    root = psutil.Process(process.pid)
    peaks: dict[int, tuple[str, int]] = {}
    while process.poll() is None:
        try:
            members = [(root, "main")] + [(p, _role(p)) for p in root.children(recursive=True)]
        except psutil.Error:
            members = []
        kernels_rss: dict[int, int] = {}
        for member, role in members:
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
    return seconds, by_role


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab", default="lab1")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    solution = REPO / "solutions" / get_lab(args.lab).notebook
    print(f"cores: {os.cpu_count()}, lab: {args.lab}, load average: {os.getloadavg()[0]:.2f}")

    with tempfile.TemporaryDirectory() as folder:
        make_class(args.lab, Path(folder), SUBMISSIONS)
        serial, _ = grade_class(Path(folder), 1)
        parallel, memory = grade_class(Path(folder), 2)
    ratio = serial / parallel
    print(f"\n{SUBMISSIONS} submissions, -j 1: {serial:6.1f} s  ({SUBMISSIONS / serial * 60:.1f} per minute)")
    print(f"{SUBMISSIONS} submissions, -j 2: {parallel:6.1f} s  ({SUBMISSIONS / parallel * 60:.1f} per minute)")
    print(f"throughput -j 2 / -j 1: {ratio:.2f}x  (target >= {THROUGHPUT_TARGET}) -> "
          f"{'OK' if ratio >= THROUGHPUT_TARGET else 'UNDER'}")
    print("peak resident memory during -j 2: " + ", ".join(
        f"{role} {rss / 2**20:.0f} MiB" for role, rss in sorted(memory.items())))

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
