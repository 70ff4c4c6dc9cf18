"""One task's checks on a saved notebook, run by the course's own checker in a process of its own.

:func:`run_check` starts ``python -m grader.panel.runner NOTEBOOK LAB TASK OUT`` (the ``__main__`` below), which
runs :func:`grader.selfcheck.run_selfcheck` (the notebook as saved, in a fresh kernel in a scratch folder, then
the task's public checks: what ``python -m grader check NOTEBOOK --task TASK`` prints) and writes its report as
JSON. The server waits for it with a deadline (the lab's own notebook deadline plus :data:`MARGIN`) and ends
its whole process group when it runs past it. Only the checker's JSON is believed, never the notebook's outputs.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from grader.panel.state import TaskCheck

MARGIN = 60
"""Seconds the checker may take beyond the lab's notebook deadline (starting a kernel, reading the lab)."""


def deadline(lab) -> float:
    """Seconds one check of ``lab`` may take, all told."""
    from grader.core.limits import Deadlines

    return Deadlines.resolve(lab).notebook + MARGIN


def _summary(report: dict) -> tuple[str, int, int]:
    outcomes = report["outcomes"]
    seen = [o for o in outcomes if o["status"] != "unchecked"]
    passed = sum(o["status"] == "passed" for o in seen)
    return ("passed" if passed == len(seen) else "failed"), passed, len(seen)


def _env() -> dict[str, str]:
    """The server's environment, with this course copy on the import path after what the server's own
    ``PYTHONPATH`` names (the class server's students import the course from their pulled handouts: so does the
    check, as ``python -m grader check`` in their terminal does)."""
    root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*filter(None, [os.environ.get("PYTHONPATH")]), root])}


async def run_check(path: Path, lab, task: str, *, timeout: float | None = None) -> TaskCheck:
    """Check ``task`` of ``lab`` on the notebook file ``path``; never raises for what the notebook does."""
    saved_at = path.stat().st_mtime
    limit = deadline(lab) if timeout is None else timeout
    with tempfile.TemporaryDirectory(prefix="course-panel-") as scratch:
        out = Path(scratch) / "report.json"
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "grader.panel.runner", str(path), lab.name, task, str(out),
            cwd=str(path.parent), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True, env=_env())
        try:
            printed, _ = await asyncio.wait_for(process.communicate(), limit)
        except asyncio.TimeoutError:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
            return TaskCheck("error", 0, 0, f"the check ran past its deadline of {limit:g} s and was stopped: run "
                             f"`python -m grader check {path.name} --task {task}` in a terminal to see where it stops",
                             time.time(), saved_at)
        text = printed.decode("utf-8", "replace")
        try:
            result = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return TaskCheck("error", 0, 0, f"the checker stopped (exit {process.returncode}) without a report:\n"
                             f"{text[-2000:]}", time.time(), saved_at)
    reports = [r for r in result["reports"] if r["task_id"] == task]
    if not reports:
        return TaskCheck("error", 0, 0, result["text"] + "\n(the checks of this task did not run: the notebook "
                         "stopped before the end)", time.time(), saved_at)
    status, passed, checks = _summary(reports[0])
    return TaskCheck(status, passed, checks, result["text"], time.time(), saved_at)


def main(argv: list[str]) -> int:
    """``NOTEBOOK LAB TASK OUT``: check ``TASK`` and write ``{"reports": [...], "text": ...}`` to ``OUT``."""
    from dataclasses import asdict

    from grader.selfcheck import run_selfcheck
    from util.answers import write_json
    from util.labs import get_lab

    notebook, lab_name, task, out = argv
    result = run_selfcheck(Path(notebook), get_lab(lab_name), tasks=(task,))
    write_json(Path(out), {"reports": [asdict(r) for r in result.reports], "text": result.text()})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
