"""Grading a class: many submissions, in parallel, resumable, with the class-level outputs.

``python -m grader grade DIR_OR_FILES... -j N --out OUT`` writes, as each submission finishes,
``OUT/<name>/`` (see :mod:`grader.grade`) and its record ``OUT/<name>/grading.json``
(:mod:`grader.grade.resume`); at the end it builds every class-level file from all the records in
``OUT``, not only this run's (:mod:`grader.report.classbook`): the gradebooks, ``statistics.csv``,
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
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Callable

from grader.execute import caches, launch
from grader.execute import sandbox as sandboxing
from grader.execute.limits import Limits
from grader import notebook
from grader.grade import resume
from grader.grade.collect import find_submissions, folder_name, output_names, refusal, resolve_lab
from grader.grade.submission import _unreadable, grade_submission
from grader.report import classbook, files, gradebook, safe_text, stats
from grader.report.results import GRADER_FAULT, SubmissionResult
from grader.report.settings import Settings
from util.answers import write_json
from util.labs import LABS, get_lab

UNKNOWN_LAB = "unknown"


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


def _not_graded(path: Path, reason: str, lab: str | None = None) -> SubmissionResult:
    """The row of a submission that is not read at all: every task of ``lab`` missing, or no task."""
    if lab in LABS:
        return _unreadable(path, get_lab(lab), reason)
    return SubmissionResult(str(path), UNKNOWN_LAB, (), 0.0, "missing", (reason,))


def _grader_fault(sub: Submission, exc: BaseException) -> SubmissionResult:
    lab = get_lab(sub.lab)
    message = (f"{GRADER_FAULT} grade this notebook ({type(exc).__name__}: {safe_text.plain(exc, 300)}); it is "
               "not your fault: the instructors have been told, and it will be graded again")
    return replace(_unreadable(sub.path, lab, message), execution_status="crash")


def _faulty(result: SubmissionResult) -> bool:
    """Whether the grader failed on this submission or on one of its tasks (then it is graded again)."""
    return (any(note.startswith(GRADER_FAULT) for note in result.notes)
            or any(c.message.startswith(GRADER_FAULT) for t in result.tasks for c in t.checks))


def grade_one(sub: Submission, out: Path, limits: Limits, sandbox: bool | None,
              key: dict[str, str], reveal: bool = False) -> SubmissionResult:
    """Grade ``sub`` into ``out/<name>/`` and record it (a grader fault is recorded to be retried);
    never raises."""
    folder = out / sub.name
    lab = get_lab(sub.lab)
    try:
        result = grade_submission(sub.path, lab, folder, limits=limits, sandbox=sandbox, reveal=reveal)
    except Exception as exc:  # a grader bug on one notebook must not stop the class
        result = _grader_fault(sub, exc)
        write_json(folder / "results.json", result.to_gradescope_dict())
    resume.save(folder, key, result, source=sub.path, submitted=resume.submitted_at(sub.path, lab),
                retry=_faulty(result))
    return result


def _run(todo: list[tuple[Submission, dict]], out: Path, limits: Limits, sandbox: bool, jobs: int,
         done: Callable[[Submission, SubmissionResult], None], reveal: bool = False,
         cluster: str | None = None) -> None:
    """Grade ``todo``, ``jobs`` at a time or on the Dask ``cluster`` (:mod:`grader.grade.cluster`),
    calling ``done`` as each finishes (in the main process)."""
    if cluster:
        from grader.grade import cluster as dask_cluster
        grade = partial(grade_one, limits=limits, sandbox=sandbox, reveal=reveal)
        return dask_cluster.run(cluster, todo, out, grade, done, sandbox=sandbox)
    if jobs <= 1:
        for sub, key in todo:
            done(sub, grade_one(sub, out, limits, sandbox, key, reveal))
        return
    attempts: dict[str, int] = {}
    pending = list(todo)
    while pending:  # a worker that dies breaks its pool: the unfinished go to a fresh one, twice at most
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(jobs, len(pending)), mp_context=context) as pool:
            futures = {pool.submit(grade_one, sub, out, limits, sandbox, key, reveal): (sub, key)
                       for sub, key in pending}
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
            candidate = folder_name("__".join(parts[-depth:])) if depth <= len(parts) else f"{name}__{depth}"
            depth += 1
        chosen.append(candidate)
    return chosen


@dataclass(frozen=True)
class Refused:
    """A submission that is not graded at all, and why."""

    name: str
    path: Path
    reason: str
    """In a student's words: a link, not a plain file, no such file, or the lab cannot be told."""
    lab: str | None = None
    """The lab, when ``--lab`` or the file's name tells it (its row then lists the lab's tasks)."""


