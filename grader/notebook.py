"""Reading a course notebook's structure: which task each cell belongs to, which lab it is.

A task section starts at a markdown cell whose first line is ``## Task 1.4: <title> (<points> points)``
and runs until the next such heading. The build uses this to name the task in a stub; the grader
uses it to say which task a failing cell belonged to.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat

HEADING = re.compile(r"^#{1,6}\s*Task\s+(\d+\.\d+)\s*:\s*(.*?)\s*\((\d+(?:\.\d+)?) points?\)\s*$")
"""``## Task 1.4: MACs (40 points)`` -> id, title, points."""


def read(path: Path) -> nbformat.NotebookNode:
    """Read a notebook, with a clear error for a file that is not one."""
    try:
        return nbformat.read(str(path), as_version=4)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such notebook") from None
    except Exception as exc:  # nbformat raises several kinds for bad JSON
        raise ValueError(f"{path} is not a readable Jupyter notebook ({exc.__class__.__name__}: {exc})") from None


def headings(nb: nbformat.NotebookNode) -> dict[int, tuple[str, str, str]]:
    """Cell index -> (task id, title, points) for every task heading."""
    out = {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and cell.source.strip():
            match = HEADING.match(cell.source.strip().splitlines()[0])
            if match:
                out[index] = match.groups()
    return out


def cell_tasks(nb: nbformat.NotebookNode) -> list[str | None]:
    """For each cell, the id of the task section it sits in (``None`` before the first task)."""
    marks = headings(nb)
    current, out = None, []
    for index in range(len(nb.cells)):
        if index in marks:
            current = marks[index][0]
        out.append(current)
    return out


def lab_name(nb: nbformat.NotebookNode | None, path: Path) -> str | None:
    """The lab a notebook belongs to: its ``course.lab`` metadata, else a ``labN`` file-name prefix."""
    meta = nb.get("metadata", {}).get("course", {}).get("lab") if nb is not None else None
    if meta:
        return str(meta)
    match = re.match(r"(lab\d+)", path.name)
    return match.group(1) if match else None


def strip_outputs(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Clear outputs and execution counts in place (notebooks are committed clean)."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.get("metadata", {}).pop("execution", None)
    return nb


def dumps(nb: nbformat.NotebookNode) -> str:
    """Canonical text of a notebook, so generated files are byte-stable."""
    return nbformat.writes(nb, version=4) + "\n"
