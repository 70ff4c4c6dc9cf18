"""Student code a grader-side judge needs, run where it can reach neither the judge nor what the judge trusts.

Some hidden cases cannot be decided from a file alone: a judge times the student's compiled kernel
against the course's naive one, replays a student's search, or retrains with a student's function. The judge (grader code, in its own confined process) never loads or calls student code
itself. It asks the grader for a **student process**: a separate process the grader starts in a
sandbox of its own, as another unprivileged user (for a root grader; a non-root grader has one user,
so there the walls are the namespaces), in its own process namespace, so it can neither trace,
signal nor read the memory of the judge or of any process the judge times against it. It sees
``util/`` without any lab's grader-only files, and nothing of the judge's.

The two talk over a Unix socket the grader hands them. A message is a JSON object (at most
:data:`MAX_HEADER` bytes), optionally followed by bytes (at most the limit the receiver sets) and
file descriptors (a shared-memory arena, say). Everything the student process says is untrusted
data: the judge bounds, parses and validates it, and never takes a verdict from it.

Judge side::

    with StudentProcess.start("util.labs.labN.harness:serve") as student:   # a course harness
        student.send({"load": "library"}, data=library_bytes)
        reply, data = student.receive(timeout=20)
        student.stats()      # the grader's own measurement: CPU seconds, threads' CPUs, libraries mapped
        student.pause()      # the grader stops every process of it (while the judge times a baseline)
        student.resume()

Student side: the grader runs :func:`main`, which imports the harness the judge named (a course
module, never a grader-only one) and calls it with the :class:`Channel`; the harness loads the
student's artefact and answers requests until the socket closes.

Who uses it: the labs' judges (``util/labs/labN/judge*.py``) and harnesses; the grader's side is
``grader/execute/student_process.py`` (starting, measuring, pausing) and ``grader/judge/isolated.py``
(serving the judge's requests).
"""
from __future__ import annotations

import array
import importlib
import json
import os
import select
import socket
import struct
import sys
import time
from typing import Any

MAX_HEADER = 64 << 10
"""Largest JSON part of a message."""
MAX_DATA = 64 << 20
"""Default largest binary part a judge accepts from a student process."""
MAX_FDS = 4
"""File descriptors one message may carry."""
SERVICE_FD_ENV = "COURSE_JUDGE_SERVICE_FD"
"""In a judge process: the descriptor of its socket to the grader (set by the grader)."""
CHANNEL_FD_ENV = "COURSE_STUDENT_CHANNEL_FD"
"""In a student process: the descriptor of its socket to the judge (set by the grader)."""
_FRAME = struct.Struct("!II")  # header length, data length


class ChannelError(RuntimeError):
    """The other side sent something malformed, too large, nothing in time, or went away; the
    message says which, in words a student can act on."""


