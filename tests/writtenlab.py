"""A tiny lab with written questions, for the tests of written answers and their marking.

``lab902`` (``tests/writtenlab_labs/lab902/``): task 902.1 (3 points for its answer, 41, and the written
question 902.Q1 worth 2), task 902.2 (4 points for 42, the written question 902.Q2 worth 1, added in
release 2, and a practice question 902.P worth 0); its rubrics are in its ``rubrics.py``.

``registered(tmp)`` makes it a known lab (as :func:`tinylab.registered` does); ``notebook(...)`` writes a
submission with answers in its answer cells; ``result(...)`` and ``store(...)`` make graded records in
memory, as :mod:`classes` does, so the report side is tested without running a kernel.
"""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import nbformat
import tinylab
from classes import store as store_record
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader.core.results import CheckResult, SubmissionResult, TaskResult, WrittenAnswer
from util import written

FOLDER = Path(__file__).resolve().parent / "writtenlab_labs"
if str(FOLDER) not in sys.path:
    sys.path.append(str(FOLDER))
from lab902.tasks import LAB  # noqa: E402

REFERENCES = {"lab": "lab902", "answers": {"902.1": 41, "902.2": 42}, "cases": {}, "provenance": {}}
Q1, Q2, PRACTICE = (q for task in LAB.tasks for q in task.written)


def registered(folder: Path):
    """lab902 is a known lab while the block runs (references in ``folder``)."""
    return tinylab.registered(folder, LAB, REFERENCES, FOLDER)


def _export(task: str, value: str) -> str:
    return f"from util.answers import write_answer, output_dir\nwrite_answer(output_dir('lab902'), {task!r}, {value})"


def answer_cell(question, text: str | None, *, metadata: bool = True) -> nbformat.NotebookNode:
    """The answer cell as the build makes it, with ``text`` in place of the placeholder (``None``: left as is)."""
    source = written.answer_cell_source(question)
    if text is not None:
        source = source.replace(written.PLACEHOLDER, text)
    cell = new_markdown_cell(source)
    if metadata:
        cell.metadata.update(written.cell_metadata(question))
    return cell


def notebook(q1: str | None = "It is 41 because the task says so.", q2: str | None = "Everything.", *,
             release: int = 2, metadata: bool = True, first: str = "41") -> nbformat.NotebookNode:
    """A lab902 submission of ``release`` with the answers ``q1`` and ``q2`` in their cells (release 1 has no Q2)."""
    cells = [new_markdown_cell("## Task 902.1: First (5 points)\n\nWhy is the answer 41?"),
             new_code_cell(_export("902.1", first)), answer_cell(Q1, q1, metadata=metadata),
             new_markdown_cell("## Task 902.2: Second (5 points)\n\nWhy is the answer 42?"),
             new_code_cell(_export("902.2", "42"))]
    if release >= 2:
        cells.append(answer_cell(Q2, q2, metadata=metadata))
    cells += [new_markdown_cell("#### Next\n\nWhat would you try next?"), answer_cell(PRACTICE, None, metadata=metadata)]
    nb = new_notebook(cells=cells)
    nb.metadata["course"] = {"lab": "lab902", "release": release}
    return nb


def write(nb: nbformat.NotebookNode, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def result(q1: str | None = "It is 41 because the task says so.", q2: str | None = "Everything.", *,
           release: int = 2, auto: tuple[float, float] = (3, 4)) -> SubmissionResult:
    """A graded lab902 result in memory: ``auto`` points for the two answers, the written answers received."""
    tasks = tuple(TaskResult(task.id, task.title, (CheckResult("answer", "passed" if points == task.answer_points
                                                               else "failed", points, task.answer_points,
                                                               "" if points == task.answer_points else "differs"),))
                  for task, points in zip(LAB.as_of(release).tasks, auto))
    answers = [WrittenAnswer("902.Q1", q1 or "", "cell" if q1 is not None else "none")]
    if release >= 2:
        answers.append(WrittenAnswer("902.Q2", q2 or "", "cell" if q2 is not None else "none"))
    answers.append(WrittenAnswer("902.P", "", "cell"))
    return SubmissionResult("lab902.ipynb", "lab902", tasks, 1.0, "completed", (), release, tuple(answers))


def store(out: Path, name: str, res: SubmissionResult, **kwargs) -> Path:
    """Store ``res`` as submission ``name``'s record in the class folder ``out``."""
    return store_record(out, name, res, **kwargs)


@contextlib.contextmanager
def class_of(tmp_path: Path, answers: dict[str, tuple[str | None, str | None]]):
    """A class folder (``tmp_path / "out"``) with one stored lab902 result per name -> (Q1, Q2 answers), lab902
    registered; yields the folder."""
    with registered(tmp_path / "refs"):
        out = tmp_path / "out"
        for name, (q1, q2) in answers.items():
            store(out, name, result(q1, q2), source=tmp_path / "class" / name / "lab902.ipynb")
        yield out
