"""Lab 5 wall time, measured in one run: the pieces of the notebook that cost, the hidden cases with their
grader-side judges, and ``grader grade`` of the whole solution, against the 45 s target.

    python benchmarks/bench_lab5_grading.py [--repeats 1] [--threads 1]

Timings depend on what else runs: the load average is printed first; measure on a quiet machine.
``--threads 2`` times the pieces at two torch threads (the graded kernel always uses one).
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

import torch  # noqa: E402
import torch.fx as fx  # noqa: E402
from timing import graded_run, print_rows  # noqa: E402
from torch.fx.experimental.optimization import fuse  # noqa: E402

from util.labs.lab5.nets import build, seeded_input  # noqa: E402
from util.labs.lab5.tasks import LAB  # noqa: E402

SOLUTION = REPO / "solutions" / LAB.notebook
WALL_TARGET = 45.0


def timed(label: str, rows: dict, fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    rows[label] = time.perf_counter() - start
    return result


def piece_times() -> dict[str, float]:
    """The expensive steps, with PyTorch's own fuser standing in for the student's fold."""
    rows: dict[str, float] = {}
    resnet = timed("build resnet18_bnstats", rows, build, "resnet18_bnstats")
    x = seeded_input((8, 3, 64, 64), 2)
    folded = timed("fold ResNet-18 (torch.fx fuse)", rows, fuse, resnet)
    traced = fx.symbolic_trace(resnet)
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        model = traced.to(dtype) if dtype != torch.float32 else traced
        with torch.no_grad():
            timed(f"ResNet-18 forward at 8x3x64x64, {str(dtype).removeprefix('torch.')}", rows, model, x.to(dtype))
    for name in ("mobilenet_v3_small", "densenet121", "resnet34"):
        timed(f"build {name} (hidden cases; the judge builds it again)", rows, build, name)
    del folded
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; pieces at {args.threads} thread(s)")
    rows = piece_times()
    graded = [graded_run(SOLUTION, LAB.name) for _ in range(args.repeats)]
    rows["grader grade of the solution (hidden cases and judges included)"] = statistics.median(graded)
    print_rows(rows, "grader grade of the solution (hidden cases and judges included)", WALL_TARGET)


if __name__ == "__main__":
    main()
