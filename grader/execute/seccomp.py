"""A seccomp filter for student code: the few system calls that hold memory no limit sees, or that
would let a root grader's sandbox create user namespaces, fail.

* SysV shared memory and message queues (``shmget``, ``msgget``, ``semget``): a segment keeps its
  memory after every process detached from it, counted in no process's memory. Where a cgroup
  enforces ``--memory`` it is counted there, but elsewhere 1 GiB of it passed a 512 MiB limit
  (measured here). Nothing in the course uses SysV IPC (``multiprocessing`` and PyTorch use POSIX
  shared memory, which lies in ``/dev/shm``, inside the scratch folder).
* New user namespaces (``unshare`` or ``clone`` with ``CLONE_NEWUSER``; ``clone3`` answers
  "not implemented", so the C library falls back to ``clone``): in one, a process holds every
  capability over mounts of its own, and could mount a tmpfs outside the limits. A non-root
  grader's sandbox already forbids them (``bwrap --disable-userns``); a root grader's cannot.
* On x86-64, the 32-bit and x32 system call tables, so the numbers above cannot be dodged.

:func:`program` builds the classic BPF program for this machine (x86-64 or arm64; elsewhere there
is no filter, and :func:`program` returns ``None``); the launcher installs it with
``prctl(PR_SET_SECCOMP)`` just before student code starts (:mod:`grader.execute.launch`).
"""
from __future__ import annotations

import platform
import struct
import sys

_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
ALLOW = 0x7FFF0000
EPERM, ENOSYS = 0x00050000 | 1, 0x00050000 | 38
CLONE_NEWUSER = 0x10000000
ARCHES = {
    # machine: (AUDIT_ARCH, {denied call: number}, {call whose flags (argument 0) are checked: number}, clone3)
    "x86_64": (0xC000003E, {"shmget": 29, "semget": 64, "msgget": 68}, {"clone": 56, "unshare": 272}, 435),
    "aarch64": (0xC00000B7, {"msgget": 186, "semget": 190, "shmget": 194}, {"unshare": 97, "clone": 220}, 435),
}
I386 = (0x40000003, {"ipc": 117, "semget": 393, "shmget": 395, "msgget": 399})
"""x86-64 also runs 32-bit code: its own numbers for the same calls (``ipc`` multiplexes them all)."""


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def _block(numbers, flagged=(), clone3=None) -> list[bytes]:
    """Load the call's number; deny ``numbers``; ``clone3`` answers ENOSYS; ``flagged`` calls are denied
    when argument 0 has ``CLONE_NEWUSER``; everything else is allowed."""
    out = [_op(_LD_ABS, 0)]
    for number in numbers:
        out += [_op(_JEQ, number, 0, 1), _op(_RET, EPERM)]
    if clone3 is not None:
        out += [_op(_JEQ, clone3, 0, 1), _op(_RET, ENOSYS)]
    for number in flagged:  # [JEQ, LD arg0, JSET, RET EPERM, RET ALLOW]: not this call -> the next check
        out += [_op(_JEQ, number, 0, 4), _op(_LD_ABS, 16), _op(_JSET, CLONE_NEWUSER, 0, 1), _op(_RET, EPERM),
                _op(_RET, ALLOW)]
    out.append(_op(_RET, ALLOW))
    return out


def program(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default: this one), as the bytes of ``struct sock_filter[]``."""
    if machine is None and not sys.platform.startswith("linux"):
        return None  # seccomp is Linux's
    machine = machine or platform.machine()
    if machine not in ARCHES:
        return None
    arch, denied, flagged, clone3 = ARCHES[machine]
    native = _block(denied.values(), flagged.values(), clone3)
    if machine == "x86_64":
        native[1:1] = [_op(_JGE, 0x40000000, 0, 1), _op(_RET, EPERM)]  # x32 numbers: none of ours
        i386_arch, i386_denied = I386
        other = _block(i386_denied.values()) + [_op(_RET, EPERM)]  # a 32-bit program, then any other arch
        head = [_op(_LD_ABS, 4), _op(_JEQ, arch, len(other) + 1, 0), _op(_JEQ, i386_arch, 0, len(other) - 1)]
    else:
        other = [_op(_RET, EPERM)]  # any other architecture
        head = [_op(_LD_ABS, 4), _op(_JEQ, arch, 1, 0)]
    return b"".join(head + other + native)
