"""A watchdog on a submission: its deadline, memory, processes and disk, and a clean ending.

It polls a few times a second. When the submission is past its deadline, or over a limit, it
kills everything the submission runs and remembers why, so the executor can tell the student
"your notebook used more than 4 GiB" rather than "the kernel died". What it reads depends on what
enforces each limit (:mod:`grader.execute.cgroups`, :mod:`grader.execute.disk`):

* **memory**: with a cgroup, the kernel enforces ``memory.max`` itself and the watchdog only
  notices its out-of-memory kill; without one, it sums the tree's resident memory (shared pages
  counted once, by PSS, before it kills) plus memfd and deleted-but-open tmpfs files its
  processes hold;
* **processes**: it counts the tree's processes; with a cgroup also the forks ``pids.max`` refused;
* **disk**: the scratch filesystem's usage (``statvfs``, every poll) or, for a plain folder, a walk
  every 2 s plus the deleted files the processes still hold open;
* **time**: an absolute deadline the executor sets (:attr:`Watchdog.deadline`): at it, everything
  is killed, whatever the cells do.

:meth:`Watchdog.stop` kills whatever is left, including processes that were seen in the tree and
detached since (a double fork, ``setsid``). In the sandbox the process namespace (and the cgroup,
where there is one) already guarantees that; without them this is the best effort there is (a
process that detaches within one poll interval can escape).
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from grader.core.limits import format_size
from grader.execute.cgroups import Group
from grader.execute.disk import Scratch
from grader.execute.tree import Unmeasurable


@dataclass(frozen=True)
class Breach:
    """Why the watchdog killed a submission."""

    kind: str
    """``memory``, ``procs``, ``disk``, ``output`` (a message too large for the relay) or ``timeout``."""
    message: str
    """In a student's words, e.g. ``used more than 4 GiB of memory (4.2 GiB)``."""


def _pss(process: psutil.Process) -> int:
    try:
        return process.memory_full_info().pss
    except (psutil.Error, AttributeError):
        return _rss(process)


def _rss(process: psutil.Process) -> int:
    try:
        return process.memory_info().rss
    except psutil.Error:
        return 0


def held_files(pids: list[int], *, maps: bool = False) -> tuple[int, int]:
    """(bytes of memfd files, bytes of deleted files) held open by ``pids``, each file counted once.

    A deleted file's space is only freed when its last descriptor closes, so a submission can keep
    gigabytes no walk of its folder sees. With ``maps`` (and root, which may read
    ``/proc/<pid>/map_files``), deleted files that are only mapped count too.
    """
    seen: set[tuple[int, int]] = set()
    memory = deleted = 0

    def count(path: str, text: str) -> None:
        nonlocal memory, deleted
        try:
            info = os.stat(path)
        except OSError:
            return
        key = (info.st_dev, info.st_ino)
        if key in seen or info.st_nlink and not text.startswith("/memfd:"):
            return
        seen.add(key)
        if text.startswith("/memfd:"):
            memory += info.st_blocks * 512
        elif text.endswith("(deleted)"):
            deleted += info.st_blocks * 512

    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            names = os.listdir(fd_dir)
        except OSError:
            continue
        for name in names:
            try:
                text = os.readlink(f"{fd_dir}/{name}")
            except OSError:
                continue
            if text.startswith("/memfd:") or text.endswith("(deleted)"):
                count(f"{fd_dir}/{name}", text)
        if maps:
            try:
                lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
            except OSError:
                continue
            for line in lines:
                if line.endswith("(deleted)") and "/" in line:
                    count(f"/proc/{pid}/map_files/{line.split()[0]}", line[line.index("/"):])
    return memory, deleted


def live_members(group: int) -> list[int]:
    """The pids of the process group ``group`` that are not zombies (read from ``/proc/<pid>/stat``).

    ``killpg`` succeeds as long as a group has any member, a zombie included, so a loop that kills
    until ``killpg`` fails waits for the launcher's parent to reap it; this is what to wait for
    instead: every member that can still run has died.
    """
    alive = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            text = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        fields = text[text.rfind(b")") + 2:].split()  # after "pid (comm) ": state ppid pgrp ...
        if len(fields) > 2 and int(fields[2]) == group and fields[0] not in (b"Z", b"X"):
            alive.append(int(name))
    return alive


DISK_EVERY = 10
"""Polls between two walks of a plain scratch folder (a mounted one is read at every poll)."""
HELPERS = 3
"""Processes of the tree that are not the student's: bwrap's two and a launcher."""


