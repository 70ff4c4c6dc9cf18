"""``python -m grader export``: the grades as an LMS's upload file, or as plain CSV.

``python -m grader export --format NAME --out build/gradebook`` writes ``<out>/export_<NAME>.csv``:
one row per student on the roster (students who submitted nothing too), one column per lab, the
lab's ``total`` (manual overrides and the late penalty applied). The layouts are plug-ins, one
module each in :mod:`grader.report.lms` (Canvas, Moodle, Blackboard, plain CSV); this module
gathers the grades once (:func:`grader.report.lms.table.gather`) and writes what the format lays out.

A student with no submission for a lab gets 0 (``--missing zero``, the default) or an empty cell
(``--missing blank``: no grade; LMSs then clear a grade entered there before). A submission the
grader could not grade because of its own fault is left empty and reported. A student with several
submissions for one lab is exported with the latest one (by submission time), and reported.

A lab whose written answers are not all marked yet (status ``to mark``) has no final total: by default
its cell is left empty (no grade) and reported (``--unmarked blank``); ``--unmarked zero`` exports the
total as it stands (answers still to mark count 0), ``--unmarked auto`` the autograder's points alone
(overrides and the late penalty applied, no written answer counted).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from grader.core import files, safe_text
from grader.core.namespace import class_file
from grader.report import class_folder, gradebook, lms
from grader.report.lms.table import gather
from grader.report.settings import Settings
from util.labs import LABS


@dataclass(frozen=True)
class Export:
    """One upload file: its header, its rows, and what the instructor should know before uploading."""

    headers: list[str]
    rows: list[list]
    warnings: list[str]
    quote_all: bool = False
    """Every field quoted (the format's rule)."""


def column_names(labs: list[str], given: dict[str, str]) -> dict[str, str]:
    """Lab -> the LMS column it goes in: as given (``--column``), else ``labN: <the lab's title>``."""
    return {lab: given.get(lab) or (f"{lab}: {LABS[lab].title}" if lab in LABS else lab) for lab in labs}


def build(book: class_folder.Book, fmt: str, *, labs: list[str] | None = None, columns: dict[str, str] | None = None,
          missing: str = "zero", unmarked: str = "blank") -> Export:
    """The upload file of format ``fmt`` (a name in :func:`grader.report.lms.formats`) for ``book``."""
    layout = lms.get(fmt)
    labs = labs or list(dict.fromkeys(r.lab for r in book.rows if r.cells))
    if book.roster is None:
        if layout.needs_roster:
            raise ValueError(f"a {fmt} export needs a roster (--roster FILE: student_id, name, email, submission), "
                             "to know which student each submission is")
        headers, rows = gradebook.summary_table([r for r in book.rows if r.lab in labs])
        return Export(headers, rows, [], layout.quote_all)
    table = gather(book, labs, column_names(labs, columns or {}), missing, unmarked)
    headers, rows = layout.layout(table)
    if book.unowned:
        table.warnings.append(f"{len(book.unowned)} submissions belong to no student on the roster and are not "
                              "exported: " + ", ".join(book.unowned[:10]) + (" ..." if len(book.unowned) > 10 else ""))
    return Export(headers, rows, table.warnings, layout.quote_all)


def main(*, out: Path, fmt: str, labs: list[str] | None = None, columns: list[str] | None = None,
         missing: str = "zero", file: Path | None = None, settings: dict | None = None, unmarked: str = "blank") -> int:
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
    class_folder.free_class_names(out)
    book = class_folder.build(out, class_settings)
    if not book.rows:
        print(f"grader: nothing to export: {out} holds no graded submission (run `python -m grader grade ... "
              f"--out {out}` first)", file=sys.stderr)
        return 2
    class_settings.save(out)
    try:
        export = build(book, fmt, labs=labs, columns=given, missing=missing, unmarked=unmarked)
    except ValueError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    target = file or class_file(out, f"export_{fmt}.csv")
    files.write_csv(target, export.headers, export.rows, quote_all=export.quote_all)
    students = len(book.roster.students) if book.roster is not None else len(export.rows)
    print(f"{target}: {fmt} upload file, {students} rows; settings: {class_settings.describe()}")
    for line in [*book.problems, *export.warnings]:
        print(f"grader: {safe_text.terminal(line)}", file=sys.stderr)
    return 1 if book.problems or export.warnings else 0
