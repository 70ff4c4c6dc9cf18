"""``python -m grader dispute CLASS_FOLDER STUDENT TASK``: a student's mark, run again, twice, on the record.

A student who believes a mark is wrong needs a path other than an email, and the instructor one other than
re-running by hand. A dispute re-runs the task's hidden cases for that submission in fresh sandboxes, twice
(the notebook again, then only that task's cases), and writes a record beside the original grading
(``<submission>/disputes/<task>-<time>.json`` and ``.md``): for the original and each re-run, every case's
input (as this term grades it), what the student's function returned, the verdict, its points, the time it
took and what the grader's own checks measured (a speed-up and the band it was judged in: ``facts.json``),
with the grader's version and the lab release. It then says whether the mark **stands** (both re-runs give
the task the points it has) or **differs**.

The instructor's decision goes through the overrides (:mod:`grader.report.overrides`): ``--decide POINTS
--reason TEXT`` appends a line to the class's overrides file whose reason names the record, so the student's
feedback shows the decision and where it came from; ``python -m grader report`` (or the next ``grade``)
applies it. Nothing here changes ``results.json``: the autograder's own result stays as it was.
"""
from __future__ import annotations

import csv
import io
import json
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from grader import __version__
from grader.core import files, notebook
from grader.core import records as stored_records
from grader.core.limits import Limits
from grader.core.safe_text import json_value, plain
from grader.grade.run import run_notebook
from grader.judge import references
from grader.judge.score import score
from grader.report import roster
from grader.report.settings import Settings
from util.contract import Lab, Task
from util.hidden import graded_spec, use_term
from util.labs import find_task

FOLDER = "disputes"
"""Where a submission's dispute records go, in its result folder."""
RUNS = 2
"""How many times a dispute runs the task again."""


class DisputeError(ValueError):
    """A dispute that cannot be run; the message says why and what to do."""


def find_submission(out: Path, who: str, lab: Lab, settings: Settings) -> tuple[str, stored_records.Previous]:
    """The result folder name and stored record of ``who``'s submission of ``lab``: ``who`` is a submission's
    folder in ``out``, or a roster ``student_id`` or email (the class's roster setting) owning exactly one
    graded submission of ``lab``."""
    records = {name: r for name, r in stored_records.load_all(out).items() if r.result.lab == lab.name}
    if who in records:
        return who, records[who]
    if settings.roster:
        class_roster = roster.read(Path(settings.roster))
        student = class_roster.find(who)
        owned = [(name, r) for name, r in sorted(records.items())
                 if student is not None and r.source and student in class_roster.owners(r.source)]
        if len(owned) == 1:
            return owned[0]
        if len(owned) > 1:
            raise DisputeError(f"{who} has {len(owned)} graded submissions of {lab.name} "
                               f"({', '.join(n for n, _ in owned)}): name the one in dispute by its folder")
    known = ", ".join(sorted(records)[:8]) + (" ..." if len(records) > 8 else "")
    raise DisputeError(f"no graded submission {who!r} of {lab.name} in {out} (its submissions of {lab.name}: "
                       f"{known or 'none'}); name a submission's folder, or a student of the roster")


def _only(lab: Lab, task_ids: list[str]) -> Lab:
    """``lab`` with the hidden cases of ``task_ids`` alone (the notebook still runs whole: it defines them)."""
    def keep(task: Task) -> Task:
        return task if task.id in task_ids else replace(task, cases=(), hidden_points=0.0)

    return replace(lab, tasks=tuple(keep(t) for t in lab.tasks))


def _cases_of(task: Task, lab: Lab, cases: dict, facts: dict, checks: dict) -> list[dict[str, Any]]:
    """Per case of ``task``: its input, the kernel's record, the verdict and what the grader measured."""
    rows = []
    for case in task.cases:
        record = (cases.get(task.id) or {}).get(case.id) or {}
        check = checks.get(case.id) or {}
        rows.append({"case": case.id, "input": graded_spec(lab, task, case), "status": record.get("status"),
                     "value": record.get("value"), "message": record.get("message"),
                     "seconds": record.get("seconds"), "verdict": check.get("status"),
                     "points": check.get("score"), "max_points": check.get("max_score"),
                     "feedback": check.get("message"), "measured": (facts.get(task.id) or {}).get(case.id, {})})
    return rows


