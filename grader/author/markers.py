"""Solution regions: ``### BEGIN SOLUTION`` ... ``### END SOLUTION`` (the nbgrader convention).

:func:`stub_regions` replaces each region with a stub that raises ``NotImplementedError`` naming the
task, indented like the markers. Unbalanced or nested markers raise :class:`MarkerError` with the
line, so a bad solution notebook fails the build instead of leaking code into the student copy.

C++ files use the same markers in comments (``// ### BEGIN SOLUTION`` ... ``// ### END SOLUTION``)
and get a stub that compiles and throws ``std::logic_error("Implement task 4.1: ...")`` (the file
must include ``<stdexcept>``). A C++ file has no notebook headings, so a region belongs to the task
named by the last ``// Task 4.1: <title>`` comment line above it (:func:`stub_cpp`).
"""
from __future__ import annotations

import re
from typing import Callable, Mapping

LANGUAGES = ("python", "cpp")
_PREFIX = {"python": "", "cpp": r"//\s*"}
ANY = re.compile(r"###\s*(BEGIN|END)\s+SOLUTION", re.I)
CPP_TASK = re.compile(r"^\s*//\s*Task\s+(\d+\.\d+)\s*:\s*(.*?)\s*$")
"""``// Task 4.1: Weight memory`` in a C++ file: the task of the regions below it."""
BEGIN = re.compile(r"^(\s*)### BEGIN SOLUTION\s*$")
END = re.compile(r"^(\s*)### END SOLUTION\s*$")


def _marker(kind: str, language: str) -> re.Pattern:
    if language not in LANGUAGES:
        raise ValueError(f"unknown language {language!r}; markers exist for {', '.join(LANGUAGES)}")
    return re.compile(rf"^(\s*){_PREFIX[language]}### {kind} SOLUTION\s*$")


class MarkerError(ValueError):
    """A solution region is unbalanced, nested, or a marker is malformed."""


def stub(indent: str, task_id: str | None, title: str | None, language: str = "python") -> list[str]:
    """The lines that replace a solution region."""
    label = f"task {task_id}: {title}" if task_id else "this part"
    if language == "cpp":
        return [f"{indent}// YOUR CODE HERE",
                f"{indent}throw std::logic_error({_cpp_string('Implement ' + label)});"]
    return [f"{indent}# YOUR CODE HERE", f"{indent}raise NotImplementedError({('Implement ' + label)!r})"]


def _cpp_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _replace_regions(source: str, where: str, language: str,
                     replacement: Callable[[int, str, list[str]], list[str]]) -> str:
    """``source`` with each region (markers included) replaced by ``replacement(line, indent, lines)``."""
    begin_re, end_re = _marker("BEGIN", language), _marker("END", language)
    out: list[str] = []
    inside, indent, body = None, "", []
    for number, line in enumerate(source.split("\n"), start=1):
        begin, end = begin_re.match(line), end_re.match(line)
        if begin:
            if inside is not None:
                raise MarkerError(f"{where}, line {number}: BEGIN SOLUTION inside the region opened at line {inside}")
            inside, indent, body = number, begin.group(1), []
        elif end:
            if inside is None:
                raise MarkerError(f"{where}, line {number}: END SOLUTION without a BEGIN SOLUTION")
            out += replacement(inside, indent, body)
            inside = None
        elif ANY.search(line):
            comment = "// " if language == "cpp" else ""
            raise MarkerError(f"{where}, line {number}: malformed marker {line.strip()!r}; write exactly "
                              f"'{comment}### BEGIN SOLUTION' or '{comment}### END SOLUTION' on its own line")
        elif inside is None:
            out.append(line)
        else:
            body.append(line)
    if inside is not None:
        raise MarkerError(f"{where}, line {inside}: BEGIN SOLUTION is never closed")
    return "\n".join(out)


def stub_regions(source: str, task_id: str | None, title: str | None, where: str = "cell",
                 language: str = "python") -> str:
    """``source`` with every solution region replaced by a stub."""
    return _replace_regions(source, where, language, lambda line, indent, body: stub(indent, task_id, title, language))


def stub_cpp(source: str, titles: Mapping[str, str], where: str = "file") -> str:
    """A C++ file with every region replaced by a stub naming the task of the ``// Task N.M: title``
    line above it. The heading's task must be declared (``titles``: id -> title) and its title must
    be the declared one, so a renamed task cannot leave stale stubs behind."""
    headings: dict[int, str] = {}
    for number, line in enumerate(source.split("\n"), start=1):
        match = CPP_TASK.match(line)
        if match:
            task_id, title = match.groups()
            if task_id not in titles:
                raise MarkerError(f"{where}, line {number}: '// Task {task_id}' is not a task of this lab")
            if title != titles[task_id]:
                raise MarkerError(f"{where}, line {number}: '// Task {task_id}: {title}' but the declaration "
                                  f"says '{titles[task_id]}'")
            headings[number] = task_id

    def replacement(line: int, indent: str, body: list[str]) -> list[str]:
        above = [number for number in headings if number < line]
        if not above:
            raise MarkerError(f"{where}, line {line}: a solution region with no '// Task N.M: <title>' line above it")
        task_id = headings[max(above)]
        return stub(indent, task_id, titles[task_id], "cpp")

    return _replace_regions(source, where, "cpp", replacement)


def remove_markers(source: str, where: str = "cell", language: str = "python") -> str:
    """``source`` with the marker lines dropped and the solution kept (for example submissions)."""
    return _replace_regions(source, where, language, lambda line, indent, body: body)


def has_markers(source: str) -> bool:
    return bool(ANY.search(source))
