"""Lab 13's hidden cases: the inputs the grader runs the student's functions on, which the notebook never shows.

Grader-only (``util.labs.GRADER_ONLY``): never in the students' copy, the student image or a graded kernel,
which receives each case's input only when the grader runs it (``util.hidden``). ``tasks.py`` states what
each task's cases are worth (``Task.hidden_points``); the registry attaches these to it (``Lab.with_cases``).

A parallel case names a run (world size, shapes, a seed) and what it decides (``check``: ``result``,
``buckets``, ``bytes`` or, for 13.8, ``overlap``); the judge draws the run's inputs itself from the grading secret
(:mod:`util.judging.secret`) and the run (the seed only tells runs of the same shape apart), and the cases of
one run share it. Any seed makes a valid run (``seeds=("seed",)``), and so does any secret.
"""
from __future__ import annotations

from typing import Any

from util.contract import Case


def _ring(world: int, n: int, values: str, seed: int) -> dict[str, Any]:
    return {"run": "ring", "world": world, "n": n, "values": values, "seed": seed}


def _ddp(world: int, widths: list[int], rows: int, cap_bytes: int, seed: int) -> dict[str, Any]:
    return {"run": "ddp", "world": world, "widths": widths, "rows": rows, "cap_bytes": cap_bytes, "seed": seed}


def _overlap(world: int, widths: list[int], rows: int, cap_bytes: int, seed: int) -> dict[str, Any]:
    """13.8's run; its ``overlap`` case is a run of its own on the same inputs, the grader's hold in the model."""
    return {"run": "overlap", "world": world, "widths": widths, "rows": rows, "cap_bytes": cap_bytes, "seed": seed}


def _tp(world: int, batch: int, d: int, h: int, seed: int) -> dict[str, Any]:
    return {"run": "tp", "world": world, "batch": batch, "d": d, "h": h, "seed": seed}


def _checked(run: dict[str, Any], what: str, **checks: float) -> tuple[Case, ...]:
    """One case per thing a run decides: ``result=3, bytes=2`` -> two cases of one run."""
    return tuple(Case(f"{what}: {check}", {**run, "check": check}, worth, seeds=("seed",))
                 for check, worth in checks.items())


_A, _B = _ddp(2, [12, 20, 7], 16, 200, 31), _ddp(4, [10, 33, 17, 5], 24, 2_000, 32)
_C, _D = _overlap(2, [16, 24, 12, 6], 20, 300, 51), _overlap(4, [9, 40, 21, 8], 28, 1_500, 52)

CASES = {
    "13.1": (
        *_checked(_ring(2, 1_000, "normal", 11), "2 ranks, 1,000 floats", result=3, bytes=2),
        *_checked(_ring(3, 10, "integer", 12), "3 ranks, 10 integer-valued floats (chunks 4, 3, 3)",
                  result=3, bytes=2),
        *_checked(_ring(4, 4_097, "normal", 13), "4 ranks, 4,097 floats (one chunk longer)", result=3, bytes=2),
    ),
    "13.2": tuple(
        Case(f"{world} ranks, {nbytes:,} bytes", {"nbytes": nbytes, "world": world, "alpha": alpha, "beta": beta}, 1)
        for nbytes, world, alpha, beta in ((1 << 20, 2, 2e-6, 1e-10), (50_000, 3, 1e-5, 4e-11),
                                           (123_456, 4, 3e-6, 1e-9), (10, 5, 1e-5, 1e-10), (1 << 30, 6, 1e-5, 2e-11),
                                           (64_000, 16, 5e-6, 8e-11), (1 << 26, 64, 2e-5, 5e-11))
    ),
    "13.3": (
        *_checked(_A, "2 ranks, MLP 12-20-7, batch 16, cap 200 bytes", result=3, buckets=2, bytes=2),
        *_checked(_B, "4 ranks, MLP 10-33-17-5, batch 24, cap 2,000 bytes", result=4, buckets=2, bytes=2),
    ),
    "13.4": tuple(
        Case(f"{numel:,} parameters, {world} ranks, stage {stage}", {"numel": numel, "world": world, "stage": stage}, 1)
        for numel, world, stage in ((19_258, 3, 1), (19_258, 4, 2), (11_689_512, 8, 3), (1_001, 3, 0), (546, 5, 2),
                                    (123_457, 6, 3), (10, 4, 2))
    ),
    "13.5": _checked({"run": "adam", "world": 3, "n": 1_001, "step": 3, "lr": 0.01, "seed": 21},
                     "3 ranks, 1,001 parameters, step 3", result=5, bytes=2),
    "13.6": (
        *_checked(_tp(2, 8, 16, 64, 41), "2 ranks, batch 8, d 16, h 64", result=3, bytes=2),
        *_checked(_tp(4, 5, 12, 40, 42), "4 ranks, batch 5, d 12, h 40", result=3, bytes=2),
    ),
    "13.8": (
        *_checked(_C, "2 ranks, MLP 16-24-12-6, batch 20, cap 300 bytes", result=1, buckets=1, bytes=1, overlap=2),
        *_checked(_D, "4 ranks, MLP 9-40-21-8, batch 28, cap 1,500 bytes", result=1, buckets=1, bytes=1, overlap=2),
    ),
    "13.9": tuple(
        Case(f"{numel:,} parameters, {world} ranks, stage {stage}", {"numel": numel, "world": world, "stage": stage}, 1)
        for numel, world, stage in ((70_001, 6, 0), (10_007, 4, 1), (11_689_513, 7, 2), (546, 5, 3))
    ),
    "13.7": tuple(
        Case(f"{kind}, {stages} stages, {micro} micro-batches, at most {limit} held",
             {"kind": kind, "stages": stages, "microbatches": micro, "limit": limit}, 2)
        for kind, stages, micro, limit in (("gpipe", 4, 8, 4), ("gpipe", 3, 7, 3), ("1f1b", 4, 8, 4), ("1f1b", 5, 3, 5),
                                           ("1f1b", 3, 10, 3))
    ),
}
"""Task id -> its hidden cases (``Lab.with_cases``)."""
