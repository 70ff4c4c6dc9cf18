"""Lab 7's hidden cases: the inputs the grader runs the student's functions on, which the notebook never shows.

Grader-only (``util.labs.GRADER_ONLY``): never in the students' copy, the student image or a graded kernel,
which receives each case's input only when the grader runs it (``util.hidden``). ``tasks.py`` states what
each task's cases are worth (``Task.hidden_points``); the registry attaches these to it (``Lab.with_cases``).
"""
from __future__ import annotations

from util.contract import Case

CUSTOM_LISTS = {"target": ["MatMul", "Softmax"], "fp32": ["LayerNormalization", "Relu"],
                "widest": ["Add", "Mul", "Concat"], "follow": ["Shape", "Reshape", "Abs", "Sub"],
                "conditional": [["LpNormalization", "p", [1]]]}
"""Lists unlike the defaults (a hidden case of 7.1): a function that hard-codes the defaults fails it."""


RESNET_EXCLUDED = ["/conv1/Conv", "/fc/Gemm"]


SEARCH = {"rtol": 1e-2, "atol": 1e-3}
"""Task 7.5's tolerance: emulated outputs within ``atol + rtol * |float32 output|`` of the float32 ones."""


FP16_PARAMS_CASES = (
    Case("mixer, parameters in float16", {"model": "mixer", "lists": "default", "fp16_params": True}, 3),
    Case("ResNet-18 BN folded, parameters in float16", {"model": "resnet18_folded", "lists": "default",
                                                        "fp16_params": True}, 3),
)
"""Task 7.3's hidden cases (the same in both releases)."""


CASES = {
    '7.1': (
        Case("mixer, default lists", {"model": "mixer", "lists": "default"}, 5),
        Case("mixer, other lists, mm2 excluded", {"model": "mixer", "lists": CUSTOM_LISTS,
                                                  "excluded": ["mm2"]}, 5),
        Case("ResNet-18, conv1 and fc excluded", {"model": "resnet18", "lists": "default",
                                                 "excluded": RESNET_EXCLUDED}, 5),
    ),
    '7.2': (
        Case("mixer", {"model": "mixer", "lists": "default"}, 5),
        Case("frag", {"model": "frag", "lists": "default"}, 5),
        Case("ResNet-18, BN folded", {"model": "resnet18_folded", "lists": "default"}, 5),
        Case("ResNet-18, conv1 and fc excluded", {"model": "resnet18", "lists": "default",
                                                 "excluded": RESNET_EXCLUDED}, 5),
    ),
    '7.3': FP16_PARAMS_CASES,
    '7.4': (
        Case("RMS chain, all float16", {"model": "rms_chain", "all_fp16": True}, 5),
        Case("toy in mixed precision", {"model": "toy_mixed"}, 5),
        Case("ResNet-18, all float16", {"model": "resnet18", "all_fp16": True}, 5),
    ),
    '7.5': (
        Case("RMS chain", {"model": "rms_chain", **SEARCH}, 7),
        Case("gate", {"model": "gate", **SEARCH}, 8),
        Case("ResNet-18", {"model": "resnet18", **SEARCH}, 5),
    ),
}
"""Task id -> its hidden cases (``Lab.with_cases``)."""
