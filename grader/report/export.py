"""Grades for the learning-management system: the upload file Canvas or Moodle expects, or plain CSV.

``python -m grader export --format canvas|moodle|csv --out build/gradebook`` writes
``<out>/export_<format>.csv``: one row per student on the roster (students who submitted nothing
too), one column per lab, the lab's ``total`` (manual overrides and the late penalty applied).

**Canvas** (Grades > Import): the columns Canvas's importer reads: ``Student``, ``ID``, ``SIS User
ID``, ``SIS Login ID``, ``Section``, then one column per lab, and a ``Points Possible`` row. Canvas
finds each student by ``ID`` (its own user id: roster ``canvas_id``), else ``SIS User ID``
(``student_id``), else ``SIS Login ID`` (``login_id``, else ``email``), else the name. A lab column
named ``Title (1234)`` updates Canvas assignment 1234; another title creates a new assignment
(``--column labN="Lab N (1234)"`` names it).

**Moodle** (Grades > Import > CSV file): ``ID number``, ``Email address``, ``Full name``, then per
lab a grade column and a feedback column. On import, identify users by email address (or ID
number) and map each column to its grade item (and its feedback). Moodle stops the whole import at
a user it does not know, so only roster students are written.

**csv**: ``student_id``, ``name``, ``email``, ``section``, then per lab ``total``, ``max``,
``percent``, ``status`` and ``late days``; without a roster, the class summary (``gradebook.csv``).

A student with no submission for a lab gets 0 (``--missing zero``, the default) or an empty cell
(``--missing blank``: no grade; both LMSs then clear a grade entered there before). A submission the grader could not grade
because of its own fault is left empty and reported. A student with several submissions for one lab
is exported with the latest one (by submission time), and reported.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from grader.report import classbook, files, gradebook, safe_text
from grader.report.gradebook import NOT_SUBMITTED, UNGRADED, Row
from grader.report.settings import Settings

FORMATS = ("canvas", "moodle", "csv")
MISSING = ("zero", "blank")


@dataclass(frozen=True)
class Export:
    """One upload file: its header, its rows, and what the instructor should know before uploading."""

    headers: list[str]
    rows: list[list]
    warnings: list[str]


def column_names(labs: list[str], given: dict[str, str]) -> dict[str, str]:
    """Lab -> the LMS column it goes in: as given (``--column``), else ``labN: <the lab's title>``."""
    from util.labs import LABS

    return {lab: given.get(lab) or (f"{lab}: {LABS[lab].title}" if lab in LABS else lab) for lab in labs}


def _pick(rows: list[Row], book: classbook.Book, warnings: list[str], who: str, lab: str) -> Row | None:
    if len(rows) > 1:
        rows = sorted(rows, key=lambda r: (book.submitted.get(r.submission) is not None,
                                           book.submitted.get(r.submission) or 0, r.submission))
        warnings.append(f"{who} has {len(rows)} submissions for {lab} ({', '.join(r.submission for r in rows)}): "
                        f"exported {rows[-1].submission}, the latest")
    return rows[-1] if rows else None


def grades(book: classbook.Book, labs: list[str], missing: str, warnings: list[str]) -> list[tuple]:
    """(student, {lab: row or None}) for every roster student."""
    out = []
    for student in book.roster.students:
        chosen = {}
        for lab in labs:
            mine = [r for r in book.rows if r.lab == lab and r.student == student and r.status != NOT_SUBMITTED]
            chosen[lab] = _pick(mine, book, warnings, student.student_id, lab)
        out.append((student, chosen))
    return out


def value(row: Row | None, missing: str, warnings: list[str], who: str, lab: str):
    """The grade to upload for one student and lab."""
    if row is None:
        return 0 if missing == "zero" else ""
    if row.status == UNGRADED and row.result is not None and any("grader could not" in n for n in row.result.notes):
        warnings.append(f"{who}: {lab} ({row.submission}) could not be graded (a grader fault): left empty; "
                        "grade it again first")
        return ""
    return gradebook.number(row.total)


