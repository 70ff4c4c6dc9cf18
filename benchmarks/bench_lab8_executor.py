"""Lab 8 in one run: the kernel's speed-up as the grader measures it, the executor against
onnxruntime, and ``grader grade`` of the whole solution against the 45 s target.

* kernel: the solution's ``mm_fast`` against the course's naive kernel at 500x700x1000 and on the
  residual MLP's matrix products (one CPU, best of 5 interleaved pairs, in the grader's own
  processes: ``util.labs.lab8.judge_timing``), ``--trials`` times;
* executor: dlsys's MLP at batch 1000 run inside the course's plan with the naive kernel, the
  solution's kernel and numpy's BLAS, against onnxruntime (one thread each, best of a few runs);
* grading: ``grader grade`` of the solution, hidden cases and the grader's kernel timing included.

    python benchmarks/bench_lab8_executor.py [--trials 3] [--no-grade]

Timings depend on what else runs: measure on a quiet machine (the load average is printed first).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = "1"   # before numpy loads its BLAS

import numpy as np  # noqa: E402
from timing import graded_run  # noqa: E402

from grader.author.solution import solution_namespace  # noqa: E402
from util.labs.lab8.graphs import graph, random_feeds  # noqa: E402
from util.labs.lab8.harness import load_weights, make_pool  # noqa: E402
from util.labs.lab8.judge_timing import judge_library  # noqa: E402
from util.labs.lab8.kernel import build_library, build_naive, load_matmul  # noqa: E402
from util.labs.lab8.plans import course_plan, course_shapes  # noqa: E402
from util.labs.lab8.verify import matmul_sizes  # noqa: E402

SOLUTION = REPO / "solutions" / "lab8_graph_executor"
TARGET_SECONDS = 45.0
MIN_SPEEDUP = 3.0


def best_of(run, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def kernel_rows(library: bytes, trials: int) -> None:
    from grader.judge.isolated import serving

    residual = graph("residual_mlp")
    workloads = {"500x700x1000": [(500, 700, 1000)],
                 "residual MLP@256 products": matmul_sizes(residual, course_shapes(residual, {"x": [256, 784]}))}
    for label, timed in workloads.items():
        found = []
        for trial in range(trials):
            with serving():  # the library runs in a student process, as in grading
                problems, measured = judge_library(library, timed=timed, seed=trial)
            if problems:
                sys.exit(f"the solution's kernel failed the grader's check: {problems}")
            found.append(measured)
        speedups = [m["speedup"] for m in found]
        cpu = [m["cpu_speedup"] for m in found]
        print(f"kernel, {label}: naive {statistics.median(m['naive_s'] for m in found):.4f} s, "
              f"fast {statistics.median(m['fast_s'] for m in found):.4f} s; speed-up min {min(speedups):.1f}x, "
              f"median {statistics.median(speedups):.1f}x over {trials} grader measurements "
              f"(needs >= {MIN_SPEEDUP:g}x: min / {MIN_SPEEDUP:g} = {min(speedups) / MIN_SPEEDUP:.1f}); in CPU time "
              f"min {min(cpu):.1f}x (needs >= {MIN_SPEEDUP:g}x too)")


def executor_rows(folder: Path) -> None:
    import onnxruntime as ort

    here = Path.cwd()
    os.chdir(folder)                  # the notebook builds kernel/mm_fast.cpp relative to its folder
    try:
        namespace = solution_namespace("lab8", ("8.1", "8.2", "8.3", "8.4", "8.5"))
    finally:
        os.chdir(here)
    execute, transpose_weights = namespace["execute"], namespace["transpose_weights"]
    mlp = graph("mlp")
    feeds = random_feeds(mlp, {"x": [1000, 784]}, seed=8)
    prepared = transpose_weights(mlp)
    shapes = course_shapes(prepared, {"x": [1000, 784]})
    plan = course_plan(prepared, shapes)
    pool, weights = make_pool(plan), load_weights(prepared)
    fast = load_matmul(build_library(folder / "kernel" / "mm_fast.cpp"))
    naive = load_matmul(build_naive(folder / "naive"), "mm_naive")
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(mlp.SerializeToString(), options, providers=["CPUExecutionProvider"])
    rows = {"executor + naive kernel": best_of(lambda: execute(prepared, weights, feeds, shapes, plan, pool, naive), 3),
            "executor + solution kernel": best_of(lambda: execute(prepared, weights, feeds, shapes, plan, pool, fast), 7),
            "executor + numpy (BLAS)": best_of(lambda: execute(prepared, weights, feeds, shapes, plan, pool, np.matmul), 7),
            "onnxruntime": best_of(lambda: session.run(None, feeds), 7)}
    print("\nMLP 784-256-100-10 at batch 1000, one thread, best of 3-7 runs:")
    for label, seconds in rows.items():
        print(f"  {label:<27} {seconds * 1e3:8.2f} ms   {rows['executor + naive kernel'] / seconds:6.1f}x naive   "
              f"{seconds / rows['onnxruntime']:6.1f}x onnxruntime's time")


class TreeCpu:
    """CPU seconds of every process below this one (the grader, its kernel, its judges' children),
    sampled from /proc every 50 ms; on a quiet machine the graded wall time is about this much.
    A process that ends between two samples loses at most its last 50 ms."""

    def __init__(self) -> None:
        self.seen: dict[int, float] = {}
        self.own = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _table(self) -> dict[int, tuple[int, float]]:
        tick, table = os.sysconf("SC_CLK_TCK"), {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    fields = Path(f"/proc/{entry}/stat").read_text().rpartition(")")[2].split()
                except OSError:
                    continue
                table[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
        return table

    def _sample(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            table = self._table()
            for pid, (parent, cpu) in table.items():
                hops = 0
                while parent in table and parent != me and hops < 40:
                    parent, hops = table[parent][0], hops + 1
                if parent == me and pid != me:
                    self.seen[pid] = max(self.seen.get(pid, 0.0), cpu)
            time.sleep(0.05)
        self.own = time.thread_time()

    def __enter__(self) -> "TreeCpu":
        self._start = os.times()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        end = os.times()
        mine = end.user + end.system - self._start.user - self._start.system - self.own
        self.seconds = sum(self.seen.values()) + mine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3, help="grader measurements of the kernel per workload")
    parser.add_argument("--no-grade", action="store_true", help="skip grading the whole solution")
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        shutil.copytree(SOLUTION / "kernel", folder / "kernel", ignore=shutil.ignore_patterns("build"))
        kernel_rows(build_library(folder / "kernel" / "mm_fast.cpp").read_bytes(), args.trials)
        executor_rows(folder)
    if not args.no_grade:
        with TreeCpu() as cpu:
            seconds = graded_run(SOLUTION / "lab8_graph_executor.ipynb", "lab8")
        print(f"\ngrader grade of the solution: {seconds:.1f} s wall (load average now "
              f"{os.getloadavg()[0]:.1f}); / {TARGET_SECONDS:.0f} s target = {seconds / TARGET_SECONDS:.2f} "
              "(<= 1.00 meets the target)")
        print(f"CPU time of the grading's process tree: {cpu.seconds:.1f} s (about the wall time on a quiet "
              f"machine); / {TARGET_SECONDS:.0f} s = {cpu.seconds / TARGET_SECONDS:.2f}")


if __name__ == "__main__":
    main()
