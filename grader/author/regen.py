"""Regenerating the reference answers: only by running the solution notebook, stored with provenance.

``regenerate`` runs the solution twice through the grading path and refuses to write unless both
runs agree exactly and the solution ran cleanly. ``check`` verifies the committed file is fresh:
same solution and declaration (by hash), same pinned package versions, and a new run reproduces it.

A released lab's grading never changes silently (:func:`release_changes`). The references record the
lab release they were made for and what each check was worth (``provenance.release``, ``graded``). A
hidden case they did not have must name a newer release (``Case.since``): notebooks built before are
then graded without it (:meth:`util.contract.Lab.as_of`). Any other change a student could lose points
to (an expected value, a check's points, a case or task gone) is refused unless the lab declares a new
release that tells students what changed (``Lab.releases``); then it is written, listed, and the TA
regrades the class and reads ``regrade_diff.csv`` (its ``release`` column says who held the older
handout). ``docs/tas.md`` says why.
"""
from __future__ import annotations

import hashlib
import json
import platform
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from grader import REPO
from grader.core import notebook
from grader.grade.run import Run, run_notebook
from grader.judge.compare import compare
from grader.judge.references import load, path_for
from util import labs
from util.answers import write_json
from util.contract import Lab, Tolerance
from util.hidden import term_fingerprint, term_secret, use_term

SOLUTION_DIR = REPO / "solutions"


class StaleReferences(RuntimeError):
    """The committed references do not match what the solution produces now."""


def source_hash(lab: Lab) -> str:
    """SHA-256 of the solution's cell sources and the lab's source files (not of outputs)."""
    digest = hashlib.sha256()
    nb = notebook.read(SOLUTION_DIR / lab.notebook)
    for cell in nb.cells:
        digest.update(cell.cell_type.encode() + b"\0" + cell.source.encode() + b"\0")
    for path in labs.source_files(lab):  # its folder, the course modules it imports, what it declares
        name = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)
        digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def provenance(lab: Lab) -> dict[str, Any]:
    """Where the references came from: the lab release, the versions of the packages the lab declares
    (``Lab.packages``), Python, platform, source hash."""
    versions = {}
    for name in lab.packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    secret = term_secret()
    return {
        "solution": f"solutions/{lab.notebook}",
        "release": lab.release,
        **({"term": term_fingerprint(secret)} if secret is not None else {}),
        "source_sha256": source_hash(lab),
        "packages": versions,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
    }


def _collect(lab: Lab, run: Run) -> dict[str, Any]:
    """The reference content of one solution run, or an error naming what went wrong."""
    problems = [e.describe() for e in run.execution.errors]
    if run.execution.status != "completed":
        problems.append(run.execution.message)
    problems += [f"task {t.id}: the solution exported no answer" for t in lab.tasks if t.id not in run.answers]
    for task_id, found in run.verdicts.items():  # grader-side checks too
        problems += [f"task {task_id} case {case_id}: {'; '.join(p)}" for case_id, p in found.items() if p]
    cases: dict[str, dict[str, Any]] = {}
    for task in lab.tasks:
        for case in task.cases:
            record = run.cases.get(task.id, {}).get(case.id)
            if record is None or record["status"] != "ok":
                problems.append(f"task {task.id} case {case.id}: "
                                + (record["message"] if record else "did not run"))
            else:
                cases.setdefault(task.id, {})[case.id] = record["value"]
    if problems:
        raise RuntimeError(f"the {lab.name} solution did not run cleanly:\n  " + "\n  ".join(problems))
    return {"answers": {t.id: run.answers[t.id] for t in lab.tasks}, "cases": cases}


def _differences(first: dict[str, Any], second: dict[str, Any]) -> list[str]:
    return [f"{m.path}: {m.expected!r} vs {m.actual!r}" for m in compare(first, second, Tolerance(), path="refs")]


def produce(lab: Lab) -> dict[str, Any]:
    """Run the solution once and return its reference content."""
    path = SOLUTION_DIR / lab.notebook
    return _collect(lab, run_notebook(notebook.read(path), lab, source_dir=path.parent))


def graded(lab: Lab) -> dict[str, Any]:
    """What each check of ``lab`` is worth: task id -> ``{"answer": points, "cases": {case id: points}}``."""
    return {t.id: {"answer": t.answer_points, "cases": {c.id: c.points for c in t.cases}} for t in lab.tasks}


