"""Upload files for learning-management systems, one format per module of this package (a plug-in).

A format is a module here that defines ``FORMAT = Format(...)``: its name on the command line
(``python -m grader export --format NAME``), a one-line description for ``--help``, whether it
needs a roster, and ``layout(table) -> (headers, rows)``, which lays out the grades the export has
gathered (:class:`grader.report.lms.table.Table`). :func:`formats` finds them: adding an LMS is
one new module (and its test), as nbgrader's export plugins are; the command line's choices and
help come from here.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from grader.report.lms.table import Table

_NOT_FORMATS = {"table"}
"""Modules of this package that hold no format."""


@dataclass(frozen=True)
class Format:
    """One LMS upload layout."""

    name: str
    """``--format NAME``; the file is ``export_<name>.csv``."""
    description: str
    """For ``--help``: the LMS and where its import is, e.g. ``Canvas (Grades > Import)``."""
    layout: Callable[[Table], tuple[list[str], list[list]]]
    """The header row and the data rows for the grades gathered in the table."""
    needs_roster: bool = True
    """Whether the LMS must be told which student each row is (every LMS does; plain CSV does not)."""
    quote_all: bool = False
    """Quote every field, not only those that need it (Blackboard requires it)."""


@lru_cache(maxsize=None)
def formats() -> dict[str, Format]:
    """Every format of this package, by name, in name order."""
    found: dict[str, Format] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name in _NOT_FORMATS or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        fmt = getattr(module, "FORMAT", None)
        if not isinstance(fmt, Format):
            raise TypeError(f"{module.__name__} defines no FORMAT = Format(...)")
        if fmt.name in found:
            raise ValueError(f"two LMS formats are called {fmt.name!r}")
        found[fmt.name] = fmt
    return dict(sorted(found.items()))


def get(name: str) -> Format:
    """The format called ``name``, or a ``KeyError`` naming those there are."""
    try:
        return formats()[name]
    except KeyError:
        raise KeyError(f"no LMS format {name!r}; the formats are {', '.join(formats())}") from None


def help_text() -> str:
    """``canvas``: ..., one clause per format, for the command line's ``--format`` help."""
    return "; ".join(f"{f.name}: {f.description}" for f in formats().values())
