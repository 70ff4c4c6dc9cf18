"""Grading overhead on Lab 1, measured in one run.

Compares plain nbclient execution of the Lab 1 solution with ``grader grade`` of the same notebook
(which adds the hidden cases, the exports and the scoring), alternating the two so both see the
same machine state, and prints the median of each and their ratio.

Targets (from the course spine issue): grading <= 1.15 x plain execution; Lab 1 wall time <= 45 s
on 2 cores.

    python benchmarks/bench_lab1_grading.py [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from timing import graded_run, plain_run  # noqa: E402

SOLUTION = REPO / "solutions" / "lab1_pytorch_analysis.ipynb"
GRADE_TARGET, WALL_TARGET = 1.15, 45.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    plain, graded = [], []
    plain_run(SOLUTION)  # warm the file cache so the first timed run is not penalised
    for _ in range(args.repeats):
        plain.append(plain_run(SOLUTION))
        graded.append(graded_run(SOLUTION, "lab1"))
    p, g = statistics.median(plain), statistics.median(graded)
    print(f"cores: {os.cpu_count()}, repeats: {args.repeats}")
    print(f"plain nbclient execution of the Lab 1 solution: median {p:6.2f} s  ({', '.join(f'{x:.2f}' for x in plain)})")
    print(f"grader grade of the same notebook:              median {g:6.2f} s  ({', '.join(f'{x:.2f}' for x in graded)})")
    print(f"ratio grade / plain: {g / p:.3f}  (target <= {GRADE_TARGET}) -> {'OK' if g / p <= GRADE_TARGET else 'OVER'}")
    print(f"Lab 1 wall time: {p:.2f} s  (target <= {WALL_TARGET:.0f} s on 2 cores) -> {'OK' if p <= WALL_TARGET else 'OVER'}")


if __name__ == "__main__":
    main()
