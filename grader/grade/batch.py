"""Grading a class: many submissions, in parallel, resumable, with the class-level outputs.

``python -m grader grade DIR_OR_FILES... -j N --out OUT`` writes, as each submission finishes,
``OUT/<name>/`` (see :mod:`grader.grade`) and its record ``OUT/<name>/grading.json``
(:mod:`grader.grade.resume`); at the end it builds every class-level file from all the records in
``OUT``, not only this run's (:mod:`grader.report.classbook`): the gradebooks, ``statistics.csv``,
feedback, ``report.html``; and ``OUT/regrade_diff.csv`` (scores that changed in this run, and why).
Grading one student into a class's folder therefore replaces that student's row and keeps the
others. A submission named by the same path as one graded before keeps its folder.

A failure in one submission never stops the others: a notebook that is not one is graded 0 with
the reason; a notebook whose lab cannot be told gets a row saying so; a grader fault on one
notebook (even a worker process dying) gives that notebook a ``crash`` row, and it is retried on
the next run. A rerun skips submissions already graded against the same notebook, references,
grader and limits; ``force`` regrades everything.
"""
from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from grader.execute import caches, launch
from grader.execute import sandbox as sandboxing
from grader.execute.limits import Limits
from grader.grade import resume
from grader.grade.submission import _unreadable, find_submissions, grade_submission, output_names, resolve_lab
from grader.report import classbook, files, gradebook, safe_text, stats
from grader.report.results import SubmissionResult
from grader.report.settings import Settings
from util.answers import write_json
from util.labs import get_lab

UNKNOWN_LAB = "unknown"
GRADER_FAULT = "the grader could not"
"""Messages starting with this are the grader's problem, not the student's: never stored as done."""


@dataclass(frozen=True)
class Submission:
    """One thing to grade."""

    name: str
    """Its result folder's name (distinct across the class)."""
    path: Path
    """The notebook (or the file or folder that should have been one)."""
    lab: str
    """The lab it is graded as."""


def prepare(lab_names: set[str], *, timeout: int = 600) -> None:
    """Fill and verify the export caches for each lab, outside the sandbox (:mod:`grader.execute.caches`).

    Files that do not match what was recorded when they were written are deleted first; then each
    lab's ``prepare`` hook builds what is missing. A failing hook only costs time (each kernel then
    exports for itself), so it is reported and grading goes on.
    """
    import time

    caches.verify()  # before any hook runs: what the grader did not record is deleted, then rebuilt
    for name in sorted(lab_names):
        lab = get_lab(name)
        if not lab.prepare:
            continue
        print(f"grader: preparing {name}: exporting the models its notebook loads into the shared caches "
              "(a minute or two the first time, seconds once cached)...", file=sys.stderr, flush=True)
        start = time.monotonic()
        failure = caches.prepare(lab, timeout=timeout)
        if failure is not None:
            print(f"grader: warning: preparing {name} ({lab.prepare}) failed, kernels will export models themselves: "
                  + failure, file=sys.stderr)
        else:
            print(f"grader: prepared {name} in {time.monotonic() - start:.0f} s", file=sys.stderr, flush=True)


def _not_graded(path: Path, reason: str) -> SubmissionResult:
    return SubmissionResult(str(path), UNKNOWN_LAB, (), 0.0, "missing", (reason,))


def _grader_fault(sub: Submission, exc: BaseException) -> SubmissionResult:
    lab = get_lab(sub.lab)
    message = (f"{GRADER_FAULT} grade this notebook ({type(exc).__name__}: {exc}); it is not your fault: the "
               "instructors have been told, and it will be graded again")
    return replace(_unreadable(sub.path, lab, message), execution_status="crash")


def _faulty(result: SubmissionResult) -> bool:
    return result.execution_status == "crash" and any(GRADER_FAULT in note for note in result.notes)


def grade_one(sub: Submission, out: Path, limits: Limits, sandbox: bool | None,
              key: dict[str, str]) -> SubmissionResult:
    """Grade ``sub`` into ``out/<name>/`` and record it (a grader fault is recorded to be retried);
    never raises."""
    folder = out / sub.name
    lab = get_lab(sub.lab)
    try:
        result = grade_submission(sub.path, lab, folder, limits=limits, sandbox=sandbox)
    except Exception as exc:  # a grader bug on one notebook must not stop the class
        result = _grader_fault(sub, exc)
        write_json(folder / "results.json", result.to_gradescope_dict())
    resume.save(folder, key, result, source=sub.path, submitted=resume.submitted_at(sub.path, lab),
                retry=_faulty(result))
    return result


