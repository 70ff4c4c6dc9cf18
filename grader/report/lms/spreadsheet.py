"""Plain CSV for any spreadsheet or LMS without its own layout (``--format csv``).

With a roster: ``student_id``, ``name``, ``email``, ``section``, then per lab ``total``, ``max``,
``percent``, ``status`` and ``late days``. Without one: the class summary (``gradebook.csv``'s rows).
"""
from __future__ import annotations

from grader.report import gradebook
from grader.report.lms import Format
from grader.report.lms.table import Table


def layout(table: Table) -> tuple[list[str], list[list]]:
    headers = ["student_id", "name", "email", "section"]
    for lab in table.labs:
        headers += [f"{lab} total", f"{lab} max", f"{lab} percent", f"{lab} status", f"{lab} late days"]
    rows = []
    for s, chosen in table.students:
        cells = [s.student_id, s.name, s.email, s.section]
        for lab in table.labs:
            row = chosen[lab]
            grade = table.grade(row, s.student_id, lab)
            percent = round(100 * grade / table.maxima[lab], 1) if grade != "" and table.maxima[lab] else ""
            cells += [grade, gradebook.number(table.maxima[lab]), percent if row else (0.0 if table.missing == "zero" else ""),
                      table.status(row), row.late.days if row and row.late else ""]
        rows.append(cells)
    return headers, rows


FORMAT = Format("csv", "plain CSV (a row per student and per-lab columns; the class summary without a roster)",
                layout, needs_roster=False)
