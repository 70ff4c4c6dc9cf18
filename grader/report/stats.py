"""Per-task class statistics: mean score, pass rate and the most common failure, per lab.

For instructors: a task most of the class fails for the same reason is usually a task (or a
reference) to look at, not a class to blame.
"""
from __future__ import annotations

import csv
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate

from grader.report.results import SubmissionResult

HEADERS = ["lab", "task", "title", "submissions", "mean", "max", "pass rate", "most common failure", "count"]


@dataclass(frozen=True)
class TaskStats:
    """How the class did on one task."""

    lab: str
    task_id: str
    title: str
    submissions: int
    """Submissions graded for this lab."""
    mean: float
    """Mean points."""
    max_score: float
    """Points the task is worth."""
    pass_rate: float
    """Fraction of submissions that passed every check of the task."""
    common_failure: str
    """``status: message`` of the most frequent failing check (numbers masked so alike ones group)."""
    common_failure_count: int
    """How many submissions had that failure."""

    def row(self) -> list[str]:
        return [self.lab, self.task_id, self.title, str(self.submissions), f"{self.mean:.2f}", f"{self.max_score:g}",
                f"{self.pass_rate:.0%}", self.common_failure, str(self.common_failure_count)]


def _failure_kind(status: str, name: str, message: str) -> str:
    """A failure with its specifics masked, so "cell 12 raised" and "cell 13 raised" count as one."""
    text = re.sub(r"(?<![\w.])-?\d[\d,._e+-]*", "N", " ".join(message.split()))  # not inside names: bfloat16
    return f"{status}: {name}: {text[:120]}"


def compute(results: list[tuple[str, SubmissionResult]]) -> list[TaskStats]:
    """Statistics for every (lab, task) seen in ``results``, in order."""
    by_task: dict[tuple[str, str], list] = {}
    for _, result in results:
        for task in result.tasks:
            by_task.setdefault((result.lab, task.task_id), []).append(task)
    out = []
    for (lab, task_id), tasks in by_task.items():
        failures = Counter()
        for task in tasks:  # one count per submission: its first failing check
            check = next((c for c in task.checks if c.status != "passed"), None)
            if check is not None:
                failures[_failure_kind(check.status, check.name, check.message)] += 1
        common, count = failures.most_common(1)[0] if failures else ("", 0)
        out.append(TaskStats(lab, task_id, tasks[0].title, len(tasks), sum(t.score for t in tasks) / len(tasks),
                             tasks[0].max_score, sum(t.status == "passed" for t in tasks) / len(tasks),
                             common, count))
    return out


def render(stats: list[TaskStats]) -> str:
    """A terminal table (failures shortened to fit)."""
    rows = [s.row()[:7] + [s.common_failure[:70] + ("..." if len(s.common_failure) > 70 else ""),
                           s.row()[8]] for s in stats]
    return tabulate(rows, headers=HEADERS, disable_numparse=True)


def write_csv(path: Path, stats: list[TaskStats]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADERS)
        writer.writerows(s.row() for s in stats)
