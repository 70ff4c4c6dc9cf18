"""Comparing an answer with its reference, deeply, in the grader's own process.

Integers, strings, booleans, keys and list lengths must match exactly; floats match within the
task's :class:`~util.contract.Tolerance`. Every difference is reported with its path in the answer
(``by_type['Conv2d']``), so feedback can say *where* an answer is wrong even when it must not say
what the right value is.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from util.contract import EXACT, Tolerance


@dataclass(frozen=True)
class Mismatch:
    """One place where the answer differs from the reference."""

    path: str
    """Where, e.g. ``answer['own']['total']``."""
    expected: Any
    """The reference value there (never shown for hidden checks)."""
    actual: Any
    """The student's value there."""
    reason: str
    """``value``, ``type``, ``missing key``, ``unexpected key`` or ``length``."""


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def compare(expected: Any, actual: Any, tolerance: Tolerance = EXACT, path: str = "answer") -> list[Mismatch]:
    """Every difference between ``expected`` and ``actual`` (empty when they match)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [Mismatch(path, expected, actual, "type")]
        out: list[Mismatch] = []
        for key in expected:
            if key not in actual:
                out.append(Mismatch(f"{path}[{key!r}]", expected[key], None, "missing key"))
            else:
                out += compare(expected[key], actual[key], tolerance, f"{path}[{key!r}]")
        out += [Mismatch(f"{path}[{key!r}]", None, actual[key], "unexpected key")
                for key in actual if key not in expected]
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list):
            return [Mismatch(path, expected, actual, "type")]
        if len(expected) != len(actual):
            return [Mismatch(path, len(expected), len(actual), "length")]
        out = []
        for i, (e, a) in enumerate(zip(expected, actual)):
            out += compare(e, a, tolerance, f"{path}[{i}]")
        return out
    if _is_number(expected):
        if not _is_number(actual):
            return [Mismatch(path, expected, actual, "type")]
        if isinstance(expected, int) and isinstance(actual, int):
            return [] if expected == actual else [Mismatch(path, expected, actual, "value")]
        ok = math.isclose(actual, expected, rel_tol=tolerance.rtol, abs_tol=tolerance.atol) or actual == expected
        return [] if ok else [Mismatch(path, expected, actual, "value")]
    if type(expected) is not type(actual):
        return [Mismatch(path, expected, actual, "type")]
    return [] if expected == actual else [Mismatch(path, expected, actual, "value")]


def _short(value: Any, limit: int = 60) -> str:
    text = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(mismatches: list[Mismatch], tolerance: Tolerance, reveal: bool, limit: int = 4) -> str:
    """Feedback for a failed check: where it differs and, when ``reveal``, expected vs. found."""
    parts = []
    for m in mismatches[:limit]:
        if m.reason == "missing key":
            parts.append(f"{m.path} is missing")
        elif m.reason == "unexpected key":
            parts.append(f"{m.path} is not expected")
        elif m.reason == "length":
            parts.append(f"{m.path} has {m.actual} items" + (f", expected {m.expected}" if reveal else " (wrong length)"))
        elif m.reason == "type":
            parts.append(f"{m.path} is a {type(m.actual).__name__}" + (f", expected a {type(m.expected).__name__}"))
        elif reveal:
            parts.append(f"{m.path}: expected {_short(m.expected)}, found {_short(m.actual)}")
        else:
            parts.append(f"{m.path} differs from the reference")
    more = f"; and {len(mismatches) - limit} more differences" if len(mismatches) > limit else ""
    return "; ".join(parts) + more + f" (compared {tolerance.describe()})"
