"""Starting, measuring and stopping the student processes judges ask for (:mod:`util.student_process`).

A judge never runs student code itself. When it needs some (a compiled kernel to time, a function to
retrain with), it asks the grader, which starts a **student process** here: confined like a kernel
(:func:`grader.execute.launch.command_prefix`: its own scratch folder, sandbox, process namespace,
rlimits, seccomp; no lab's grader-only file visible), running as the student's unprivileged user,
which is not the judge's (:func:`grader.execute.confinement.judge_ids`), so it can neither trace,
signal nor read the memory of the judge or of a baseline the judge times. The grader hands the judge
one end of a Unix socket to it, and keeps watch: a deadline, the submission's memory and process
limits (a :class:`grader.execute.watchdog.Watchdog`), and what the judge may ask of the grader about
it, measured from outside, where the student's code cannot touch the measurement: CPU time of every
process it ran, the CPUs its threads may use, the libraries mapped into it, its peak memory; pausing
it (``SIGSTOP`` to each of its processes) while the judge times something else on the same CPU.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from grader.core.limits import Limits
from grader.core.limits import tasks as task_limit
from grader.execute import cgroups, disk, launch
from grader.execute.scratch import judge_env
from grader.execute.watchdog import Watchdog
from util.student_process import CHANNEL_FD_ENV, Channel, ChannelError

DISK = 256 << 20
"""Disk a student process may use in its scratch folder (a library, a few arrays)."""
BOOT = "from util.student_process import main; main()"
"""What the confined Python runs: the course's side of the channel (:func:`util.student_process.main`)."""