def collect(paths: list[Path], lab: str | None, out: Path | None = None
            ) -> tuple[list[Submission], list[Refused], list[str]]:
    """Submissions to grade, those refused (with the reason), and every name in the order found
    (names kept from earlier runs into ``out``: :func:`keep_folders`). Never raises for what a
    file holds or is called."""
    found = find_submissions(paths)
    names = output_names(found)
    if out is not None:
        names = keep_folders(found, names, out)
    subs, refused = [], []
    for name, path in zip(names, found):
        reason = refusal(path)
        if reason:
            refused.append(Refused(name, path, reason, lab or notebook.lab_name(None, path)))
            continue
        try:
            subs.append(Submission(name, path, resolve_lab(path, lab).name))
        except Exception as exc:  # whatever the file holds: its own row, never the class's end
            refused.append(Refused(name, path, safe_text.plain(str(exc).strip("'\""))))
    return subs, refused, names


def main(*, paths: list[Path], out: Path, lab: str | None = None, show_feedback: bool = False,
         progress: bool = True, cell_timeout: int | None = None, notebook_timeout: int | None = None,
         jobs: int = 1, limits: Limits | None = None, force: bool = False, feedback_dir: Path | None = None,
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
    from tqdm import tqdm

    try:
        class_settings = Settings.load(out).updated(**(settings or {}))
    except ValueError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    shown = ", ".join(safe_text.terminal(safe_text.file_name(p, 500)) for p in paths)
    if not any(os.path.lexists(p) for p in paths):
        print(f"grader: nothing to grade: {shown} not found", file=sys.stderr)
        return 2
    subs, unknown, order = collect(list(paths), lab, out)
    if not (subs or unknown):
        print(f"grader: nothing to grade: no .ipynb files under {shown}", file=sys.stderr)
        return 2
    class_settings.save(out)
    limits = limits or Limits()
    limits = replace(limits, cell_timeout=cell_timeout or limits.cell_timeout,
                     notebook_timeout=notebook_timeout or limits.notebook_timeout)
    sandbox = (bool(cluster) or sandboxing.available()) if sandbox is None else sandbox
    print(f"grader: limits: {limits.describe()}; sandbox: {'bubblewrap' if sandbox else 'NONE'}", file=sys.stderr)
    print(f"grader: class settings ({out / 'class.json'}): {class_settings.describe()}", file=sys.stderr)
    print("grader: enforced by: " + "; ".join(f"{what}: {how}" for what, how in launch.enforcement(sandbox).items()),
          file=sys.stderr)

    for item in unknown:  # not read at all; the key hashes no link and reads no FIFO
        result = _not_graded(item.path, item.reason, item.lab)
        write_json(out / item.name / "results.json", result.to_gradescope_dict())
        key = (resume.key(item.path, None, limits) if refusal(item.path) is None
               else {"lab": UNKNOWN_LAB, "not read": item.reason[:200]})  # no content: never "identical"
        resume.save(out / item.name, key, result, source=item.path, submitted=resume.submitted_at(item.path, None))
    records = resume.load_all(out)
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

    def done(sub: Submission, result: SubmissionResult) -> None:
        stored, key = previous[sub.name]
        if stored is not None:
            changes.extend(resume.changes(sub.name, stored, key, result))
        records[sub.name] = resume.load(out / sub.name) or records.get(sub.name)
        gradebook.write(out, list(classbook.build(out, class_settings, records).rows))
        bar.set_postfix_str(safe_text.terminal(sub.name, 40))
        bar.update()

    _run(todo, out, limits, sandbox, jobs, done, reveal, cluster)
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
    for item in unknown:
        print(f"grader: not graded: {safe_text.terminal(item.name, 200)}: {safe_text.terminal(item.reason)}",
              file=sys.stderr)
    faults = [sub.name for sub in subs if (r := book_result(book, sub.name)) is not None and _faulty(r)]
    for name in faults:
        print(f"grader: grader fault on {safe_text.terminal(name, 200)} (see its results.json); rerun to retry it",
              file=sys.stderr)
    return 1 if unknown or faults or book.problems else 0


def book_result(book: "classbook.Book", name: str) -> SubmissionResult | None:
    """The stored result of submission ``name`` in ``book``."""
    return next((r.result for r in book.rows if r.submission == name), None)