def _run(todo: list[tuple[Submission, dict]], out: Path, limits: Limits, sandbox: bool, jobs: int,
         done: Callable[[Submission, SubmissionResult], None]) -> None:
    """Grade ``todo``, ``jobs`` at a time, calling ``done`` as each finishes (in the main process)."""
    if jobs <= 1:
        for sub, key in todo:
            done(sub, grade_one(sub, out, limits, sandbox, key))
        return
    attempts: dict[str, int] = {}
    pending = list(todo)
    while pending:  # a worker that dies breaks its pool: the unfinished go to a fresh one, twice at most
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(jobs, len(pending)), mp_context=context) as pool:
            futures = {pool.submit(grade_one, sub, out, limits, sandbox, key): (sub, key) for sub, key in pending}
            pending = []
            for future in as_completed(futures):
                sub, key = futures[future]
                try:
                    result = future.result()
                except Exception as exc:  # BrokenProcessPool: the worker process died
                    attempts[sub.name] = attempts.get(sub.name, 0) + 1
                    if attempts[sub.name] < 2:
                        pending.append((sub, key))
                        continue
                    result = _grader_fault(sub, exc)
                    write_json(out / sub.name / "results.json", result.to_gradescope_dict())
                    resume.save(out / sub.name, key, result, source=sub.path, retry=True)
                done(sub, result)


def keep_folders(paths: list[Path], names: list[str], out: Path) -> list[str]:
    """Result folder names for ``paths``: a path graded into ``out`` before keeps its folder, and no
    path takes a folder that holds another submission's record (it gets a longer, distinct name).

    So grading one student into a class's folder replaces that student's row, whatever name the
    class run gave it, and never overwrites another student's."""
    records = resume.load_all(out)
    by_source = {os.path.abspath(r.source): name for name, r in records.items() if r.source}
    taken = set(records)
    chosen = []
    for path, name in zip(paths, names):
        earlier = by_source.get(os.path.abspath(path))
        if earlier is not None:
            chosen.append(earlier)
            continue
        parts = list(Path(os.path.abspath(path)).with_suffix("").parts[1:])
        if len(parts) >= 2 and parts[-2] == parts[-1]:  # a folder named like its notebook (a lab with support files)
            parts.pop()
        candidate, depth = name, 2
        while candidate in taken or candidate in chosen:
            candidate = "__".join(parts[-depth:]) if depth <= len(parts) else f"{name}__{depth}"
            depth += 1
        chosen.append(candidate)
    return chosen


def collect(paths: list[Path], lab: str | None, out: Path | None = None
            ) -> tuple[list[Submission], list[tuple[str, Path, str]], list[str]]:
    """Submissions to grade, (name, path, reason) for those whose lab cannot be told, and every
    name in the order found (names kept from earlier runs into ``out``: :func:`keep_folders`)."""
    found = find_submissions(paths)
    names = output_names(found)
    if out is not None:
        names = keep_folders(found, names, out)
    subs, unknown = [], []
    for name, path in zip(names, found):
        try:
            subs.append(Submission(name, path, resolve_lab(path, lab).name))
        except (ValueError, KeyError, OSError) as exc:
            unknown.append((name, path, str(exc).strip("'\"")))
    return subs, unknown, names


