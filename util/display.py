"""Readable, titled result blocks (the handout's ``print_hw_result`` idea).

A block is a title line with the task id, then indented lines: ``key  value`` pairs for dicts of
scalars, a tabulate table for lists of rows or dicts of rows. Integers get thousands separators; lists of
integers read as lists, and as ``1x3x224x224`` only under a key that names a shape (:func:`fmt`).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tabulate import tabulate

INDENT = "    "
MAX_ROWS = 40
"""Tables longer than this show their head and tail; the exported answer is always complete."""


def is_shape_key(key: Any) -> bool:
    """Whether an answer's key names a shape (``shape``, ``output_shape``, ``dims``...): its integers read
    ``1x3x224x224``; every other list of integers reads as the list it is."""
    name = str(key).lower()
    return "shape" in name or name == "dims" or name.endswith("_dims")


def fmt(value: Any, key: Any = "") -> str:
    """One value as text: ``6,624,904`` for ints, 4 significant digits for floats, ``[334, 333, 333]`` for a list of
    integers (never ``334x333x333``, which reads as a product), ``1x3x224x224`` where ``key`` names a shape."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        if value and is_shape_key(key):
            return "x".join(str(v) for v in value)
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def _is_rows(value: Any) -> bool:
    return (isinstance(value, Sequence) and not isinstance(value, str) and len(value) > 0
            and all(isinstance(row, Mapping) for row in value))


def _table(rows: list[Mapping[str, Any]], key_header: str | None = None) -> list[str]:
    shown = rows if len(rows) <= MAX_ROWS else rows[: MAX_ROWS // 2] + rows[-MAX_ROWS // 2:]
    headers = list(dict.fromkeys(k for row in shown for k in row))
    body = [[fmt(row.get(h, ""), h) for h in headers] for row in shown]
    if len(shown) < len(rows):
        body.insert(MAX_ROWS // 2, ["..."] * len(headers))
    lines = tabulate(body, headers=headers, disable_numparse=True,
                     colalign=["left"] + ["right"] * (len(headers) - 1)).splitlines()
    if len(shown) < len(rows):
        lines.append(f"({len(rows)} rows; {len(rows) - len(shown)} not shown)")
    return lines


def render_lines(value: Any) -> list[str]:
    """The body of a block, unindented."""
    if _is_rows(value):
        return _table(list(value))
    if isinstance(value, Mapping):
        if value and all(isinstance(v, Mapping) and v and not any(isinstance(x, (Mapping, list))
                                                               for x in v.values())
                         for v in value.values()):
            return _table([{"": k, **v} for k, v in value.items()])
        lines: list[str] = []
        scalars = {k: fmt(v, k) for k, v in value.items() if not (isinstance(v, Mapping) or _is_rows(v))}
        width = max((len(str(k)) for k in scalars), default=0)
        vwidth = max((len(v) for v in scalars.values()), default=0)
        for key, item in value.items():
            if key in scalars:
                lines.append(f"{str(key):<{width}}  {scalars[key]:>{vwidth}}")
            else:
                lines.append(f"{key}:")
                lines += [INDENT + line for line in render_lines(item)]
        return lines
    return [fmt(value)]


def render_block(task_id: str, title: str, value: Any) -> str:
    """The whole block as a string: a title rule, then the indented body."""
    head = f"── Task {task_id} · {title} "
    rule = head + "─" * max(4, 72 - len(head))
    return "\n".join([rule] + [INDENT + line for line in render_lines(value)])


def print_hw_result(task_id: str, title: str, value: Any) -> None:
    """Print a titled block for one result (used by ``util.submit``; handy on its own too)."""
    print(render_block(task_id, title, value))
