"""Grading a class: many submissions, in parallel, resumable, with the class-level outputs.

``python -m grader grade DIR_OR_FILES... -j N --out OUT`` writes, as each submission finishes,
``OUT/<name>/`` (see :mod:`grader.grade.submission`) and ``OUT/gradebook.csv``; at the end it also writes
``OUT/statistics.csv`` (per task: mean, pass rate, most common failure, :mod:`grader.report.stats`) and
``OUT/regrade_diff.csv`` (scores that changed since the last run, and why, :mod:`grader.grade.resume`).

A failure in one submission never stops the others: a notebook that is not one is graded 0 with
the reason; a notebook whose lab cannot be told gets a row saying so; a grader fault on one
notebook (even a worker process dying) gives that notebook a ``crash`` row, and it is retried on
the next run. A rerun skips submissions already graded against the same notebook, references,
grader and limits; ``force`` regrades everything.
"""
from __future__ import annotations

import csv
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Callable

from grader import REPO
from grader.execute import sandbox as sandboxing
from grader.execute.limits import Limits
from grader.grade import resume
from grader.grade.submission import (
    _unreadable,
    find_submissions,
    grade_submission,
    output_names,
    resolve_lab,
)
from grader.report import feedback, gradebook, stats
from grader.report.results import SubmissionResult
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
    """Run each lab's ``prepare`` hook (fill the export caches) in a subprocess, outside the sandbox.

    A subprocess keeps torch out of the grader's own memory; a failing hook only costs time (each
    kernel then exports for itself), so it is reported and grading goes on.
    """
    import subprocess

    for name in sorted(lab_names):
        hook = get_lab(name).prepare
        if not hook:
            continue
        module, function = hook.split(":")
        code = f"import importlib, util.labs; importlib.import_module({module!r}).{function}()"
        try:
            done = subprocess.run([sys.executable, "-c", code], cwd=str(REPO), capture_output=True,
                                  text=True, timeout=timeout)
            failure = done.stderr.strip().splitlines()[-1:] if done.returncode else None
        except (OSError, subprocess.TimeoutExpired) as exc:
            failure = [str(exc)]
        if failure is not None:
            print(f"grader: warning: preparing {name} ({hook}) failed, kernels will export models themselves: "
                  + " ".join(failure), file=sys.stderr)


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
    """Grade ``sub`` into ``out/<name>/`` and record it for resuming; never raises."""
    folder = out / sub.name
    try:
        result = grade_submission(sub.path, get_lab(sub.lab), folder, limits=limits, sandbox=sandbox)
    except Exception as exc:  # a grader bug on one notebook must not stop the class
        result = _grader_fault(sub, exc)
        write_json(folder / "results.json", result.to_gradescope_dict())
    if not _faulty(result):
        resume.save(folder, key, result)
    return result


def _run(todo: list[tuple[Submission, dict]], out: Path, limits: Limits, sandbox: bool, jobs: int,
         done: Callable[[Submission, SubmissionResult], None], cluster: str | None = None) -> None:
    """Grade ``todo``, ``jobs`` at a time or on the Dask ``cluster`` (:mod:`grader.grade.cluster`),
    calling ``done`` as each finishes (in the main process)."""
    if cluster:
        from grader.grade import cluster as dask_cluster
        grade = partial(grade_one, limits=limits, sandbox=sandbox)
        return dask_cluster.run(cluster, todo, out, grade, done, sandbox=sandbox)
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
                done(sub, result)


def collect(paths: list[Path], lab: str | None) -> tuple[list[Submission], list[tuple[str, Path, str]], list[str]]:
    """Submissions to grade, (name, path, reason) for those whose lab cannot be told, and every
    name in the order found."""
    found = find_submissions(paths)
    names = output_names(found)
    subs, unknown = [], []
    for name, path in zip(names, found):
        try:
            subs.append(Submission(name, path, resolve_lab(path, lab).name))
        except (ValueError, KeyError, OSError) as exc:
            unknown.append((name, path, str(exc).strip("'\"")))
    return subs, unknown, names


