"""Canvas, Grades > Import: the columns Canvas's gradebook importer reads.

``Student``, ``ID``, ``SIS User ID``, ``SIS Login ID``, ``Section``, then one column per lab, and a
``Points Possible`` row. Canvas finds each student by ``ID`` (its own user id: roster ``canvas_id``),
else ``SIS User ID`` (``student_id``), else ``SIS Login ID`` (``login_id``, else ``email``), else the
name. A lab column named ``Title (1234)`` updates Canvas assignment 1234; another title creates a new
assignment (``--column labN="Lab N (1234)"``). Checked against the importer's source
(``lib/gradebook_importer.rb`` in instructure/canvas-lms): the header must start ``Student``, ``ID``,
the last student column must be ``Section``, a row starting ``Points Possible`` sets the maxima, an
empty cell or ``-`` is no grade.
"""
from __future__ import annotations

from grader.report import gradebook
from grader.report.lms import Format
from grader.report.lms.table import Table


def layout(table: Table) -> tuple[list[str], list[list]]:
    headers = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] + [table.columns[lab] for lab in table.labs]
    rows = [["    Points Possible", "", "", "", ""] + [gradebook.number(table.maxima[lab]) for lab in table.labs]]
    rows += [[s.name, s.canvas_id, s.student_id, s.login, s.section]
             + [table.grade(chosen[lab], s.student_id, lab) for lab in table.labs] for s, chosen in table.students]
    return headers, rows


FORMAT = Format("canvas", "Canvas (Grades > Import)", layout)
