"""Grader-side checks of saved files, run in a confined subprocess, never in the grader's own process.

A task's ``grader_check`` judges a file the student's code made (an ONNX model its function built):
the check parses it, runs it (onnxruntime), maybe compiles and times it. A hostile file can crash,
hang or bloat whatever process does that. So the checks run in a judge process confined exactly
like a kernel (:func:`grader.execute.launch.command_prefix`: its own cgroup where there is one, an
unprivileged user, rlimits, the bubblewrap sandbox with no network, everything read-only but a
scratch folder of its own, the files shown read-only), under a watchdog (memory, processes, disk,
and a deadline per case). The judge receives the files by path (the grader never reads them) and
returns, per case, a bounded list of problems as JSON lines (:mod:`grader.judge.worker`).

A case whose check makes the judge die, overrun its time or memory, or write something that is not
the expected JSON is marked failed with a message saying so; the judge is restarted for the cases
after it, so one hostile file costs only its own case. A check may start child processes (the
process limit applies to all of them together); they end with the judge.
"""
from __future__ import annotations

import contextlib
import json
import queue
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from grader.core.limits import Limits, format_size
from grader.core.limits import tasks as task_limit
from grader.execute import cgroups, confinement, disk, launch, student_process
from grader.execute.scratch import judge_env
from grader.execute.watchdog import Watchdog
from util import labs
from util.data import WITHHELD
from util.judging import secret
from util.student_process import SERVICE_FD_ENV, Channel, ChannelError

WORKER = Path(__file__).with_name("worker.py")
MAX_LINE = 64 << 10
"""Longest protocol line read from a judge (its problems are bounded well below this)."""
JUDGE_DISK = 256 << 20
"""Disk a judge may use for its own scratch files (a check writes little, if anything)."""


def _reader(stream, lines: queue.Queue) -> None:  # noqa: ANN001
    """Put each protocol line (or ``None`` at its end) on ``lines``; an overlong line ends the stream."""
    try:
        while True:
            line = stream.readline(MAX_LINE + 1)
            if not line or len(line) > MAX_LINE:
                break
            lines.put(line)
    except (OSError, ValueError):
        pass
    lines.put(None)


@dataclass(frozen=True)
class Judged:
    """The grader's verdict on one saved file."""

    problems: list[str]
    """What is wrong with it (empty: the case passes)."""
    facts: dict[str, Any] = field(default_factory=dict)
    """What the check measured on the way (a speed-up and the band it was judged in): for the instructor's
    records, disputes and leaderboards (:mod:`grader.judge.worker` bounds them); never a verdict."""


def _judged(record: Any, index: int) -> Judged | None:
    """The verdict in a ``done`` record for case ``index``, or ``None`` if it is not one."""
    if not isinstance(record, dict) or record.get("done") != index:
        return None
    problems = record.get("problems")
    if not isinstance(problems, list) or not all(isinstance(p, str) for p in problems):
        return None
    facts = record.get("facts")
    facts = facts if isinstance(facts, dict) and len(json.dumps(facts)) <= 16 << 10 else {}
    return Judged([p[:400] for p in problems[:20]], facts)


def _failure(watchdog: Watchdog, code: int | None, timeout: int, memory: int, garbage: bool) -> str:
    """Why the judge stopped on a case, in words for the student and the instructor."""
    breach = watchdog.breach
    if breach is not None and breach.kind == "timeout":
        return f"the grader's check of this file was still running after {timeout} s and was stopped"
    if breach is not None and breach.kind == "memory":
        return f"the grader's check of this file used more than {format_size(memory)} of memory and was stopped"
    if breach is not None:
        return f"the grader's check of this file was stopped: it {breach.message}"
    if garbage:
        return "the grader's check of this file returned something unreadable"
    signal = -code if code is not None and code < 0 else code - 128 if code is not None and code > 128 else None
    if signal is not None:  # (the sandbox passes a signal on as 128 + its number)
        return f"the grader's check of this file crashed (signal {signal})"
    return f"the grader's check of this file ended without a verdict (exit code {code})"


