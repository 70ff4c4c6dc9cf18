"""A tiny lab for grader tests: two one-line tasks, so each graded kernel takes about a second.

``registered(tmp)`` declares it (as ``lab9``) and writes its references for the duration of a
``with`` block, in this process only: grade it with ``jobs=1`` (spawned workers would not know it).
Its notebooks export with ``util.answers.write_answer`` rather than ``submit`` (the kernel does not
know the lab either); 9.1 expects 41, 9.2 expects 42.
"""
from __future__ import annotations

import contextlib
import json
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
import pytest

from grader import references
from util import tasks
from util.contract import Lab, Task

LAB = Lab(name="lab9", title="Grader test lab", notebook="lab9_tiny.ipynb", tasks=(
    Task(id="9.1", title="First", points=5, answer="the int 41"),
    Task(id="9.2", title="Second", points=5, answer="the int 42"),
))
REFERENCES = {"lab": "lab9", "answers": {"9.1": 41, "9.2": 42}, "cases": {}, "provenance": {}}


def export(task: str, value: str) -> str:
    """Code that exports ``value`` (Python source) as task ``task``'s answer."""
    return f"from util.answers import write_answer, output_dir\nwrite_answer(output_dir('lab9'), {task!r}, {value})"


GOOD_1, GOOD_2 = export("9.1", "41"), export("9.2", "42")


def notebook(*cells: str | tuple[str, str], lab: str = "lab9") -> nbformat.NotebookNode:
    """A lab9 notebook: strings are code cells, ``("md", text)`` markdown cells.

    The usual layout is ``heading 9.1, export 9.1, heading 9.2, <code under test>, export 9.2``.
    """
    nb = new_notebook(cells=[new_markdown_cell(c[1]) if isinstance(c, tuple) else new_code_cell(c) for c in cells])
    nb.metadata["course"] = {"lab": lab}
    return nb


def standard(code: str, *, before_export: bool = True) -> nbformat.NotebookNode:
    """Task 9.1 exported first; then ``code`` in task 9.2's section, in the same cell as 9.2's export
    (``before_export``) or in its own cell before it."""
    second = [code + "\n" + GOOD_2] if before_export else [code, GOOD_2]
    return notebook(("md", "## Task 9.1: First (5 points)"), GOOD_1,
                    ("md", "## Task 9.2: Second (5 points)"), *second)


def write(nb: nbformat.NotebookNode, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


@contextlib.contextmanager
def registered(folder: Path):
    """``lab9`` is a known lab with references in ``folder`` while the block runs."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lab9.json").write_text(json.dumps(REFERENCES))
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(tasks.LABS, LAB.name, LAB)
        patch.setattr(references, "REFERENCE_DIR", folder)
        yield LAB
