"""Lab 9's hidden cases: the inputs the grader runs the student's functions on, which the notebook never shows.

Grader-only (``util.labs.GRADER_ONLY``): never in the students' copy, the student image or a graded kernel,
which receives each case's input only when the grader runs it (``util.hidden``). ``tasks.py`` states what
each task's cases are worth (``Task.hidden_points``); the registry attaches these to it (``Lab.with_cases``).
"""
from __future__ import annotations

from typing import Any

from util.contract import Case


def _onnx_case(model: Any, calib: int, per_channel: bool) -> dict[str, Any]:
    return {"model": model, "calib": calib, "per_channel": per_channel}


def _set_case(where: str, channel: int, k: int) -> dict[str, Any]:
    return {"model": {"outlier": k, "where": where, "channel": channel}, "calib": 32, "max_drop": 0.01}


CASES = {
    '9.1': (
        Case("an all-positive activation, 8-bit asymmetric",
             {"tensor": "all_positive", "seed": 31, "bits": 8, "symmetric": False, "axis": None}, 3),
        Case("conv weights with a pruned (all-zero) filter, per channel",
             {"tensor": "pruned_filter", "seed": 32, "bits": 8, "symmetric": True, "axis": 0}, 3),
        Case("4-bit symmetric weights, per tensor",
             {"tensor": "weights", "seed": 33, "bits": 4, "symmetric": True, "axis": None}, 3),
        Case("one output channel 100x larger, per tensor and per channel",
             {"tensor": "one_channel_x100", "seed": 34, "bits": 8, "symmetric": True, "axis": [None, 0]}, 3),
    ),
    '9.2': (
        Case("one outlier pixel, percentile 99.99",
             {"model": "conv_net", "seed": 41, "batches": [50, 50, 50, 50], "outlier": 1000.0,
              "method": ["percentile", 99.99]}, 4),
        Case("a BatchNorm after a pool (it cannot fold), model handed over in train mode",
             {"model": "pool_then_bn", "seed": 42, "batches": [32, 32], "train_mode": True,
              "method": "minmax"}, 4),
        Case("batches of 50, 7 and 1 images, in-place ReLUs, percentile 99.9",
             {"model": "in_place", "seed": 43, "batches": [50, 7, 1], "method": ["percentile", 99.9]}, 4),
    ),
    '9.3': (
        Case("input zero point -128 with padding 1", {"model": "padded_conv", "seed": 51}, 4),
        Case("depthwise, stride 2, output zero point 127 (saturates)",
             {"model": "depthwise_saturating", "seed": 52}, 4),
        Case("multipliers just below 1 (M0 rounds to 2^31)", {"model": "multiplier_near_one", "seed": 53}, 4),
        Case("2,304-deep linear: acc * M0 needs 64 bits", {"model": "deep_linear", "seed": 54}, 4),
        Case("DigitsCNN's layers end to end", {"model": "digits_cnn", "seed": 55, "batch": 16}, 4),
    ),
    '9.4': (
        Case("a tied weight (counted once), 8 and 4 bits per channel",
             {"model": "tiny_tied", "bits": [8, 4], "per_channel": True, "symmetric": True}, 3),
        Case("odd tensor sizes and a BatchNorm kept, asymmetric per tensor",
             {"model": "odd_sizes", "bits": [8, 4], "per_channel": False, "symmetric": False}, 3),
    ),
    '9.5': (
        Case("DigitsCNN per tensor, 64 calibration images", _onnx_case({}, 64, False), 5),
        Case("ResNet-18 (BatchNorm folded) per channel, 8 calibration images",
             _onnx_case("resnet18", 8, True), 5),
    ),
    '9.6': (
        Case("an outlier channel after conv1 (K = 500)", _set_case("conv1", 7, 500), 5),
        Case("an outlier channel after conv2, through the pool", _set_case("conv2", 3, 1000), 5),
        Case("an outlier channel after conv3 (before fc)", _set_case("conv3", 5, 1000), 5),
    ),
}
"""Task id -> its hidden cases (``Lab.with_cases``)."""
