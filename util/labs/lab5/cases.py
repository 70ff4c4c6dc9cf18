"""Lab 5's hidden cases: the inputs the grader runs the student's functions on, which the notebook never shows.

Grader-only (``util.labs.GRADER_ONLY``): never in the students' copy, the student image or a graded kernel,
which receives each case's input only when the grader runs it (``util.hidden``). ``tasks.py`` states what
each task's cases are worth (``Task.hidden_points``); the registry attaches these to it (``Lab.with_cases``).
"""
from __future__ import annotations

from typing import Any

from util.contract import Case


def _conv(**kwargs: Any) -> dict[str, Any]:
    return {"in_channels": 8, "out_channels": 8, "kernel_size": 3, "padding": 1, "bias": False, **kwargs}


CASES = {
    '5.1': (
        Case("conv with a bias", {"conv": _conv(in_channels=6, bias=True), "seed": 11, "cancel": True}, 3),
        Case("grouped, stride 2, BN eps 1e-3",
             {"conv": _conv(out_channels=12, stride=2, groups=4), "bn": {"eps": 1e-3}, "seed": 12, "cancel": True}, 3),
        Case("depthwise, dilated, BN affine=False",
             {"conv": _conv(padding=2, dilation=2, groups=8), "bn": {"affine": False}, "seed": 13}, 3),
        Case("reflect padding, 3x5 kernel, a bias",
             {"conv": _conv(in_channels=4, out_channels=6, kernel_size=[3, 5], padding=[1, 2],
                            padding_mode="reflect", bias=True), "seed": 14, "cancel": True}, 3),
    ),
    '5.2': (
        Case("mobilenet_v3_small (BN eps 1e-3)",
             {"model": "mobilenet_v3_small", "input": [2, 3, 64, 64], "seed": 15, "cancel": True}, 4),
        Case("densenet121 (pre-activation BNs)",
             {"model": "densenet121", "input": [1, 3, 64, 64], "seed": 16, "cancel": True}, 4),
        Case("course net: a shared conv output, a BN after a pool",
             {"model": "tiny_shared", "input": [2, 3, 16, 16], "seed": 17, "cancel": True}, 4),
    ),
    '5.3': (
        Case("resnet34", {"model": "resnet34", "input": [2, 3, 64, 64], "seed": 18}, 4),
        Case("course net: relu(add) written five ways",
             {"model": "tiny_res", "input": [2, 4, 8, 8], "seed": 19}, 4),
        Case("ResNet-18 folded by PyTorch's fuser",
             {"model": "resnet18_bnstats", "input": [2, 3, 32, 32], "seed": 20, "fold": True}, 4),
    ),
    '5.4': (
        Case("an all-zero reference", {"seed": 21, "kind": "zero_reference"}, 4),
        Case("float16 values near 65504", {"seed": 22, "kind": "float16_extremes"}, 4),
    ),
    '5.5': (Case("course net with a shared conv output, 8x3x32x32",
                {"model": "tiny_shared", "input": [8, 3, 32, 32], "seed": 5}, 10),),
    '5.6': (
        Case("k5 s1 p2, count_include_pad=False",
             {"pool": {"kernel_size": 5, "stride": 1, "padding": 2, "count_include_pad": False},
              "channels": 6}, 3),
        Case("k2 s2 p0, count_include_pad=False",
             {"pool": {"kernel_size": 2, "stride": 2, "padding": 0, "count_include_pad": False},
              "channels": 5}, 3),
        Case("k3 s2 p0, ceil_mode=True",
             {"pool": {"kernel_size": 3, "stride": 2, "padding": 0, "ceil_mode": True}, "channels": 4}, 3),
        Case("k5 s1 p2, count_include_pad=False, divisor_override=25",
             {"pool": {"kernel_size": 5, "stride": 1, "padding": 2, "count_include_pad": False,
                       "divisor_override": 25}, "channels": 3}, 3),
    ),
    '5.7': (
        Case("one bias missing, stride 2",
             {"first": _conv(in_channels=3, stride=2), "second": _conv(in_channels=5, stride=2, bias=True),
              "seed": 23}, 3),
        Case("padding modes differ",
             {"first": _conv(in_channels=4, bias=True),
              "second": _conv(in_channels=4, bias=True, padding_mode="reflect"), "seed": 24}, 3),
    ),
}
"""Task id -> its hidden cases (``Lab.with_cases``)."""
