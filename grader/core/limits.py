"""Resource limits for one graded submission: time, memory, processes, file size, output.

Time is one policy, :class:`Deadlines`: resolved once per run from the lab's declared defaults and
the command line's overrides (:meth:`Deadlines.resolve`), and asked by every runner (the kernel's
cell loop, the hidden cases, the judge process, the self-check).

The limits are enforced in three layers, so that each works where the others cannot:

* kernel rlimits, set in the sandbox just before the kernel starts (:func:`rlimit_prefix`):
  ``RLIMIT_DATA`` (one process's heap: an allocation past it raises ``MemoryError`` in the
  student's cell), ``RLIMIT_FSIZE`` (one file's size), ``RLIMIT_CORE`` = 0 (no core dumps) and, in
  the sandbox only, ``RLIMIT_NPROC``. Linux counts that one per user and counts threads: inside
  the sandbox's own user namespace it counts only the submission's tasks (so it is set to
  :data:`TASKS_PER_PROCESS` times ``procs``); outside it would count every process of the grading
  user, so it is not set there. Root is exempt from it either way;
* a watchdog in the grader (:mod:`grader.execute.watchdog`) that sums the memory and counts the processes
  of the submission's whole process tree, and measures its scratch folder, and kills the tree when
  one is over its limit (this is what holds for a root grader and for memory spread over several
  processes);
* the executor's timeouts and its bounded output (:mod:`grader.execute.kernel`).

``RLIMIT_AS`` is not used: it counts address space that is only reserved, and threaded libraries
(onnxruntime, OpenMP) reserve a lot of it without using it.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from util.contract import Lab

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str | int) -> int:
    """Bytes from ``"4G"``, ``"512M"``, ``"100k"`` or a plain number of bytes (binary units)."""
    if isinstance(text, int):
        return text
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", str(text).lower())
    if not match:
        raise ValueError(f"{text!r} is not a size: write a number of bytes or e.g. 512M, 4G")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def format_size(n: int) -> str:
    """``4294967296`` -> ``4 GiB``, for messages students read."""
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


@dataclass(frozen=True)
class Limits:
    """What one submission may use. ``None`` time limits mean "the lab's declared limit"."""

    notebook_timeout: int | None = None
    """Seconds for the whole notebook (``--timeout``); default the lab's ``notebook_timeout``."""
    cell_timeout: int | None = None
    """Seconds for one cell (``--cell-timeout``); default the lab's ``cell_timeout``."""
    memory: int = 4 << 30
    """Bytes of memory for the whole submission: every process of the kernel's tree together."""
    procs: int = 64
    """Processes (and threads' worth of tasks, for a non-root grader) the submission may run at once."""
    fsize: int = 1 << 30
    """Largest file the submission may write, in bytes; also the size of its private ``/tmp``."""
    disk: int = 4 << 30
    """Bytes of files the submission may keep in its scratch folder (checked every 2 s)."""
    output: int = 1 << 20
    """Bytes of cell output kept per cell; more is dropped with a note (the run continues)."""
    notebook_output: int = 16 << 20
    """Bytes of output kept for the whole notebook."""
    notebook_size: int = 32 << 20
    """Largest notebook file graded (``--max-notebook``); a larger one is refused before it is read."""
    judge_timeout: int | None = None
    """Seconds the grader's own check of one saved file may take (in its judge process); default the lab's."""
    saved_files: int = 256
    """Files the hidden cases may save for the grader's checks (``--max-saved-files``): one per case that
    declares one; the cases past it are failed, unjudged (``grader.judge.artifacts``)."""
    saved_file: int = 512 << 20
    """Largest saved file the grader judges (``--max-saved-file``); a larger one fails its case, unjudged
    (the largest model a course lab saves is about 250 MB)."""
    saved_total: int = 1536 << 20
    """Bytes of saved files the grader judges per submission (``--max-saved``), in case order; a case whose
    file would go over it fails, unjudged."""
    kept_saved: int = 64 << 20
    """Bytes of judged files copied into the submission's results folder for disputes (``--keep-saved``),
    each at most ``grader.judge.artifacts.KEEP_FILE``; the others are listed by size and SHA-256 only."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """One line for the grader's log, e.g. ``timeout 900 s, cell 300 s, memory 4 GiB, ...``."""
        times = ", ".join(f"{label} {value} s" if value else f"{label} the lab's"
                          for label, value in (("timeout", self.notebook_timeout), ("cell", self.cell_timeout)))
        return (f"{times}, memory {format_size(self.memory)}, {self.procs} processes, "
                f"files up to {format_size(self.fsize)} each and {format_size(self.disk)} in all, "
                f"output {format_size(self.output)} per cell, notebooks up to {format_size(self.notebook_size)}, "
                f"saved files: {self.saved_files}, up to {format_size(self.saved_file)} each and "
                f"{format_size(self.saved_total)} in all, {format_size(self.kept_saved)} kept")