class ReleasedChange(RuntimeError):
    """New references would change how a released lab grades the notebooks students hold, unannounced."""


def release_changes(lab: Lab, old: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str]]:
    """``(refused, announced)``: how replacing the references ``old`` (the committed file) by ``new`` (a
    solution run) changes grading for notebooks built from the release ``old`` was made for.

    ``refused`` always stops regen: a hidden case ``old`` lacks whose ``since`` is not a newer release
    (declare one, and notebooks built before are graded without it). ``announced`` lists every other
    change a notebook could lose points to: a changed expected value (beyond the task's tolerance), a
    check worth other points, a case or task gone. Regen refuses them too unless the lab declares a
    release newer than ``old``'s (students are told what changed); then they are written and listed."""
    made_for = old.get("provenance", {}).get("release", lab.release)  # files from before releases: the current one
    before = lab.as_of(made_for)  # the lab as that release grades
    worth = old.get("graded")
    refused, announced = [], []
    for task in lab.tasks:
        old_cases = old.get("cases", {}).get(task.id, {})
        if task.id not in old.get("answers", {}):
            announced.append(f"task {task.id} is new")
            continue
        found = compare(old["answers"][task.id], new["answers"][task.id], task.tolerance, path="answer")
        announced += [f"task {task.id}: the expected answer changes at {found[0].path}"] if found else []
        for case in task.cases:
            if case.id not in old_cases and case.since <= made_for:
                refused.append(f"task {task.id} gains the hidden case {case.id!r}, which notebooks built from release "
                               f"{made_for} were never told about: declare release {made_for + 1} in the lab's releases "
                               f"(what it adds, in the students' words) and give the case since={made_for + 1}, so "
                               "those notebooks are graded without it")
            elif case.id in old_cases:
                found = compare(old_cases[case.id], new["cases"][task.id][case.id], task.tolerance, path="result")
                announced += [f"task {task.id}: the expected value of case {case.id!r} changes at {found[0].path}"
                              ] if found else []
        gone = sorted(set(old_cases) - {c.id for c in task.cases})
        announced += [f"task {task.id} loses the case {case_id!r}" for case_id in gone]
        if isinstance(worth, dict) and isinstance(worth.get(task.id), dict):
            was, now = worth[task.id], graded(before)[task.id]
            if was.get("answer") != now["answer"]:
                announced.append(f"task {task.id}: a release-{made_for} notebook's answer is worth {now['answer']:g} "
                                 f"points instead of {was.get('answer')}")
            announced += [f"task {task.id}: case {case_id!r} is worth {points:g} points instead of "
                          f"{was['cases'][case_id]}" for case_id, points in now["cases"].items()
                          if case_id in was.get("cases", {}) and was["cases"][case_id] != points]
    announced += [f"task {task_id} is gone" for task_id in old.get("answers", {}) if task_id not in
                  {t.id for t in lab.tasks}]
    if announced and lab.release <= made_for:
        refused += [f"{change}: a notebook built from release {made_for} that was right by its handout's rules "
                    f"could lose points. If a rule changed, state it in the notebook and declare release "
                    f"{made_for + 1} in the lab's releases (what changed, in the students' words); a new rule is "
                    f"better a new hidden case with since={made_for + 1}" for change in announced]
        announced = []
    return refused, announced


@dataclass(frozen=True)
class RegenReport:
    lab: str
    path: Path
    changed: list[str]
    """Paths whose value differs from the previous file (empty for a first generation)."""
    announced: tuple[str, ...] = ()
    """Changes to how notebooks of the release the previous file was made for are graded, each announced
    by a newer release (:func:`release_changes`): regrade the class and read ``regrade_diff.csv``."""


def regenerate(lab: Lab) -> RegenReport:
    """Run the solution twice; write the references only if both runs agree exactly and the new ones do
    not change a released lab's grading unannounced (:class:`ReleasedChange`)."""
    first, second = produce(lab), produce(lab)
    differences = _differences(first, second)
    if differences:
        raise RuntimeError(f"{lab.name}: two runs of the solution disagree, so the references would not be "
                           "reproducible:\n  " + "\n  ".join(differences[:10]))
    path = path_for(lab)
    changed: list[str] = []
    announced: list[str] = []
    if path.exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        changed = _differences({"answers": old.get("answers"), "cases": old.get("cases")}, first)
        refused, announced = release_changes(lab, old, first)
        if refused:
            raise ReleasedChange(f"{lab.name}: refusing to change how released notebooks are graded, unannounced "
                                 "(nothing written):\n  " + "\n  ".join(refused))
    write_json(path, {"lab": lab.name, "provenance": provenance(lab), "graded": graded(lab), **first})
    return RegenReport(lab.name, path, changed, tuple(announced))


