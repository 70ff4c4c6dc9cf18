"""Lab 13 wall time, measured in one run: a plain run of the solution, ``grader grade`` of the solution (hidden
cases and the grader's judges included), and the costly steps on their own: starting a group of ranks by fork
(2, 3 and 4 ranks: fork, one torch thread, gloo over loopback, the sockets handed over, the walls), the judge's
first ranked case (a student process started, PyTorch imported there, the run and the judge's own run) and a
later one (the student process reused).

Target (issue 38): the graded solution <= 30 s on 2 cores. Process start-up is the cost to watch: every rank is a
fork (about 0.1 s), never a fresh interpreter (4 to 16 s).

    python benchmarks/bench_lab13_grading.py [--repeats 1]

Timings depend on what else runs: the load average is printed first (and last).
"""
from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from timing import graded_run, plain_run, print_rows  # noqa: E402

from util.labs import get_lab  # noqa: E402

WALL_TARGET = 30.0


def group_seconds(world: int, repeats: int = 5) -> float:
    """Median seconds of one launch of ``world`` ranks, each summing a 1,000-float tensor with the library's
    all-reduce, from this (warm) process."""
    import torch
    import torch.distributed as dist

    from util.labs.lab13.ranks import run_ranks

    torch.set_num_threads(1)

    def job(rank, size):
        x = torch.ones(1000)
        dist.all_reduce(x)
        return x

    run_ranks(job, world)  # warm: the launcher's imports
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run_ranks(job, world)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def judge_seconds() -> tuple[float, float]:
    """(first ranked case: a student process started and its run, second case: the process reused) of the 13.1
    judge on the solution's ring, each with the judge's own run of the stated ring."""
    import cloudpickle
    import numpy as np

    from grader.author.solution import solution_namespace
    from grader.judge.isolated import serving
    from util.contract import Tolerance
    from util.labs.lab13 import judge

    ring = solution_namespace("lab13", ("13.1",))["ring_all_reduce"]
    buffer = io.BytesIO()
    np.savez(buffer, function=np.frombuffer(cloudpickle.dumps(ring), dtype=np.uint8))
    cases = [c for c in get_lab("lab13").task("13.1").cases if c.spec["check"] == "bytes"]
    seconds = []
    with serving():
        for case in cases[:2]:
            start = time.perf_counter()
            problems = judge.check_ring(dict(case.spec), buffer.getvalue(), Tolerance())
            seconds.append(time.perf_counter() - start)
            if problems:
                sys.exit(f"the 13.1 judge failed the solution: {problems}")
    return seconds[0], seconds[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    lab = get_lab("lab13")
    solution = REPO / "solutions" / lab.notebook
    rows = {"plain run of the solution (nbclient)": plain_run(solution)}
    rows["grader grade of the solution"] = statistics.median(graded_run(solution, "lab13") for _ in range(args.repeats))
    for world in (2, 3, 4):
        rows[f"a group of {world} ranks by fork (median of 5)"] = group_seconds(world)
    first, later = judge_seconds()
    rows["13.1 judge, first case: student process, imports, both runs"] = first
    rows["13.1 judge, a later case: both runs (process reused)"] = later
    print_rows(rows, "grader grade of the solution", WALL_TARGET)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
