"""Lab 1's hidden cases: the inputs the grader runs the student's functions on, which the notebook never shows.

Grader-only (``util.labs.GRADER_ONLY``): never in the students' copy, the student image or a graded kernel,
which receives each case's input only when the grader runs it (``util.hidden``). ``tasks.py`` states what
each task's cases are worth (``Task.hidden_points``); the registry attaches these to it (``Lab.with_cases``).
"""
from __future__ import annotations

from util.contract import Case

CASES = {
    '1.1': (
        Case("resnet18 with layer1 frozen", {"model": "resnet18", "freeze": ["conv1", "bn1", "layer1"]}, 2),
        Case("mobilenet_v2", {"model": "mobilenet_v2"}, 2),
        Case("tiny_tied", {"model": "tiny_tied"}, 2, since=2),
    ),
    '1.2': (
        Case("resnet18 float32", {"model": "resnet18"}, 2),
        Case("tiny_grouped with a float16 stem", {"model": "tiny_grouped", "half": ["stem", "bn"]}, 2),
        Case("tiny_tied", {"model": "tiny_tied"}, 2, since=2),
    ),
    '1.3': (
        Case("resnet18@1x3x64x64", {"model": "resnet18", "input_shape": [1, 3, 64, 64]}, 3),
        Case("tiny_grouped@2x4x16x16", {"model": "tiny_grouped", "input_shape": [2, 4, 16, 16]}, 3),
        Case("tiny_tied@2x4x16x16", {"model": "tiny_tied", "input_shape": [2, 4, 16, 16]}, 3, since=2),
    ),
    '1.4': (
        Case("resnet18@1x3x224x224", {"model": "resnet18", "input_shape": [1, 3, 224, 224]}, 6),
        Case("mobilenet_v3_small@1x3x160x160",
             {"model": "mobilenet_v3_small", "input_shape": [1, 3, 160, 160]}, 6),
        Case("squeezenet1_1@1x3x128x128", {"model": "squeezenet1_1", "input_shape": [1, 3, 128, 128]}, 6),
        Case("tiny_grouped@2x4x16x16", {"model": "tiny_grouped", "input_shape": [2, 4, 16, 16]}, 6),
        Case("tiny_tied@2x4x16x16", {"model": "tiny_tied", "input_shape": [2, 4, 16, 16]}, 6, since=2),
    ),
    '1.5': (
        Case("resnet18@1x3x64x64", {"model": "resnet18", "input_shape": [1, 3, 64, 64]}, 6),
        Case("tiny_grouped@2x4x16x16", {"model": "tiny_grouped", "input_shape": [2, 4, 16, 16]}, 6),
        Case("tiny_tied@2x4x16x16", {"model": "tiny_tied", "input_shape": [2, 4, 16, 16]}, 6, since=2),
    ),
}
"""Task id -> its hidden cases (``Lab.with_cases``)."""
