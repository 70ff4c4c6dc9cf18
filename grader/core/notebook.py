"""Reading a course notebook's structure: which task each cell belongs to, which lab it is.

A task section starts at a markdown cell whose first line is ``## Task 1.4: <title> (<points> points)``
and runs until the next such heading. The build uses this to name the task in a stub; the grader
uses it to say which task a failing cell belonged to.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat

from grader.core.limits import format_size
from grader.core.untrusted import Refused, loads, read_bounded

MAX_NOTEBOOK_BYTES = 32 << 20
"""Largest notebook file the grader reads (``--max-notebook``): the course's notebooks, with their
figures, are a few MiB; a larger file is refused before it is parsed."""


class NotebookTooLarge(ValueError):
    """A notebook file over the size limit; its message says the size, the limit and what to do."""


HEADING = re.compile(r"^#{1,6}\s*Task\s+(\d+\.\d+)\s*:\s*(.*?)\s*\((\d+(?:\.\d+)?) points?\)\s*$")
"""``## Task 1.4: MACs (40 points)`` -> id, title, points."""


KERNEL_METADATA = {
    "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
    "language_info": {"codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
                      "mimetype": "text/x-python", "name": "python", "nbconvert_exporter": "python",
                      "pygments_lexer": "ipython3", "version": "3.11.7"},
}
"""What JupyterLab writes into a notebook's metadata when the course's kernel starts (ipykernel 7.4 on
Python 3.11.7, the student image's). A student copy that already carries exactly this is not marked
modified just by being opened."""


MAX_NOTEBOOK_DEPTH = 64
"""Deepest JSON nesting read in a notebook (a notebook nests about 6 levels, widget state a few more)."""
_CELL_TYPES = ("code", "markdown", "raw")


def _shape_problem(nb: object) -> str | None:
    """What makes ``nb`` not the notebook shape the grader reads, or ``None`` (sources may still be
    lists of lines, as in the file)."""
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        return "it has no list of cells"
    if not isinstance(nb.get("metadata", {}), dict):
        return "its metadata is not an object"
    for index, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict) or cell.get("cell_type") not in _CELL_TYPES:
            return f"cell {index} is not a code, markdown or raw cell"
        source = cell.get("source")
        text = isinstance(source, str) or (isinstance(source, list) and all(isinstance(s, str) for s in source))
        if not text or not isinstance(cell.get("metadata", {}), dict):
            return f"cell {index} has no text source or its metadata is not an object"
        if cell["cell_type"] == "code" and not isinstance(cell.get("outputs", []), list):
            return f"cell {index}'s outputs are not a list"
    return None


def read(path: Path, max_bytes: int = MAX_NOTEBOOK_BYTES) -> nbformat.NotebookNode:
    """Read a notebook, with a clear error for a file that is not one.

    A file over ``max_bytes`` raises :class:`NotebookTooLarge` before any of it is read.

    Never through a link and never from a FIFO or device (``ValueError``); a file that is not JSON
    is named with the line and column of the error; JSON nested deeper than
    :data:`MAX_NOTEBOOK_DEPTH` or not shaped like a notebook (cells with text sources) is refused.
    """


    name = path.name
    try:
        data = read_bounded(path, max_bytes)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such notebook") from None
    except Refused as exc:
        size = os.lstat(path).st_size if os.path.isfile(path) and not os.path.islink(path) else 0
        if size > max_bytes:
            raise NotebookTooLarge(
                f"{name} is {format_size(size)}, over the {format_size(max_bytes)} a notebook may be: "
                "clear its outputs (Kernel > Restart Kernel and Clear Outputs of All Cells), save, and submit "
                "it again; keep data out of the notebook") from None
        raise ValueError(f"{name} is not a readable Jupyter notebook: {exc}") from None
    try:
        parsed = loads(data, MAX_NOTEBOOK_DEPTH)  # bounded depth; JSON errors with their line and column
        del data
        problem = _shape_problem(parsed) if not isinstance(parsed, dict) or parsed.get("nbformat") == 4 else None
        if problem:
            raise Refused(problem)
        major, minor = nbformat.reader.get_version(parsed)
        nb = nbformat.convert(nbformat.versions[major].to_notebook_json(parsed, minor=minor), 4)
    except Refused as exc:
        raise ValueError(f"{name} is not a valid Jupyter notebook: {exc}") from None
    except Exception as exc:  # nbformat raises several kinds for JSON that is not a notebook
        raise ValueError(f"{name} is not a readable Jupyter notebook ({exc.__class__.__name__}: "
                         f"{str(exc)[:300]})") from None
    problem = _shape_problem(nb)
    if problem:
        raise ValueError(f"{name} is not a valid Jupyter notebook: {problem}")
    return nb


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


def metadata_lab(nb: object) -> str | None:
    """The notebook's ``metadata.course.lab``, when it has that shape (a short string), else ``None``."""
    meta = nb.get("metadata") if isinstance(nb, dict) else None
    course = meta.get("course") if isinstance(meta, dict) else None
    lab = course.get("lab") if isinstance(course, dict) else None
    return lab if isinstance(lab, str) and 0 < len(lab) <= 64 else None


def metadata_release(nb: object) -> int | None:
    """The notebook's ``metadata.course.release`` (the lab release the build made it from), when it is a
    whole number from 1 to 999 (it is the student's file: anything else is ignored), else ``None``."""
    meta = nb.get("metadata") if isinstance(nb, dict) else None
    course = meta.get("course") if isinstance(meta, dict) else None
    release = course.get("release") if isinstance(course, dict) else None
    return release if isinstance(release, int) and not isinstance(release, bool) and 1 <= release <= 999 else None


def lab_name(nb: nbformat.NotebookNode | None, path: Path) -> str | None:
    """The lab a notebook belongs to: its ``course.lab`` metadata, else a ``labN`` file-name prefix."""
    meta = metadata_lab(nb)
    if meta:
        return meta
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
