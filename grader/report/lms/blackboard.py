"""Blackboard Learn, Grade Center > Work Offline > Upload: the layout of its grade-centre CSV.

``Last Name``, ``First Name``, ``Username``, ``Student ID``, then one column per lab; every field
quoted (Blackboard's rule for comma-delimited uploads). Blackboard matches each row by
``Username`` (the roster's ``login_id``, else its ``student_id``) and ignores changes to the name
columns. A grade column whose header ends in ``|<column id>`` (as Blackboard writes it in a
downloaded grade centre: ``Lab N [Total Pts: 100 Score] |1234``) updates that column; a header
without one creates a new column, which Blackboard adds as a text column worth 0 points. So create
each lab's column in the Grade Center first and name it with ``--column labN="Lab N |1234"``; by
default the header is ``<lab>: <title> [Total Pts: <max> Score]``. Layout as Blackboard Learn's
help for instructors describes it ("Formatting External Files for Uploading"); not tried on a live
Blackboard here.
"""
from __future__ import annotations

from grader.report import gradebook
from grader.report.lms import Format
from grader.report.lms.table import Table


def _header(table: Table, lab: str) -> str:
    given = table.columns[lab]
    if "|" in given or "[Total Pts:" in given:
        return given
    return f"{given} [Total Pts: {gradebook.number(table.maxima[lab])} Score]"


def _names(full: str) -> tuple[str, str]:
    """(last, first) from a roster's one ``name`` field: ``Adams, Amy``, or else ``Amy Adams`` (the last word)."""
    if "," in full:
        last, first = full.split(",", 1)
        return last.strip(), first.strip()
    words = full.split()
    return (words[-1], " ".join(words[:-1])) if len(words) > 1 else (full, "")


def layout(table: Table) -> tuple[list[str], list[list]]:
    headers = ["Last Name", "First Name", "Username", "Student ID"] + [_header(table, lab) for lab in table.labs]
    rows = []
    for s, chosen in table.students:
        last, first = _names(s.name)
        rows.append([last, first, s.login_id or s.student_id, s.student_id]
                    + [table.grade(chosen[lab], s.student_id, lab) for lab in table.labs])
    return headers, rows


FORMAT = Format("blackboard", "Blackboard Learn (Grade Center > Work Offline > Upload; rows matched by Username)",
                layout, quote_all=True)