def main(*, paths: list[Path], out: Path, lab: str | None = None, show_feedback: bool = False,
         progress: bool = True, cell_timeout: int | None = None, notebook_timeout: int | None = None,
         jobs: int = 1, limits: Limits | None = None, force: bool = False, feedback_dir: Path | None = None,
         sandbox: bool | None = None, settings: dict | None = None) -> int:
    """Grade every submission under ``paths`` into ``out``; write and print the class's outputs.

    ``settings`` are the class-setting flags given (:meth:`grader.report.settings.Settings.updated`).
    Exit code 0 when every submission was graded (whatever its score), 1 when some could not be
    (lab unknown, or a grader fault) or an instructor's file has a problem, 2 when there was
    nothing to grade or a setting is malformed.
    """
    from tqdm import tqdm

    try:
        class_settings = Settings.load(out).updated(**(settings or {}))
    except ValueError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    missing = [p for p in paths if not p.exists()]
    subs, unknown, order = collect([p for p in paths if p.exists()], lab, out)
    if missing or not (subs or unknown):
        print("grader: nothing to grade: " + (", ".join(map(str, missing)) + " not found" if missing
                                              else "no .ipynb files under " + ", ".join(map(str, paths))),
              file=sys.stderr)
        return 2
    class_settings.save(out)
    limits = limits or Limits()
    limits = replace(limits, cell_timeout=cell_timeout or limits.cell_timeout,
                     notebook_timeout=notebook_timeout or limits.notebook_timeout)
    sandbox = sandboxing.available() if sandbox is None else sandbox
    print(f"grader: limits: {limits.describe()}; sandbox: {'bubblewrap' if sandbox else 'NONE'}", file=sys.stderr)
    print(f"grader: class settings ({out / 'class.json'}): {class_settings.describe()}", file=sys.stderr)
    print("grader: enforced by: " + "; ".join(f"{what}: {how}" for what, how in launch.enforcement(sandbox).items()),
          file=sys.stderr)

    for name, path, reason in unknown:
        result = _not_graded(path, reason)
        write_json(out / name / "results.json", result.to_gradescope_dict())
        resume.save(out / name, resume.key(path, None, limits), result, source=path,
                    submitted=resume.submitted_at(path, None))
    records = resume.load_all(out)
    todo, previous = [], {}
    for sub in subs:
        key = resume.key(sub.path, get_lab(sub.lab), limits)
        stored = records.get(sub.name)
        if stored is not None and stored.key == key and not stored.retry and not force:
            continue
        todo.append((sub, key))
        previous[sub.name] = (stored, key)
    if len(todo) < len(subs):
        print(f"grader: {len(subs) - len(todo)} of {len(subs)} submissions unchanged since they were graded: "
              "kept (--force regrades them)", file=sys.stderr)

    prepare({sub.lab for sub, _ in todo})
    changes: list[resume.Change] = []
    bar = tqdm(total=len(todo), desc="grading", unit="notebook", disable=not progress, file=sys.stderr)

    def done(sub: Submission, result: SubmissionResult) -> None:
        stored, key = previous[sub.name]
        if stored is not None:
            changes.extend(resume.changes(sub.name, stored, key, result))
        records[sub.name] = resume.load(out / sub.name) or records.get(sub.name)
        gradebook.write(out, list(classbook.build(out, class_settings, records).rows))
        bar.set_postfix_str(safe_text.terminal(sub.name, 40))
        bar.update()

    _run(todo, out, limits, sandbox, jobs, done)
    bar.close()

    book = classbook.build(out, class_settings)
    classbook.write(book, feedback_dir=feedback_dir)
    print(gradebook.render(list(book.rows)))
    print("\nPer task:\n" + stats.render(list(book.stats)))
    files.write_csv(out / "regrade_diff.csv", resume.CHANGE_HEADERS, [c.row() for c in changes])
    if changes:
        from tabulate import tabulate
        print(f"\nScores changed in this run ({len({c.submission for c in changes})} submissions):")
        print(tabulate([[safe_text.terminal(cell, 60) for cell in c.row()] for c in changes],
                       headers=resume.CHANGE_HEADERS, disable_numparse=True))
    if show_feedback:
        for row in book.rows:
            if row.result is None or row.submission not in order:
                continue
            print(f"\n== {safe_text.terminal(row.submission, 200)}: {row.total:g}/{row.max_score:g} ({row.status})")
            for note in row.result.notes:
                print(f"   note: {safe_text.terminal(note)}")
            for task in row.result.tasks:
                print("   " + safe_text.plain(task.output()).replace("\n", "\n   "))
    print(f"\nIn {out}: gradebook.csv (the class), gradebook_<lab>.csv (per task), statistics.csv, "
          "regrade_diff.csv, report.html (open it in a browser); per submission <name>/ (results.json, "
          "feedback.md, feedback.html, answers.json, executed.ipynb, grading.json)")
    for problem in book.problems:
        print(f"grader: {safe_text.terminal(problem)}", file=sys.stderr)
    for name, path, reason in unknown:
        print(f"grader: not graded: {safe_text.terminal(reason if str(path) in reason else f'{path}: {reason}')}",
              file=sys.stderr)
    faults = [sub.name for sub in subs if (r := book_result(book, sub.name)) is not None and _faulty(r)]
    for name in faults:
        print(f"grader: grader fault on {safe_text.terminal(name, 200)} (see its results.json); rerun to retry it",
              file=sys.stderr)
    return 1 if unknown or faults or book.problems else 0


def book_result(book: "classbook.Book", name: str) -> SubmissionResult | None:
    """The stored result of submission ``name`` in ``book``."""
    return next((r.result for r in book.rows if r.submission == name), None)
