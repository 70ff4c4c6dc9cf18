"""The walls around a rank: once its process group is up, a rank can talk to the other ranks only through it.

Lab 13 counts every byte a rank sends, on the wire (:mod:`util.labs.lab13.wire`). That count means something
only if the process group's connections are the ranks' only way to reach each other. So each rank, after
joining its group and before any code of the notebook runs in it, installs a seccomp filter (enforced by the
kernel, kept across everything the rank does, impossible to remove) under which these system calls fail
with ``EPERM`` ("Operation not permitted"):

* new channels: sockets (``socket``, ``socketpair``, ``connect``, ``bind``, ``listen``, ``accept``), pipes,
  ``memfd_create``, POSIX and SysV message queues, shared memory and semaphores, ``io_uring``, keyrings;
* files as channels: opening a file for writing (``open``/``openat`` with a write, create, truncate or append
  flag; ``openat2``, ``creat``), and every call that changes a file's name, links, mode, times, size or
  extended attributes; file locks and ``fcntl``'s signal-owner commands;
* other processes and threads: starting one (``fork``, ``vfork``, every ``clone``: a new thread would take a
  process id from the counter every rank shares, which another rank sees move), ``execve``, signalling any
  process but itself (``kill``, ``tgkill``, ``rt_sigqueueinfo`` ... to another pid; ``tkill``, ``pidfd_*``),
  tracing or reading one (``ptrace``, ``process_vm_*``, ``kcmp``), changing what others can read of it (its
  name, priority, I/O priority, CPU affinity, process group or session, another process's limits);
* the machine's shared state read without ``/proc``: ``sysinfo`` (free memory, the number of processes), and
  which pages of a file are cached (``mincore``, ``cachestat``, ``preadv2``'s no-wait reads), or evicting them
  (``fadvise64``, ``readahead``).

Reading files (imports), computing, printing (the launcher captures it) and everything ``torch.distributed``
does over the group's existing connections keep working: gloo's threads start when the group does, before
the walls, and the filter is installed on every thread the rank has then (``SECCOMP_FILTER_FLAG_TSYNC``), so
they are behind it too; a rank's function cannot start threads of its own. ``clone3`` answers "not implemented", so the C
library falls back on ``clone``, which is refused. The filter is built for Linux on x86-64 and arm64; elsewhere
:func:`install` returns ``False`` and the launcher says the walls are missing.

What a rank reads is kept to itself by Landlock (:mod:`util.labs.lab13.apart`, installed as the rank is
forked): of ``/proc``, only its own entry, so no rank reads another's ``cmdline``, ``stat`` or ``environ``, and
(Landlock's own rule) none may trace or inspect a process outside its domain. What stays open: ranks share the
machine, so whatever one does to its timing (the CPUs, their caches, the file pages it reads) another can time;
those channels are not closed here, and were not measured.
"""
from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys

_LD, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06
ALLOW = 0x7FFF0000
EPERM, ENOSYS = 0x00050000 | 1, 0x00050000 | 38
WRITE_FLAGS = 0o1 | 0o2 | 0o100 | 0o1000 | 0o2000 | 0o20000000
"""``O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND | __O_TMPFILE`` (the same values on x86-64 and arm64)."""
FCNTL_DENIED = (6, 7, 8, 10, 15, 37, 38, 1024, 1026)
"""``F_SETLK``, ``F_SETLKW``, ``F_SETOWN``, ``F_SETSIG``, ``F_SETOWN_EX``, ``F_OFD_SETLK``, ``F_OFD_SETLKW``,
``F_SETLEASE``, ``F_NOTIFY``: locks and signals to other processes."""
PR_SET_NAME = 15