def _original(folder: Path, task: Task, lab: Lab) -> dict[str, Any]:
    def read(name: str) -> dict:
        try:
            return json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    result = stored_records.load(folder).result
    task_result = next(t for t in result.tasks if t.task_id == task.id)
    checks = {c.name: {"status": c.status, "score": c.score, "max_score": c.max_score, "message": c.message}
              for c in task_result.checks}
    return {"points": task_result.score, "max_points": task_result.max_score, "release": result.release,
            "cases": _cases_of(task, lab, read("cases.json"), read("facts.json"), checks)}


def _rerun(source: Path, lab: Lab, tasks: list[Task], limits: Limits, sandbox: bool | None) -> dict[str, Any]:
    """One run of the notebook and of ``tasks``' hidden cases: task id -> its points, cases and the run's time."""
    nb = notebook.read(source, limits.notebook_size)
    start = time.monotonic()
    ids = [task.id for task in tasks]
    run = run_notebook(nb, _only(lab, ids), limits=limits, sandbox=sandbox, source_dir=source.parent)
    seconds = round(time.monotonic() - start, 2)
    scored = {t.task_id: t for t in score(lab, references.load(lab), run.answers, run.cases, run.execution,
                                          run.verdicts) if t.task_id in ids}
    out = {}
    for task in tasks:
        checks = {c.name: {"status": c.status, "score": c.score, "max_score": c.max_score, "message": c.message}
                  for c in scored[task.id].checks}
        out[task.id] = {"points": scored[task.id].score, "max_points": scored[task.id].max_score,
                        "execution": run.execution.status, "seconds": seconds,
                        "cases": _cases_of(task, lab, run.cases, run.facts, checks)}
    return out


def dispute(out: Path, who: str, task_ids: str | list[str], *, settings: Settings | None = None,
            limits: Limits | None = None, sandbox: bool | None = None,
            runs: int = RUNS) -> list[tuple[Path, dict[str, Any]]]:
    """Run tasks ``task_ids`` (of one lab) of ``who``'s submission again ``runs`` times, all in the same runs;
    write and return one record per task."""
    task_ids = [task_ids] if isinstance(task_ids, str) else list(task_ids)
    settings = settings or Settings.load(out)
    use_term(settings.term)  # the inputs and references the class was graded with
    try:
        found_labs = {find_task(task_id)[0].name: find_task(task_id)[0] for task_id in task_ids}
    except KeyError as exc:
        raise DisputeError(str(exc).strip("'\"")) from None
    if len(found_labs) != 1:
        raise DisputeError(f"tasks {', '.join(task_ids)} belong to {len(found_labs)} labs; dispute one lab's at a time")
    [lab] = found_labs.values()
    name, record = find_submission(out, who, lab, settings)
    graded_as = lab.as_of(record.result.release) if record.result.release else lab
    tasks = [graded_as.task(task_id) for task_id in dict.fromkeys(task_ids)]
    source = Path(record.source or record.result.submission)
    if not source.exists():
        raise DisputeError(f"the submission {source} is no longer where it was graded from; put it back to re-run it")
    folder = out / name
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    reruns = []
    for index in range(runs):
        print(f"dispute: {name} tasks {', '.join(t.id for t in tasks)}: run {index + 1} of {runs} (the notebook, "
              "then these tasks' cases)...", file=sys.stderr, flush=True)
        reruns.append(_rerun(source, graded_as, tasks, limits or Limits(), sandbox))
    written = []
    for task in tasks:
        found = {"student": name, "lab": lab.name, "task": task.id, "title": task.title,
                 "grader_version": __version__, "disputed": when, "source": str(source),
                 "original": _original(folder, task, graded_as), "runs": [rerun[task.id] for rerun in reruns]}
        points = {found["original"]["points"], *(run["points"] for run in found["runs"])}
        found["verdict"] = "stands" if len(points) == 1 else "differs"
        path = folder / FOLDER / f"{task.id}-{when.replace(':', '').replace('-', '')}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        files.write_text(path, json.dumps(json_value(found), indent=1, sort_keys=True) + "\n")
        files.write_text(path.with_suffix(".md"), render(found))
        written.append((path, found))
    return written


