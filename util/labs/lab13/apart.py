"""Ranks kept apart: what a rank may read of the file system once it is forked, so that no rank reads another.

The walls (:mod:`util.labs.lab13.walls`) stop a rank writing, signalling or opening a channel. Reading is the
other half. Every process of a pid namespace may read much of another's ``/proc/PID`` (its ``cmdline``, its
``stat``), and a process may overwrite its own argument area, which ``cmdline`` shows: about 80 bytes a read,
enough to pass every rank's result around without the process group (the held-out attacks did it). Namespaces
of their own per rank would need a user namespace, which the grader's sandbox refuses (nested user namespaces
are how a sandboxed process would gain mounts of its own). So each rank, the moment it is forked and before
it joins its group (it has one thread then, and every thread it starts later inherits this), restricts itself
with Landlock (the kernel's unprivileged access control, Linux 5.13 and later; ABI 1 is enough), for good:

* it may read files and list folders beneath every top-level folder of its file system **except** ``/proc``
  and ``/sys`` (imports, the course, the store its group starts from);
* of ``/proc``, only its own entry (``/proc/self`` is that entry; its threads' entries are beneath it) and
  ``/proc/cpuinfo`` (PyTorch's CPU detection reads it on first use);
* of ``/sys``, only the two files that say how many CPUs there are, and the list of PCI devices with each one's
  class and network interfaces' names (gloo reads them when a group starts: fixed facts of the machine);
* where the kernel knows them (Landlock ABI 6, Linux 6.12), it may neither signal nor reach an abstract Unix
  socket of a process outside its own domain.

So a rank cannot list ``/proc``, read another process's entry (a peer's ``cmdline``, ``stat``, ``environ``), nor
read the machine's shared counters there (``/proc/meminfo``, ``/proc/loadavg``, ``/proc/stat``) or in ``/sys``
(cgroups). Writing is the walls' business (every write-open is refused there), so only reading is handled.
Landlock needs no privilege and works the same for a root and an unprivileged grader; :func:`install` returns
``False`` where the kernel has none (not Linux, older than 5.13, Landlock not enabled), and the grader's judge
then refuses to judge (``judge.py``) rather than judge ranks that can read each other.
"""
from __future__ import annotations

import ctypes
import os
import platform
import stat
import struct
import sys

_CREATE, _ADD_RULE, _RESTRICT = 444, 445, 446
"""``landlock_create_ruleset``, ``landlock_add_rule``, ``landlock_restrict_self``: the same on x86-64 and arm64."""
_VERSION = 1
"""``LANDLOCK_CREATE_RULESET_VERSION``: ask the kernel for its Landlock ABI."""
EXECUTE, READ_FILE, READ_DIR = 1 << 0, 1 << 2, 1 << 3
HANDLED = EXECUTE | READ_FILE | READ_DIR
"""What this ruleset decides: running, reading and listing files (the walls refuse every write)."""
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1
HIDDEN = ("proc", "sys")
"""Top-level folders a rank may not read, but what :data:`SYS_FILES` and its own ``/proc`` entry allow."""
SYS_FILES = ("/sys/devices/system/cpu/online", "/sys/devices/system/cpu/possible")
"""Of ``/sys``, what a rank may read: how many CPUs there are (what libraries ask when a thread pool starts)."""
PCI = "/sys/bus/pci/devices"
"""Listed by gloo when a group starts, with each device's ``class`` and ``net`` (which interface it carries)."""


def abi() -> int:
    """The kernel's Landlock ABI (0 where there is none)."""
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    found = libc.syscall(_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION))
    return max(int(found), 0)


def _rule(libc, ruleset: int, path: str, access: int) -> None:
    """Allow ``access`` beneath ``path`` (a file: the file's part of it); a path that is not there is skipped."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= EXECUTE | READ_FILE
        rule = ctypes.create_string_buffer(struct.pack("=Qi", access, fd), 12)  # struct landlock_path_beneath_attr
        if libc.syscall(_ADD_RULE, ruleset, 1, rule, 0) != 0:  # LANDLOCK_RULE_PATH_BENEATH
            raise OSError(ctypes.get_errno(), f"Landlock refused a rule for {path}")
    finally:
        os.close(fd)


def _listed(folder: str) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


def install() -> bool:
    """Restrict this process (a rank, just forked) to reading what the module's docstring lists, for good.
    ``False`` where the kernel has no Landlock; ``OSError`` if it has one and refuses."""
    version = abi()
    if version < 1:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL if version >= 6 else 0
    attr = struct.pack("=QQQ", HANDLED, 0, scoped) if version >= 6 else struct.pack("=Q", HANDLED)
    buffer = ctypes.create_string_buffer(attr, len(attr))
    ruleset = libc.syscall(_CREATE, buffer, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "could not create a rank's Landlock ruleset")
    try:
        for name in _listed("/"):
            if name not in HIDDEN:
                _rule(libc, ruleset, "/" + name, HANDLED)
        _rule(libc, ruleset, f"/proc/{os.getpid()}", READ_FILE | READ_DIR)
        _rule(libc, ruleset, "/proc/cpuinfo", READ_FILE)
        for path in SYS_FILES:
            _rule(libc, ruleset, path, READ_FILE)
        _rule(libc, ruleset, PCI, READ_DIR)
        for device in _listed(PCI):
            _rule(libc, ruleset, f"{PCI}/{device}/class", READ_FILE)
            _rule(libc, ruleset, f"{PCI}/{device}/net", READ_DIR)
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS (Landlock asks for it without CAP_SYS_ADMIN)
            raise OSError(ctypes.get_errno(), "could not set no_new_privs for a rank")
        if libc.syscall(_RESTRICT, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "could not restrict a rank with Landlock")
    finally:
        os.close(ruleset)
    return True
