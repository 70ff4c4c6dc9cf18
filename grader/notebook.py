"""Reading a course notebook's structure: which task each cell belongs to, which lab it is.

A task section starts at a markdown cell whose first line is ``## Task 1.4: <title> (<points> points)``
and runs until the next such heading. The build uses this to name the task in a stub; the grader
uses it to say which task a failing cell belonged to.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat

from grader import REPO

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


def solution_namespace(lab_name: str, task_ids: tuple[str, ...] | list[str] = ()) -> dict:
    """Run part of a lab's *solution* notebook in this process and return its namespace.

    Executes, in a fresh namespace, the code cells before the first task heading (imports,
    ``setup()``) and the code cells under each task in ``task_ids``, in notebook order, with the
    solution regions kept. For benchmarks and tests that need the reference implementation of a
    function, e.g.::

        tiled = solution_namespace("labN", ("N.1", "N.2"))["tiled_gemm_model"]   # a function of task N.2

    Answers the cells export with ``submit`` go to a throw-away folder, not ``./outputs``; what
    they print is not shown. IPython magics are not supported (the course notebooks use none).
    A task id the notebook has no heading for raises ``KeyError``.
    """
    import contextlib
    import io
    import os
    import tempfile

    from grader.author.markers import remove_markers
    from util.answers import OUTPUT_DIR_ENV
    from util.labs import get_lab

    lab = get_lab(lab_name)
    path = REPO / "solutions" / lab.notebook
    nb = read(path)
    wanted = set(task_ids)
    known = {found[0] for found in headings(nb).values()}
    if wanted - known:
        raise KeyError(f"solutions/{lab.notebook} has no task {', '.join(sorted(wanted - known))}; "
                       f"its tasks are {', '.join(sorted(known))}")
    namespace: dict = {"__name__": f"solution_{lab_name}"}
    previous = os.environ.get(OUTPUT_DIR_ENV)
    with tempfile.TemporaryDirectory(prefix=f"solution-{lab_name}-") as scratch:
        os.environ[OUTPUT_DIR_ENV] = scratch
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                for index, (cell, task) in enumerate(zip(nb.cells, cell_tasks(nb))):
                    if cell.cell_type == "code" and (task is None or task in wanted):
                        source = remove_markers(cell.source, f"{lab.notebook} cell {index}")
                        exec(compile(source, f"<{lab.notebook} cell {index}>", "exec"), namespace)
        finally:
            if previous is None:
                os.environ.pop(OUTPUT_DIR_ENV, None)
            else:
                os.environ[OUTPUT_DIR_ENV] = previous
    return namespace
