"""``python -m grader check NOTEBOOK``: a student's self-check from a terminal.

Runs the notebook headless in a fresh kernel (as the grader does: a scratch copy, the same limits,
the same environment), then runs every public check of its lab (``util.selfcheck``) in that kernel
and prints passed / failed with a hint per check. It never reads ``grader/references/`` and never
runs a hidden case, so it works in the students' copy, where neither exists.

It works from any folder. ``NOTEBOOK`` is a path, or a lab's name (``labN``) or notebook file name
(``labN_topic.ipynb``), looked up in the current folder, in its ``labs/`` and in the
``labs/`` of the course copy this package belongs to (:func:`find_notebook`): a JupyterLab terminal
opened by ``jupyter lab labs/`` starts in ``labs/``, the course image's in the course's root.
``--task N.M`` reports only that task (the whole notebook still runs: later cells may need earlier ones).
Written answers are checked in the file itself (there, and not the length asked?), as the grader reads them.
"""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from grader import REPO
from grader.core import notebook
from grader.core.limits import Deadlines, Limits
from grader.execute.kernel import Execution, execute
from grader.execute.scratch import copy_support, kernel_env
from grader.grade.collect import resolve_lab
from util.contract import Lab
from util.labs import LABS
from util.selfcheck import TaskReport, cell_source, read_reports, written_outcomes


def find_notebook(name: str | Path, cwd: Path | None = None) -> Path:
    """The notebook ``name`` means: a path as given if it exists, else a lab or notebook name.

    A lab name (``labN``) or a notebook file name is looked for in ``cwd``, in ``cwd/labs`` and in
    the ``labs/`` folder of this course copy (next to the installed ``grader`` package), in that
    order; a folder lab's notebook also in its own folder. Raises ``FileNotFoundError`` saying
    where it looked.
    """
    cwd = Path.cwd() if cwd is None else cwd
    given = Path(name)
    if given.exists():
        return given
    relative = given
    lab = LABS.get(str(name))
    if lab is not None:
        relative = Path(lab.notebook)
    elif given.suffix != ".ipynb" or len(given.parts) > 1:
        raise FileNotFoundError(f"{name}: no such notebook (looked in {cwd}); give a notebook's path or a "
                                f"lab's name ({', '.join(LABS)})")
    else:
        found = [lab for lab in LABS.values() if Path(lab.notebook).name == given.name]
        relative = Path(found[0].notebook) if found else given
    candidates = [cwd / relative, cwd / relative.name, cwd / "labs" / relative, REPO / "labs" / relative]
    for candidate in dict.fromkeys(candidates):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{name}: found no notebook {relative} in {cwd}, {cwd / 'labs'} or {REPO / 'labs'}; "
                            "give the notebook's path")


def missing_tools(lab: Lab) -> list[str]:
    """The programs ``lab`` needs (``Lab.requires``) that are not on ``PATH``."""
    return [tool for tool in lab.requires if shutil.which(tool) is None]


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
                  notebook_timeout: int | None = None, tasks: tuple[str, ...] = ()) -> SelfCheck:
    """Run ``path`` in a scratch folder, then the public checks of ``lab`` (only ``tasks`` if given)
    in the same kernel."""
    nb = notebook.read(path)
    scratch = Path(tempfile.mkdtemp(prefix=f"check-{lab.name}-"))
    try:
        copy_support(lab, path.parent, scratch)  # a folder lab's support files (e.g. cpp/), as grading does
        report_path = scratch / "selfcheck.json"
        deadlines = Deadlines.resolve(lab, Limits(cell_timeout=cell_timeout, notebook_timeout=notebook_timeout))
        execution = execute(nb, scratch, kernel_env(scratch / "answers"), deadlines=deadlines,
                            extra_cells=(cell_source(lab.name, report_path, tasks),))
        reports = tuple(read_reports(report_path)) if report_path.exists() else ()
        tasks = {t.id: t for t in lab.tasks}
        reports = tuple(replace(r, outcomes=r.outcomes + written_outcomes(tasks[r.task_id], nb))
                        if r.task_id in tasks else r for r in reports)
        return SelfCheck(path, lab.name, reports, execution)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _tasks(lab: Lab, wanted: list[str]) -> tuple[str, ...]:
    ids = tuple(dict.fromkeys(part.strip() for item in wanted for part in item.split(",") if part.strip()))
    unknown = [i for i in ids if i not in {t.id for t in lab.tasks}]
    if unknown:
        raise KeyError(f"{lab.name} has no task {', '.join(unknown)}; its tasks are {', '.join(t.id for t in lab.tasks)}")
    return ids


def main(*, paths: list[str | Path], lab: str | None = None, cell_timeout: int | None = None,
         notebook_timeout: int | None = None, tasks: list[str] | None = None) -> int:
    """Check each notebook and print its report; 0 when every public check passed, else 1.

    ``paths``: notebooks, or lab / notebook names (:func:`find_notebook`); ``tasks``: task ids
    (``["1.4"]``, or ``["1.4,1.5"]``) to report, default all.
    """
    status = 0
    for name in paths:
        try:
            path = find_notebook(name)
            target = resolve_lab(path, lab or (str(name) if str(name) in LABS else None))
            wanted = _tasks(target, tasks or [])
            missing = missing_tools(target)
            if missing:
                print(f"note: {target.name} needs {', '.join(target.requires)}; not found on PATH: "
                      f"{', '.join(missing)} (install them, or use the course image)")
            print(f"checking {path} as saved on disk (save the notebook first) ...", flush=True)
            result = run_selfcheck(path, target, cell_timeout=cell_timeout, notebook_timeout=notebook_timeout,
                                   tasks=wanted)
        except (FileNotFoundError, ValueError, KeyError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc  # KeyError quotes its str
            print(f"check: {message}")
            status = 1
            continue
        print(result.text())
        status |= not result.passed
    return status
