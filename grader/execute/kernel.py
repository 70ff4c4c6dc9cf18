"""Executing a notebook headless with nbclient, cell by cell, sandboxed and under limits.

Cells run even after an earlier cell raised (a stub's ``NotImplementedError`` must not cost the
other tasks their points). Execution stops at a timeout, when the kernel dies, or when the
watchdog stops a submission over its memory or process limit; what was exported before still
counts. Only exported JSON is graded: stdout, stderr and warnings never are, and cell output is
kept only up to a bound (a notebook printing hundreds of megabytes costs the grader nothing).

The kernel runs in the bubblewrap sandbox when it is usable (:mod:`grader.execute.sandbox`), with rlimits
(:mod:`grader.execute.limits`) and a watchdog on its process tree (:mod:`grader.execute.watchdog`). It talks to the
grader over Unix sockets in ``<workdir>/.kernel/``.
"""
from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

from grader.execute import sandbox as sandboxing
from grader.execute.limits import Limits, rlimit_prefix
from grader.execute.output import BoundedClient, bounded_context, install_kernel_cap
from grader.execute.watchdog import Breach, Watchdog
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
    """``completed``, ``timeout``, ``memory`` (over the memory limit, or killed like the OOM killer
    does) or ``crash`` (the kernel died, or ran too many processes)."""
    seconds: float
    """Wall time from kernel start to the last cell."""
    errors: tuple[CellError, ...]
    """Every cell that raised, in order."""
    message: str = ""
    """For anything but ``completed``: what stopped the run, where, in a student's words."""
    stopped_task: str | None = None
    """The task section the run stopped in, if it stopped early."""
    sandboxed: bool = False
    """Whether the kernel ran in the bubblewrap sandbox."""
    peak_memory: int = 0
    """Largest memory of the kernel's process tree the watchdog saw, in bytes."""
    output_dropped: int = 0
    """Bytes of cell output dropped over the output limits."""


SLACK = 64 << 10
"""Bytes the grader accepts per cell beyond the kernel's own cap (its note, the export's print)."""


class _PrefixedKernelManager(AsyncKernelManager):
    """A kernel manager that starts the kernel through a command prefix (sandbox, rlimits) and
    talks to it through sockets that refuse oversized messages (:func:`grader.execute.output.bounded_context`)."""

    command_prefix: list[str] = []
    max_message: int = 64 << 20

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        return list(self.command_prefix) + super().format_kernel_cmd(extra_arguments)

    def client(self, **kwargs: Any):  # noqa: ANN201 (jupyter_client's signature)
        kc = super().client(context=bounded_context(self.max_message), **kwargs)
        kc._created_context = True  # so kc.stop_channels() closes it, after its threads have stopped
        return kc


_SIGNALS = {signal.SIGSEGV: "a segmentation fault", signal.SIGBUS: "a bus error", signal.SIGABRT: "an abort",
            signal.SIGFPE: "a floating-point exception", signal.SIGILL: "an illegal instruction"}


def _kernel_returncode(client: NotebookClient) -> int | None:
    process = getattr(getattr(client.km, "provisioner", None), "process", None)
    try:
        return process.wait(timeout=2) if process is not None else None
    except Exception:
        return None


def _death(code: int | None, breach: Breach | None, where: str) -> tuple[str, str]:
    """Status and message for a kernel that died in cell ``where``."""
    after = "; later cells did not run. Answers exported before it still count."
    if breach is not None:
        return ("memory" if breach.kind == "memory" else "crash"), f"the notebook {breach.message}: it was " \
               f"stopped in {where}" + after
    number = -code if code is not None and code < 0 else code - 128 if code is not None and code > 128 else None
    if number == signal.SIGKILL:
        return "memory", f"the kernel was killed in {where}, most likely because it ran out of memory" + after
    if number is not None:
        name = _SIGNALS.get(number, f"signal {number}")
        return "crash", f"the kernel crashed in {where} with {name}" + after
    detail = f" with exit code {code} (os._exit, exit() in a C library...)" if code is not None else ""
    return "crash", f"the kernel died in {where}{detail}" + after


