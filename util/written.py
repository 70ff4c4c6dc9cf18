"""Written answers in a notebook: the answer cell the build generates, and reading the answer back.

A written question (:class:`util.contract.Written`) is answered in a Markdown cell the build generates
after the question is stated::

    #### Answer to Q6 (2 points, graded by hand; 20-120 words)

    _Type your answer here, in place of this line._

with ``{"course": {"written": "10.Q6"}}`` in the cell's metadata. :func:`find` reads an answer from the
notebook's JSON, as a notebook saved by JupyterLab, VS Code or any other tool holds it, so neither a kernel
nor a particular editor is needed:

* the cell whose metadata names the question; if the metadata is gone (a tool dropped it, the cell was
  copied), the first Markdown cell headed ``Answer to Q6``;
* with the Markdown cells right after it up to the next code cell or heading (students often answer in a
  new cell below the one given: the build keeps the course's own text away from an answer cell);
* less the heading line and the placeholder.

Used by the self-check (``check("10.4")``, ``progress``, ``python -m grader check``), the build
(:mod:`grader.author.build`) and the grader, which keeps the text for marking.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

from util.contract import Written

PLACEHOLDER = "_Type your answer here, in place of this line._"
"""The answer cell's text until the student writes; an answer that is only this is no answer."""
MAX_CHARACTERS = 20_000
"""Characters of an answer the grader keeps and a TA reads (about 3,000 words); the rest is cut, and
the grader says so."""
METADATA_KEY = "written"
"""The answer cell's ``metadata.course`` key; its value is the question's id."""
ANSWER_HEADING = re.compile(r"^#{1,6}\s*Answer to\s+([A-Za-z0-9_-]+)\s*\((?:(\d+(?:\.\d+)?) points?, graded by "
                            r"hand(?:;\s*(\d+)-(\d+) words)?|practice, not graded)\)\s*$")
"""``#### Answer to Q6 (2 points, graded by hand; 20-120 words)`` -> label, points, low, high; a question worth
nothing reads ``#### Answer to Q1 (practice, not graded)``."""
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
FOUND = ("cell", "heading", "none")
"""How an answer was found: by its cell's metadata, by its heading (the metadata was gone), or not at all."""


def _points(value: float) -> str:
    return f"{value:g} point{'s' if value != 1 else ''}"


def heading(question: Written) -> str:
    """The answer cell's first line, e.g. ``#### Answer to Q6 (2 points, graded by hand; 20-120 words)``."""
    if not question.points:
        return f"#### Answer to {question.label} (practice, not graded)"
    low, high = question.words
    return f"#### Answer to {question.label} ({_points(question.points)}, graded by hand; {low}-{high} words)"


def answer_cell_source(question: Written) -> str:
    """The source of the answer cell the build generates for ``question`` (its heading and the placeholder)."""
    return f"{heading(question)}\n\n{PLACEHOLDER}"


def cell_metadata(question: Written) -> dict[str, dict[str, str]]:
    """What the build merges into the answer cell's metadata: ``{"course": {"written": "10.Q6"}}``."""
    return {"course": {METADATA_KEY: question.id}}


def _source(cell: Any) -> str:
    source = cell.get("source", "") if isinstance(cell, dict) else ""
    if isinstance(source, list):
        source = "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def _markdown(cell: Any) -> bool:
    return isinstance(cell, dict) and cell.get("cell_type") == "markdown"


def cell_question(cell: Any) -> str | None:
    """The question id an answer cell's metadata names, or ``None`` (any other shape is ignored)."""
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    course = meta.get("course") if isinstance(meta, dict) else None
    value = course.get(METADATA_KEY) if isinstance(course, dict) else None
    return value if isinstance(value, str) and len(value) <= 64 else None


def heading_label(source: str) -> str | None:
    """The label of an answer heading on the first line of ``source`` (``Q6``), else ``None``."""
    first = source.lstrip().split("\n", 1)[0].strip()
    match = ANSWER_HEADING.match(first)
    return match.group(1) if match else None


