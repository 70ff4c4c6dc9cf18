"""Lab 2's hidden cases: the inputs the grader runs the student's functions on, which the notebook never shows.

Grader-only (``util.labs.GRADER_ONLY``): never in the students' copy, the student image or a graded kernel,
which receives each case's input only when the grader runs it (``util.hidden``). ``tasks.py`` states what
each task's cases are worth (``Task.hidden_points``); the registry attaches these to it (``Lab.with_cases``).
"""
from __future__ import annotations

from util.contract import Case
from util.labs.lab2.tasks import TINY

RESNET18 = {"model": "resnet18", "input_shape": [1, 3, 224, 224]}

RESNET18_NODES = ["/conv1/Conv", "/bn1/BatchNormalization", "/maxpool/MaxPool",
                  "/layer1/layer1.0/Add", "/layer2/layer2.0/downsample/downsample.0/Conv",
                  "/Flatten", "/fc/Gemm"]


TINY_NODES = ["const_pads", "pad", "shape", "const_lead_axes", "gather", "const_minus_one", "concat",
              "reshape", "matmul", "const_six", "clip", "add", "leaky_relu"]


CASES = {
    '2.1': (
        Case("resnet18", RESNET18, 3),
        Case(TINY, {"model": TINY}, 3),
    ),
    '2.2': (
        Case("resnet18 nodes", {**RESNET18, "nodes": RESNET18_NODES}, 10),
        Case("tiny_shape_graph nodes", {"model": TINY, "nodes": TINY_NODES}, 10),
    ),
    '2.3': (
        Case("resnet18", RESNET18, 8),
        Case(TINY, {"model": TINY}, 8),
    ),
    '2.4': (
        Case("resnet18", RESNET18, 10),
        Case(TINY, {"model": TINY}, 10),
    ),
    '2.5': (
        Case("series with a tie", {"labels": ["a", "b", "c", "d", "e"], "values": [3, 9, 2, 9, 0],
                                   "title": "tie: the first maximum is the peak"}, 2),
        Case("one node", {"labels": ["only"], "values": [1048576], "title": "a single step"}, 2),
    ),
}
"""Task id -> its hidden cases (``Lab.with_cases``)."""
