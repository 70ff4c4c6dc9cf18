"""Reading a file a student controls: never through a link, within a size, JSON with bounded nesting.

Used for the notebook itself (:func:`grader.core.notebook.read`) and for what its kernel exported
(:mod:`grader.judge.exports`). Every function raises :class:`Refused` (a ``ValueError`` whose message
says why, in a student's words) or returns; nothing a file holds makes it raise anything else.
"""
from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

from grader.core.limits import format_size
from util.answers import MAX_DEPTH as ANSWER_DEPTH

MAX_DEPTH = ANSWER_DEPTH + 3
"""Deepest nesting of lists and objects read by default: an answer as deep as ``util.answers`` exports
(:data:`util.answers.MAX_DEPTH`, 32) inside its record (task -> case -> record -> value)."""

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = bytes(range(256)).translate(None, b"[]{}")


class Refused(ValueError):
    """A file that is not read, with the reason in a student's words."""


def nesting(data: bytes) -> int:
    """Deepest nesting of ``[`` and ``{`` in JSON text ``data`` (brackets inside strings ignored).

    Linear and in C (regular expressions, numpy): no recursion, whatever ``data`` holds.
    """
    import numpy as np

    brackets = _STRING.sub(b"", data).translate(None, _BRACKETS)
    if not brackets:
        return 0
    codes = np.frombuffer(brackets, dtype=np.uint8)
    opening = ((codes == ord("[")) | (codes == ord("{"))).astype(np.int32)
    return int(np.cumsum(2 * opening - 1).max())


def loads(data: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` that refuses (:class:`Refused`) text nested deeper than ``max_depth``, or that
    is not JSON (with its line and column), and never raises anything else."""
    depth = nesting(data)
    if depth > max_depth:
        raise Refused(f"it is nested {depth:,} levels deep; the grader reads at most {max_depth}")
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise Refused(f"it is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # e.g. an integer of 5,000 digits
        raise Refused(f"it is not readable JSON ({type(exc).__name__}: {str(exc)[:200]})") from None


def read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of the plain file ``path`` (never through a link), or :class:`Refused` when it is
    a link, not a plain file, or over ``limit`` bytes: then nothing is read. A path that does not
    exist raises ``FileNotFoundError``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise Refused("it is a link, which the grader does not follow" if os.path.islink(path)
                      else f"it could not be opened ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Refused("it is not a plain file")
        if info.st_size > limit:
            size = format_size(info.st_size)
            size = f"{info.st_size:,} bytes" if size == format_size(limit) else size
            raise Refused(f"it is {size}; the grader reads at most {format_size(limit)}")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:  # it grew while being read
            raise Refused(f"it is over {format_size(limit)}; the grader reads at most {format_size(limit)}")
        return data
    finally:
        os.close(fd)
