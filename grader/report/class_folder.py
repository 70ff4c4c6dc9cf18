"""The class, as the gradebook folder holds it: every stored result, with the instructor's settings applied.

Every class-level output is built here from the records (``grading.json``) in the gradebook
folder and the marks of the written answers (``marks.sqlite``, :mod:`grader.mark`), never from one run's
results alone: grading one student again replaces that student's
row and keeps everyone else's. :func:`build` reads the records and the class settings (roster,
overrides, deadlines and extensions, late policy: :mod:`grader.report.settings`) into rows;
:func:`write` writes the gradebooks, ``statistics.csv``, every student's ``feedback.md`` and
``feedback.html``, and the class report ``report.html``. ``grade`` calls both at the end of every
run; ``python -m grader report`` calls them alone (after editing ``overrides.csv``, say).

A problem in an instructor's file (a roster line without an id, an override of a task nobody
has) never stops the build: it is listed in :attr:`Book.problems`, and the command exits with 1.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from grader.core import files
from grader.core import records as stored_records
from grader.core.namespace import class_file, move_reserved
from grader.core.records import RECORD, Previous
from grader.mark import state, store
from grader.report import feedback, gradebook, late, overrides, report_page, roster, stats
from grader.report.gradebook import NOT_SUBMITTED, UNGRADED, Cell, Row
from grader.report.settings import Settings
from util.labs import LABS, rubrics


@dataclass(frozen=True)
class Book:
    """A class's rows and statistics, and what was wrong with the instructor's files."""

    out: Path
    settings: Settings
    rows: tuple[Row, ...]
    """Sorted by lab (course order), then submission name; roster students without a submission last."""
    stats: tuple[stats.TaskStats, ...]
    roster: roster.Roster | None
    problems: tuple[str, ...]
    """Lines of the instructor's files that could not be used, each saying why."""
    unowned: tuple[str, ...]
    """With a roster: submissions that belong to no student on it."""
    submitted: dict[str, datetime | None]
    """Submission name -> when it was submitted."""


def _lab_order(lab: str) -> tuple[int, str]:
    """Course order (the registry's), then labs it does not know (a test lab, ``unknown``) by name."""
    names = list(LABS)
    return (names.index(lab), lab) if lab in names else (len(names), lab)


def _read(reader, path: str | None, problems: list[str]):
    if not path:
        return None
    try:
        return reader(Path(path))
    except ValueError as exc:  # RosterError, OverrideError, LateError
        problems.append(str(exc))
        return None


def _identical(records: dict[str, Previous]) -> dict[str, tuple[str, ...]]:
    groups: dict[tuple, list[str]] = defaultdict(list)
    for name, record in records.items():
        digest = record.key.get("submission") or record.key.get("notebook")
        if digest:
            groups[(record.result.lab, digest)].append(name)
    return {name: tuple(n for n in group if n != name) for group in groups.values() if len(group) > 1
            for name in group}