@dataclass(frozen=True)
class Answer:
    """A written answer as a notebook holds it."""

    question: str
    """The question's id, e.g. ``10.Q6``."""
    text: str
    """The answer, heading and placeholder removed, stripped (``""`` when there is none)."""
    found: str
    """One of :data:`FOUND`."""
    cell: int | None = None
    """Index of the answer cell (``None`` when not found)."""

    @property
    def words(self) -> int:
        """How many words the answer has (runs of non-space characters)."""
        return len(self.text.split())

    @property
    def answered(self) -> bool:
        """Whether there is anything to mark."""
        return bool(self.text)


def _clean(source: str, label: str) -> str:
    lines = source.strip().split("\n")
    if lines and heading_label(lines[0]) == label:
        lines = lines[1:]
    return "\n".join(lines).replace(PLACEHOLDER, "").strip()


def find(nb: Any, question: Written) -> Answer:
    """``question``'s answer in the notebook ``nb`` (its JSON as a dict; any shape is accepted).

    See the module's docstring for where it is looked for. Never raises."""
    cells = nb.get("cells") if isinstance(nb, dict) else None
    cells = cells if isinstance(cells, list) else []
    start, how = None, "none"
    for index, cell in enumerate(cells):
        if _markdown(cell) and cell_question(cell) == question.id:
            start, how = index, "cell"
            break
    if start is None:
        for index, cell in enumerate(cells):
            if _markdown(cell) and heading_label(_source(cell)) == question.label:
                start, how = index, "heading"
                break
    if start is None:
        return Answer(question.id, "", "none")
    parts = [_clean(_source(cells[start]), question.label)]
    for cell in cells[start + 1:]:
        source = _source(cell)
        if not _markdown(cell) or _HEADING.match(source.lstrip("\n")) or cell_question(cell):
            break
        parts.append(_clean(source, question.label))
    return Answer(question.id, "\n\n".join(p for p in parts if p), how, start)


def find_all(nb: Any, questions: Iterable[Written]) -> tuple[Answer, ...]:
    """:func:`find` for each of ``questions``, in their order."""
    return tuple(find(nb, q) for q in questions)


def problem(answer: Answer, question: Written) -> str | None:
    """What a student should fix before submitting (``None`` when the answer is there and of the length
    asked), in their words."""
    low, high = question.words
    if answer.found == "none":
        return (f"no answer cell for {question.label} was found: restore the cell headed "
                f"'Answer to {question.label}' (copy it from a fresh handout) and write your answer in it")
    if not answer.answered:
        return f"the answer to {question.label} is still empty: replace the placeholder line with your answer"
    if not low <= answer.words <= high:
        return (f"the answer to {question.label} has {answer.words} words; {low}-{high} are asked "
                "(it is marked all the same)")
    return None


NOTEBOOK_ENV = "COURSE_NOTEBOOK"
"""A variable naming the notebook's file, for a front end that tells its kernel no other way: the class server and
``python -m grader check`` set it; so can a student (``COURSE_NOTEBOOK=my_lab.ipynb papermill ...``)."""


def notebook_path(namespace: dict) -> str | None:
    """The file of the notebook this kernel runs, wherever a front end says so: VS Code's ``__vsc_ipynb_file__``,
    JupyterLab's ``__session__`` (and ``$JPY_SESSION_NAME``), :data:`NOTEBOOK_ENV`; a relative path is taken from the
    kernel's working folder. ``None`` when none does (nbclient, nbconvert and papermill tell the kernel nothing)."""
    import os

    for found in (namespace.get("__vsc_ipynb_file__"), namespace.get("__session__"), os.environ.get("JPY_SESSION_NAME"),
                  os.environ.get(NOTEBOOK_ENV)):
        if isinstance(found, str) and found.endswith(".ipynb") and os.path.isfile(found):
            return found
    return None


def saved_notebook(namespace: dict) -> dict | None:
    """The notebook this kernel runs, as last saved (its JSON), or ``None`` when it cannot be found or read."""
    import json

    path = notebook_path(namespace)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None
