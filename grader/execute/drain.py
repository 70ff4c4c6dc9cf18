"""A confined process's standard output and error: a pipe the grader drains, keeping only a bounded part.

A kernel that writes straight to its file descriptor 1 (``os.write(1, ...)``, a C library's
``printf``, a compiler it started) bypasses the message channel the grader bounds
(:mod:`grader.execute.output`). Had it inherited the grader's own standard output, 300 MB of it
would land in the grader's log, and through ``/proc/self/fd/1`` it could even reopen that log for
reading. So the kernel's standard output and error are the write end of a pipe of the grader's
(:class:`Drain`), and its standard input is ``/dev/null``: the kernel holds no descriptor of the
grader's own.

A thread of the grader reads the pipe as fast as it is written (the kernel is never blocked by a
full pipe), keeps the first :data:`HEAD` and the last :data:`TAIL` bytes (a crash's traceback
usually ends the stream), and counts the rest, which it drops. What was kept is for the instructor
(``kernel.log`` beside the results, :class:`Captured`); it is never graded and never shown to the
student.
"""
from __future__ import annotations

import os
import select
import threading
from dataclasses import dataclass

HEAD = 8 << 10
"""Bytes kept from the start of the stream."""
TAIL = 8 << 10
"""Bytes kept from its end."""
CHUNK = 1 << 16
"""Bytes read at a time."""
POLL_MS = 100
"""How often the reading thread checks whether it was asked to stop (milliseconds)."""


@dataclass(frozen=True)
class Captured:
    """What a process wrote to its standard output and error, as far as the grader kept it."""

    head: bytes = b""
    """The first bytes written (at most :data:`HEAD`)."""
    tail: bytes = b""
    """The last bytes written after ``head`` (at most :data:`TAIL`)."""
    total: int = 0
    """Bytes written in all."""

    @property
    def dropped(self) -> int:
        """Bytes written but not kept (between ``head`` and ``tail``)."""
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        """The kept bytes as text (undecodable bytes replaced), with a line saying what was dropped
        between them; empty when nothing was written. Raw: escape it before showing it."""
        if not self.total:
            return ""
        middle = (f"\n[... {self.dropped:,} bytes dropped: the grader keeps the first {HEAD:,} and the last "
                  f"{TAIL:,} ...]\n") if self.dropped else ""
        return self.head.decode("utf-8", "replace") + middle + self.tail.decode("utf-8", "replace")


class Drain:
    """A pipe whose write end a process gets as its standard output and error, drained by a thread.

    Use: ``drain = Drain()``; start the process with ``stdout=drain.fd, stderr=drain.fd``; call
    :meth:`started` once it runs (the grader closes its copy of the write end); :meth:`finish` after
    it ended, for what it wrote.
    """

    def __init__(self, head: int = HEAD, tail: int = TAIL) -> None:
        self._read, self.fd = os.pipe()  # both close-on-exec: only a process given ``fd`` as 1 or 2 holds it
        self._head_limit, self._tail_limit = head, tail
        self._head, self._tail, self._total = bytearray(), bytearray(), 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._pump, name="kernel-stdio-drain", daemon=True)
        self._thread.start()

    def _keep(self, data: bytes) -> None:
        self._total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            if len(self._tail) > self._tail_limit:
                del self._tail[: len(self._tail) - self._tail_limit]

    def _pump(self) -> None:
        poller = select.poll()
        poller.register(self._read, select.POLLIN | select.POLLHUP | select.POLLERR)
        try:
            while not self._stop.is_set():
                if not poller.poll(POLL_MS):
                    continue
                data = os.read(self._read, CHUNK)
                if not data:  # every writer is gone
                    return
                self._keep(data)
        except OSError:
            return
        finally:
            os.close(self._read)  # a straggler still writing gets EPIPE, never a full pipe

    def started(self) -> None:
        """The process has its copy of the write end: close the grader's (so the stream ends with it)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def finish(self, wait: float = 2.0) -> Captured:
        """Stop reading (after at most ``wait`` seconds more, for what is still in the pipe) and return
        what was kept. A process the grader could not kill that still holds the pipe then gets EPIPE."""
        self.started()
        self._thread.join(wait)
        self._stop.set()
        self._thread.join()
        return Captured(bytes(self._head), bytes(self._tail), self._total)
