"""Lab 6 wall time, measured in one run: the solution's three ResNet-18 steps, a plain run of the
notebook and ``grader grade`` of it (hidden cases and judges included), against the target.

Target (issue 18): the graded solution in <= 45 s on 2 cores. The steps are the *solution's*
functions (``grader.author.solution.solution_namespace``) on ResNet-18 at 8 x 3 x 64 x 64; the isolation
also reports how many sessions delta debugging needed (one session per test).

    python benchmarks/bench_lab6_grading.py [--repeats 1]

Timings depend on what else runs: measure on a quiet machine (the load average is printed first).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from timing import graded_run, plain_run, print_rows  # noqa: E402

from grader.author.solution import solution_namespace  # noqa: E402
from util.labs import get_lab  # noqa: E402
from util.labs.lab6 import zoo  # noqa: E402

WALL_TARGET = 45.0
SOLUTION = REPO / "solutions" / get_lab("lab6").notebook


def step_times() -> dict[str, float]:
    """The solution's level report, trace and isolation on ResNet-18, and the isolation's session count."""
    namespace = solution_namespace("lab6", ("6.1", "6.4", "6.5"))
    model, feeds = zoo.load(zoo.RESNET), zoo.feeds(zoo.RESNET, 0)
    sessions = [0]
    make_session = namespace["make_session"]

    def counted(*args, **kwargs):
        sessions[0] += 1
        return make_session(*args, **kwargs)

    namespace["make_session"] = counted
    rows = {}
    for label, call in [("level_report(resnet18)", lambda: namespace["level_report"](model, feeds)),
                        ("trace(resnet18, BASIC)", lambda: namespace["trace"](model, feeds, "BASIC")),
                        ("isolate_passes(resnet18)",
                         lambda: namespace["isolate_passes"](model, feeds, list(namespace["CANDIDATES"])))]:
        sessions[0] = 0
        start = time.perf_counter()
        call()
        rows[f"{label}, {sessions[0]} sessions"] = time.perf_counter() - start
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    start = time.perf_counter()
    zoo.prepare()
    rows = {"prepare (export cache filled)": time.perf_counter() - start}
    rows |= step_times()
    rows["plain run of the solution (nbclient)"] = plain_run(SOLUTION)
    graded = [graded_run(SOLUTION, "lab6") for _ in range(args.repeats)]
    rows["grader grade of the solution"] = statistics.median(graded)
    print_rows(rows, "grader grade of the solution", WALL_TARGET)


if __name__ == "__main__":
    main()