class Channel:
    """Framed, bounded messages over a connected Unix stream socket (see the module's docstring)."""

    def __init__(self, sock: socket.socket, *, max_data: int = MAX_DATA, peer: str = "the other side") -> None:
        self.sock, self.max_data, self.peer = sock, max_data, peer

    @classmethod
    def from_fd(cls, fd: int, **kwargs: Any) -> "Channel":
        return cls(socket.socket(fileno=fd), **kwargs)

    def send(self, header: dict, data: bytes = b"", fds: tuple[int, ...] = ()) -> None:
        """Send one message; ``fds`` travel with its first bytes."""
        head = json.dumps(header).encode()
        if len(head) > MAX_HEADER:
            raise ChannelError(f"a message header of {len(head):,} bytes is over {MAX_HEADER:,}")
        frame = _FRAME.pack(len(head), len(data)) + head
        try:
            if fds:
                self.sock.sendmsg([frame], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            else:
                self.sock.sendall(frame)
            if data:
                self.sock.sendall(data)
        except OSError as exc:
            raise ChannelError(f"{self.peer} is gone ({exc.strerror or exc})") from None

    def receive(self, timeout: float | None = None) -> tuple[dict, bytes, list[int]]:
        """One message: its header, its data and any descriptors it carried. Raises
        :class:`ChannelError` past ``timeout`` seconds, on malformed or oversized input, or at the end."""
        deadline = None if timeout is None else time.monotonic() + timeout
        fds: list[int] = []
        first = self._read(_FRAME.size, deadline, fds)
        head_size, data_size = _FRAME.unpack(first)
        if head_size > MAX_HEADER or data_size > self.max_data:
            self._close_fds(fds)
            raise ChannelError(f"{self.peer} sent a message of {head_size:,} + {data_size:,} bytes, over the "
                               f"limit ({MAX_HEADER:,} + {self.max_data:,})")
        try:
            header = json.loads(self._read(head_size, deadline, fds))
        except (ValueError, UnicodeDecodeError):
            self._close_fds(fds)
            raise ChannelError(f"{self.peer} sent a header that is not JSON") from None
        if not isinstance(header, dict):
            self._close_fds(fds)
            raise ChannelError(f"{self.peer} sent a header that is not a JSON object")
        data = self._read(data_size, deadline, fds) if data_size else b""
        return header, data, fds

    def _read(self, size: int, deadline: float | None, fds: list[int]) -> bytes:
        chunks, got = [], 0
        while got < size:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and (left <= 0 or not select.select([self.sock], [], [], left)[0]):
                self._close_fds(fds)
                raise ChannelError(f"{self.peer} did not answer within the time allowed")
            try:
                chunk, ancillary, _, _ = self.sock.recvmsg(min(size - got, 1 << 20),
                                                           socket.CMSG_SPACE(MAX_FDS * 4))
            except OSError as exc:
                self._close_fds(fds)
                raise ChannelError(f"{self.peer} is gone ({exc.strerror or exc})") from None
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    received = array.array("i")
                    received.frombytes(payload[:len(payload) - len(payload) % 4])
                    fds.extend(received)
            if not chunk:
                self._close_fds(fds)
                raise ChannelError(f"{self.peer} closed the connection")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    @staticmethod
    def _close_fds(fds: list[int]) -> None:
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass
        fds.clear()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


_service: Channel | None = None


def _grader() -> Channel:
    """The judge's channel to the grader (only in a judge process the grader started)."""
    global _service
    if _service is None:
        fd = os.environ.get(SERVICE_FD_ENV)
        if not fd:
            raise ChannelError("no grader to ask for a student process: this runs only in the grader's judge process")
        _service = Channel.from_fd(int(fd), peer="the grader")
    return _service


def _ask(request: dict, timeout: float = 120.0) -> tuple[dict, list[int]]:
    service = _grader()
    service.send(request)
    reply, _, fds = service.receive(timeout)
    if "error" in reply:
        Channel._close_fds(fds)
        raise ChannelError(str(reply["error"])[:400])
    return reply, fds


class StudentProcess:
    """A judge's handle on one student process (see the module's docstring). Use it as a context
    manager: the process ends when the block does (and, whatever happens, with the judge's case)."""

    def __init__(self, ident: int, channel: Channel) -> None:
        self.ident, self.channel = ident, channel

    @classmethod
    def start(cls, harness: str, *, cpu: int | None = None, max_data: int = MAX_DATA,
              seconds: float = 60.0, withhold: tuple[str, ...] = ()) -> "StudentProcess":
        """Ask the grader for a student process running ``harness`` (``"util.labs.labN.module:function"``),
        pinned to ``cpu`` if given; it may run for ``seconds`` at most (then the grader ends it).
        ``withhold``: course data sets (keys of :data:`util.data.WITHHELD`, e.g. ``"digits"``) whose files the
        process must not read (they cannot be read there): what the judge evaluates on, it sends itself."""
        reply, fds = _ask({"start": {"harness": harness, "cpu": cpu, "seconds": seconds,
                                     "withhold": list(withhold)}})
        if len(fds) != 1 or not isinstance(reply.get("id"), int):
            Channel._close_fds(fds)
            raise ChannelError("the grader did not hand over a student process")
        return cls(reply["id"], Channel.from_fd(fds[0], max_data=max_data, peer="the student's code"))

    def send(self, header: dict, data: bytes = b"", fds: tuple[int, ...] = ()) -> None:
        self.channel.send(header, data, fds)

    def receive(self, timeout: float) -> tuple[dict, bytes]:
        """The next message from the student process (untrusted: validate every field you use)."""
        header, data, fds = self.channel.receive(timeout)
        Channel._close_fds(fds)  # a student process has no business sending descriptors
        return header, data

    def stats(self) -> dict:
        """What the grader measures of the process itself, outside it: ``cpu_seconds`` (every process it
        ran, exited ones included), ``cpus`` (the CPUs any of its threads may run on), ``libraries``
        (file names mapped into its processes), ``executables`` (the paths of the files mapped executable
        into them, as the processes see them: a library copied somewhere shows where it lies), ``processes``,
        ``peak_rss`` and ``rss`` (bytes)."""
        return _ask({"stats": self.ident})[0]

    def pause(self) -> None:
        """Stop every process of it (``SIGSTOP``), as the grader sees them, until :meth:`resume`."""
        _ask({"pause": self.ident})

    def resume(self) -> None:
        _ask({"resume": self.ident})

    def reset_peak(self) -> None:
        """Start the peak resident memory (``peak_rss`` in :meth:`stats`) from the current one."""
        _ask({"reset_peak": self.ident})

    def close(self) -> None:
        self.channel.close()
        try:
            _ask({"stop": self.ident}, timeout=30.0)
        except ChannelError:
            pass

    def __enter__(self) -> "StudentProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def harden() -> None:
    """In the student process, before any student code: no ``execve`` (the process the grader measures
    stays this one) and non-dumpable (``/proc/self`` belongs to root: it cannot reset the peak memory
    the grader reads, or be traced), kept so by a seccomp filter (Linux x86-64 and arm64)."""
    import ctypes
    import platform

    machines = {"x86_64": (0xC000003E, 59, 322, 157), "aarch64": (0xC00000B7, 221, 281, 167)}
    if platform.machine() not in machines or not sys.platform.startswith("linux"):
        return
    arch, execve, execveat, prctl = machines[platform.machine()]
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, eperm = 0x7FFF0000, 0x00050001
    code = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, eperm),  # another architecture's calls: none
            (ld, 0, 0, 0), (jge, 0, 1, 0x40000000), (ret, 0, 0, eperm),  # x32 numbers: none
            (jeq, 0, 1, execve), (ret, 0, 0, eperm),
            (jeq, 0, 1, execveat), (ret, 0, 0, eperm),
            (jeq, 0, 3, prctl), (ld, 0, 0, 16), (jeq, 0, 1, 4), (ret, 0, 0, eperm),  # prctl(PR_SET_DUMPABLE, ...)
            (ret, 0, 0, allow)]
    program = b"".join(struct.pack("HBBI", c, jt, jf, k) for c, jt, jf, k in code)

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 0, before the filter forbids changing it
    buffer = ctypes.create_string_buffer(program, len(program))
    libc.prctl(38, 1, 0, 0, 0)  # no_new_privs
    if libc.prctl(22, 2, ctypes.byref(Program(len(program) // 8, ctypes.addressof(buffer))), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "could not install the student process's seccomp filter")


def no_processes(threads: bool = True) -> None:
    """From now on this process may start threads but no process (``fork``, ``vfork``, ``posix_spawn``, a
    ``clone`` without ``CLONE_THREAD``: refused with ``EPERM``; ``clone3``: ``ENOSYS``, so the C library starts
    threads with ``clone``), kept so by a seccomp filter nothing can remove (Linux x86-64 and arm64; elsewhere
    nothing changes). A harness calls it before it loads student code when what the grader measures of the
    process (its peak memory, say) must be all the student's code did: a child's memory is its own.

    ``threads=False``: no new thread either (every ``clone`` refused), for a rule PyTorch keeps per thread (the
    saved-tensor hooks that refuse autograd): what runs in the one thread there is is all that can run."""
    import ctypes
    import platform

    machines = {"x86_64": (0xC000003E, 57, 58, 56, 435), "aarch64": (0xC00000B7, 0xFFFFFFFF, 0xFFFFFFFF, 220, 435)}
    if platform.machine() not in machines or not sys.platform.startswith("linux"):
        return
    arch, fork, vfork, clone, clone3 = machines[platform.machine()]
    ld, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    allow, eperm, enosys = 0x7FFF0000, 0x00050001, 0x00050026
    code = [(ld, 0, 0, 4), (jeq, 0, 9, arch),  # another architecture: harden() refuses it already
            (ld, 0, 0, 0), (jeq, 6, 0, fork), (jeq, 5, 0, vfork),
            (jeq, 0, 1, clone3), (ret, 0, 0, enosys),
            (jeq, 0, 3, clone), (ld, 0, 0, 16), (jset, 1 if threads else 0, 0, 0x00010000),  # CLONE_THREAD?
            (ret, 0, 0, eperm), (ret, 0, 0, allow)]
    program = b"".join(struct.pack("HBBI", c, jt, jf, k) for c, jt, jf, k in code)

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(program, len(program))
    libc.prctl(38, 1, 0, 0, 0)  # no_new_privs (harden() set it already where it ran)
    if libc.prctl(22, 2, ctypes.byref(Program(len(program) // 8, ctypes.addressof(buffer))), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "could not install the filter that keeps this process from starting others")


def main() -> None:
    """The student process's entry (the grader runs it): read the harness the judge names, harden the
    process, and hand the channel to the harness."""
    channel = Channel.from_fd(int(os.environ[CHANNEL_FD_ENV]), max_data=1 << 30, peer="the judge")
    header, _, _ = channel.receive()
    module, _, name = str(header.get("harness", "")).partition(":")
    from util import labs  # (also puts the extra lab folders of the tests on sys.path)

    if not labs.course_module(module) or not name.isidentifier():
        channel.send({"error": f"not a course harness: {header.get('harness')!r}"})
        return

    serve = getattr(importlib.import_module(module), name)
    harden()
    channel.send({"ready": True})
    serve(channel)


if __name__ == "__main__":
    main()
