"""Small building blocks for public checks (``util.contract.Check``), so each lab's checks read as one line.

A check's ``test`` returns ``None`` when the property holds, else a sentence saying what it found.
These helpers return exactly that, so checks compose with :func:`first`::

    lambda a: first(equal(a["total"], a["trainable"] + a["non_trainable"], "total"),
                    at_least(a["non_trainable"], 1, "non_trainable"))
"""
from __future__ import annotations

from typing import Any, Iterable


def _show(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _difference(found: Any, expected: Any, where: str) -> tuple[str, Any, Any] | None:
    """The first place where ``found`` and ``expected`` differ: (path, found there, expected there)."""
    if isinstance(expected, dict) and isinstance(found, dict) and list(found) == list(expected):
        return next((d for k in expected if (d := _difference(found[k], expected[k], f"{where}[{k!r}]"))), None)
    if isinstance(expected, list) and isinstance(found, list) and len(found) == len(expected):
        return next((d for i, (f, e) in enumerate(zip(found, expected))
                     if (d := _difference(f, e, f"{where}[{i}]"))), None)
    if found == expected and isinstance(found, bool) == isinstance(expected, bool):
        return None
    return where, found, expected


def equal(found: Any, expected: Any, what: str) -> str | None:
    """``None`` if ``found == expected``, else ``"<what>[where] is <found>; expected <expected>"``.

    Dicts and lists are compared deeply; the message names the first place that differs.
    """
    difference = _difference(found, expected, what)
    if difference is None:
        return None
    where, found, expected = difference
    return f"{where} is {_show(found)}; expected {_show(expected)}"


def at_least(found: Any, bound: Any, what: str) -> str | None:
    """``None`` if ``found >= bound``."""
    return None if found >= bound else f"{what} is {_show(found)}; expected at least {_show(bound)}"


def is_int(found: Any, what: str) -> str | None:
    """``None`` if ``found`` is an int (not a float, not a bool): counts and byte sizes are integers."""
    if isinstance(found, int) and not isinstance(found, bool):
        return None
    return f"{what} is a {type(found).__name__} ({_show(found)}); counts and sizes are ints"


def has_keys(found: Any, keys: Iterable[str], what: str = "the answer") -> str | None:
    """``None`` if ``found`` is a dict with exactly ``keys``."""
    keys = list(keys)
    if not isinstance(found, dict):
        return f"{what} is a {type(found).__name__}; expected a dict with keys {', '.join(keys)}"
    missing = [k for k in keys if k not in found]
    extra = [k for k in found if k not in keys]
    if missing or extra:
        return (f"{what} has keys {', '.join(map(str, found))}; expected {', '.join(keys)}"
                + (f" (missing: {', '.join(missing)})" if missing else ""))
    return None


def first(*results: str | None) -> str | None:
    """The first failure among ``results``, or ``None`` if all passed."""
    return next((r for r in results if r is not None), None)


def each(items: Iterable[Any], test, what: str) -> str | None:
    """The first failure of ``test(item)`` over ``items``, prefixed with the item's position."""
    for i, item in enumerate(items):
        found = test(item)
        if found is not None:
            return f"{what}[{i}]: {found}"
    return None