_DENIED = (
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "pipe", "pipe2", "memfd_create",
    "memfd_secret", "mq_open", "shmget", "msgget", "semget", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "add_key", "request_key", "keyctl", "creat", "openat2", "open_by_handle_at",
    "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "unlink", "unlinkat", "mkdir",
    "mkdirat", "rmdir", "mknod", "mknodat", "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown",
    "lchown", "fchownat", "truncate", "ftruncate", "utime", "utimes", "futimesat", "utimensat", "setxattr",
    "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr", "flock", "fork", "vfork", "execve",
    "execveat", "tkill", "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "ptrace", "process_vm_readv",
    "process_vm_writev", "kcmp", "setpriority", "sched_setaffinity", "sched_setscheduler", "sched_setattr",
    "setrlimit", "perf_event_open", "bpf", "userfaultfd", "process_madvise",
    "setpgid", "setsid", "ioprio_set", "sched_setparam", "sysinfo", "mincore", "cachestat", "preadv2", "pwritev2",
    "fadvise64", "readahead",
)
"""Calls refused outright."""

_X86_64 = dict(
    open=2, pipe=22, shmget=29, socket=41, connect=42, accept=43, bind=49, listen=50, socketpair=53, clone=56,
    fork=57, vfork=58, execve=59, kill=62, semget=64, msgget=68, fcntl=72, flock=73, truncate=76, ftruncate=77,
    rename=82, mkdir=83, rmdir=84, creat=85, link=86, unlink=87, symlink=88, chmod=90, fchmod=91, chown=92,
    fchown=93, lchown=94, ptrace=101, rt_sigqueueinfo=129, utime=132, mknod=133, setpriority=141,
    sched_setscheduler=144, prctl=157, setrlimit=160, setxattr=188, lsetxattr=189, fsetxattr=190,
    removexattr=197, lremovexattr=198, fremovexattr=199, tkill=200, sched_setaffinity=203, utimes=235,
    mq_open=240, add_key=248, request_key=249, keyctl=250, openat=257, mkdirat=258, mknodat=259, fchownat=260,
    futimesat=261, unlinkat=263, renameat=264, linkat=265, symlinkat=266, fchmodat=268, utimensat=280,
    accept4=288, pipe2=293, rt_tgsigqueueinfo=297, perf_event_open=298, prlimit64=302, open_by_handle_at=304,
    process_vm_readv=310, process_vm_writev=311, kcmp=312, sched_setattr=314, renameat2=316, memfd_create=319,
    bpf=321, execveat=322, userfaultfd=323, tgkill=234, pidfd_send_signal=424, io_uring_setup=425,
    io_uring_enter=426, io_uring_register=427, pidfd_open=434, clone3=435, openat2=437, pidfd_getfd=438,
    process_madvise=440, memfd_secret=447, fchmodat2=452,
    mincore=27, sysinfo=99, setpgid=109, setsid=112, sched_setparam=142, readahead=187, fadvise64=221,
    ioprio_set=251, preadv2=327, pwritev2=328, cachestat=451,
)
_AARCH64 = dict(  # the generic table (asm-generic/unistd.h): no open, pipe, fork, rename, ...
    setxattr=5, lsetxattr=6, fsetxattr=7, removexattr=14, lremovexattr=15, fremovexattr=16, fcntl=25, flock=32,
    mknodat=33, mkdirat=34, unlinkat=35, symlinkat=36, linkat=37, renameat=38, truncate=45, ftruncate=46,
    fchmod=52, fchmodat=53, fchownat=54, fchown=55, openat=56, pipe2=59, utimensat=88, ptrace=117,
    sched_setscheduler=119, sched_setaffinity=122, kill=129, tkill=130, tgkill=131, rt_sigqueueinfo=138,
    setpriority=140, setrlimit=164, prctl=167, mq_open=180, msgget=186, semget=190, shmget=194, socket=198,
    socketpair=199, bind=200, listen=201, accept=202, connect=203, add_key=217, request_key=218, keyctl=219,
    clone=220, execve=221, rt_tgsigqueueinfo=240, perf_event_open=241, accept4=242, prlimit64=261,
    open_by_handle_at=265, process_vm_readv=270, process_vm_writev=271, kcmp=272, sched_setattr=274,
    renameat2=276, memfd_create=279, bpf=280, execveat=281, userfaultfd=282, pidfd_send_signal=424,
    io_uring_setup=425, io_uring_enter=426, io_uring_register=427, pidfd_open=434, clone3=435, openat2=437,
    pidfd_getfd=438, process_madvise=440, memfd_secret=447, fchmodat2=452,
    ioprio_set=30, sched_setparam=118, setpgid=154, setsid=157, sysinfo=179, readahead=213, fadvise64=223,
    mincore=232, preadv2=286, pwritev2=287, cachestat=451,
)
ARCHES = {"x86_64": (0xC000003E, _X86_64), "aarch64": (0xC00000B7, _AARCH64)}
SECCOMP = {"x86_64": 317, "aarch64": 277}
"""``seccomp``'s own number: the filter is installed with ``SECCOMP_FILTER_FLAG_TSYNC``, on every thread the rank
has (gloo's, started when the group did), not only the one that asks."""


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _arg(index: int) -> int:
    """Offset of the low 32 bits of argument ``index`` in ``struct seccomp_data`` (little-endian)."""
    return 16 + 8 * index


