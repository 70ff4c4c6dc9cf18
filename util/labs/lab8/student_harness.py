"""The student's side of lab 8's kernel timing: the student's library loaded in a student process.

The grader's judge (``judge_timing.py``) never loads a student's library itself: it asks the grader
for a student process (:mod:`util.student_process`) running :func:`serve`, hands it the library's
bytes and a shared arena (a memory file holding ``A``, ``B`` and ``C``), and times each call from its
own side of the socket. This module is the course's code in that process; everything it answers is
checked by the judge against its own copies of the inputs.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import tempfile

from util.student_process import Channel, ChannelError, no_processes


def serve(channel: Channel) -> None:
    """``{"load": name}`` + the library's bytes + the arena's descriptor, answered ``{"library": path}`` (where the
    library was written, before it is loaded) then ``{"ready": true}``; then ``{"call": [m, k, n, a, b, c]}``
    (byte offsets in the arena) answered ``{"ok": true}`` or ``{"error": message}``. From the load on, the
    process may start no other process (:func:`util.student_process.no_processes`)."""
    entry, base, message = None, 0, ctypes.create_string_buffer(400)
    while True:
        try:
            header, data, fds = channel.receive()
        except ChannelError:
            return
        if "load" in header:
            if len(fds) != 1:
                channel.send({"error": "no arena came with the library"})
                return
            fd, path = tempfile.mkstemp(suffix=".so")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            size = os.fstat(fds[0]).st_size
            memory = mmap.mmap(fds[0], size)
            base = ctypes.addressof(ctypes.c_char.from_buffer(memory))
            channel.send({"library": path})  # where the library lies, said before any of its code has run
            no_processes()  # its code may start threads (the grader counts their CPU time), never a process
            try:
                entry = getattr(ctypes.CDLL(path), "course_entry_" + str(header["load"]))
            except (OSError, AttributeError) as exc:
                channel.send({"error": f"the library could not be loaded: {exc}"[:300]})
                return
            entry.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 3 + [ctypes.c_char_p, ctypes.c_int]
            entry.restype = ctypes.c_int
            channel.send({"ready": True})
        elif "call" in header and entry is not None:
            m, k, n, a, b, c = (int(v) for v in header["call"])
            if entry(base + a, base + b, base + c, m, k, n, message, 400) == 0:
                channel.send({"ok": True})
            else:
                channel.send({"error": message.value.decode(errors="replace")})