def _write_rows(path: Path, headers: list[str], rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(headers)
        writer.writerows(rows)


def main(*, paths: list[Path], out: Path, lab: str | None = None, show_feedback: bool = False,
         progress: bool = True, cell_timeout: int | None = None, notebook_timeout: int | None = None,
         jobs: int = 1, limits: Limits | None = None, force: bool = False, feedback_dir: Path | None = None,
         sandbox: bool | None = None, cluster: str | None = None) -> int:
    """Grade every submission under ``paths`` into ``out``; print the gradebook and statistics.

    ``cluster`` grades on a Dask cluster instead of local processes (``local:N`` or a scheduler's
    address, :mod:`grader.grade.cluster`); there the sandbox is required on every worker unless
    ``sandbox`` is False.

    Exit code 0 when every submission was graded (whatever its score), 1 when some could not be
    (lab unknown, or a grader fault), 2 when there was nothing to grade.
    """
    from tqdm import tqdm

    missing = [p for p in paths if not p.exists()]
    subs, unknown, order = collect([p for p in paths if p.exists()], lab)
    if missing or not (subs or unknown):
        print("grader: nothing to grade: " + (", ".join(map(str, missing)) + " not found" if missing
                                              else "no .ipynb files under " + ", ".join(map(str, paths))),
              file=sys.stderr)
        return 2
    limits = limits or Limits()
    limits = replace(limits, cell_timeout=cell_timeout or limits.cell_timeout,
                     notebook_timeout=notebook_timeout or limits.notebook_timeout)
    sandbox = (bool(cluster) or sandboxing.available()) if sandbox is None else sandbox
    print(f"grader: limits: {limits.describe()}; sandbox: {'bubblewrap' if sandbox else 'NONE'}", file=sys.stderr)

    results: dict[str, SubmissionResult] = {}
    for name, path, reason in unknown:
        results[name] = _not_graded(path, reason)
        write_json(out / name / "results.json", results[name].to_gradescope_dict())
    todo, previous = [], {}
    for sub in subs:
        key = resume.key(sub.path, get_lab(sub.lab), limits)
        stored = resume.load(out / sub.name)
        if stored is not None and stored.key == key and not force:
            results[sub.name] = stored.result
        else:
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
        results[sub.name] = result
        stored, key = previous[sub.name]
        if stored is not None:
            changes.extend(resume.changes(sub.name, stored, key, result))
        gradebook.write_csv(out / "gradebook.csv", [(n, results[n]) for n in order if n in results])
        bar.set_postfix_str(sub.name)
        bar.update()

    _run(todo, out, limits, sandbox, jobs, done, cluster)
    bar.close()

    graded = [(name, results[name]) for name in order]
    print(gradebook.render(graded))
    gradebook.write_csv(out / "gradebook.csv", graded)
    class_stats = stats.compute([(n, r) for n, r in graded if r.lab != UNKNOWN_LAB])
    stats.write_csv(out / "statistics.csv", class_stats)
    print("\nPer task:\n" + stats.render(class_stats))
    _write_rows(out / "regrade_diff.csv", resume.CHANGE_HEADERS, [c.row() for c in changes])
    if changes:
        from tabulate import tabulate
        print(f"\nScores changed since the last grading ({len({c.submission for c in changes})} submissions):")
        print(tabulate([c.row() for c in changes], headers=resume.CHANGE_HEADERS, disable_numparse=True))
    for name, result in graded:
        if feedback_dir is not None:
            feedback_dir.mkdir(parents=True, exist_ok=True)
            (feedback_dir / f"{name}.md").write_text(feedback.render(name, result), encoding="utf-8")
        if show_feedback:
            print(f"\n== {name}: {result.score:g}/{result.max_score:g}")
            for note in result.notes:
                print(f"   note: {note}")
            for task in result.tasks:
                print("   " + task.output().replace("\n", "\n   "))
    print(f"\nPer submission: {out}/<submission>/ (results.json, feedback.md, answers.json, executed.ipynb); "
          f"class: {out / 'gradebook.csv'}, {out / 'statistics.csv'}, {out / 'regrade_diff.csv'}")
    for name, path, reason in unknown:
        print(f"grader: not graded: {reason if str(path) in reason else f'{path}: {reason}'}", file=sys.stderr)
    faults = [name for name, r in graded if _faulty(r)]
    for name in faults:
        print(f"grader: grader fault on {name} (see its results.json); rerun to retry it", file=sys.stderr)
    return 1 if unknown or faults else 0