class _Service:
    """The grader's side of what a judge process may ask it (:mod:`util.student_process`): start a
    student process for it (:mod:`grader.execute.student_process`), measure, pause, resume or stop one.
    Runs in a thread of the grader while the judge process lives; every student process it started ends
    with it. A request it cannot honour gets ``{"error": ...}``."""

    MAX_STUDENTS = 16
    """Student processes one judge process may ask for."""

    def __init__(self, sock: socket.socket, *, sandboxed: bool, limits: Limits, timeout: int) -> None:
        self.channel = Channel(sock, max_data=0, peer="the judge")
        self.sandboxed, self.limits, self.timeout = sandboxed, limits, timeout
        self.students: dict[int, student_process.StudentProcess] = {}
        self.started = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                header, _, fds = self.channel.receive()
            except ChannelError:
                return
            Channel._close_fds(fds)
            handed: socket.socket | None = None
            try:
                reply, handed = self._handle(header)
            except (ChannelError, OSError, ValueError, KeyError, TypeError) as exc:
                reply = {"error": f"{type(exc).__name__}: {exc}"[:400]}
            try:
                self.channel.send(reply, fds=(handed.fileno(),) if handed is not None else ())
            except ChannelError:
                return
            finally:
                if handed is not None:
                    handed.close()

    def _handle(self, header: dict) -> tuple[dict, socket.socket | None]:
        if "start" in header:
            request = header["start"]
            harness = str(request.get("harness", ""))
            if not labs.course_module(harness.partition(":")[0]) or not harness.partition(":")[2].isidentifier():
                raise ValueError(f"not a course harness: {harness!r}")
            if self.started >= self.MAX_STUDENTS:
                raise ValueError(f"a judge may start at most {self.MAX_STUDENTS} student processes")
            cpu = request.get("cpu")
            seconds = min(float(request.get("seconds") or self.timeout), float(self.timeout))
            withheld = request.get("withhold") or []
            if not isinstance(withheld, list) or not all(name in WITHHELD for name in withheld):
                raise ValueError(f"withhold names data sets the course has: {', '.join(WITHHELD)}")
            self.started += 1
            record, sock = student_process.start(
                self.started, harness, sandboxed=self.sandboxed, ids=confinement.student_ids(self.sandboxed),
                limits=self.limits, cpu=int(cpu) if cpu is not None else None, seconds=seconds,
                withhold=tuple(path for name in withheld for path in WITHHELD[name]()))
            self.students[record.ident] = record
            return {"id": record.ident}, sock
        for verb in ("stats", "pause", "resume", "reset_peak", "stop"):
            if verb in header:
                record = self.students.get(header[verb])
                if record is None:
                    raise KeyError(f"no student process {header[verb]!r}")
                if verb == "stats":
                    return record.stats(), None
                if verb == "stop":
                    self.students.pop(record.ident).stop()
                else:
                    getattr(record, verb)()
                return {"done": verb}, None
        raise ValueError(f"the grader does not know the request {sorted(header)[:3]}")

    def close(self) -> None:
        self.channel.close()
        self.thread.join(timeout=10)
        for record in list(self.students.values()):
            record.stop()
        self.students.clear()


@contextlib.contextmanager
def serving(*, limits: Limits | None = None, sandbox: bool | None = None, timeout: int = 600):
    """Let this process act as a judge while the block runs: a judge's function called here (a test, a
    benchmark) gets its student processes from a :class:`_Service` thread of this process, confined as
    in grading."""
    from util import student_process as client

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    sandboxed = confinement.available() if sandbox is None else sandbox
    service = _Service(ours, sandboxed=sandboxed, limits=limits or Limits(), timeout=timeout)
    previous, client._service = client._service, Channel(theirs, max_data=0, peer="the grader")
    try:
        yield service
    finally:
        client._service.close()
        client._service = previous
        service.close()