def build(out: Path, settings: Settings, records: dict[str, Previous] | None = None) -> Book:
    """The class in ``out`` under ``settings`` (see the module's docstring); ``records`` when the
    caller has them already (else they are read from ``out``)."""
    problems: list[str] = []
    records = stored_records.load_all(out) if records is None else dict(sorted(records.items()))
    class_roster = _read(roster.read, settings.roster, problems)
    wanted = _read(overrides.read, settings.overrides, problems) or []
    extensions = _read(late.read_extensions, settings.extensions, problems) or []
    try:
        policy = settings.policy
        deadlines = {lab: late.parse_time(when, f"deadline of {lab}") for lab, when in settings.deadlines.items()}
    except ValueError as exc:
        problems.append(str(exc))
        policy, deadlines = late.Policy(), {}
    same = _identical(records)
    marks = state.index(store.load(out))
    lab_rubrics = {lab: rubrics(LABS[lab]) for lab in {r.result.lab for r in records.values()} if lab in LABS}

    owner, unowned = {}, []
    for name, record in records.items():
        if class_roster is None:
            continue
        found = class_roster.owners(record.source or record.result.submission)
        if len(found) > 1:
            problems.append(f"roster: submission {name} matches {len(found)} students "
                            f"({', '.join(s.student_id for s in found)}); it is counted for {found[0].student_id}")
        if found:
            owner[name] = found[0]
        else:
            unowned.append(name)

    def matches(name: str, who: str) -> bool:
        student = owner.get(name)
        return who == name or (student is not None and class_roster.find(who) == student)

    applied: dict[tuple[str, str], overrides.Applied] = {}
    for wish in wanted:
        hits = [(name, task) for name, record in records.items() if matches(name, wish.student)
                for task in record.result.tasks if task.task_id == wish.task]
        if not hits:
            problems.append(f"overrides line {wish.line}: no graded submission of {wish.student!r} has task "
                            f"{wish.task}; nothing changed")
        for name, task in hits:
            why_not = overrides.check_points(wish, task.max_score)
            if why_not:
                problems.append(f"overrides {why_not}; nothing changed")
            else:
                applied[(name, task.task_id)] = overrides.Applied(task.task_id, task.score, wish.points, wish.reason)

    rows = []
    for name, record in records.items():
        result = record.result
        cells = tuple(Cell(t.task_id, t.title, applied[(name, t.task_id)].new if (name, t.task_id) in applied
                           else t.score, t.max_score, t.status, applied.get((name, t.task_id)))
                      for t in result.tasks)
        written = state.assess(name, state.questions(LABS.get(result.lab), result.release), result.written, marks,
                               lab_rubrics.get(result.lab, {}))
        problems += [f"marks: {name}'s mark of {w.question.id} applies rubric item{'s' if len(w.unknown) > 1 else ''} "
                     f"{', '.join(w.unknown)}, which its rubric no longer has: counted 0 (mark it again)"
                     for w in written if w.unknown]
        status = gradebook.status_of(result, cells, ungraded=record.retry or result.lab == "unknown", written=written)
        extension = next((e for e in extensions if e.lab in ("", result.lab) and matches(name, e.student)), None)
        row_late = None
        if status != UNGRADED:
            row_late = late.lateness(record.submitted, deadlines.get(result.lab), policy,
                                     sum(c.max_score for c in cells) + sum(w.question.points for w in written),
                                     sum(c.score for c in cells) + sum(w.counted for w in written), extension)
        rows.append(Row(name, result.lab, cells, status, owner.get(name), row_late, same.get(name, ()), result,
                        written))
    for extension in extensions:
        if not any(matches(name, extension.student) for name in records):
            problems.append(f"extensions: {extension.student!r} has no graded submission; the extension is unused")

    if class_roster is not None:  # a row for every student without a submission of a graded lab
        labs = {r.lab: r for r in rows if r.cells}
        for lab, example in labs.items():
            have = {r.student.student_id for r in rows if r.lab == lab and r.student}
            for student in class_roster.students:
                if student.student_id not in have:
                    cells = tuple(Cell(c.task_id, c.title, 0.0, c.max_score, "missing") for c in example.cells)
                    unanswered = tuple(state.Marked(w.question, w.task_id, None, state.UNANSWERED, points=0.0)
                                       for w in example.written)
                    rows.append(Row("", lab, cells, NOT_SUBMITTED, student, written=unanswered))
    rows.sort(key=lambda r: (_lab_order(r.lab), r.status == NOT_SUBMITTED, r.submission,
                             r.student.student_id if r.student else ""))
    graded = [(r.submission, r.result) for r in rows if r.result is not None and r.status != UNGRADED]
    marked = [(r.result.lab, r.written, lab_rubrics.get(r.result.lab, {})) for r in rows
              if r.result is not None and r.status != UNGRADED]
    task_stats = sorted(stats.compute(graded) + stats.compute_written(marked), key=lambda s: _lab_order(s.lab))
    return Book(out, settings, tuple(rows), tuple(task_stats), class_roster, tuple(problems),
                tuple(unowned), {name: record.submitted for name, record in records.items()})


def write(book: Book, *, feedback_dir: Path | None = None, now: datetime | None = None) -> list[Path]:
    """Write the class's files into ``book.out`` (see the module's docstring); returns them. A lab's feedback
    explains its failed hidden cases when the class settings say so at ``now`` (default: now):
    :meth:`grader.report.settings.Settings.diagnosed`."""
    written = gradebook.write(book.out, list(book.rows))
    written.append(stats.write_csv(class_file(book.out, "statistics.csv"), list(book.stats)))
    for row in book.rows:
        if row.result is None or not (book.out / row.submission).is_dir():
            continue
        found = (feedback.read_diagnosis(book.out / row.submission) if book.settings.diagnosed(row.result.lab, now) else None)
        for suffix, render in (("md", feedback.render), ("html", feedback.render_html)):
            text = render(row.submission, row.result, overrides=row.overrides, late=row.late, written=row.written,
                          diagnosis=found)
            files.write_text(book.out / row.submission / f"feedback.{suffix}", text)
            if feedback_dir is not None:
                files.write_text(feedback_dir / f"{row.submission}.{suffix}", text)
    written.append(report_page.write(class_file(book.out, "report.html"), book))
    return written


def free_class_names(out: Path) -> None:
    """Move aside any submission folder an older grader named like a class file (``gradebook.csv/``,
    :func:`grader.core.namespace.move_reserved`), saying so; call before reading the records."""
    import sys

    from grader.core import safe_text

    for old, new in move_reserved(out, RECORD):
        print(f"grader: moved {safe_text.terminal(old, 200)}/ to {safe_text.terminal(new, 200)}/: a submission's "
              "folder may not be named like a class file", file=sys.stderr)


def main(*, out: Path, feedback_dir: Path | None = None, settings: dict | None = None) -> int:
    """``python -m grader report``: rebuild the class's files from the stored results, grading nothing.

    0 when written, 1 when written with problems in the instructor's files, 2 when there is nothing."""
    import sys

    from grader.core import safe_text

    try:
        class_settings = Settings.load(out).updated(**(settings or {}))
    except ValueError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    free_class_names(out)
    book = build(out, class_settings)
    if not book.rows:
        print(f"grader: {out} holds no graded submission: run `python -m grader grade ... --out {out}` first",
              file=sys.stderr)
        return 2
    class_settings.save(out)
    write(book, feedback_dir=feedback_dir)
    print(gradebook.render(list(book.rows)))
    print(f"\n{out}: gradebook.csv, gradebook_<lab>.csv, statistics.csv, report.html and every feedback "
          f"rewritten from {sum(r.result is not None for r in book.rows)} stored results; settings: "
          f"{class_settings.describe()}")
    for problem in book.problems:
        print(f"grader: {safe_text.terminal(problem)}", file=sys.stderr)
    return 1 if book.problems else 0
