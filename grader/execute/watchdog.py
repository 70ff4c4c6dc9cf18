"""A watchdog on a submission's process tree: total memory, process count, and a clean ending.

It polls the tree under the kernel's launcher process a few times a second. When the tree uses
more memory than allowed (summed over every process; shared pages counted once, by PSS) or runs
more processes than allowed, it kills the whole tree and remembers why, so the executor can tell
the student "your notebook used more than 4 GiB" rather than "the kernel died".

:meth:`Watchdog.stop` kills whatever is left of the tree, including processes that were seen in it
and detached since (a double fork, ``setsid``), so nothing a submission started keeps running. In
the bubblewrap sandbox the process namespace already guarantees that; without it this is the
best effort there is (a process that detaches within one poll interval can escape).
"""
from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from grader.execute.limits import format_size


@dataclass(frozen=True)
class Breach:
    """Why the watchdog killed a submission."""

    kind: str
    """``memory``, ``procs`` or ``disk``."""
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


DISK_EVERY = 10
"""Polls between two measurements of the scratch folder's size (walking it costs more)."""


def folder_size(folder: Path, stop_above: int) -> int:
    """Bytes in the files under ``folder`` (links not followed), counting stops past ``stop_above``."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512  # what the disk holds
            except OSError:
                continue
        if total > stop_above:
            break
    return total


class Watchdog:
    """Watch the process tree rooted at ``pid``; kill it on a breach of ``memory`` or ``procs``, or
    when ``folder`` (the scratch folder) holds more than ``disk`` bytes."""

    def __init__(self, pid: int, *, memory: int, procs: int, folder: Path | None = None, disk: int = 0,
                 interval: float = 0.2) -> None:
        self.root = psutil.Process(pid)
        try:  # the launcher's own process group (jupyter starts kernels in a new session)
            group = os.getpgid(pid)
        except OSError:
            group = None
        self._group = group if group == pid and group != os.getpgrp() else None
        self.memory, self.procs, self.interval = memory, procs, interval
        self.folder, self.disk = folder, disk
        self.breach: Breach | None = None
        self.peak_memory = 0
        """Largest total memory of the tree seen at one poll (RSS sum), in bytes."""
        self._seen: dict[int, psutil.Process] = {}
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
            if self.folder is not None and self.disk and polls % DISK_EVERY == 0:
                used = folder_size(self.folder, self.disk)
                if used > self.disk:
                    self._kill(Breach("disk", f"wrote more than {format_size(self.disk)} of files in its "
                                              "folder, the limit per submission"))
                    return
            processes = self.tree()
            if not processes:
                return
            for process in processes:
                self._seen.setdefault(process.pid, process)
            # bwrap's own two processes and the rlimit wrapper are not the student's
            if len(processes) > self.procs + 3:
                self._kill(Breach("procs", f"ran more than {self.procs} processes at once "
                                           f"({len(processes)}); that is the limit per submission"))
                return
            total = sum(_rss(p) for p in processes)
            self.peak_memory = max(self.peak_memory, total)
            if total > self.memory:
                total = sum(_pss(p) for p in processes)  # forked children share pages: count them once
                if total > self.memory:
                    self._kill(Breach("memory", f"used more than {format_size(self.memory)} of memory "
                                                f"({format_size(total)}), the limit per submission"))
                    return

    def _kill(self, breach: Breach) -> None:
        self.breach = breach
        self.kill_all()

    def kill_all(self) -> None:
        """SIGKILL the launcher's process group, the tree, and every process seen in it since.

        The group first: one ``killpg`` reaches every member at once, even one being forked (a fork
        bomb cannot outrun it), where killing the processes one by one would let new ones escape.
        """
        for _ in range(50):  # until the group is empty (a group id is not reused while it has members)
            if self._group is None:
                break
            try:
                os.killpg(self._group, signal.SIGKILL)
            except OSError:
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