@dataclass(frozen=True)
class Deadlines:
    """Every time limit of one graded run, in seconds: the one policy the runners ask.

    Made by :meth:`resolve` (the lab's declared defaults, ``Lab.cell_timeout`` and its siblings,
    overridden by the command line's ``--cell-timeout``, ``--timeout``...), never assembled by hand
    in a runner: a new kind of budget (per task, say) is a change to this class alone.
    """

    cell: int
    """One cell of the notebook."""
    notebook: int
    """The notebook's own cells together, counted from the kernel's start: an absolute deadline."""
    hidden: int
    """The grader's hidden cases together, after the notebook: a deadline of their own."""
    judge: int
    """The grader's check of one saved file, in its judge process."""

    @classmethod
    def resolve(cls, lab: "Lab", limits: Limits | None = None) -> "Deadlines":
        """The deadlines of a run of ``lab`` under ``limits``: an override where one is given, else the lab's."""
        limits = limits or Limits()
        return cls(cell=limits.cell_timeout or lab.cell_timeout, notebook=limits.notebook_timeout or lab.notebook_timeout,
                   hidden=lab.hidden_timeout, judge=limits.judge_timeout or lab.judge_timeout)

    def phase(self, *, hidden: bool) -> int:
        """Seconds of the phase a cell belongs to: the notebook's, or the hidden cases'."""
        return self.hidden if hidden else self.notebook

    def cell_limit(self, *, hidden: bool, task: str | None, left: float) -> int:
        """Seconds the next cell (of ``task``'s section, or the grader's hidden cases) may run when its
        phase has ``left`` seconds before its deadline: its own limit, never past the deadline."""
        own = self.hidden if hidden else self.cell
        return max(1, math.ceil(min(own, left)))

    def describe(self) -> str:
        """For messages: ``300 s per cell, 900 s per notebook, 300 s for the hidden cases``."""
        return f"{self.cell} s per cell, {self.notebook} s per notebook, {self.hidden} s for the hidden cases"


TASKS_PER_PROCESS = 8
"""Threads allowed per process in ``RLIMIT_NPROC`` (a kernel runs several; onnxruntime one per core)."""
OPEN_FILES = 4096
"""``RLIMIT_NOFILE``: open files per process (pipe and socket buffers are bounded through it)."""


def tasks(limits: Limits) -> int:
    """Tasks (processes and threads) a submission may run at once: ``RLIMIT_NPROC`` and ``pids.max``."""
    return max(limits.procs * TASKS_PER_PROCESS, 256)


def rlimits(limits: Limits, *, per_user: bool) -> list[tuple[str, int]]:
    """The rlimits student code runs under, as (``resource`` name, value) pairs.

    ``per_user``: the submission runs as a user of its own (its own uid, or a user namespace of its
    own), so that ``RLIMIT_NPROC``, which Linux counts per user, counts only its tasks (see
    :mod:`grader.execute.launch`); it is left out otherwise.
    """
    values = [("RLIMIT_DATA", limits.memory), ("RLIMIT_FSIZE", limits.fsize), ("RLIMIT_CORE", 0),
              ("RLIMIT_NOFILE", OPEN_FILES)]
    if per_user:
        values.append(("RLIMIT_NPROC", tasks(limits)))
    return values