def check(lab: Lab, *, rerun: bool = True) -> list[str]:
    """Reasons the committed references are not fresh (empty when they are).

    Fresh means: made from today's solution and lab sources (by hash), with today's pinned packages,
    and (``rerun``) reproduced by a new run of the solution within each task's tolerance. Without
    ``rerun`` only the first two are checked (a graded run of the solution checks the third)."""
    try:
        committed = load(lab)
    except FileNotFoundError as exc:
        return [str(exc)]
    reasons = []
    now = provenance(lab)
    was = committed.get("provenance", {})
    if was.get("source_sha256") != now["source_sha256"]:
        root = labs.folder(lab)
        shared = ", ".join(path.relative_to(REPO).as_posix() for path in labs.source_files(lab)
                           if not path.is_relative_to(root) and path.is_relative_to(REPO)) or "no shared module"
        reasons.append(f"solutions/{lab.notebook} or the lab's sources ({labs.folder(lab)}/, {shared}) changed "
                       "since the references were made")
    if "release" in was and was["release"] != now["release"]:
        reasons.append(f"the lab is at release {now['release']} but the references were made for release "
                       f"{was['release']}")
    for name, version in now["packages"].items():
        if was.get("packages", {}).get(name) != version:
            reasons.append(f"{name} is {version} here but the references were made with "
                           f"{was.get('packages', {}).get(name)}")
    if not rerun:
        return reasons
    fresh = produce(lab)
    for task in lab.tasks:  # within each task's own tolerance: what grading would notice
        old = {"answer": committed.get("answers", {}).get(task.id), "cases": committed.get("cases", {}).get(task.id)}
        new = {"answer": fresh["answers"].get(task.id), "cases": fresh["cases"].get(task.id)}
        reasons += [f"a new run of task {task.id} differs at {m.path}: {m.expected!r} vs {m.actual!r}"
                    for m in compare(old, new, task.tolerance, path="refs")[:5]]
    return reasons


def main(*, labs: list[Lab], check_only: bool = False, term: str | None = None) -> int:
    """``python -m grader regen``: rewrite (or with ``check_only`` verify) the references; ``term``: those of the
    term whose secret that file holds (:func:`util.hidden.use_term`), stored beside it."""
    import time

    try:
        use_term(term)
    except ValueError as exc:
        print(f"regen: {exc}", file=sys.stderr)
        return 1
    status = 0
    for lab in labs:
        if not lab.tasks:
            continue
        start = time.monotonic()
        print(f"regen{' --check' if check_only else ''}: {lab.name}: running the solution "
              f"{'once' if check_only else 'twice'} (a few seconds to a minute or two each)...",
              file=sys.stderr, flush=True)
        if check_only:
            reasons = check(lab)
            for reason in reasons:
                print(f"regen --check: {lab.name}: {reason}", file=sys.stderr)
            print(f"regen --check: {lab.name}: " + ("STALE" if reasons else "fresh")
                  + f" ({time.monotonic() - start:.0f} s)")
            status |= bool(reasons)
            continue
        try:
            report = regenerate(lab)
        except RuntimeError as exc:
            print(f"regen: {exc}", file=sys.stderr)
            status = 1
            continue
        shown = report.path.relative_to(REPO) if report.path.is_relative_to(REPO) else report.path
        print(f"wrote {shown} ({time.monotonic() - start:.0f} s)"
              + (f"; {len(report.changed)} values changed:" if report.changed else "; no value changed"))
        for line in report.changed[:20]:
            print(f"  {line}")
        if report.announced:
            print(f"regen: {lab.name}: release {lab.release} changes how notebooks of earlier releases are graded "
                  "(announced in its changelog); regrade the class and read regrade_diff.csv (its release column):")
            for line in report.announced:
                print(f"  {line}")
    return status
