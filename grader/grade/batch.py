"""Grading a class: many submissions, in parallel, resumable, with the class-level outputs.

``python -m grader grade DIR_OR_FILES... -j N --out OUT`` writes, as each submission finishes,
``OUT/<name>/`` (see :mod:`grader.grade`) and its record ``OUT/<name>/grading.json``
(:mod:`grader.grade.resume`); the gradebooks while it grades (:class:`Rewrites`: as each finishes, or less often
when a large class's rewrite would cost the main process more than :data:`REWRITE_SHARE` of its time); at the end
it builds every class-level file from all the records in
``OUT``, not only this run's (:mod:`grader.report.class_folder`): the gradebooks, ``statistics.csv``,
feedback, ``report.html``; and ``OUT/regrade_diff.csv`` (scores that changed in this run, and why).
Grading one student into a class's folder therefore replaces that student's row and keeps the
others. A submission named by the same path as one graded before keeps its folder.

A failure in one submission never stops the others, whatever the file holds or is called: a
notebook that is not one is graded 0 with the reason; a link, a FIFO or a device, a path that does
not exist and a notebook whose lab cannot be told each get a row saying so (and exit code 1); a
grader fault while judging one task costs that task only (:func:`grader.judge.score.score`), and a
fault on the whole notebook (even a worker process dying) gives that notebook a ``crash`` row;
either is retried on the next run. A rerun skips submissions already graded against the same
notebook, references, grader, limits and feedback setting; ``force`` regrades everything.
"""
from __future__ import annotations

import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from pathlib import Path
from typing import Callable

from grader.core import records as stored_records
from grader.core import safe_text
from grader.core.files import write_csv
from grader.core.limits import Limits
from grader.core.namespace import class_file
from grader.core.results import SubmissionResult
from grader.execute import confinement
from grader.grade import resume
from grader.grade.cluster import run as cluster_run
from grader.grade.collect import Submission, collect, refusal
from grader.grade.jobs import UNKNOWN_LAB, faulty, grade_one, grader_fault, not_graded, prepare
from grader.report import class_folder, gradebook, stats
from grader.report.settings import Settings
from util.answers import write_json
from util.hidden import use_term
from util.labs import get_lab

REWRITE_SHARE = 0.05
"""The most of its time the main process spends rewriting the gradebooks while a class grades. Rebuilding them
reads every row (:func:`grader.report.class_folder.build`): measured, 10 to 90 ms for a class of 8, 0.7 s for 256,
so rewriting after every submission made the main process's work grow with the square of the class (about 180 s
for 256) and, at -j 16, slower than the submissions arriving."""


class Rewrites:
    """``rewrite()`` called as each submission finishes, run unless the last run was too recent: after a rewrite
    that took ``c`` seconds, the next waits until ``c / REWRITE_SHARE`` seconds have passed since that one began
    (a class of 8 is rewritten after every submission; one of 256 about every 14 s). The end of the run writes
    every class file whatever was skipped (:func:`grader.report.class_folder.write`)."""

    def __init__(self, rewrite: Callable[[], None], share: float = REWRITE_SHARE,
                 clock: Callable[[], float] = time.monotonic):
        self.rewrite, self.share, self.clock = rewrite, share, clock
        self.next_at = float("-inf")
        self.runs = self.skipped = 0
        self.seconds = 0.0

    def __call__(self) -> bool:
        began = self.clock()
        if began < self.next_at:
            self.skipped += 1
            return False
        self.rewrite()
        cost = self.clock() - began
        self.runs, self.seconds = self.runs + 1, self.seconds + cost
        self.next_at = began + cost / self.share
        return True


def _pool(jobs: int) -> ProcessPoolExecutor:
    """``jobs`` worker processes, started now: each imports the grader (about a second) while the main process
    still collects and hashes the submissions, instead of after."""
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))
    for _ in range(jobs):
        pool.submit(_ready)
    return pool


def _ready() -> bool:
    """Nothing: what a fresh worker runs first, so that it starts and imports this module (:func:`_pool`)."""
    return True


