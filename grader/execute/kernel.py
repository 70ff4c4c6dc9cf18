"""Executing a notebook headless with nbclient, cell by cell, confined and under limits.

Cells run even after an earlier cell raised (a stub's ``NotImplementedError`` must not cost the
other tasks their points). Execution stops at a timeout, when the kernel dies, or when the
watchdog stops a submission over its memory, process or disk limit; what was exported before
still counts. Only exported JSON is graded: stdout, stderr and warnings never are, and output of
every kind is kept only up to a bound (:mod:`grader.execute.output`).

The notebook's deadline is absolute: the watchdog kills the kernel at ``notebook_timeout`` seconds
after its start, whatever its cells do, and no cell starts after it; the grader's hidden cases then
get ``extra_timeout`` seconds of their own, just as absolute. The grader's own time per submission
is therefore at most the two plus the kernel's start and shutdown.

The kernel is started through :func:`grader.execute.launch.command_prefix`: in its own cgroup where there
is one (:mod:`grader.execute.cgroups`), as an unprivileged user, under rlimits, in the bubblewrap sandbox
when it is usable (:mod:`grader.execute.sandbox`), with a watchdog on it (:mod:`grader.execute.watchdog`). It
talks to the grader over Unix sockets in ``<workdir>/.kernel/``. It holds no descriptor of the grader's:
its standard input is ``/dev/null``, its standard output and error a pipe the grader drains with a cap
(:mod:`grader.execute.drain`), and nothing else is inherited (``close_fds``).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import nbformat
import zmq
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from traitlets import default

from grader.core.limits import Deadlines, Limits
from grader.core.limits import tasks as task_limit
from grader.core.notebook import cell_tasks
from grader.execute import cgroups, confinement, disk, launch, relay
from grader.execute.drain import Captured, Drain
from grader.execute.output import BoundedClient, SafeSession, bounded_context, install_kernel_cap
from grader.execute.watchdog import Breach, Watchdog


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
    messages_dropped: int = 0
    """Kernel messages dropped unread: too large, unsigned, or without the fields the grader reads."""
    stdio: Captured = Captured()
    """What the kernel (and every process it started) wrote to its standard output and error, below
    the message channel: its first and last bytes, for the instructor (:mod:`grader.execute.drain`)."""


SLACK = 64 << 10
"""Bytes the grader accepts per cell beyond the kernel's own cap (its note, the export's print)."""


RELAY_MEMORY = 256 << 20
"""``RLIMIT_DATA`` of the relay process (:mod:`grader.execute.relay`): its baseline plus a few bounded messages."""


class _PrefixedKernelManager(AsyncKernelManager):
    """A kernel manager that starts the kernel through a command prefix (cgroup, user, rlimits,
    sandbox) and talks to it through sockets that refuse oversized message parts
    (:func:`grader.execute.output.bounded_context`) and a session that drops malformed messages
    (:class:`grader.execute.output.SafeSession`)."""

    command_prefix: list[str] = []
    max_frame: int = 64 << 20
    owner: tuple[int, int] | None = None
    relay_dir: Path | None = None
    """Where the relay (:mod:`grader.execute.relay`) offers the kernel's sockets; ``None``: connect directly."""
    relay_memory: int = RELAY_MEMORY
    relay: subprocess.Popen | None = None

    @default("session")
    def _session_default(self) -> SafeSession:
        return SafeSession(parent=self)

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        if self.owner is not None and self.connection_file:  # written by now; the kernel must read it
            os.chown(self.connection_file, *self.owner)
        return list(self.command_prefix) + super().format_kernel_cmd(extra_arguments)

    def _connect_control_socket(self) -> None:
        """The manager's own control socket (shutdown and interrupt requests) never connects to the
        kernel directly: only through the relay, once it runs (the grader shuts kernels down with a
        signal, so it is rarely needed at all)."""
        if self.relay_dir is None:
            return super()._connect_control_socket()
        if self._control_socket is None and self.relay is not None:
            context = zmq.Context.instance()
            socket = context.socket(zmq.DEALER)
            socket.setsockopt(zmq.MAXMSGSIZE, self.max_frame)
            socket.setsockopt(zmq.RCVHWM, 1)
            socket.linger = 100
            socket.connect(f"ipc://{self.relay_dir / 'relay'}-{self.control_port}")
            self._control_socket = socket
        return None

    def client(self, **kwargs: Any):  # noqa: ANN201 (jupyter_client's signature)
        kc = super().client(context=bounded_context(self.max_frame), **kwargs)
        kc._created_context = True  # so kc.stop_channels() closes it, after its threads have stopped
        if self.relay_dir is not None:
            prefix = str(self.relay_dir / "relay")
            if self.relay is None:
                self.relay = relay.start(self.get_connection_info(), prefix, max_frame=self.max_frame,
                                         max_message=self.session.max_message, memory=self.relay_memory)
            kc.ip = prefix  # the client's channels connect to the relay, never to the kernel
        return kc