def build(book: classbook.Book, fmt: str, *, labs: list[str] | None = None, columns: dict[str, str] | None = None,
          missing: str = "zero") -> Export:
    """The upload file of format ``fmt`` for ``book`` (see the module's docstring)."""
    labs = labs or list(dict.fromkeys(r.lab for r in book.rows if r.cells))
    warnings: list[str] = []
    names = column_names(labs, columns or {})
    if book.roster is None:
        if fmt != "csv":
            raise ValueError(f"a {fmt} export needs a roster (--roster FILE: student_id, name, email, submission), "
                             "to know which student each submission is")
        headers, rows = gradebook.summary_table([r for r in book.rows if r.lab in labs])
        return Export(headers, rows, warnings)
    maxima = {lab: next((r.max_score for r in book.rows if r.lab == lab and r.cells), 0) for lab in labs}
    table = grades(book, labs, missing, warnings)
    if fmt == "canvas":
        headers = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] + [names[lab] for lab in labs]
        rows = [["    Points Possible", "", "", "", ""] + [gradebook.number(maxima[lab]) for lab in labs]]
        rows += [[s.name, s.canvas_id, s.student_id, s.login, s.section]
                 + [value(chosen[lab], missing, warnings, s.student_id, lab) for lab in labs] for s, chosen in table]
    elif fmt == "moodle":
        headers = ["ID number", "Email address", "Full name"]
        for lab in labs:
            headers += [names[lab], f"{names[lab]} feedback"]
        rows = []
        for s, chosen in table:
            cells = [s.student_id, s.email, s.name]
            for lab in labs:
                row = chosen[lab]
                cells.append(value(row, missing, warnings, s.student_id, lab))
                cells.append(_comment(row, maxima[lab]))
            rows.append(cells)
    else:
        headers = ["student_id", "name", "email", "section"]
        for lab in labs:
            headers += [f"{lab} total", f"{lab} max", f"{lab} percent", f"{lab} status", f"{lab} late days"]
        rows = []
        for s, chosen in table:
            cells = [s.student_id, s.name, s.email, s.section]
            for lab in labs:
                row = chosen[lab]
                cells += [value(row, missing, warnings, s.student_id, lab), gradebook.number(maxima[lab]),
                          row.percent if row else (0.0 if missing == "zero" else ""),
                          row.status if row else NOT_SUBMITTED, row.late.days if row and row.late else ""]
            rows.append(cells)
    if book.unowned:
        warnings.append(f"{len(book.unowned)} submissions belong to no student on the roster and are not exported: "
                        + ", ".join(book.unowned[:10]) + (" ..." if len(book.unowned) > 10 else ""))
    return Export(headers, rows, warnings)


def _comment(row: Row | None, max_score: float) -> str:
    """A short feedback text for the LMS."""
    if row is None:
        return "nothing submitted"
    text = f"{row.total:g}/{max_score:g} ({row.status})"
    if row.overrides:
        text += "; changed by the instructor: " + ", ".join(f"task {o.task} {o.new:g}" for o in row.overrides)
    if row.late and row.late.days:
        text += f"; {row.late.days} day{'s' if row.late.days != 1 else ''} late, -{row.late.penalty:g}"
    return text


def main(*, out: Path, fmt: str, labs: list[str] | None = None, columns: list[str] | None = None,
         missing: str = "zero", file: Path | None = None, settings: dict | None = None) -> int:
    """``python -m grader export``: 0 written, 1 written with problems to look at, 2 nothing written."""
    bad = [c for c in columns or () if "=" not in c or not c.split("=", 1)[0].strip()]
    if bad:
        print(f"grader: --column {bad[0]!r}: write LAB=NAME, e.g. labN='Lab N (1234)'", file=sys.stderr)
        return 2
    given = {lab.strip(): name.strip() for lab, name in (c.split("=", 1) for c in columns or ())}
    try:
        class_settings = Settings.load(out).updated(**(settings or {}))
    except ValueError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    book = classbook.build(out, class_settings)
    if not book.rows:
        print(f"grader: nothing to export: {out} holds no graded submission (run `python -m grader grade ... "
              f"--out {out}` first)", file=sys.stderr)
        return 2
    class_settings.save(out)
    try:
        export = build(book, fmt, labs=labs, columns=given, missing=missing)
    except ValueError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    target = file or out / f"export_{fmt}.csv"
    files.write_csv(target, export.headers, export.rows)
    students = len(export.rows) - (fmt == "canvas" and book.roster is not None)
    print(f"{target}: {fmt} upload file, {students} rows; settings: {class_settings.describe()}")
    for line in [*book.problems, *export.warnings]:
        print(f"grader: {safe_text.terminal(line)}", file=sys.stderr)
    return 1 if book.problems or export.warnings else 0
