"""Lab 12 wall time, measured in one run: a plain run of the solution, ``grader grade`` of the solution
(hidden cases and the grader's judges included), and the costly steps on their own: the judge's
re-run of task 12.5 (a student process: start, imports, warm-up, the student's ``train``) and the
course executor on the largest hidden chain.

Target (issue 32): the graded solution <= 30 s on 2 cores.

    python benchmarks/bench_lab12_grading.py [--repeats 1]

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

WALL_TARGET = 30.0


def retrain_seconds(solution: Path) -> tuple[float, float, float]:
    """(whole judge call, the timed run: unpickling, the model and ``train``, and its CPU seconds) of the 12.5
    judge on the solution's ``train``."""
    import cloudpickle

    from grader.author.solution import solution_namespace
    from grader.judge.isolated import serving
    from util.data import digits_split
    from util.labs.lab12 import judge_training

    train = solution_namespace("lab12", ("12.5",))["train"]
    spec = get_lab("lab12").task("12.5").cases[0].spec
    split = digits_split()
    with serving():
        start = time.perf_counter()
        state, measured, problem = judge_training.trained_state(spec, cloudpickle.dumps(train), split.x_train,
                                                                split.y_train)
        whole = time.perf_counter() - start
    if state is None:
        sys.exit(f"the 12.5 judge failed on the solution: {problem}")
    return whole, measured["seconds"], measured["cpu_seconds"]


def executor_seconds() -> float:
    """The course executor on the 30-block hidden chain without checkpointing (one thread)."""
    import torch

    from util.labs.lab12.executor import Chain, run_plan

    torch.set_num_threads(1)
    spec = next(c.spec for c in get_lab("lab12").task("12.4").cases if len(c.spec["widths"]) > 20)
    chain = Chain(spec["batch"], tuple(spec["widths"]))
    start = time.perf_counter()
    run_plan(chain, list(range(chain.n)))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    lab = get_lab("lab12")
    solution = REPO / "solutions" / lab.notebook
    rows = {"plain run of the solution (nbclient)": plain_run(solution)}
    rows["grader grade of the solution"] = statistics.median(graded_run(solution, "lab12") for _ in range(args.repeats))
    whole, seconds, cpu = retrain_seconds(solution)
    rows["12.5 judge: student process, imports, warm-up and train"] = whole
    rows["12.5 judge: the timed run, unpickling to weights (10 s allowed)"] = seconds
    rows["12.5 judge: its CPU seconds, the whole process tree"] = cpu
    rows["12.4: the course executor on the 30-block chain"] = executor_seconds()
    print_rows(rows, "grader grade of the solution", WALL_TARGET)


if __name__ == "__main__":
    main()