def execute(nb: nbformat.NotebookNode, workdir: Path, env: Mapping[str, str], *, cell_timeout: int,
            notebook_timeout: int, extra_cells: tuple[str, ...] = (), extra_timeout: int = 300,
            limits: Limits | None = None, sandbox: bool | None = None) -> Execution:
    """Run ``nb`` in place in a fresh kernel whose working directory is ``workdir``.

    ``extra_cells`` are appended and run in the same kernel after the notebook (the grader's hidden
    cases), each under ``extra_timeout`` seconds; their errors are tagged with task ``hidden``.
    ``limits`` bounds memory, processes, file size and output (time comes from the two timeouts);
    ``sandbox`` forces the bubblewrap sandbox on or off (default: on when usable here). Only
    ``workdir`` is writable in the sandbox, so ``env``'s answer folder must lie inside it.
    """
    limits = limits or Limits()
    sandboxed = sandboxing.available() if sandbox is None else sandbox
    count = len(nb.cells)
    for source in extra_cells:
        nb.cells.append(nbformat.v4.new_code_cell(source))
    tasks = cell_tasks(nb)[:count] + ["hidden"] * len(extra_cells)

    kernel_dir = workdir / ".kernel"
    kernel_dir.mkdir(parents=True, exist_ok=True)
    km = _PrefixedKernelManager(kernel_name="python3", transport="ipc",
                                connection_file=str(kernel_dir / "kernel.json"))
    km.command_prefix = ((sandboxing.bwrap_prefix(workdir, tmp_size=limits.fsize) if sandboxed else [])
                         + rlimit_prefix(limits, sandboxed=sandboxed))
    km.max_message = limits.notebook_output
    client = BoundedClient(nb, km=km, cell_limit=limits.output + SLACK, total_limit=limits.notebook_output,
                            timeout=cell_timeout, allow_errors=True, kernel_name="python3",
                            resources={"metadata": {"path": str(workdir)}}, record_timing=False,
                            shutdown_kernel="immediate")
    kernel_env = {**env, "HOME": str(workdir / ".home")}  # caches (matplotlib, IPython) stay in scratch
    install_kernel_cap(workdir / ".home", limits.output)
    start = time.monotonic()
    deadline = start + notebook_timeout
    errors: list[CellError] = []
    status, message, stopped = "completed", "", None
    watchdog: Watchdog | None = None
    try:
        # the kernel's own log (not cell output) would only add noise to the grader's terminal
        # cleanup_kc: shut the kernel down and close the client's sockets even though we made the km
        with client.setup_kernel(env=kernel_env, stderr=subprocess.DEVNULL, cleanup_kc=True):
            watchdog = Watchdog(km.provisioner.process.pid, memory=limits.memory, procs=limits.procs,
                                folder=workdir, disk=limits.disk)
            for index, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                where = f"cell {index} ({tasks[index] or 'set-up'})"
                # the grader's own cells have their own budget; the notebook's share the notebook's
                limit = extra_timeout if index >= count else min(cell_timeout, deadline - time.monotonic())
                client.timeout = max(1, int(limit))
                try:
                    client.execute_cell(cell, index)
                except CellTimeoutError:
                    status, stopped = "timeout", tasks[index]
                    message = (f"{where} was still running after {client.timeout} s and was stopped (limits: "
                               f"{cell_timeout} s per cell, {notebook_timeout} s per notebook, {extra_timeout} s "
                               "for the hidden cases); later cells did not run. Answers exported before it "
                               "still count.")
                    break
                except DeadKernelError:
                    status, message = _death(_kernel_returncode(client), watchdog.breach, where)
                    stopped = tasks[index]
                    break
                for output in cell.get("outputs", []):
                    if output.get("output_type") == "error":
                        errors.append(CellError(index, tasks[index], output.get("ename", "Error"),
                                                output.get("evalue", "")))
    except (RuntimeError, TimeoutError, OSError) as exc:  # the kernel never started
        status, stopped = "crash", None
        message = f"the grader could not start a kernel for this notebook ({type(exc).__name__}: {exc})"
    finally:
        if watchdog is not None:
            watchdog.stop()
    return Execution(status, time.monotonic() - start, tuple(errors), message, stopped, sandboxed,
                     watchdog.peak_memory if watchdog else 0, client.dropped)
