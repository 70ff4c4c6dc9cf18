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
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import nbformat  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

from grader.grade import grade_submission  # noqa: E402
from grader.run import kernel_env  # noqa: E402
from util.tasks import get_lab  # noqa: E402

SOLUTION = REPO / "solutions" / "lab1_pytorch_analysis.ipynb"
GRADE_TARGET, WALL_TARGET = 1.15, 45.0


def plain_execution() -> float:
    """What a student's "Run all" costs: nbclient executes the notebook, nothing else."""
    nb = nbformat.read(str(SOLUTION), as_version=4)
    with tempfile.TemporaryDirectory() as scratch:
        start = time.perf_counter()
        NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": scratch}}).execute(
            env=kernel_env(Path(scratch) / "answers"))
        return time.perf_counter() - start


def graded_execution() -> float:
    """``grader grade`` of the same notebook: execution, hidden cases, scoring, result files."""
    lab = get_lab("lab1")
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        result = grade_submission(SOLUTION, lab, Path(out))
        seconds = time.perf_counter() - start
    if result.score != result.max_score:
        sys.exit(f"the solution scored {result.score}/{result.max_score}; fix that before benchmarking")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    plain, graded = [], []
    plain_execution()  # warm the file cache so the first timed run is not penalised
    for _ in range(args.repeats):
        plain.append(plain_execution())
        graded.append(graded_execution())
    p, g = statistics.median(plain), statistics.median(graded)
    print(f"cores: {os.cpu_count()}, repeats: {args.repeats}")
    print(f"plain nbclient execution of the Lab 1 solution: median {p:6.2f} s  ({', '.join(f'{x:.2f}' for x in plain)})")
    print(f"grader grade of the same notebook:              median {g:6.2f} s  ({', '.join(f'{x:.2f}' for x in graded)})")
    print(f"ratio grade / plain: {g / p:.3f}  (target <= {GRADE_TARGET}) -> {'OK' if g / p <= GRADE_TARGET else 'OVER'}")
    print(f"Lab 1 wall time: {p:.2f} s  (target <= {WALL_TARGET:.0f} s on 2 cores) -> {'OK' if p <= WALL_TARGET else 'OVER'}")


if __name__ == "__main__":
    main()
