"""Comparing an answer with its reference, deeply, in the grader's own process.

Integers, strings, booleans, keys and list lengths must match exactly; floats match within the
task's :class:`~util.contract.Tolerance`. Every difference is reported with its path in the answer
(``by_type['Conv2d']``), so feedback can say *where* an answer is wrong and *how* (too large by
10% to 50%, a factor of 1.5 to 3 too small, a missing key) without saying what the right value is.

The answer comes from a student's kernel, so the comparison is total: no value (an integer of
400 digits, a string with a lone surrogate, a list of a million items, NaN) makes it raise. It
follows the reference's structure, so its depth is the reference's, whatever the answer's.
"""
from __future__ import annotations

import math
import reprlib
from dataclasses import dataclass
from typing import Any

from util.contract import EXACT, Tolerance

MAX_MISMATCHES = 200
"""Differences recorded per comparison; the rest are only counted (:func:`describe` says how many)."""


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


class Mismatches(list):
    """The recorded differences (at most :data:`MAX_MISMATCHES`), and how many there were in all."""

    total: int = 0


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _close(expected: int | float, actual: int | float, tolerance: Tolerance) -> bool:
    if isinstance(expected, int) and isinstance(actual, int):
        return expected == actual
    if actual == expected:  # exact, for any int and float (no conversion, no overflow)
        return True
    try:
        return math.isclose(float(actual), float(expected), rel_tol=tolerance.rtol, abs_tol=tolerance.atol)
    except OverflowError:  # an integer too large for a float is far from any reference
        return False


def _key(key: Any) -> str:
    text = str(key)
    return repr(text if len(text) <= 60 else text[:57] + "...")


def compare(expected: Any, actual: Any, tolerance: Tolerance = EXACT, path: str = "answer") -> Mismatches:
    """Every difference between ``expected`` and ``actual`` (empty when they match); never raises."""
    found = Mismatches()

    def add(mismatch: Mismatch) -> None:
        found.total += 1
        if len(found) < MAX_MISMATCHES:
            found.append(mismatch)

    def walk(expected: Any, actual: Any, path: str) -> None:
        if isinstance(expected, dict):
            if not isinstance(actual, dict):
                return add(Mismatch(path, expected, actual, "type"))
            for key in expected:
                if key not in actual:
                    add(Mismatch(f"{path}[{_key(key)}]", expected[key], None, "missing key"))
                else:
                    walk(expected[key], actual[key], f"{path}[{_key(key)}]")
            for key in actual:
                if key not in expected:
                    add(Mismatch(f"{path}[{_key(key)}]", None, actual[key], "unexpected key"))
            return None
        if isinstance(expected, list):
            if not isinstance(actual, list):
                return add(Mismatch(path, expected, actual, "type"))
            if len(expected) != len(actual):
                return add(Mismatch(path, len(expected), len(actual), "length"))
            for i, (e, a) in enumerate(zip(expected, actual)):
                walk(e, a, f"{path}[{i}]")
            return None
        if _is_number(expected):
            if not _is_number(actual):
                return add(Mismatch(path, expected, actual, "type"))
            return None if _close(expected, actual, tolerance) else add(Mismatch(path, expected, actual, "value"))
        if type(expected) is not type(actual):
            return add(Mismatch(path, expected, actual, "type"))
        return None if expected == actual else add(Mismatch(path, expected, actual, "value"))

    walk(expected, actual, path)
    return found


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxstring, _REPR.maxother = 2, 4, 4, 40, 40


def _short(value: Any, limit: int = 60) -> str:
    """A short, always printable form of any JSON value (an integer of 5,000 digits included)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > 200:
            return f"an integer of {len(str(abs(value))) if value.bit_length() < 14000 else 'over 4,000'} digits"
        text = f"{value:,}"
    else:
        text = _REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


_JSON_TYPES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
               dict: "an object", type(None): "null"}


def _type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), f"a {type(value).__name__}")


def _magnitude(expected: int | float, actual: int | float) -> str:
    """How a number differs, in bands that do not give the expected value away."""
    if isinstance(actual, float) and math.isnan(actual):
        return "is NaN"
    if expected == 0 or actual == 0 or (expected > 0) != (actual > 0):
        if (expected > 0 and actual < 0) or (expected < 0 and actual > 0):
            return "has the wrong sign"
        return "is too large" if actual > expected else "is too small"
    try:
        ratio = abs(math.log10(abs(actual)) - math.log10(abs(expected)))  # log10 takes any int
    except (OverflowError, ValueError):
        ratio = math.inf
    larger = abs(actual) > abs(expected)
    direction = "too large" if larger == (actual > 0) else "too small"
    factor = 10 ** ratio if ratio < 300 else math.inf
    if factor < 1.01:
        return f"is {direction} by less than 1%"
    if factor < 1.1:
        return f"is {direction} by 1% to 10%"
    if factor < 1.5:
        return f"is {direction} by 10% to 50%"
    for low, high in ((1.5, 3), (3, 10), (10, 100), (100, 1000)):
        if factor < high:
            return f"is {direction} by a factor between {low:g} and {high:g}"
    return f"is {direction} by a factor of 1,000 or more"


def _how(m: Mismatch, reveal: bool) -> str:
    if m.reason == "missing key":
        return f"{m.path} is missing"
    if m.reason == "unexpected key":
        return f"{m.path} is not expected"
    if m.reason == "length":
        more = "too many" if m.actual > m.expected else "too few"
        return f"{m.path} has {m.actual:,} items ({more}" + (f"; expected {m.expected:,})" if reveal else ")")
    if m.reason == "type":
        return f"{m.path} is {_type(m.actual)}; expected {_type(m.expected)}"
    if _is_number(m.expected) and _is_number(m.actual):
        how = f"{m.path} {_magnitude(m.expected, m.actual)}"
    else:
        how = f"{m.path} differs from the reference"
    return how + (f": expected {_short(m.expected)}, found {_short(m.actual)}" if reveal else "")


def describe(mismatches: list[Mismatch], tolerance: Tolerance, reveal: bool = False, limit: int = 4) -> str:
    """Feedback for a failed check: where it differs and how (too large, a factor off, a missing key),
    and, only when ``reveal``, the expected and found values."""
    parts = [_how(m, reveal) for m in mismatches[:limit]]
    total = max(getattr(mismatches, "total", 0), len(mismatches))
    more = f"; and {total - limit:,} more differences" if total > limit else ""
    return "; ".join(parts) + more + f" (compared {tolerance.describe()})"
