"""Regenerating the reference answers: only by running the solution notebook, stored with provenance.

``regenerate`` runs the solution twice through the grading path and refuses to write unless both
runs agree exactly and the solution ran cleanly. ``check`` verifies the committed file is fresh:
same solution and declaration (by hash), same pinned package versions, and a new run reproduces it.
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

SOLUTION_DIR = REPO / "solutions"


class StaleReferences(RuntimeError):
    """The committed references do not match what the solution produces now."""


def source_hash(lab: Lab) -> str:
    """SHA-256 of the solution's cell sources and the lab's source files (not of outputs)."""
    digest = hashlib.sha256()
    nb = notebook.read(SOLUTION_DIR / lab.notebook)
    for cell in nb.cells:
        digest.update(cell.cell_type.encode() + b"\0" + cell.source.encode() + b"\0")
    for path in labs.source_files(lab):  # the lab's folder and the shared modules it declares
        name = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)
        digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def provenance(lab: Lab) -> dict[str, Any]:
    """Where the references came from: the versions of the packages the lab declares (``Lab.packages``),
    Python, platform, source hash."""
    versions = {}
    for name in lab.packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "solution": f"solutions/{lab.notebook}",
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


@dataclass(frozen=True)
class RegenReport:
    lab: str
    path: Path
    changed: list[str]
    """Paths whose value differs from the previous file (empty for a first generation)."""


def regenerate(lab: Lab) -> RegenReport:
    """Run the solution twice; write the references only if both runs agree exactly."""
    first, second = produce(lab), produce(lab)
    differences = _differences(first, second)
    if differences:
        raise RuntimeError(f"{lab.name}: two runs of the solution disagree, so the references would not be "
                           "reproducible:\n  " + "\n  ".join(differences[:10]))
    path = path_for(lab)
    changed: list[str] = []
    if path.exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        changed = _differences({"answers": old.get("answers"), "cases": old.get("cases")}, first)
    write_json(path, {"lab": lab.name, "provenance": provenance(lab), **first})
    return RegenReport(lab.name, path, changed)


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
        shared = ", ".join(lab.shared_sources) or "no shared module"
        reasons.append(f"solutions/{lab.notebook} or the lab's sources ({labs.folder(lab)}/, {shared}) changed "
                       "since the references were made")
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


def main(*, labs: list[Lab], check_only: bool = False) -> int:
    """``python -m grader regen``: rewrite (or with ``check_only`` verify) the references."""
    import time

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
        print(f"wrote {report.path.relative_to(REPO)} ({time.monotonic() - start:.0f} s)"
              + (f"; {len(report.changed)} values changed:" if report.changed else "; no value changed"))
        for line in report.changed[:20]:
            print(f"  {line}")
    return status
