"""Marking offline: the answers to mark as a CSV file, and the marks read back from it, all or nothing.

``python -m grader mark CLASS --export-csv answers.csv [--question 10.Q6] [--all] [--names]`` writes one row
per answer still to mark (every answer with ``--all``), anonymous unless ``--names``:

    answer, question, answer_sha256, items, adjust, comment, text, rubric

``answer`` is the answer's pseudonym (the marking page's), or with ``--names`` a ``submission`` column
holds its folder's name; ``items`` lists the rubric item ids applied (``A C``), ``rubric`` lists the
question's items for reference, and ``text`` is the answer. Every cell is made safe for a spreadsheet
(a text starting with ``= + - @`` gets a leading ``'``).

``python -m grader mark CLASS --import-csv marks.csv`` reads it back: a row is found by its question
and its ``answer`` (or ``submission``); a blank ``items``, ``adjust`` or ``comment`` cell changes nothing
(``items`` = ``none`` removes every item); ``answer_sha256``, when given, must still be the answer's (it
was not graded again since). Every row is checked before anything is written: a bad row is reported with
its line, and then nothing is applied; otherwise all marks are written in one transaction.
"""
from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path

from grader.core import files, safe_text
from grader.mark.api import Desk, Refused
from grader.mark.state import PENDING
from grader.mark.store import MAX_ADJUST, Mark
from util.labs import LABS, rubrics
from util.rubric import Rubric
from util.written import MAX_CHARACTERS

HEADERS = ["answer", "question", "answer_sha256", "items", "adjust", "comment", "text", "rubric"]
MAX_ROWS = 100_000
"""Rows read from a marks file (a class of 600 with a dozen questions has 7,200)."""
_FORMULA = re.compile(r"^'(?=[=+\-@\t\r\n\uff1d\uff0b\uff0d\uff20])")


class MarksFileError(ValueError):
    """A marks file that cannot be applied; the message lists every bad line, and nothing was written."""


def _rubric_text(rubric: Rubric | None) -> str:
    items = rubric.items if rubric else ()
    return " | ".join(f"{i.id} {'+' if i.points >= 0 else ''}{i.points:g}: {i.text}" for i in items)


def export(desk: Desk, *, question: str | None = None, everything: bool = False, names: bool = False) -> tuple[list[str], list[list]]:
    """The header and rows of an export (see the module's docstring)."""
    headers = (["submission"] if names else ["answer"]) + HEADERS[1:]
    rows = []
    for lab in LABS.values():
        lab_rubrics = rubrics(lab)
        for asked in lab.written:
            if not asked.points or (question and asked.id != question):
                continue
            for pseudonym, name, marked in desk.listed(lab, asked):
                if not everything and marked.state not in PENDING:
                    continue
                mark = marked.mark if marked.mark is not None and marked.mark.sha256 == marked.sha256 else None
                rows.append([name if names else pseudonym, asked.id, marked.sha256,
                             " ".join(mark.items) if mark else "", mark.adjust if mark else "",
                             mark.comment if mark else "", marked.answer.text if marked.answer else "",
                             _rubric_text(lab_rubrics.get(asked.id))])
    return headers, rows