def _run(todo: list[tuple[Submission, dict]], out: Path, limits: Limits, sandbox: bool, jobs: int,
         done: Callable[[Submission, SubmissionResult], None], reveal: bool = False,
         cluster: str | None = None, pool: ProcessPoolExecutor | None = None) -> None:
    """Grade ``todo``, ``jobs`` at a time or on the Dask ``cluster`` (:mod:`grader.grade.cluster`),
    calling ``done`` as each finishes (in the main process); ``pool``: ``jobs`` workers already started
    (:func:`_pool`), used first and shut down here."""
    if cluster:
        grade = partial(grade_one, limits=limits, sandbox=sandbox, reveal=reveal)
        return cluster_run(cluster, todo, out, grade, done, sandbox=sandbox)
    if jobs <= 1:
        for sub, key in todo:
            done(sub, grade_one(sub, out, limits, sandbox, key, reveal))
        return
    attempts: dict[str, int] = {}
    pending = list(todo)
    while pending:  # a worker that dies breaks its pool: the unfinished go to a fresh one, twice at most
        try:
            pool = pool or ProcessPoolExecutor(min(jobs, len(pending)), mp_context=multiprocessing.get_context("spawn"))
            futures = {pool.submit(grade_one, sub, out, limits, sandbox, key, reveal): (sub, key)
                       for sub, key in pending}
        except BrokenProcessPool:  # a worker of the pool started early died before grading began
            pool.shutdown(cancel_futures=True)
            pool = ProcessPoolExecutor(min(jobs, len(pending)), mp_context=multiprocessing.get_context("spawn"))
            futures = {pool.submit(grade_one, sub, out, limits, sandbox, key, reveal): (sub, key)
                       for sub, key in pending}
        with pool:
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
                    result = grader_fault(sub, exc)
                    write_json(out / sub.name / "results.json", result.to_gradescope_dict())
                    stored_records.save(out / sub.name, key, result, source=sub.path, retry=True)
                done(sub, result)
        pool = None


