"""cgroup v2: the Linux kernel's own limit on a submission's memory and processes, where it can be had.

A cgroup counts every byte the submission's processes make the kernel hold (heap, ``/tmp`` and
``/dev/shm`` files on tmpfs, memfd, SysV shared memory, pipe and socket buffers, page cache) and
every task they start, and nothing a submission does can leave it. The grader uses one when all
of this holds:

* a cgroup v2 hierarchy is mounted (``/sys/fs/cgroup`` on systemd machines) with the ``memory``
  and ``pids`` controllers;
* the grader may create groups there: it runs as root and the hierarchy's root delegates both
  controllers to its children, or ``$COURSE_CGROUP`` names a cgroup delegated to the grader's user
  (for example one made by ``systemd-run --user -p Delegate=yes``).

The grader only ever writes to groups it created: ``<root>/course-grader/`` (or ``$COURSE_CGROUP``)
and one ``sub-<grader pid>-<n>/`` per submission under it. Each submission's group gets
``memory.max`` (the ``--memory`` limit), ``memory.swap.max = 0``, ``memory.oom.group = 1`` (an
out-of-memory kill takes the whole submission, so it is reported as one) and ``pids.max``.
Elsewhere (cgroup v1 only, a container without delegation, a non-root grader without
``$COURSE_CGROUP``) :func:`unavailable_reason` says why, and the watchdog's polling is the limit.
"""
from __future__ import annotations

import functools
import itertools
import os
import signal
import time
from pathlib import Path

ENV = "COURSE_CGROUP"
"""A cgroup v2 folder delegated to the grader (absolute, or relative to the cgroup2 mount)."""
GROUP_NAME = "course-grader"
"""The grader's own group under the hierarchy's root, when it runs as root."""
CONTROLLERS = ("memory", "pids")
_counter = itertools.count()


def mount_point(mountinfo: str = "/proc/self/mountinfo") -> Path | None:
    """Where the cgroup v2 hierarchy is mounted, or ``None``."""
    try:
        lines = Path(mountinfo).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] == "cgroup2":
            return Path(left.split()[4])
    return None


def _words(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError:
        return set()


def _write(path: Path, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _prepare_parent(mount: Path) -> Path:
    """The folder to create submission groups in; raises ``OSError`` with the reason it cannot be used."""
    named = os.environ.get(ENV)
    if named:
        parent = Path(named) if Path(named).is_absolute() else mount / named
        if not (parent / "cgroup.controllers").is_file():
            raise OSError(f"${ENV}={named} is not a cgroup v2 folder")
    elif os.geteuid() != 0:
        raise OSError(f"the grader is not root and ${ENV} names no cgroup delegated to it")
    else:
        missing = set(CONTROLLERS) - _words(mount / "cgroup.subtree_control")
        if missing:
            raise OSError(f"the cgroup v2 root does not delegate {', '.join(sorted(missing))} to its children "
                          "(cgroup v1 holds them, or the container was given no delegation)")
        parent = mount / GROUP_NAME
        parent.mkdir(exist_ok=True)
    missing = set(CONTROLLERS) - _words(parent / "cgroup.controllers")
    if missing:
        raise OSError(f"{parent} has no {', '.join(sorted(missing))} controller")
    enabled = _words(parent / "cgroup.subtree_control")
    if not set(CONTROLLERS) <= enabled:
        _write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in CONTROLLERS))
    _sweep(parent)
    return parent


def _sweep(parent: Path) -> None:
    """Remove the groups of graders that died without removing theirs (killing what is left in them)."""
    for group in parent.glob("sub-*-*"):
        try:
            pid = int(group.name.split("-")[1])
            os.kill(pid, 0)
            continue  # its grader is alive
        except ProcessLookupError:
            pass
        except (ValueError, PermissionError, IndexError):
            continue
        try:
            Group(group).remove()
        except OSError:
            pass


@functools.lru_cache(maxsize=None)
def _probe() -> tuple[Path | None, str | None]:
    mount = mount_point()
    if mount is None:
        return None, "no cgroup v2 hierarchy is mounted"
    try:
        parent = _prepare_parent(mount)
        probe = Group.create(parent, memory=1 << 30, tasks=64)
        probe.remove()
    except OSError as exc:
        return None, str(exc) if not isinstance(exc, PermissionError) else f"no permission ({exc})"
    return parent, None


def unavailable_reason() -> str | None:
    """``None`` when each submission gets its own cgroup here, else why not (probed once per process)."""
    return _probe()[1]


def parent() -> Path | None:
    """The folder submission groups are created in, or ``None`` when cgroups are unavailable."""
    return _probe()[0]


def create(*, memory: int, tasks: int) -> "Group | None":
    """A new group for one submission, or ``None`` where cgroups are unavailable (or the kernel
    refused this one: the watchdog's limits then apply, as without cgroups)."""
    where = parent()
    if where is None:
        return None
    try:
        return Group.create(where, memory=memory, tasks=tasks)
    except OSError:
        return None


class Group:
    """One submission's cgroup: its limits, what it used, and the end of everything in it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def create(cls, parent: Path, *, memory: int, tasks: int) -> "Group":
        """A new group under ``parent`` allowing ``memory`` bytes (no swap) and ``tasks`` tasks."""
        path = parent / f"sub-{os.getpid()}-{next(_counter)}"
        path.mkdir()
        group = cls(path)
        try:
            _write(path / "memory.max", str(memory))
            if (path / "memory.swap.max").exists():
                _write(path / "memory.swap.max", "0")
            if (path / "memory.oom.group").exists():
                _write(path / "memory.oom.group", "1")
            _write(path / "pids.max", str(tasks))
        except OSError:
            group.remove()
            raise
        return group

    @property
    def procs_file(self) -> Path:
        """Writing a pid here moves that process (and its future children) into the group."""
        return self.path / "cgroup.procs"

    def _number(self, name: str) -> int:
        try:
            return int((self.path / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return 0

    def _event(self, file: str, key: str) -> int:
        try:
            for line in (self.path / file).read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def memory_current(self) -> int:
        """Bytes charged to the group now (page cache included)."""
        return self._number("memory.current")

    def memory_peak(self) -> int:
        """Largest ``memory.current`` since the group was made (Linux 5.19+; else 0)."""
        return self._number("memory.peak")

    def oom_kills(self) -> int:
        """Processes the kernel killed because the group was over ``memory.max``."""
        return self._event("memory.events", "oom_kill") + self._event("memory.events", "oom_group_kill")

    def tasks_refused(self) -> int:
        """Forks the kernel refused because the group was at ``pids.max``."""
        return self._event("pids.events", "max")

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in self.procs_file.read_text().split()]
        except (OSError, ValueError):
            return []

    def kill(self) -> None:
        """SIGKILL every process in the group at once (``cgroup.kill``; else freeze, kill, thaw)."""
        if (self.path / "cgroup.kill").exists():
            try:
                _write(self.path / "cgroup.kill", "1")
                return
            except OSError:
                pass
        frozen = (self.path / "cgroup.freeze").exists()
        try:
            if frozen:
                _write(self.path / "cgroup.freeze", "1")
            for _ in range(20):
                pids = self.pids()
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                time.sleep(0.01)
        finally:
            if frozen:
                try:
                    _write(self.path / "cgroup.freeze", "0")
                except OSError:
                    pass

    def remove(self, wait: float = 5.0) -> None:
        """Kill what is left in the group and delete it (waits up to ``wait`` s for the processes to go)."""
        if not self.path.exists():
            return
        self.kill()
        deadline = time.monotonic() + wait
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