def write_export(path: Path, headers: list[str], rows: list[list]) -> Path:
    """Write the export; the answer's text keeps up to :data:`util.written.MAX_CHARACTERS` characters."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(headers)
    writer.writerows([safe_text.csv_cell(cell, MAX_CHARACTERS + 100) for cell in row] for row in rows)
    return files.write_text(path, buffer.getvalue())


@dataclass(frozen=True)
class Imported:
    """What an import wrote."""

    marks: tuple[Mark, ...]
    skipped: int
    """Rows with every mark cell blank (they change nothing)."""


def _cell(row: dict, name: str) -> str:
    return _FORMULA.sub("", (row.get(name) or "").strip())


def _read(path: Path) -> list[dict]:
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MarksFileError(f"{path}: not UTF-8 text (byte {exc.start}): save it as CSV UTF-8; nothing was applied") from None
    except OSError as exc:
        raise MarksFileError(f"{path}: cannot be read ({exc.strerror}); nothing was applied") from None
    try:
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise MarksFileError(f"{path}: not a readable CSV file ({exc}); nothing was applied") from None
    if len(rows) > MAX_ROWS:
        raise MarksFileError(f"{path}: {len(rows):,} rows; at most {MAX_ROWS:,} are read; nothing was applied")
    return [{(k or "").strip().lower(): v for k, v in row.items() if isinstance(v, str)} for row in rows]


def parse(desk: Desk, path: Path) -> tuple[list[tuple[Mark, int]], int]:
    """Every mark the file sets, with the version each replaces; :class:`MarksFileError` listing every bad
    line when any is bad (nothing is written either way)."""
    rows = _read(path)
    bad, out, skipped, seen = [], [], 0, set()
    found: dict[str, dict] = {}
    for line, row in enumerate(rows, start=2):
        who = _cell(row, "answer") or _cell(row, "submission")
        question_id = _cell(row, "question")
        items, adjust, comment = _cell(row, "items"), _cell(row, "adjust"), _cell(row, "comment")
        if not (items or adjust or comment):
            skipped += 1
            continue
        try:
            lab, question = desk.question(question_id)
            if question_id not in found:
                found[question_id] = {key: (name, marked) for pseudonym, name, marked in desk.listed(lab, question)
                                      for key in (pseudonym, name)}
            if who not in found[question_id]:
                raise Refused(f"no answer {who!r} to {question_id} in this class (give the answer's id or its "
                              "submission)")
            name, marked = found[question_id][who]
            if (name, question_id) in seen:
                raise Refused(f"a second row for this answer of {question_id}")
            seen.add((name, question_id))
            sha = _cell(row, "answer_sha256")
            if sha and sha != marked.sha256:
                raise Refused("the answer changed since it was exported (graded again): export it again and mark "
                              "its new text")
            rubric = rubrics(lab).get(question_id) or Rubric(items=())
            base = marked.mark if marked.mark is not None else Mark(name, question_id, marked.sha256)
            version = base.version if base.sha256 == marked.sha256 else 0
            mark = replace(base, sha256=marked.sha256, marker=desk.marker or base.marker)
            if items:
                chosen = () if items.lower() == "none" else tuple(re.split(r"[\s,;]+", items))
                unknown = [i for i in chosen if rubric.item(i) is None]
                if unknown:
                    raise Refused(f"items {', '.join(unknown)} are not in {question_id}'s rubric "
                                  f"({', '.join(i.id for i in rubric.items)})")
                mark = replace(mark, items=chosen)
            if adjust:
                value = float(adjust)
                if not math.isfinite(value) or abs(value) > MAX_ADJUST:
                    raise ValueError
                mark = replace(mark, adjust=value)
            if comment:
                mark = replace(mark, comment=comment)
            out.append((mark, version))
        except Refused as exc:
            bad.append(f"line {line}: {exc}")
        except ValueError:
            bad.append(f"line {line}: adjust {safe_text.terminal(adjust, 40)!r} is not a number of points "
                       f"(between -{MAX_ADJUST:g} and {MAX_ADJUST:g})")
    if bad:
        raise MarksFileError(f"{path}: {len(bad)} bad row{'s' if len(bad) > 1 else ''}; nothing was applied:\n  "
                           + "\n  ".join(safe_text.terminal(b, 300) for b in bad[:50]))
    return out, skipped


def apply(desk: Desk, path: Path) -> Imported:
    """Read ``path`` and write its marks, all in one transaction (or nothing: :class:`MarksFileError`, or
    :class:`grader.mark.store.Conflict` when another marker changed one of them meanwhile)."""
    marks, skipped = parse(desk, path)
    return Imported(tuple(desk.store.save_all(marks)), skipped)


def main(*, out: Path, export_csv: Path | None = None, import_csv: Path | None = None, question: str | None = None,
         everything: bool = False, names: bool = False, marker: str = "") -> int:
    """``python -m grader mark CLASS --export-csv FILE`` or ``--import-csv FILE``: 0 when done, 1 when the
    file had bad rows (nothing applied), 2 when the class folder has nothing to mark."""
    import sys

    from grader.mark.store import Conflict, Store

    if not (out.is_dir() and any(out.glob("*/grading.json"))):
        print(f"grader: {out} holds no graded submission: run `python -m grader grade ... --out {out}` first",
              file=sys.stderr)
        return 2
    with Store(out) as store:
        desk = Desk(out, store, marker)
        if question is not None:
            try:
                desk.question(question)
            except Refused as exc:
                print(f"grader: {exc}", file=sys.stderr)
                return 2
        if export_csv is not None:
            headers, rows = export(desk, question=question, everything=everything, names=names)
            write_export(export_csv, headers, rows)
            print(f"{export_csv}: {len(rows)} answer(s) {'in all' if everything else 'to mark'}; fill items, adjust "
                  f"and comment, then `python -m grader mark {out} --import-csv {export_csv}`")
            return 0
        try:
            done = apply(desk, import_csv)
        except (MarksFileError, Conflict) as exc:
            print(f"grader: {exc}" + ("; nothing was applied: import again" if isinstance(exc, Conflict) else ""),
                  file=sys.stderr)
            return 1
        print(f"{import_csv}: {len(done.marks)} mark(s) written, {done.skipped} row(s) left as they were; "
              f"`python -m grader report --out {out}` adds them to the gradebooks and feedback")
        return 0