def render(found: dict[str, Any]) -> str:
    """The record as the instructor (and, if shared, the student) reads it: every value escaped as text."""
    def text(value: Any, limit: int = 200) -> str:
        return plain(json.dumps(value, sort_keys=True) if not isinstance(value, str) else value, limit).replace("|", "/")

    lines = [f"# Dispute: {text(found['student'])}, task {found['task']} ({text(found['title'])})", "",
             f"Lab {found['lab']}, graded as release {found['original'].get('release')}; grader {found['grader_version']}; "
             f"run again {len(found['runs'])} times on {found['disputed']}.", "",
             f"**The mark {found['verdict']}**: originally {found['original']['points']:g} of "
             f"{found['original']['max_points']:g}; re-runs: "
             + ", ".join(f"{run['points']:g} ({run['seconds']:g} s)" for run in found["runs"]) + ".", ""]
    columns = ["original", *(f"run {i + 1}" for i in range(len(found["runs"])))]
    for index, case in enumerate(found["original"]["cases"]):
        lines += [f"## Case: {text(case['case'])}", "", f"Input: `{text(case['input'], 400)}`", "",
                  "| | verdict | points | returned | seconds | measured by the grader |", "|---|---|---|---|---|---|"]
        for label, run in zip(columns, [found["original"], *found["runs"]]):
            row = run["cases"][index]
            lines.append(f"| {label} | {text(row['verdict'])} | {row['points']} | {text(row['value'], 120)} | "
                         f"{row['seconds']} | {text(row['measured'], 160)} |")
        lines.append("")
    return "\n".join(lines)


def decide(out: Path, name: str, task_id: str, points: float, reason: str, record: Path,
           settings: Settings) -> Path:
    """Append the instructor's decision to the class's overrides file (created in ``out`` when the class has
    none, and remembered in its settings), its reason naming the dispute's record."""
    path = Path(settings.overrides) if settings.overrides else out / "overrides.csv"
    new = not path.exists() or not path.read_text(encoding="utf-8-sig").strip()
    line = io.StringIO()
    writer = csv.writer(line)
    if new:
        writer.writerow(["student", "task", "points", "reason"])
    writer.writerow([name, task_id, f"{points:g}", f"{reason} (dispute record: {name}/{FOLDER}/{record.name})"])
    with open(path, "a", encoding="utf-8", newline="") as handle:
        handle.write(line.getvalue())
    if not settings.overrides:
        replace(settings, overrides=str(path.resolve())).save(out)
    return path


def main(*, out: Path, who: str, task_ids: list[str], decide_points: float | None = None, reason: str | None = None,
         limits: Limits | None = None, sandbox: bool | None = None) -> int:
    """``python -m grader dispute``: 0 when it ran (whatever the verdict), 1 when it could not."""
    settings = Settings.load(out)
    if decide_points is not None and len(task_ids) != 1:
        print("dispute: --decide gives one task's points: name one task", file=sys.stderr)
        return 1
    try:
        written = dispute(out, who, task_ids, settings=settings, limits=limits, sandbox=sandbox)
    except (DisputeError, FileNotFoundError, ValueError) as exc:
        print(f"dispute: {exc}", file=sys.stderr)
        return 1
    for path, found in written:
        print(render(found).split("\n\n")[2])
        print(f"dispute: the record is {path} (and {path.with_suffix('.md').name} beside it)")
    if decide_points is not None:
        [(path, found)] = written
        overrides = decide(out, found["student"], found["task"], decide_points, reason or "decided after a dispute",
                           path, settings)
        print(f"dispute: the decision ({decide_points:g} points) is in {overrides}; `python -m grader report --out {out}` "
              "applies it to the gradebook and the student's feedback")
    return 0