_SIGNALS = {signal.SIGSEGV: "a segmentation fault", signal.SIGBUS: "a bus error", signal.SIGABRT: "an abort",
            signal.SIGFPE: "a floating-point exception", signal.SIGILL: "an illegal instruction"}


def _kernel_returncode(client: NotebookClient) -> int | None:
    process = getattr(getattr(client.km, "provisioner", None), "process", None)
    try:
        return process.wait(timeout=2) if process is not None else None
    except Exception:
        return None


AFTER = "; later cells did not run. Answers exported before it still count."


def _death(code: int | None, breach: Breach | None, where: str) -> tuple[str, str]:
    """Status and message for a kernel that died in cell ``where``."""
    after = AFTER
    if breach is not None:
        status = {"memory": "memory", "timeout": "timeout"}.get(breach.kind, "crash")  # procs, disk, output
        return status, f"the notebook {breach.message}: it was stopped in {where}" + after
    number = -code if code is not None and code < 0 else code - 128 if code is not None and code > 128 else None
    if number == signal.SIGKILL:
        return "memory", f"the kernel was killed in {where}, most likely because it ran out of memory" + after
    if number is not None:
        name = _SIGNALS.get(number, f"signal {number}")
        return "crash", f"the kernel crashed in {where} with {name}" + after
    detail = f" with exit code {code} (os._exit, exit() in a C library...)" if code is not None else ""
    return "crash", f"the kernel died in {where}{detail}" + after


def _folders(workdir: Path, owner: tuple[int, int] | None) -> disk.Scratch:
    """The scratch folder as :class:`grader.execute.disk.Scratch` with the folders the kernel needs, given to ``owner``."""
    scratch = workdir if isinstance(workdir, disk.Scratch) else disk.Scratch(Path(workdir), None, owner)
    scratch.owner = owner
    scratch.give(scratch.path)
    for name in (disk.KERNEL, disk.HOME, disk.TMP, disk.SHM):
        scratch.folder(name)
    return scratch