def program(pid: int, machine: str | None = None) -> bytes | None:
    """The filter for a rank whose process id is ``pid`` on ``machine`` (default: this one), as the bytes of
    ``struct sock_filter[]``; ``None`` where there is none (not Linux, another architecture)."""
    machine = machine or platform.machine()
    if machine not in ARCHES or (machine == platform.machine() and not sys.platform.startswith("linux")):
        return None
    arch, numbers = ARCHES[machine]
    code = [_op(_LD, 4), _op(_JEQ, arch, 1, 0), _op(_RET, EPERM), _op(_LD, 0)]
    if machine == "x86_64":  # the x32 numbers (bit 30) are refused whole
        code += [_op(0x35, 0x40000000, 0, 1), _op(_RET, EPERM)]  # JGE

    def when(name: str, body: list[bytes]) -> None:
        """``body`` runs for the call ``name`` (it must end in a RET); other calls skip it."""
        if name in numbers:
            code.extend([_op(_JEQ, numbers[name], 0, len(body)), *body])

    for name in _DENIED:
        when(name, [_op(_RET, EPERM)])
    when("clone3", [_op(_RET, ENOSYS)])
    when("clone", [_op(_RET, EPERM)])  # threads too (see the module's docstring)
    for name, index in (("open", 1), ("openat", 2)):
        when(name, [_op(_LD, _arg(index)), _op(_JSET, WRITE_FLAGS, 0, 1), _op(_RET, EPERM), _op(_RET, ALLOW)])
    for name in ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):  # only to itself
        when(name, [_op(_LD, _arg(0)), _op(_JEQ, pid, 0, 1), _op(_RET, ALLOW), _op(_RET, EPERM)])
    fcntl = [_op(_LD, _arg(1))]
    for command in FCNTL_DENIED:
        fcntl += [_op(_JEQ, command, 0, 1), _op(_RET, EPERM)]
    when("fcntl", fcntl + [_op(_RET, ALLOW)])
    when("prctl", [_op(_LD, _arg(0)), _op(_JEQ, PR_SET_NAME, 0, 1), _op(_RET, EPERM), _op(_RET, ALLOW)])
    # prlimit64(0, resource, NULL, old) is how the C library reads its own limits; nothing else
    when("prlimit64", [_op(_LD, _arg(0)), _op(_JEQ, 0, 0, 3), _op(_LD, _arg(2)), _op(_JEQ, 0, 0, 1),
                       _op(_RET, ALLOW), _op(_RET, EPERM)])
    code.append(_op(_RET, ALLOW))
    return b"".join(code)


def install() -> bool:
    """Put this process (a rank) behind the walls for good; ``False`` where this machine has no filter."""
    filter_ = program(os.getpid())
    if filter_ is None:
        return False

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(filter_, len(filter_))
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "could not set no_new_privs for a rank")
    prog = Program(len(filter_) // 8, ctypes.addressof(buffer))
    # seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, prog): every thread of the rank, gloo's too
    if libc.syscall(SECCOMP[platform.machine()], 1, 1, ctypes.byref(prog)) != 0:
        raise OSError(ctypes.get_errno(), "could not install a rank's seccomp filter on all its threads")
    return True