def _run_judge(cases: list[dict], first: int, results: list, files_dir: Path, *, limits: Limits,
               sandboxed: bool, timeout: int, reveal: tuple[Path, ...]) -> int | None:
    """Judge ``cases[first:]`` in one judge process, filling ``results``; the index of the case it
    stopped on without a verdict (``results`` then holds why), or ``None`` when it judged them all.

    The judge runs as the judge's user (:func:`grader.execute.confinement.judge_ids`), never the
    student's, reads only its lab's judges among the grader-only files (``reveal``), and may ask this
    process for student processes through a socket of its own (:class:`_Service`)."""
    owner = confinement.judge_ids(sandboxed)
    scratch = disk.Scratch.create("judge", disk=JUDGE_DISK, owner=owner, filesystem=False)
    group = cgroups.create(memory=limits.memory, tasks=task_limit(limits))
    watchdog = None
    service = None
    current = first
    garbage = False
    try:
        for name in (disk.TMP, disk.SHM, disk.HOME):
            scratch.folder(name)
        command = launch.command_prefix(scratch.path, sandboxed=sandboxed, ids=owner, limits=limits,
                                         cgroup=group.procs_file if group else None, readable=(files_dir,),
                                         reveal=reveal)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = {**judge_env(scratch.path, sandboxed), SERVICE_FD_ENV: str(theirs.fileno())}
        try:
            process = subprocess.Popen(command + [sys.executable, "-c", WORKER.read_text(encoding="utf-8")],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                       cwd=scratch.path, env=env, text=True, start_new_session=True,
                                       pass_fds=(theirs.fileno(),))
        finally:
            theirs.close()
        service = _Service(ours, sandboxed=sandboxed, limits=limits, timeout=timeout)
        watchdog = Watchdog(process.pid, memory=limits.memory, procs=limits.procs, scratch=scratch,
                            disk=JUDGE_DISK, cgroup=group, deadline=time.monotonic() + timeout)
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(process.stdout, lines), daemon=True).start()
        try:
            # the grading secret travels only here, on the judge's standard input (util.judging.secret)
            process.stdin.write(json.dumps({"cases": cases[first:], "secret": secret.current().hex()}) + "\n")
            process.stdin.close()
        except OSError:
            pass
        while current < len(cases):
            line = lines.get()
            if line is None:
                break
            try:
                record = json.loads(line)
            except ValueError:
                garbage = True
                break
            if isinstance(record, dict) and record.get("start") == current - first:
                watchdog.deadline = time.monotonic() + timeout  # each case gets its own time
                continue
            judged = _judged(record, current - first)
            if judged is None:
                garbage = True
                break
            results[current] = judged
            current += 1
        if current == len(cases):
            return None
        watchdog.kill_all()
        try:
            code = process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        results[current] = Judged([_failure(watchdog, code, timeout, limits.memory, garbage)])
        return current
    finally:
        if watchdog is not None:
            watchdog.stop()
        if service is not None:
            service.close()
        if group is not None:
            try:
                group.remove()
            except OSError:
                pass
        scratch.remove()


def judge(cases: list[Mapping[str, Any]], files_dir: Path, *, timeout: int, limits: Limits | None = None,
          sandbox: bool | None = None, reveal: tuple[Path, ...] = ()) -> list[list[str]]:
    """Problems per case (empty: passed): :func:`judge_all` without the facts."""
    return [judged.problems for judged in judge_all(cases, files_dir, timeout=timeout, limits=limits, sandbox=sandbox,
                                                    reveal=reveal)]


def judge_all(cases: list[Mapping[str, Any]], files_dir: Path, *, timeout: int, limits: Limits | None = None,
              sandbox: bool | None = None, reveal: tuple[Path, ...] = ()) -> list[Judged]:
    """A :class:`Judged` per case (no problems: passed) for ``cases``, each ``{"check": "module:function", "spec":
    ..., "tolerance": {"rtol": ..., "atol": ...}, "file": path}`` with ``file`` inside ``files_dir``, and
    optionally ``"returned"``: what the case returned in the kernel, for a check that takes it
    (:mod:`grader.judge.worker`).

    ``timeout`` bounds each case (the run's ``Deadlines.judge``); ``limits`` bounds the judge's memory
    and processes (and each student process's it starts); ``reveal`` lists the grader-only files it
    may read (its lab's judges: :func:`util.labs.judge_paths`); ``sandbox`` forces the sandbox on or off (default: on where it works).
    """
    limits = limits or Limits()
    sandboxed = confinement.available() if sandbox is None else sandbox
    results: list[Judged | None] = [None] * len(cases)
    first = 0
    while first < len(cases):
        stopped = _run_judge([dict(c) for c in cases], first, results, files_dir.resolve(), limits=limits,
                             sandboxed=sandboxed, timeout=timeout, reveal=reveal)
        if stopped is None:
            break
        first = stopped + 1
    return [r if r is not None else Judged(["the grader could not check this file"]) for r in results]
