"""Lab 8's hidden cases: the inputs the grader runs the student's functions on, which the notebook never shows.

Grader-only (``util.labs.GRADER_ONLY``): never in the students' copy, the student image or a graded kernel,
which receives each case's input only when the grader runs it (``util.hidden``). ``tasks.py`` states what
each task's cases are worth (``Task.hidden_points``); the registry attaches these to it (``Lab.with_cases``).
"""
from __future__ import annotations

from typing import Any

from util.contract import Case

RESNET18 = {"graph": "resnet18", "inputs": {"input": [1, 3, 64, 64]}}


ZOO = {"graph": "op_zoo", "inputs": {"img": [1, 3, 17, 13], "seq": [7, 3, 4], "batch4d": [2, 1, 5, 3],
                                     "vec": [6], "mat": [5, 9]}}


def _kernel_case(name: str, points: float, **spec: Any) -> Case:
    return Case(name, {"check": [], "timed": [], "seed": 84, **spec}, points)


CASES = {
    '8.1': (
        Case("op_zoo", ZOO, 4),
        Case("cnn@3", {"graph": "cnn", "inputs": {"x": [3, 1, 28, 28]}}, 4),
        Case("residual_mlp@7", {"graph": "residual_mlp", "inputs": {"x": [7, 784]}}, 4),
        Case("resnet18@1x3x64x64", RESNET18, 4),
    ),
    '8.2': (
        Case("residual_mlp@128", {"graph": "residual_mlp", "inputs": {"x": [128, 784]}}, 5),
        Case("cnn@16", {"graph": "cnn", "inputs": {"x": [16, 1, 28, 28]}}, 5),
        Case("resnet18@1x3x64x64", RESNET18, 5),
        Case("consumed_output@64", {"graph": "consumed_output", "inputs": {"x": [64, 8]}}, 5),
    ),
    '8.3': (
        Case("residual_mlp@256", {"graph": "residual_mlp", "inputs": {"x": [256, 784]}, "seed": 83}, 5, seeds=("seed",)),
        Case("mlp@500", {"graph": "mlp", "inputs": {"x": [500, 784]}, "seed": 84}, 5, seeds=("seed",)),
        Case("consumed_output@64", {"graph": "consumed_output", "inputs": {"x": [64, 8]}, "seed": 85}, 5,
             seeds=("seed",)),
    ),
    '8.4': (
        _kernel_case("1x1x1 and 3x5x2000", 4, check=[[1, 1, 1], [3, 5, 2000]]),
        _kernel_case("257x383x311", 4, check=[[257, 383, 311]]),
        _kernel_case("64x1000x3", 4, check=[[64, 1000, 3]]),
        _kernel_case("3x faster than naive at 500x700x1000, one thread", 8, timed=[[500, 700, 1000]],
                     pairs=5, min_speedup=3.0),
    ),
    '8.5': (
        Case("residual_mlp@256, outputs and 3x speed",
             {"graph": "residual_mlp", "inputs": {"x": [256, 784]}, "seed": 86, "pairs": 5,
              "min_speedup": 3.0}, 6),
    ),
}
"""Task id -> its hidden cases (``Lab.with_cases``)."""
