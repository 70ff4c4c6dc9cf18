"""``python -m grader check NOTEBOOK``: a student's self-check from a terminal.

Runs the notebook headless in a fresh kernel (as the grader does: a scratch copy, the same limits,
the same environment), then runs every public check of its lab (``util.selfcheck``) in that kernel
and prints passed / failed with a hint per check. It never reads ``grader/references/`` and never
runs a hidden case, so it works in the students' container, where neither exists.
"""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader import notebook
from grader.execute.kernel import Execution, execute
from grader.execute.scratch import copy_support, kernel_env
from grader.grade.submission import resolve_lab
from util.contract import Lab
from util.selfcheck import TaskReport, cell_source, read_reports


@dataclass(frozen=True)
class SelfCheck:
    """The public checks of one notebook."""

    path: Path
    """The notebook checked."""
    lab: str
    """The lab it was checked against."""
    reports: tuple[TaskReport, ...]
    """One report per task, in notebook order (empty if the check cell never ran)."""
    execution: Execution
    """How the notebook's run went (cells that raised, timeouts)."""

    @property
    def passed(self) -> bool:
        """Every public check of every task passed."""
        return bool(self.reports) and all(report.passed for report in self.reports)

    def text(self) -> str:
        """What the student reads."""
        lines = [f"{self.path}: {self.lab}, public checks (the grader's hidden cases and references are not used)"]
        lines += [f"note: {e.describe()}" for e in self.execution.errors if e.task != "hidden"]
        if self.execution.status != "completed":
            lines.append(f"note: {self.execution.message}")
        if not self.reports:
            lines.append("the checks did not run: the notebook stopped before the end")
        lines += [f"\n{report.text()}" for report in self.reports]
        lines.append(f"\n{sum(r.passed for r in self.reports)}/{len(self.reports)} tasks pass all their public checks")
        return "\n".join(lines)


def run_selfcheck(path: Path, lab: Lab, *, cell_timeout: int | None = None,
                  notebook_timeout: int | None = None) -> SelfCheck:
    """Run ``path`` in a scratch folder, then the public checks of ``lab`` in the same kernel."""
    nb = notebook.read(path)
    scratch = Path(tempfile.mkdtemp(prefix=f"check-{lab.name}-"))
    try:
        copy_support(lab, path.parent, scratch)  # a folder lab's support files (e.g. cpp/), as grading does
        report_path = scratch / "selfcheck.json"
        execution = execute(nb, scratch, kernel_env(scratch / "answers"),
                            cell_timeout=cell_timeout or lab.cell_timeout,
                            notebook_timeout=notebook_timeout or lab.notebook_timeout,
                            extra_cells=(cell_source(lab.name, report_path),), extra_timeout=lab.hidden_timeout)
        reports = tuple(read_reports(report_path)) if report_path.exists() else ()
        return SelfCheck(path, lab.name, reports, execution)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main(*, paths: list[Path], lab: str | None = None, cell_timeout: int | None = None,
         notebook_timeout: int | None = None) -> int:
    """Check each notebook and print its report; 0 when every public check passed, else 1."""
    status = 0
    for path in paths:
        try:
            result = run_selfcheck(path, resolve_lab(path, lab), cell_timeout=cell_timeout,
                                   notebook_timeout=notebook_timeout)
        except (FileNotFoundError, ValueError, KeyError) as exc:
            print(f"check: {exc}")
            status = 1
            continue
        print(result.text())
        status |= not result.passed
    return status
