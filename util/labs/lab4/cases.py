"""Lab 4's hidden cases: the inputs the grader runs the student's functions on, which the notebook never shows.

Grader-only (``util.labs.GRADER_ONLY``): never in the students' copy, the student image or a graded kernel,
which receives each case's input only when the grader runs it (``util.hidden``). ``tasks.py`` states what
each task's cases are worth (``Task.hidden_points``); the registry attaches these to it (``Lab.with_cases``).
"""
from __future__ import annotations

from util.contract import Case

RESNET18 = {"model": "resnet18", "input_shape": [1, 3, 128, 128]}
MOBILENET_V2 = {"model": "mobilenet_v2", "input_shape": [1, 3, 160, 160]}
TINY = {"model": "tiny_addmm", "input_shape": [2, 4, 16, 16]}
TIED = {"model": "tiny_tied", "input_shape": [2, 4, 16, 16]}


def _cpp_cases(points: float) -> tuple[Case, ...]:
    return tuple(Case(f"{spec['model']}@{'x'.join(map(str, spec['input_shape']))}", spec, points,
                      since=3 if spec is TIED else 1)
                 for spec in (RESNET18, MOBILENET_V2, TINY, TIED))


CASES = {
    '4.0': (
        Case("resnet18@1x3x64x64", {"model": "resnet18", "input_shape": [1, 3, 64, 64]}, 2),
        Case("tiny_addmm@2x4x16x16", TINY, 2),
    ),
    '4.1': _cpp_cases(3),
    '4.2': _cpp_cases(6),
    '4.3': _cpp_cases(6),
}
"""Task id -> its hidden cases (``Lab.with_cases``)."""
