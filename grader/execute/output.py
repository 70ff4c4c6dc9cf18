"""Bounded cell output: a notebook that prints hundreds of megabytes costs the grader almost nothing.

Three layers, from the source outwards:

1. in the kernel, an IPython startup file caps what ``print`` and ``sys.stdout``/``sys.stderr``
   send per cell (:func:`install_kernel_cap`): ordinary runaway output is never even sent;
2. on the grader's sockets, ZeroMQ drops any single message over the notebook's whole output
   budget and queues at most a few dozen messages (:func:`bounded_context`): a student who removes
   the kernel-side cap cannot make the grader hold a huge message;
3. in the grader, :class:`BoundedClient` keeps at most ``cell_limit`` bytes per cell and
   ``total_limit`` per notebook in the executed notebook, with one note where output was dropped.

Errors are always kept (shortened), since the grader reads them to explain a task's status.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import nbformat
import zmq
import zmq.asyncio
from nbclient import NotebookClient

from grader.execute.limits import format_size

KEEP_ERROR_TEXT = 10_000
"""Characters kept of an exception message or traceback (a huge one is shortened, never dropped)."""
QUEUED_MESSAGES = 64
"""Messages ZeroMQ may queue for the grader per socket before the kernel's side drops output."""

_KERNEL_CAP = '''\
def _course_cap_output(limit):
    """Installed by the grader: keep at most {size} of printed output per cell."""
    from ipykernel.iostream import OutStream
    state = {{"used": 0, "noted": False}}
    write = OutStream.write

    def capped_write(self, text):
        room = limit - state["used"]
        state["used"] += len(text)
        if room >= len(text):
            return write(self, text)
        if room > 0:
            write(self, text[:room])
        if not state["noted"]:
            state["noted"] = True
            write(self, "\\n[grader: output over {size} per cell was dropped]\\n")
        return len(text)

    def reset(*args):
        state.update(used=0, noted=False)

    OutStream.write = capped_write
    get_ipython().events.register("pre_run_cell", reset)


_course_cap_output({limit})
del _course_cap_output
'''


def install_kernel_cap(home: Path, limit: int) -> None:
    """Write the IPython startup file that caps printed output at ``limit`` bytes per cell."""
    startup = home / ".ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-grader-output-cap.py").write_text(
        _KERNEL_CAP.format(limit=limit, size=format_size(limit)), encoding="utf-8")


def bounded_context(max_message: int) -> zmq.asyncio.Context:
    """A ZeroMQ context whose sockets refuse messages over ``max_message`` bytes and queue few."""
    context = zmq.asyncio.Context()
    context.setsockopt(zmq.MAXMSGSIZE, max_message)
    context.setsockopt(zmq.RCVHWM, QUEUED_MESSAGES)
    return context


def _size(content: Mapping[str, Any]) -> int:
    if "text" in content:
        return len(content["text"])
    return sum(len(str(value)) for value in content.get("data", {}).values())


class BoundedClient(NotebookClient):
    """An nbclient client that keeps at most ``cell_limit`` bytes of output per cell and
    ``total_limit`` per notebook, dropping the rest as it arrives (errors are kept, shortened)."""

    def __init__(self, nb: nbformat.NotebookNode, *, cell_limit: int, total_limit: int, **kwargs: Any) -> None:
        super().__init__(nb, **kwargs)
        self.cell_limit, self.total_limit = cell_limit, total_limit
        self.dropped = 0
        """Bytes of output dropped so far."""
        self._total, self._cell, self._cell_used, self._noted = 0, -1, 0, False

    def output(self, outs, msg, display_id, cell_index):  # noqa: ANN001 (nbclient's signature)
        if cell_index != self._cell:
            self._cell, self._cell_used, self._noted = cell_index, 0, False
        content = msg["content"]
        if msg["msg_type"] == "error":
            content["evalue"] = str(content.get("evalue", ""))[:KEEP_ERROR_TEXT]
            content["traceback"] = ["\n".join(content.get("traceback", []))[-KEEP_ERROR_TEXT:]]
            return super().output(outs, msg, display_id, cell_index)
        size = _size(content)
        room = min(self.cell_limit - self._cell_used, self.total_limit - self._total)
        if size > room and msg["msg_type"] == "stream" and room > 0:  # keep the head of the text
            content["text"] = content["text"][:room]
            self.dropped += size - room
            size = room
        elif size > room:
            self.dropped += size
            if not self._noted:
                self._noted = True
                outs.append(nbformat.v4.new_output(
                    "stream", name="stderr",
                    text=f"\n[grader: output over {format_size(self.cell_limit)} per cell "
                         f"({format_size(self.total_limit)} per notebook) was dropped]\n"))
            return None
        self._cell_used += size
        self._total += size
        return super().output(outs, msg, display_id, cell_index)