def execute(nb: nbformat.NotebookNode, workdir: Path | disk.Scratch, env: Mapping[str, str], *,
            deadlines: Deadlines, extra_cells: tuple[str, ...] = (), limits: Limits | None = None,
            sandbox: bool | None = None) -> Execution:
    """Run ``nb`` in place in a fresh kernel whose working directory is ``workdir``.

    ``extra_cells`` are appended and run in the same kernel after the notebook (the grader's hidden
    cases), under the hidden cases' deadline; their errors are tagged with task ``hidden``. Every
    time limit comes from ``deadlines`` (:class:`grader.core.limits.Deadlines`); ``limits`` bounds
    memory, processes, disk, file size and output; ``sandbox`` forces the bubblewrap sandbox on or
    off (default: on when usable here). Only ``workdir`` (a folder, or a
    :class:`grader.execute.disk.Scratch`) is writable in the sandbox, so ``env``'s answer folder
    must lie inside it. ``env`` is the kernel's whole environment (see
    :func:`grader.execute.scratch.kernel_env`).
    """
    limits = limits or Limits()
    sandboxed = confinement.available() if sandbox is None else sandbox
    owner = confinement.student_ids(sandboxed)
    scratch = _folders(workdir, owner)
    count = len(nb.cells)
    for source in extra_cells:
        nb.cells.append(nbformat.v4.new_code_cell(source))
    tasks = cell_tasks(nb)[:count] + ["hidden"] * len(extra_cells)

    group = cgroups.create(memory=limits.memory, tasks=task_limit(limits))
    km = _kernel_manager(scratch, sandboxed=sandboxed, owner=owner, limits=limits, group=group)
    client = BoundedClient(nb, km=km, cell_limit=limits.output + SLACK, total_limit=limits.notebook_output,
                           timeout=deadlines.cell, allow_errors=True, kernel_name="python3",
                           resources={"metadata": {"path": str(scratch.path)}}, record_timing=False,
                           shutdown_kernel="immediate", startup_timeout=max(5, min(60, deadlines.notebook)))
    kernel_env = {**env, "HOME": str(scratch.path / disk.HOME),  # caches (matplotlib, IPython) stay in scratch
                  "TMPDIR": "/tmp" if sandboxed else str(scratch.path / disk.TMP)}
    install_kernel_cap(scratch.path / disk.HOME, limits.output)
    scratch.give(scratch.path / disk.HOME)
    start = time.monotonic()
    run = _CellRun(client, nb, tasks, count, deadlines)
    watchdog: Watchdog | None = None
    drain = Drain()  # the kernel's stdout and stderr: a pipe of the grader's, never the grader's own
    try:
        # cleanup_kc: shut the kernel down and close the client's sockets even though we made the km
        with client.setup_kernel(env=kernel_env, stdin=subprocess.DEVNULL, stdout=drain.fd, stderr=drain.fd,
                                 cleanup_kc=True):
            drain.started()
            watchdog = Watchdog(km.provisioner.process.pid, memory=limits.memory, procs=limits.procs,
                                scratch=scratch, disk=limits.disk, cgroup=group,
                                deadline=start + deadlines.notebook, relay=km.relay,
                                relay_limit=km.session.max_message)
            watchdog.deadline_message = f"was still running at its time limit ({deadlines.notebook} s per notebook)"
            run.all(watchdog)
    except (RuntimeError, TimeoutError, OSError) as exc:  # the kernel never started
        run.status, run.stopped = "crash", None
        run.message = f"the grader could not start a kernel for this notebook ({type(exc).__name__}: {exc})"
    finally:
        if watchdog is not None:
            watchdog.stop()
        if km.relay is not None:
            km.relay.kill()
            km.relay.wait()
        shutil.rmtree(km.relay_dir, ignore_errors=True)
        peak = max(watchdog.peak_memory if watchdog else 0, group.memory_peak() if group else 0)
        if group is not None:
            try:
                group.remove()
            except OSError:
                pass
        stdio = drain.finish()
    return Execution(run.status, time.monotonic() - start, tuple(run.errors), run.message, run.stopped, sandboxed,
                     peak, client.dropped, km.session.dropped, stdio)


def _kernel_manager(scratch: disk.Scratch, *, sandboxed: bool, owner: tuple[int, int] | None, limits: Limits,
                    group: cgroups.Group | None) -> "_PrefixedKernelManager":
    """A kernel manager that starts the kernel confined (cgroup, user, rlimits, sandbox) and talks to
    it through the relay, with message bounds from ``limits``."""
    km = _PrefixedKernelManager(kernel_name="python3", transport="ipc",
                                connection_file=str(scratch.path / disk.KERNEL / "kernel.json"))
    km.command_prefix = launch.command_prefix(scratch.path, sandboxed=sandboxed, ids=owner, limits=limits,
                                              cgroup=group.procs_file if group else None)
    km.owner = owner
    km.max_frame = limits.output + SLACK
    km.session.max_message = 4 * (limits.output + SLACK)
    km.relay_dir = Path(tempfile.mkdtemp(prefix="grade-relay-"))  # the grader's alone: the kernel cannot see it
    return km


