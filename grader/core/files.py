"""Writing the grader's result files: atomically, readable by the group and others as the umask allows.

A reader (a spreadsheet, a browser, a grader run at the same time) sees the old file or the new
one, never half of one. Every file gets the mode an ordinary ``open()`` would give it (0644 under
the usual umask 022), the same for every result file: a temporary file's 0600 is never kept.
CSV cells go through :func:`grader.core.safe_text.csv_cell`: numbers stay numbers, text that a
spreadsheet would run as a formula is neutralised.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Iterable

from grader.core import safe_text
from util.atomic import write_atomic


def write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (:func:`util.atomic.write_atomic`); returns ``path``."""
    return write_atomic(path, data)


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` as UTF-8 (lone surrogates escaped rather than raising)."""
    return write_bytes(path, text.encode("utf-8", errors="backslashreplace"))


def csv_text(headers: list[str], rows: Iterable[Iterable[Any]], *, quote_all: bool = False) -> str:
    """A CSV document; every cell made safe for a spreadsheet (:func:`grader.core.safe_text.csv_cell`);
    ``quote_all``: every field in quotes, numbers too."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_ALL if quote_all else csv.QUOTE_MINIMAL)
    writer.writerow([safe_text.csv_cell(h) for h in headers])
    writer.writerows([safe_text.csv_cell(cell) for cell in row] for row in rows)
    return buffer.getvalue()


def write_csv(path: Path, headers: list[str], rows: Iterable[Iterable[Any]], *, quote_all: bool = False) -> Path:
    """Write a CSV file atomically (see :func:`csv_text`); returns ``path``."""
    return write_text(path, csv_text(headers, rows, quote_all=quote_all))
