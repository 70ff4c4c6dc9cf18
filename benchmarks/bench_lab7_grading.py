"""Lab 7 wall time, measured in one run: the exports its prepare hook caches, a plain run of the
solution, and ``grader grade`` of the solution (hidden cases and the grader's judges included).

Target (issue 19): the graded solution <= 45 s on 2 cores.

    python benchmarks/bench_lab7_grading.py [--repeats 1]

Timings depend on what else runs: the load average is printed first.
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

from util.labs import get_lab  # noqa: E402

WALL_TARGET = 45.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    lab = get_lab("lab7")
    from util.labs.lab7.tasks import prepare

    start = time.perf_counter()
    prepare()
    rows = {"prepare (ResNet-18 exports, cached after the first run)": time.perf_counter() - start}
    solution = REPO / "solutions" / lab.notebook
    rows["plain run of the solution (nbclient)"] = plain_run(solution)
    rows["grader grade of the solution"] = statistics.median(graded_run(solution, "lab7") for _ in range(args.repeats))
    print_rows(rows, "grader grade of the solution", WALL_TARGET)


if __name__ == "__main__":
    main()