class Watchdog:
    """Watch the submission whose launcher is ``pid``; kill it at ``deadline`` (monotonic seconds)
    or on a breach of ``memory``, ``procs`` or ``disk`` (measured in ``scratch``)."""

    def __init__(self, pid: int, *, memory: int, procs: int, scratch: Scratch | None = None, disk: int = 0,
                 cgroup: Group | None = None, deadline: float | None = None, relay: subprocess.Popen | None = None,
                 relay_limit: int = 0, interval: float = 0.2) -> None:
        self.root = psutil.Process(pid)
        try:  # the launcher's own process group (jupyter starts kernels in a new session)
            group = os.getpgid(pid)
        except OSError:
            group = None
        self._group = group if group == pid and group != os.getpgrp() else None
        self.memory, self.procs, self.interval = memory, procs, interval
        self.scratch, self.disk, self.cgroup = scratch, disk, cgroup
        self.relay, self.relay_limit = relay, relay_limit
        self.deadline = deadline
        """Monotonic time at which everything is killed (``None``: no deadline); the executor moves it."""
        self.deadline_message = "was still running at its time limit"
        self.breach: Breach | None = None
        self.peak_memory = 0
        """Largest total memory of the submission seen (the cgroup's peak, or an RSS sum), in bytes."""
        self._seen: dict[int, psutil.Process] = {}
        self._maps = os.geteuid() == 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"watchdog-{pid}", daemon=True)
        self._thread.start()

    def tree(self) -> list[psutil.Process]:
        """The root and all its live descendants."""
        try:
            return [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return []

    def _loop(self) -> None:
        polls = 0
        while not self._stop.wait(self.interval):
            polls += 1
            try:
                breach = self._check(polls)
            except Exception:  # a process vanished mid-read: the watch (and its deadline) goes on
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    breach = Breach("timeout", self.deadline_message)
                else:
                    continue
            if breach is not None:
                self._kill(breach)
                return
            if not self.tree() and (self.cgroup is None or not self.cgroup.pids()):
                return

    def _check(self, polls: int) -> Breach | None:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return Breach("timeout", self.deadline_message)
        if self.relay is not None and self.relay.poll() is not None:  # it ran out of memory on a message
            return Breach("output", f"sent the grader a message far over the {format_size(self.relay_limit)} it "
                                    "accepts (all its parts together)")
        processes = self.tree()
        for process in processes:
            self._seen.setdefault(process.pid, process)
        pids = [p.pid for p in processes]
        if self.cgroup is not None:
            pids = sorted(set(pids) | set(self.cgroup.pids()))
        if len(pids) > self.procs + HELPERS or (self.cgroup is not None and self.cgroup.tasks_refused()):
            return Breach("procs", f"ran more than {self.procs} processes (or threads) at once; that is the "
                                   "limit per submission")
        if self.disk and self.scratch is not None and (self.scratch.mounted or polls % DISK_EVERY == 0):
            try:
                used = self.scratch.usage(self.disk)
            except Unmeasurable as exc:  # what the grader cannot measure counts as over the limit
                return Breach("disk", f"{exc}, so its files could not be measured against the "
                                      f"{format_size(self.disk)} limit per submission")
            if not self.scratch.mounted and used <= self.disk:
                used += held_files(pids, maps=self._maps)[1]
            if used > self.disk or self.scratch.full():
                return Breach("disk", f"kept more than {format_size(self.disk)} of files (its folder, /tmp and "
                                      "/dev/shm, deleted files still open included), the limit per submission")
        if self.cgroup is not None:
            self.peak_memory = max(self.peak_memory, self.cgroup.memory_peak(), self.cgroup.memory_current())
            if self.cgroup.oom_kills():
                return Breach("memory", f"used more than {format_size(self.memory)} of memory, the limit per "
                                        "submission")
            return None
        total = sum(_rss(p) for p in processes)
        held = held_files(pids)[0]
        self.peak_memory = max(self.peak_memory, total + held)
        if total + held > self.memory:
            total = sum(_pss(p) for p in processes) + held  # forked children share pages: count them once
            if total > self.memory:
                return Breach("memory", f"used more than {format_size(self.memory)} of memory "
                                        f"({format_size(total)}), the limit per submission")
        return None

    def settle(self) -> None:
        """Check once more, now, without killing: for a submission the system ended between two polls
        (an out-of-memory kill in its cgroup), so that :attr:`breach` says why."""
        if self.breach is None:
            try:
                self.breach = self._check(DISK_EVERY)
            except Exception:  # the process is gone: nothing more to learn
                pass

    def _kill(self, breach: Breach) -> None:
        self.breach = breach
        self.kill_all()

    def kill_all(self) -> None:
        """SIGKILL the cgroup, the launcher's process group, the tree, and every process seen in it.

        The cgroup or the group first: one ``cgroup.kill`` or ``killpg`` reaches every member at
        once, even one being forked (a fork bomb cannot outrun it), where killing the processes one
        by one would let new ones escape.
        """
        if self.cgroup is not None:
            self.cgroup.kill()
        for _ in range(50):  # until no member runs (a group id is not reused while it has members)
            if self._group is None:
                break
            try:
                os.killpg(self._group, signal.SIGKILL)
            except OSError:
                break
            if not live_members(self._group):  # only zombies are left: their parents reap them
                break
            time.sleep(0.01)
        for process in self.tree() + list(self._seen.values()):
            try:
                if process.is_running():  # compares the start time: never kills a recycled pid
                    process.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass

    def stop(self) -> None:
        """Stop watching and make sure nothing of the submission is left running."""
        self._stop.set()
        self._thread.join(timeout=5)
        self.kill_all()