class _CellRun:
    """The cell loop of one execution: each code cell under the limit :class:`Deadlines` gives it,
    until the end, a timeout, the kernel's death or a breach of a limit; what stopped it, and why."""

    def __init__(self, client: NotebookClient, nb: nbformat.NotebookNode, tasks: list[str | None], count: int,
                 deadlines: Deadlines) -> None:
        self.client, self.nb, self.tasks, self.count, self.deadlines = client, nb, tasks, count, deadlines
        self.errors: list[CellError] = []
        self.status, self.message, self.stopped = "completed", "", None

    def all(self, watchdog: Watchdog) -> None:
        """Run every code cell in order (``count`` notebook cells, then the grader's own)."""
        deadline = watchdog.deadline
        for index, cell in enumerate(self.nb.cells):
            if cell.cell_type != "code":
                continue
            hidden = index >= self.count
            if index == self.count:  # the grader's own cells: a budget (and a deadline) of their own
                deadline = time.monotonic() + self.deadlines.hidden
                watchdog.deadline = deadline
                watchdog.deadline_message = (f"was still running the hidden cases at their time limit "
                                             f"({self.deadlines.hidden} s)")
            if not self.one(index, cell, hidden, deadline - time.monotonic(), watchdog):
                return

    def one(self, index: int, cell: Any, hidden: bool, left: float, watchdog: Watchdog) -> bool:
        """Run cell ``index``; whether the run goes on after it."""
        task = self.tasks[index]
        where = f"cell {index} ({task or 'set-up'})"
        if left <= 0 or watchdog.breach is not None:
            self.status, self.message, self.stopped = _stopped(watchdog.breach, self.deadlines, where, task, hidden)
            return False
        client = self.client
        client.timeout = self.deadlines.cell_limit(hidden=hidden, task=task, left=left)
        try:
            client.execute_cell(cell, index)
        except CellTimeoutError:
            self.status, self.stopped = "timeout", task
            if client.timeout < (self.deadlines.hidden if hidden else self.deadlines.cell):
                # the cell's limit was what its phase had left: the phase's deadline stopped it, whichever of
                # the client's timer and the watchdog's poll saw it first
                self.message = (f"{where} was still running the hidden cases at their time limit "
                                f"({self.deadlines.hidden} s)" if hidden else
                                f"{where} was still running at its time limit ({self.deadlines.notebook} s per "
                                "notebook)") + AFTER
            else:
                self.message = (f"{where} was still running after {client.timeout} s and was stopped (limits: "
                                f"{self.deadlines.describe()})" + AFTER)
            return False
        except DeadKernelError:
            code = _kernel_returncode(client)
            watchdog.settle()  # killed by the system (a cgroup's OOM kill) between two polls: say why
            self.status, self.message = _death(code, watchdog.breach, where)
            self.stopped = task
            return False
        raised = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if raised and watchdog.breach is None:  # "no space left" raised before the next poll: over the limit?
            watchdog.settle()
            if watchdog.breach is not None:
                watchdog.kill_all()
        if watchdog.breach is None:  # (an error the limit caused is the limit's, not the cell's)
            self.errors += [CellError(index, task, o.get("ename", "Error"), o.get("evalue", "")) for o in raised]
            return True
        self.status, self.message = _death(None, watchdog.breach, where)  # killed as the cell ended
        self.stopped = task
        return False


def _stopped(breach: Breach | None, deadlines: Deadlines, where: str, task: str | None,
             hidden: bool) -> tuple[str, str, str | None]:
    """Status, message and task for a run stopped before ``where`` started (deadline or breach)."""
    if breach is not None and breach.kind != "timeout":
        status, message = _death(None, breach, where)
        return status, message, task
    limit = f"{deadlines.hidden} s for the hidden cases" if hidden else f"{deadlines.notebook} s per notebook"
    return "timeout", f"the notebook reached its time limit ({limit}) before {where}" + AFTER, task
