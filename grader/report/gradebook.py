"""The class gradebook: one row per submission, one column per task, as a table and a CSV."""
from __future__ import annotations

import csv
from pathlib import Path

from tabulate import tabulate

from grader.report.results import SubmissionResult


def rows(results: list[tuple[str, SubmissionResult]]) -> tuple[list[str], list[list[str]]]:
    """Headers and rows: submission, lab, each task's score, total, and what went wrong."""
    task_ids = list(dict.fromkeys(t.task_id for _, r in results for t in r.tasks))
    headers = ["submission", "lab"] + task_ids + ["total", "status"]
    body = []
    for name, result in results:
        by_id = {t.task_id: t for t in result.tasks}
        cells = [f"{by_id[i].score:g}" if i in by_id else "" for i in task_ids]
        problems = sorted({t.status for t in result.tasks if t.status != "passed"})
        status = result.execution_status if result.execution_status != "completed" else (
            "all passed" if not problems else ", ".join(problems))
        body.append([name, result.lab, *cells, f"{result.score:g}/{result.max_score:g}", status])
    return headers, body


def render(results: list[tuple[str, SubmissionResult]]) -> str:
    """The gradebook for the terminal: one table per lab, so each has only its own task columns."""
    labs = list(dict.fromkeys(r.lab for _, r in results)) or [""]
    tables = []
    for lab in labs:
        headers, body = rows([(n, r) for n, r in results if r.lab == lab])
        tables.append(tabulate(body, headers=headers, disable_numparse=True))
    return "\n\n".join(tables)


def write_csv(path: Path, results: list[tuple[str, SubmissionResult]]) -> None:
    """The gradebook as CSV, for a spreadsheet or an LMS import."""
    headers, body = rows(results)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(headers)
        writer.writerows(body)