def main(*, paths: list[Path], out: Path, lab: str | None = None, show_feedback: bool = False,
         progress: bool = True, jobs: int = 1, limits: Limits | None = None, force: bool = False, feedback_dir: Path | None = None,
         sandbox: bool | None = None, settings: dict | None = None, reveal: bool = False,
         cluster: str | None = None) -> int:
    """Grade every submission under ``paths`` into ``out``; write and print the class's outputs.

    ``settings`` are the class-setting flags given (:meth:`grader.report.settings.Settings.updated`).
    ``reveal`` (``--show-expected``) puts the expected values in the feedback of checks that are not
    hidden; by default feedback says where and how an answer differs, never the value.
    ``cluster`` grades on a Dask cluster instead of local processes (``local:N`` or a scheduler's
    address, :mod:`grader.grade.cluster`); there the sandbox is required on every worker unless
    ``sandbox`` is False.
    Exit code 0 when every submission was graded (whatever its score), 1 when some could not be
    (a link or special file, a path that does not exist, lab unknown, or a grader fault) or an
    instructor's file has a problem, 2 when there was nothing to grade or a setting is malformed.
    """

    try:
        class_settings = Settings.load(out).updated(**(settings or {}))
        use_term(class_settings.term)  # the hidden cases' seeds and the references are this term's
    except ValueError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    shown = ", ".join(safe_text.terminal(safe_text.file_name(p, 500)) for p in paths)
    if not any(os.path.lexists(p) for p in paths):
        print(f"grader: nothing to grade: {shown} not found", file=sys.stderr)
        return 2
    class_folder.free_class_names(out)
    pool = _pool(jobs) if jobs > 1 and not cluster else None
    try:
        return _grade(paths, out, lab, show_feedback, progress, jobs, limits, force, feedback_dir, sandbox,
                      class_settings, reveal, cluster, pool, shown)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def _grade(paths, out, lab, show_feedback, progress, jobs, limits, force, feedback_dir, sandbox, class_settings,
           reveal, cluster, pool, shown) -> int:
    """:func:`main`, once the class settings are read and the workers started."""
    from tqdm import tqdm

    subs, unknown, order = collect(list(paths), lab, out)
    if not (subs or unknown):
        print(f"grader: nothing to grade: no .ipynb files under {shown}", file=sys.stderr)
        return 2
    class_settings.save(out)
    limits = limits or Limits()
    sandbox = (bool(cluster) or confinement.available()) if sandbox is None else sandbox
    print(f"grader: limits: {limits.describe()}; sandbox: {'bubblewrap' if sandbox else 'NONE'}", file=sys.stderr)
    print(f"grader: class settings ({out / 'class.json'}): {class_settings.describe()}", file=sys.stderr)
    print("grader: enforced by: " + "; ".join(f"{what}: {how}" for what, how in confinement.enforcement(sandbox).items()),
          file=sys.stderr)

    for item in unknown:  # not read at all; the key hashes no link and reads no FIFO
        result = not_graded(item.path, item.reason, item.lab)
        write_json(out / item.name / "results.json", result.to_gradescope_dict())
        key = (resume.key(item.path, None, limits) if refusal(item.path) is None
               else {"lab": UNKNOWN_LAB, "not read": item.reason[:200]})  # no content: never "identical"
        stored_records.save(out / item.name, key, result, source=item.path, submitted=resume.submitted_at(item.path, None))
    records = stored_records.load_all(out)
    todo, previous = [], {}
    for sub in subs:
        key = resume.key(sub.path, get_lab(sub.lab), limits)
        key["feedback"] = "expected values shown" if reveal else "expected values hidden"
        stored = records.get(sub.name)
        if stored is not None and stored.key == key and not stored.retry and not force:
            continue
        todo.append((sub, key))
        previous[sub.name] = (stored, key)
    if len(todo) < len(subs):
        print(f"grader: {len(subs) - len(todo)} of {len(subs)} submissions unchanged since they were graded: "
              "kept (--force regrades them)", file=sys.stderr)

    if not cluster:  # a cluster prepares on each worker
        prepare({sub.lab for sub, _ in todo})
    changes: list[resume.Change] = []
    bar = tqdm(total=len(todo), desc="grading", unit="notebook", disable=not progress, file=sys.stderr)

    rewrite = Rewrites(lambda: gradebook.write(out, list(class_folder.build(out, class_settings, records).rows)))

    def done(sub: Submission, result: SubmissionResult) -> None:
        stored, key = previous[sub.name]
        if stored is not None:
            changes.extend(resume.changes(sub.name, stored, key, result))
        records[sub.name] = stored_records.load(out / sub.name) or records.get(sub.name)
        rewrite()
        bar.set_postfix_str(safe_text.terminal(sub.name, 40))
        bar.update()

    _run(todo, out, limits, sandbox, jobs, done, reveal, cluster, pool)
    bar.close()

    book = class_folder.build(out, class_settings)
    class_folder.write(book, feedback_dir=feedback_dir)
    print(gradebook.render(list(book.rows)))
    print("\nPer task:\n" + stats.render(list(book.stats)))
    write_csv(class_file(out, "regrade_diff.csv"), resume.CHANGE_HEADERS, [c.row() for c in changes])
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
    for item in unknown:
        print(f"grader: not graded: {safe_text.terminal(item.name, 200)}: {safe_text.terminal(item.reason)}",
              file=sys.stderr)
    faults = [sub.name for sub in subs if (r := book_result(book, sub.name)) is not None and faulty(r)]
    for name in faults:
        print(f"grader: grader fault on {safe_text.terminal(name, 200)} (see its results.json); rerun to retry it",
              file=sys.stderr)
    return 1 if unknown or faults or book.problems else 0


def book_result(book: "class_folder.Book", name: str) -> SubmissionResult | None:
    """The stored result of submission ``name`` in ``book``."""
    return next((r.result for r in book.rows if r.submission == name), None)
