"""Executing a notebook headless with nbclient, cell by cell, under a per-cell and a per-notebook limit.

Cells run even after an earlier cell raised (a stub's ``NotImplementedError`` must not cost the
other tasks their points). Execution stops at a timeout or when the kernel dies; what was exported
before still counts. Only exported JSON is graded: stdout, stderr and warnings never are.
"""
from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from grader.notebook import cell_tasks


@dataclass(frozen=True)
class CellError:
    """A cell that raised."""

    cell: int
    """Index of the cell in the notebook (0-based)."""
    task: str | None
    """Task section the cell sits in, ``hidden`` for the grader's own cell, ``None`` for set-up cells."""
    ename: str
    """Exception class, e.g. ``NotImplementedError``."""
    evalue: str
    """Exception message."""

    def describe(self) -> str:
        where = f"task {self.task}" if self.task not in (None, "hidden") else (self.task or "set-up")
        return f"cell {self.cell} ({where}) raised {self.ename}: {self.evalue}"


@dataclass(frozen=True)
class Execution:
    """How a notebook run went."""

    status: str
    """``completed``, ``timeout``, ``memory`` (kernel killed, most likely out of memory) or ``crash``."""
    seconds: float
    """Wall time from kernel start to the last cell."""
    errors: tuple[CellError, ...]
    """Every cell that raised, in order."""
    message: str = ""
    """For anything but ``completed``: what stopped the run, where."""
    stopped_task: str | None = None
    """The task section the run stopped in, if it stopped early."""


def _kernel_returncode(client: NotebookClient) -> int | None:
    process = getattr(getattr(client.km, "provisioner", None), "process", None)
    try:
        return process.wait(timeout=2) if process is not None else None
    except Exception:
        return None


def execute(nb: nbformat.NotebookNode, workdir: Path, env: Mapping[str, str], *, cell_timeout: int,
            notebook_timeout: int, extra_cells: tuple[str, ...] = (), extra_timeout: int = 300) -> Execution:
    """Run ``nb`` in place in a fresh kernel whose working directory is ``workdir``.

    ``extra_cells`` are appended and run in the same kernel after the notebook (the grader's hidden
    cases), each under ``extra_timeout`` seconds; their errors are tagged with task ``hidden``.
    """
    count = len(nb.cells)
    for source in extra_cells:
        nb.cells.append(nbformat.v4.new_code_cell(source))
    tasks = cell_tasks(nb)[:count] + ["hidden"] * len(extra_cells)
    client = NotebookClient(nb, timeout=cell_timeout, allow_errors=True, kernel_name="python3",
                            resources={"metadata": {"path": str(workdir)}}, record_timing=False)
    start = time.monotonic()
    deadline = start + notebook_timeout
    errors: list[CellError] = []
    status, message, stopped = "completed", "", None
    # the kernel's own log (not cell output) would only add noise to the grader's terminal
    with client.setup_kernel(env=dict(env), stderr=subprocess.DEVNULL):
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            # the grader's own cells have their own budget; the notebook's share the notebook's
            limit = extra_timeout if index >= count else min(cell_timeout, deadline - time.monotonic())
            client.timeout = max(1, int(limit))
            try:
                client.execute_cell(cell, index)
            except CellTimeoutError:
                status, stopped = "timeout", tasks[index]
                message = (f"cell {index} ({tasks[index] or 'set-up'}) ran past its time limit "
                           f"({client.timeout} s); later cells were not run")
                break
            except DeadKernelError:
                code = _kernel_returncode(client)
                status = "memory" if code in (-9, 137) else "crash"
                stopped = tasks[index]
                message = (f"the kernel died in cell {index} ({tasks[index] or 'set-up'})"
                           + (", most likely out of memory" if status == "memory" else
                              f" (exit code {code})" if code is not None else ""))
                break
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    errors.append(CellError(index, tasks[index], output.get("ename", "Error"),
                                            output.get("evalue", "")))
    return Execution(status, time.monotonic() - start, tuple(errors), message, stopped)
