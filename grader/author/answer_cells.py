"""Answer cells of written questions: checked in the solution, generated in the students' copy.

In ``solutions/``, each written question (:class:`util.contract.Written`) is stated in its task's section
and followed by a Markdown cell headed as the students' answer cell will be (:func:`util.written.heading`,
e.g. ``#### Answer to Q6 (2 points, graded by hand; 20-120 words)``) holding the model answer. The build:

* checks (:func:`problems`) that each question has exactly one such cell, in its task's section, headed as
  declared, after the question's prompt (whitespace aside), and followed by a code cell or a heading (a
  student's extra Markdown cells below an answer cell count as part of the answer, so the course's own
  text must never sit there), and that no answer cell names a question the lab does not ask;
* replaces each in the students' copy (:func:`for_students`) with the generated cell, heading and
  placeholder only, its metadata naming the question: nothing of the model answer is copied;
* keeps the model answer in the example submissions, marking the cell as the students' is
  (:func:`for_examples`), so they are read as a student's would be.
"""
from __future__ import annotations

import nbformat

from grader.core import notebook
from util import written
from util.contract import Lab, Written


def _questions(lab: Lab) -> dict[str, tuple[str, Written]]:
    """Label -> (task id, question) for ``lab``'s written questions."""
    return {q.label: (task.id, q) for task in lab.tasks for q in task.written}


def _flat(text: str) -> str:
    return " ".join(text.split())


def answer_cells(nb: nbformat.NotebookNode) -> dict[int, str]:
    """Cell index -> the label of every Markdown cell headed ``Answer to <label> (...)``."""
    return {index: label for index, cell in enumerate(nb.cells)
            if cell.cell_type == "markdown" and (label := written.heading_label(cell.source)) is not None}


def problems(lab: Lab, nb: nbformat.NotebookNode, where: str) -> list[str]:
    """What is wrong with the answer cells of the solution ``nb`` (see the module's docstring)."""
    found = answer_cells(nb)
    sections = notebook.cell_tasks(nb)
    questions = _questions(lab)
    out = [f"{where}: cell {index} is an answer cell for {label}, which is not a written question of {lab.name}"
           for index, label in found.items() if label not in questions]
    for label, (task_id, question) in questions.items():
        cells = [index for index, each in found.items() if each == label]
        if len(cells) != 1:
            out.append(f"{where}: expected one answer cell '{written.heading(question)}' for {question.id}, "
                       f"found {len(cells)}: put the model answer in one Markdown cell under that heading")
            continue
        index = cells[0]
        first = nb.cells[index].source.strip().split("\n", 1)[0].strip()
        if first != written.heading(question):
            out.append(f"{where}: cell {index} is headed '{first}' but the declaration says "
                       f"'{written.heading(question)}'")
        if sections[index] != task_id:
            out.append(f"{where}: the answer cell of {question.id} is in the section of task {sections[index]}; "
                       f"it belongs under task {task_id}")
        before = " ".join(_flat(c.source) for c, section in zip(nb.cells[:index], sections)
                          if c.cell_type == "markdown" and section == task_id)
        if _flat(question.prompt) not in before:
            out.append(f"{where}: the prompt of {question.id} ({question.prompt[:60]!r}...) is not stated in task "
                       f"{task_id}'s text before its answer cell (Written.prompt must be the handout's words)")
        after = nb.cells[index + 1] if index + 1 < len(nb.cells) else None
        if after is not None and after.cell_type == "markdown" and not after.source.lstrip().startswith("#"):
            out.append(f"{where}: cell {index + 1}, after the answer cell of {question.id}, is Markdown without a "
                       "heading: a student's answer would swallow it; start it with a heading or move it")
    return out


def for_students(lab: Lab, nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` with each answer cell replaced by the generated one (in place; returned)."""
    questions = _questions(lab)
    for index, label in answer_cells(nb).items():
        if label in questions:
            question, cell = questions[label][1], nb.cells[index]
            cell.source = written.answer_cell_source(question)  # the cell keeps its id: the build is byte-stable
            cell.metadata = nbformat.from_dict(written.cell_metadata(question))
            cell.pop("attachments", None)
    return nb


def for_examples(lab: Lab, nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` with each answer cell's metadata naming its question, its model answer kept (in place)."""
    questions = _questions(lab)
    for index, label in answer_cells(nb).items():
        if label in questions:
            nb.cells[index].metadata.setdefault("course", {})[written.METADATA_KEY] = questions[label][1].id
    return nb
