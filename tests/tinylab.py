"""A tiny lab for grader tests: two one-line tasks, so each graded kernel takes about a second.

The lab is a folder, ``tests/tinylab_labs/lab900/``, as a course lab is. ``registered(tmp)`` adds it to
the registry (``$COURSE_LAB_DIRS``) and writes its references into ``tmp`` (``$COURSE_REFERENCE_DIR``)
for the duration of a ``with`` block: spawned grading workers and sandboxed kernels inherit both, so
it grades with any ``jobs``. 900.1 expects 41, 900.2 expects 42.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader.judge.references import REFERENCE_ENV
from util import labs

FOLDER = Path(__file__).resolve().parent / "tinylab_labs"
"""Holds the ``lab900`` package; added to ``$COURSE_LAB_DIRS`` while the lab is registered."""
if str(FOLDER) not in sys.path:
    sys.path.append(str(FOLDER))
from lab900.tasks import LAB  # noqa: E402  (the folder is importable from here on)

REFERENCES = {"lab": "lab900", "answers": {"900.1": 41, "900.2": 42}, "cases": {}, "provenance": {}}


def export(task: str, value: str) -> str:
    """Code that exports ``value`` (Python source) as task ``task``'s answer."""
    return f"from util.answers import write_answer, output_dir\nwrite_answer(output_dir('lab900'), {task!r}, {value})"


GOOD_1, GOOD_2 = export("900.1", "41"), export("900.2", "42")


def notebook(*cells: str | tuple[str, str], lab: str = "lab900") -> nbformat.NotebookNode:
    """A lab900 notebook: strings are code cells, ``("md", text)`` markdown cells.

    The usual layout is ``heading 900.1, export 900.1, heading 900.2, <code under test>, export 900.2``.
    """
    nb = new_notebook(cells=[new_markdown_cell(c[1]) if isinstance(c, tuple) else new_code_cell(c) for c in cells])
    nb.metadata["course"] = {"lab": lab}
    return nb


def standard(code: str, *, before_export: bool = True) -> nbformat.NotebookNode:
    """Task 900.1 exported first; then ``code`` in task 900.2's section, in the same cell as 900.2's export
    (``before_export``) or in its own cell before it."""
    second = [code + "\n" + GOOD_2] if before_export else [code, GOOD_2]
    return notebook(("md", "## Task 900.1: First (5 points)"), GOOD_1,
                    ("md", "## Task 900.2: Second (5 points)"), *second)


def write(nb: nbformat.NotebookNode, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


@contextlib.contextmanager
def registered(folder: Path, lab=LAB, references: dict = REFERENCES, lab_dir: Path = FOLDER):
    """``lab`` (default ``lab900``, whose package is in ``lab_dir``) is a known lab, in this process,
    its workers and its kernels, with ``references`` in ``folder``, while the block runs."""
    if labs.LABS.get(lab.name, lab) is not lab:
        raise labs.LabClash(f"{lab.name} (in {lab_dir}) would shadow the course's {lab.name}: number test labs from 900")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{lab.name}.json").write_text(json.dumps(references))
    with pytest.MonkeyPatch.context() as patch:
        dirs = [d for d in os.environ.get(labs.LAB_DIRS_ENV, "").split(os.pathsep) if d] + [str(lab_dir)]
        patch.setenv(labs.LAB_DIRS_ENV, os.pathsep.join(dirs))
        patch.setenv(REFERENCE_ENV, str(folder))
        patch.setitem(labs.LABS, lab.name, lab)
        patch.setitem(labs.PACKAGES, lab.name, lab.name)
        yield lab
