"""Moodle, Grades > Import > CSV file: a grade column and a feedback column per lab.

``ID number``, ``Email address``, ``Full name``, then per lab its grade and ``<lab> feedback``
(``84/100 (partial); 1 day late, -10``). On import, identify users by email address (or ID number)
and map each column to its grade item (and its feedback). Moodle stops a whole import at a user it
does not know, so only roster students are written. Checked against
``grade/import/csv/classes/load_data.php`` in moodle/moodle (users mapped by id, idnumber, email or
username; an empty cell or ``-`` is no grade; feedback columns mapped per grade item).
"""
from __future__ import annotations

from grader.report.lms import Format
from grader.report.lms.table import Table


def layout(table: Table) -> tuple[list[str], list[list]]:
    headers = ["ID number", "Email address", "Full name"]
    for lab in table.labs:
        headers += [table.columns[lab], f"{table.columns[lab]} feedback"]
    rows = []
    for s, chosen in table.students:
        cells = [s.student_id, s.email, s.name]
        for lab in table.labs:
            cells += [table.grade(chosen[lab], s.student_id, lab), table.comment(chosen[lab], lab)]
        rows.append(cells)
    return headers, rows


FORMAT = Format("moodle", "Moodle (Grades > Import > CSV file; identify users by email)", layout)
