"""Solution regions: ``### BEGIN SOLUTION`` ... ``### END SOLUTION`` (the nbgrader convention).

:func:`stub_regions` replaces each region with a stub that raises ``NotImplementedError`` naming the
task, indented like the markers. Unbalanced or nested markers raise :class:`MarkerError` with the
line, so a bad solution notebook fails the build instead of leaking code into the student copy.
"""
from __future__ import annotations

import re

BEGIN = re.compile(r"^(\s*)### BEGIN SOLUTION\s*$")
END = re.compile(r"^(\s*)### END SOLUTION\s*$")
ANY = re.compile(r"###\s*(BEGIN|END)\s+SOLUTION", re.I)


class MarkerError(ValueError):
    """A solution region is unbalanced, nested, or a marker is malformed."""


def stub(indent: str, task_id: str | None, title: str | None) -> list[str]:
    """The lines that replace a solution region."""
    label = f"task {task_id}: {title}" if task_id else "this part"
    return [f"{indent}# YOUR CODE HERE", f"{indent}raise NotImplementedError({('Implement ' + label)!r})"]


def stub_regions(source: str, task_id: str | None, title: str | None, where: str = "cell") -> str:
    """``source`` with every solution region replaced by a stub."""
    out: list[str] = []
    inside = None
    for number, line in enumerate(source.split("\n"), start=1):
        begin, end = BEGIN.match(line), END.match(line)
        if begin:
            if inside is not None:
                raise MarkerError(f"{where}, line {number}: BEGIN SOLUTION inside the region opened at line {inside}")
            inside = number
            out += stub(begin.group(1), task_id, title)
        elif end:
            if inside is None:
                raise MarkerError(f"{where}, line {number}: END SOLUTION without a BEGIN SOLUTION")
            inside = None
        elif ANY.search(line):
            raise MarkerError(f"{where}, line {number}: malformed marker {line.strip()!r}; "
                              "write exactly '### BEGIN SOLUTION' or '### END SOLUTION' on its own line")
        elif inside is None:
            out.append(line)
    if inside is not None:
        raise MarkerError(f"{where}, line {inside}: BEGIN SOLUTION is never closed")
    return "\n".join(out)


def remove_markers(source: str, where: str = "cell") -> str:
    """``source`` with the marker lines dropped and the solution kept (for example submissions)."""
    stub_regions(source, None, None, where)  # validates
    return "\n".join(line for line in source.split("\n") if not (BEGIN.match(line) or END.match(line)))


def has_markers(source: str) -> bool:
    return bool(ANY.search(source))