@dataclass
class StudentProcess:
    """The grader's record of one student process."""

    ident: int
    process: psutil.Popen
    scratch: disk.Scratch
    watchdog: Watchdog
    group: cgroups.Group | None = None
    paused: bool = False
    seen: set[int] = field(default_factory=set)
    """Every pid seen in its tree (a process that detached is still ended with it)."""

    def tree(self) -> list[psutil.Process]:
        """Its processes now (the launcher, bwrap, the harness and whatever they started)."""
        try:
            found = [self.process, *self.process.children(recursive=True)]
        except psutil.Error:
            found = []
        self.seen.update(p.pid for p in found)
        return found

    def harness(self) -> psutil.Process | None:
        """The oldest process running the course's side of the channel (a fork of it keeps its command line)."""
        running = []
        for proc in self.tree():
            try:
                if proc.cmdline()[1:] == ["-c", BOOT]:  # not bwrap nor a launcher, whose arguments hold it too
                    running.append((proc.create_time(), proc.pid, proc))
            except psutil.Error:
                continue
        return min(running)[2] if running else None

    def stats(self) -> dict:
        """CPU seconds, CPUs, libraries (names; and ``executables``: the paths of the files mapped executable, as
        the processes see them, a deleted one marked so), processes and memory, measured by the grader (see the
        module's docstring)."""
        cpu, cpus, libraries, executables, count = 0.0, set(), set(), set(), 0
        for proc in self.tree():
            try:
                times = proc.cpu_times()
                cpu += times.user + times.system + times.children_user + times.children_system
                count += 1
                for thread in proc.threads():
                    try:
                        cpus |= os.sched_getaffinity(thread.id)
                    except OSError:
                        continue
                for line in Path(f"/proc/{proc.pid}/maps").read_text().splitlines():
                    parts = line.split(None, 5)
                    if len(parts) == 6 and parts[5].startswith("/"):
                        libraries.add(Path(parts[5]).name)
                        if "x" in parts[1]:
                            executables.add(parts[5])
            except (psutil.Error, OSError):
                continue
        harness = self.harness()
        peak = rss = 0
        if harness is not None:
            try:
                status = Path(f"/proc/{harness.pid}/status").read_text()
                values = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
                peak = int(values.get("VmHWM", "0 kB").split()[0]) * 1024
                rss = int(values.get("VmRSS", "0 kB").split()[0]) * 1024
            except (OSError, ValueError):
                pass
        return {"cpu_seconds": round(cpu, 4), "cpus": sorted(cpus), "libraries": sorted(libraries),
                "executables": sorted(executables)[:500], "processes": count, "peak_rss": peak, "rss": rss,
                "exit": self.exit_code(0.2 if harness is None else 0.0)}

    def exit_code(self, wait: float = 0.2) -> int | None:
        """How it ended (the sandbox passes a signal on as 128 + its number), or ``None`` while it runs.

        ``wait``: the seconds to give a process that is ending to end (a harness gone, its sandbox not yet); a
        process whose harness still runs is asked without waiting, since :meth:`stats` is read between the calls
        of a timed case (it cost 0.2 s of every such read)."""
        try:
            return self.process.wait(wait)
        except psutil.TimeoutExpired:
            return None

    def signal_all(self, number: int) -> None:
        """Send ``number`` to each of its processes until no new one appears (a fork racing the stop)."""
        done: set[int] = set()
        for _ in range(20):
            todo = [p for p in self.tree() if p.pid not in done]
            if not todo:
                return
            for proc in todo:
                try:
                    proc.send_signal(number)
                except psutil.Error:
                    pass
                done.add(proc.pid)

    def pause(self) -> None:
        self.signal_all(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        self.signal_all(signal.SIGCONT)
        self.paused = False

    def reset_peak(self) -> None:
        """Start ``peak_rss`` afresh (``/proc/<pid>/clear_refs``; only a root grader may, since the
        process is not dumpable)."""
        harness = self.harness()
        if harness is None:
            raise ChannelError("the student process is gone")
        try:
            Path(f"/proc/{harness.pid}/clear_refs").write_text("5")
        except OSError as exc:
            raise ChannelError(f"the peak memory cannot be reset here ({exc.strerror})") from None

    def stop(self) -> None:
        """End every process of it, its scratch folder and cgroup."""
        if self.paused:
            self.resume()
        self.watchdog.kill_all()
        self.watchdog.stop()
        for pid in self.seen:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            self.process.wait(10)
        except psutil.Error:
            pass
        if self.group is not None:
            try:
                self.group.remove()
            except OSError:
                pass
        self.scratch.remove()


def start(ident: int, harness: str, *, sandboxed: bool, ids: tuple[int, int] | None, limits: Limits,
          cpu: int | None = None, seconds: float = 60.0,
          withhold: tuple[Path, ...] = ()) -> tuple[StudentProcess, socket.socket]:
    """A student process running ``harness`` and the socket to hand the judge (connected to it, the
    harness named and ready); ``withhold``: files it cannot read (a data set the judge evaluates on).
    Raises ``ChannelError`` when it does not start, or when files are to be withheld without a sandbox
    (nothing could keep them from it)."""
    if withhold and not sandboxed:
        raise ChannelError("a student process cannot be kept from the data it is evaluated on without the "
                           "sandbox (bubblewrap): install it, or grade this task elsewhere")
    scratch = disk.Scratch.create("student", disk=DISK, owner=ids, filesystem=False)
    for name in (disk.TMP, disk.SHM, disk.HOME):
        scratch.folder(name)
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    group = cgroups.create(memory=limits.memory, tasks=task_limit(limits))
    try:
        command = launch.command_prefix(scratch.path, sandboxed=sandboxed, ids=ids, limits=limits,
                                         cgroup=group.procs_file if group else None,
                                         cpus=(cpu,) if cpu is not None else (), withhold=withhold)
        env = {**judge_env(scratch.path, sandboxed), CHANNEL_FD_ENV: str(theirs.fileno())}
        process = psutil.Popen(command + [sys.executable, "-c", BOOT], pass_fds=(theirs.fileno(),),
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               cwd=scratch.path, env=env, start_new_session=True)
    except BaseException:
        ours.close()
        theirs.close()
        if group is not None:
            group.remove()
        scratch.remove()
        raise
    theirs.close()
    watchdog = Watchdog(process.pid, memory=limits.memory, procs=limits.procs, scratch=scratch, disk=DISK,
                        cgroup=group, deadline=time.monotonic() + seconds)
    record = StudentProcess(ident, process, scratch, watchdog, group)
    channel = Channel(ours, peer="the student process")
    try:
        channel.send({"harness": harness})
        header, _, fds = channel.receive(timeout=60.0)
        Channel._close_fds(fds)
        if header.get("ready") is not True:
            raise ChannelError(f"the student process did not start its harness: {str(header.get('error'))[:200]}")
    except ChannelError:
        ours.close()
        record.stop()
        raise
    return record, ours

