"""What the course panel shows for one lab notebook, read from its saved file alone.

:func:`panel_state` puts together, for a notebook under the server's root: the lab's tasks with their points
and the result of each task's last check (kept by the server, :class:`TaskCheck`), each written answer's
status (read from the file as the grader reads it, :mod:`util.written`), and the lab's progress. Nothing here
runs student code; the checks run in :mod:`grader.panel.runner`.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import util.written as written
from util.answers import read_answers
from util.contract import Lab
from util.selfcheck import CHECKS_FOLDER

NOT_CHECKED = "not checked yet"
"""A task's status before the panel (or ``check``) has run its checks on this notebook since the server started."""


@dataclass(frozen=True)
class TaskCheck:
    """One task's last check, as the checker reported it on the saved notebook."""

    status: str
    """``passed`` (every public check passed), ``failed`` (one did not), or ``error`` (the check did not run:
    the message says why)."""
    passed: int
    """Public checks that passed."""
    checks: int
    """Public checks run (those this check could not see, ``unchecked``, not counted)."""
    report: str
    """The checker's report, as ``python -m grader check`` prints it."""
    checked_at: float
    """When it finished (seconds since the epoch)."""
    saved_at: float
    """The notebook file's modification time when it was checked: a later save makes the result stale."""
    source: str = "saved notebook"
    """What was checked: ``saved notebook`` (the panel's check, a fresh run of the file) or ``kernel`` (a
    ``check(...)`` cell, on the kernel's own functions and exports; a later save does not make it stale)."""


@dataclass(frozen=True)
class TaskState:
    """One task of the lab as the panel shows it."""

    id: str
    title: str
    points: float
    """What the task is worth, its hidden cases included."""
    hidden_points: float
    """What the grader's hidden cases are worth (not run by a check)."""
    exported: bool
    """Whether ``outputs/<lab>/<task>.json`` exists beside the notebook (``submit`` ran), not whether it is right."""
    status: str
    """The last check's status, or :data:`NOT_CHECKED`."""
    stale: bool
    """The notebook was saved again after its last check."""
    check: TaskCheck | None
    """The last check itself (``None`` before the first)."""


@dataclass(frozen=True)
class WrittenState:
    """One written question worth points, read from the saved notebook."""

    id: str
    label: str
    points: float
    status: str
    """``passed`` (answered, of the length asked), ``failed`` (answered, another length), ``missing``."""
    words: int
    message: str
    """What to fix (empty when ``passed``)."""


@dataclass(frozen=True)
class Progress:
    """The lab's progress, in counts a student can check against the lists above."""

    tasks: int
    exported: int
    """Tasks whose answer is exported."""
    passing: int
    """Tasks whose last check passed (and is not stale)."""
    points: float
    """Points of the tasks whose last check passed: what their public checks allow, not a grade."""
    total_points: float
    """The lab's points, written answers included."""
    written: int
    written_answered: int


@dataclass(frozen=True)
class PanelState:
    """Everything the panel shows for one notebook."""

    path: str
    """The notebook, relative to the server's root."""
    lab: str
    title: str
    tasks: tuple[TaskState, ...]
    written: tuple[WrittenState, ...]
    progress: Progress
    handin: bool
    """Whether this server can hand in (the class server's hand-in service is configured)."""
    read_at: float

    def to_dict(self) -> dict[str, Any]:
        """The state as the API's JSON."""
        return asdict(self)


def read_notebook(path: Path) -> dict:
    """The saved notebook's JSON; ``ValueError`` saying what is wrong when it is not a notebook."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{path.name} could not be read as a notebook ({exc}); save it again from JupyterLab") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path.name} is not a notebook (its JSON is not an object); save it again from JupyterLab")
    return data


def written_states(lab: Lab, nb: dict) -> tuple[WrittenState, ...]:
    """Each written question of ``lab`` worth points, as the grader would find its answer in ``nb``."""
    out = []
    for question in (q for q in lab.written if q.points):
        answer = written.find(nb, question)
        problem = written.problem(answer, question)
        status = "passed" if problem is None else "missing" if not answer.answered else "failed"
        out.append(WrittenState(question.id, question.label, question.points, status, answer.words, problem or ""))
    return tuple(out)


def kernel_checks(folder: Path) -> dict[str, TaskCheck]:
    """The kernel's last ``check`` of each task, as :func:`util.selfcheck.record_checks` recorded them in
    ``folder`` (``outputs/<lab>/checks``): task id -> :class:`TaskCheck`; unreadable records are skipped."""
    found: dict[str, TaskCheck] = {}
    for file in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            record = json.loads(file.read_text(encoding="utf-8"))
            found[str(record["task"])] = TaskCheck(
                str(record["status"]) if record["status"] in ("passed", "failed") else "error",
                int(record["passed"]), int(record["checks"]),
                "Checked in the kernel (a check cell):\n" + str(record["report"]),
                float(record["checked_at"]), float(record["checked_at"]), "kernel")
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            continue
    return found


def panel_state(relative: str, path: Path, lab: Lab, checks: dict[str, TaskCheck], *, handin: bool) -> PanelState:
    """The panel's state for the notebook ``path`` (``relative`` to the server's root) of ``lab``, with the last
    ``checks`` the server ran on it (task id -> :class:`TaskCheck`) or the kernel's last ``check`` cell of a task
    (:func:`kernel_checks`), whichever is later."""
    nb = read_notebook(path)
    saved_at = path.stat().st_mtime
    outputs = path.parent / "outputs" / lab.name   # where the kernel's submit() and check() write
    exported = read_answers(outputs)
    recorded = kernel_checks(outputs / CHECKS_FOLDER)
    tasks = []
    for task in lab.tasks:
        check = max((c for c in (checks.get(task.id), recorded.get(task.id)) if c is not None),
                    key=lambda c: c.checked_at, default=None)
        stale = bool(check and check.source != "kernel" and check.saved_at < saved_at)
        tasks.append(TaskState(task.id, task.title, task.max_points, task.hidden_points, task.id in exported,
                               check.status if check else NOT_CHECKED, stale, check))
    answers = written_states(lab, nb)
    passing = [t for t in tasks if t.status == "passed" and not t.stale]
    progress = Progress(len(tasks), sum(t.exported for t in tasks), len(passing), sum(t.points for t in passing),
                        lab.max_points,
                        len(answers), sum(a.status != "missing" for a in answers))
    return PanelState(relative, lab.name, lab.title, tuple(tasks), answers, progress, handin, time.time())
