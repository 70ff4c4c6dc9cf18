"""The class roster: who the students are, and which submitted files are whose.

A roster is a CSV file with a header row. Columns (any order; names are case-insensitive):

======================  ==========================================================================
``student_id``          required, unique: the institution's student id (Canvas: "SIS User ID";
                        Moodle: "ID number")
``name``                the student's name as the LMS shows it
``email``               the student's email (Moodle can identify students by it)
``submission``          a path or a glob pattern, relative to the roster's folder (or absolute),
                        matching the student's submission: a notebook, or a folder holding it
                        (``submissions/alice/``, ``submissions/*_1234_*``). A submission belongs to
                        the student when its path, or a folder it is in, matches. Empty: a submission
                        belongs to the student when a folder or file on its path is named like the
                        ``student_id`` (``submissions/s1234/labN.ipynb``).
``section``             optional (Canvas's "Section")
``login_id``            optional (Canvas's "SIS Login ID"; default: the email)
``canvas_id``           optional (Canvas's own numeric user "ID", the surest match on import)
======================  ==========================================================================

Students who submitted nothing are rows of the exports all the same (:mod:`grader.report.export`).
"""
from __future__ import annotations

import csv
import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path

COLUMNS = ("student_id", "name", "email", "submission", "section", "login_id", "canvas_id")
"""Every column a roster may have; only ``student_id`` is required."""


class RosterError(ValueError):
    """A roster file that cannot be used; the message says which line and what to change."""


@dataclass(frozen=True)
class Student:
    """One row of the roster."""

    student_id: str
    """Unique within the roster."""
    name: str = ""
    email: str = ""
    submission: str = ""
    """Path or glob pattern of the student's submission (see the module's docstring)."""
    section: str = ""
    login_id: str = ""
    canvas_id: str = ""

    @property
    def login(self) -> str:
        """Canvas's "SIS Login ID": ``login_id``, else the email."""
        return self.login_id or self.email


def _absolute(path: Path | str) -> str:
    return os.path.normpath(os.path.abspath(os.fspath(path)))


@dataclass(frozen=True)
class Roster:
    """The students of a class, in the roster's order."""

    students: tuple[Student, ...]
    base: Path
    """The roster file's folder: relative ``submission`` patterns start there."""
    path: Path | None = None
    """The file it was read from."""

    def owners(self, source: Path | str) -> list[Student]:
        """The students a submitted file or folder belongs to (normally one; none when not on the roster)."""
        source = _absolute(source)
        prefixes = [source] + [str(p) for p in Path(source).parents]
        parts = set(Path(source).parts) | {Path(source).stem}
        found = []
        for student in self.students:
            if not student.submission:
                if student.student_id in parts:
                    found.append(student)
                continue
            pattern = _absolute(self.base / student.submission)
            if any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes):
                found.append(student)
        return found

    def find(self, who: str) -> Student | None:
        """The student whose id, email or login is ``who`` (case-insensitive for emails)."""
        for student in self.students:
            if who == student.student_id or (who and who.lower() in (student.email.lower(), student.login.lower())):
                return student
        return None


def read(path: Path) -> Roster:
    """Read and check a roster file; :class:`RosterError` says what is wrong, with the line."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a BOM from Excel is fine
    except (OSError, UnicodeDecodeError) as exc:
        raise RosterError(f"cannot read the roster {path}: {exc}") from None
    reader = csv.DictReader(text.splitlines())
    header = {(name or "").strip().lower(): name for name in reader.fieldnames or ()}
    if "student_id" not in header:
        raise RosterError(f"{path}: the first line must be a header naming the columns, with at least "
                          f"student_id (found: {', '.join(header) or 'nothing'}); columns: {', '.join(COLUMNS)}")
    unknown = sorted(set(header) - set(COLUMNS))
    if unknown:
        raise RosterError(f"{path}: unknown column(s) {', '.join(unknown)}; a roster has {', '.join(COLUMNS)}")
    students, seen = [], {}
    for line, row in enumerate(reader, start=2):
        values = {column: (row.get(header[column]) or "").strip() for column in COLUMNS if column in header}
        if not any(values.values()):
            continue
        if not values["student_id"]:
            raise RosterError(f"{path} line {line}: no student_id; every student needs one")
        if values["student_id"] in seen:
            raise RosterError(f"{path} line {line}: student_id {values['student_id']} is also on line "
                              f"{seen[values['student_id']]}; ids must be unique")
        seen[values["student_id"]] = line
        students.append(Student(**values))
    return Roster(tuple(students), path.parent, path)
