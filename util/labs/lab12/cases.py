"""Lab 12's hidden cases: the inputs the grader runs the student's functions on, which the notebook never shows.

Grader-only (``util.labs.GRADER_ONLY``): never in the students' copy, the student image or a graded kernel,
which receives each case's input only when the grader runs it (``util.hidden``). ``tasks.py`` states what
each task's cases are worth (``Task.hidden_points``); the registry attaches these to it (``Lab.with_cases``).
"""
from __future__ import annotations

from typing import Any

from util.contract import Case


def _chain(widths: list[int], batch: int, budget: int) -> dict[str, Any]:
    return {"widths": widths, "batch": batch, "budget": budget}


_A = 4 * 128 * 256
"""One activation of the notebook's chain (batch 128, width 256): 131,072 bytes."""


_MIXED = [128, 512, 256, 64, 512, 384, 128, 256, 512, 64, 192, 448, 128, 320, 512, 256, 96, 384, 512, 160, 64, 448,
          256, 128, 512, 320, 64, 256, 384, 192, 128]
"""The widths of a 30-block chain (too many plans to try them all: 2^29)."""


CASES = {
    '12.1': (
        Case("residual MLP (a tensor read twice)", {"graph": "residual_mlp", "batch": 32, "start": 200}, 5),
        Case("biases and a scale broadcast over the batch and the pixels",
             {"graph": "broadcast", "batch": 16, "start": 300}, 5),
        Case("DigitsCNN without BatchNorm", {"graph": "digits_cnn", "batch": 32, "start": 400}, 5),
        Case("one weight used by two layers", {"graph": "tied", "batch": 24, "start": 500}, 5),
    ),
    '12.2': (
        Case("8 Linear+ReLU blocks at batch 128, SGD", {"model": "chain8", "batch": [128, 256],
                                                        "optimizer": "sgd"}, 4),
        Case("an MLP with a frozen first layer, momentum", {"model": "frozen_mlp", "batch": [32, 64],
                                                           "optimizer": "momentum"}, 4),
        Case("DigitsCNN at batch 16 (BatchNorm in train mode), Adam",
             {"model": "digits_cnn", "batch": [16, 1, 8, 8], "optimizer": "adam"}, 4),
        Case("a weight two layers share, Adam", {"model": "tied_mlp", "batch": [16, 64], "optimizer": "adam"}, 4),
    ),
    '12.3': (
        Case("residual MLP at batch 64", {"graph": "residual_mlp", "batch": 64, "start": 0}, 4),
        Case("DigitsCNN without BatchNorm at batch 64", {"graph": "digits_cnn", "batch": 64, "start": 0}, 4),
        Case("broadcast biases and a scale at batch 16", {"graph": "broadcast", "batch": 16, "start": 0}, 4),
    ),
    '12.4': (
        Case("a budget every plan fits: no checkpointing", _chain([256] * 7, 128, 2 << 20), 4),
        Case("a budget below every plan's peak: ValueError", _chain([256] * 9, 128, 7 * _A - 1), 4),
        Case("wide and narrow blocks in turn", _chain([64, 512] * 6 + [64], 128, 1_400_000), 4),
        Case("30 blocks of mixed widths", _chain(_MIXED, 16, 500_000), 4),
    ),
    '12.5': (
        Case("trained again by the grader from a fresh DigitsCNN: 97 % within 10 s",
             {"seed": 1, "epochs": 4, "seconds": 10, "min_accuracy": 0.97}, 15),
    ),
}
"""Task id -> its hidden cases (``Lab.with_cases``)."""
