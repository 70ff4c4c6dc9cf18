"""Bounded, well-formed kernel messages: whatever a notebook sends, the grader holds little of it.

Four layers, from the source outwards:

1. in the kernel, an IPython startup file caps what ``print`` and ``sys.stdout``/``sys.stderr``
   send per cell, and the size of an exception's name, message and traceback
   (:func:`install_kernel_cap`): ordinary runaway output is never even sent, and an error with a
   4 MiB class name still arrives as an error (the relay drops a message too large, and a dropped
   reply would leave the cell waiting for its time limit);
2. on the grader's sockets, ZeroMQ drops any message part (frame) over the per-cell output budget
   and queues at most a few dozen messages per socket (:func:`bounded_context`): a student who
   removes the kernel-side cap cannot make the grader hold a huge message;
3. :class:`SafeSession` checks every message before anything else reads it: one that is too large
   in all its parts, not signed, not JSON, or without the fields and types the grader reads is
   replaced by an empty message nothing waits for (so a forged widget message cannot raise);
4. :class:`BoundedClient` keeps, per cell and per notebook, at most ``cell_limit`` and
   ``total_limit`` bytes of every kind of output in the executed notebook (streams, displays,
   results, errors, and display *updates*, which rewrite every output with the same display id),
   with one note where output was dropped. Comm messages (widget state) are never kept: the
   grader renders no widget.

The first error of each cell is always kept (shortened), since the grader reads it to explain a
task's status.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import nbformat
import zmq
import zmq.asyncio
from jupyter_client.session import Session
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionComplete

from grader.core.limits import format_size

KEEP_ERROR_TEXT = 10_000
"""Characters kept of an exception message or traceback (a huge one is shortened, never dropped)."""
KEEP_NAME = 200
"""Characters kept of an exception's class name."""
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

    from jupyter_client.session import Session
    send = Session.send

    def cut(text, keep):
        text = text if isinstance(text, str) else str(text)
        return text if len(text) <= keep else text[:keep] + f"... [{{len(text) - keep:,}} characters cut]"

    def capped_send(self, stream, msg_or_type, content=None, *args, **kwargs):
        # an exception with a huge name or message: its error and reply stay small enough to arrive
        body = msg_or_type.get("content") if isinstance(msg_or_type, dict) else content
        if isinstance(body, dict) and "ename" in body:
            body = {{**body, "ename": cut(body.get("ename", ""), 65536), "evalue": cut(body.get("evalue", ""), 65536),
                    "traceback": [cut(line, 65536) for line in list(body.get("traceback") or [])[:100]]}}
            if isinstance(msg_or_type, dict):
                msg_or_type = {{**msg_or_type, "content": body}}
            else:
                content = body
        return send(self, stream, msg_or_type, content, *args, **kwargs)

    Session.send = capped_send


_course_cap_output({limit})
del _course_cap_output
'''


def install_kernel_cap(home: Path, limit: int) -> None:
    """Write the IPython startup file that caps printed output at ``limit`` bytes per cell and an
    error's name, message and each traceback line at 64 Ki characters (100 lines)."""
    startup = home / ".ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-grader-output-cap.py").write_text(
        _KERNEL_CAP.format(limit=limit, size=format_size(limit)), encoding="utf-8")


def _shorten(text: str, keep: int) -> str:
    """``text``, or its first ``keep`` characters and how many were cut."""
    return text if len(text) <= keep else f"{text[:keep]}... [{len(text) - keep:,} characters cut]"


def bounded_context(max_frame: int) -> zmq.asyncio.Context:
    """A ZeroMQ context whose sockets refuse message parts over ``max_frame`` bytes and queue few."""
    context = zmq.asyncio.Context()
    context.setsockopt(zmq.MAXMSGSIZE, max_frame)
    context.setsockopt(zmq.RCVHWM, QUEUED_MESSAGES)
    return context


def _dropped_message() -> dict[str, Any]:
    return {"header": {"msg_type": "grader_dropped", "msg_id": ""}, "parent_header": {}, "metadata": {},
            "content": {}, "buffers": [], "msg_type": "grader_dropped", "msg_id": ""}


def _well_formed(msg: Any) -> bool:
    """Whether ``msg`` has the shape every reader (jupyter_client, nbclient, the grader) assumes."""
    if not isinstance(msg, dict):
        return False
    header, parent = msg.get("header"), msg.get("parent_header")
    if not all(isinstance(msg.get(key), dict) for key in ("header", "parent_header", "metadata", "content")):
        return False
    if not isinstance(msg.get("msg_type"), str) or not isinstance(header.get("msg_id", ""), str):
        return False
    if not isinstance(parent.get("msg_id", ""), str) or not isinstance(msg.get("buffers", []), list):
        return False
    content = msg["content"]
    if msg["msg_type"] == "execute_reply" and not isinstance(content.get("status"), str):
        return False
    if "transient" in content and not isinstance(content["transient"], (dict, type(None))):
        return False
    return True


class SafeSession(Session):
    """A jupyter session that never hands on a message it cannot vouch for.

    A message larger than :attr:`max_message` in all its parts, not properly signed, not JSON, or
    missing a field (or with a field of another type) that jupyter_client, nbclient or the grader
    reads, is replaced by an empty ``grader_dropped`` message that no reader waits for; :attr:`dropped`
    counts them. The kernel knows the session key, so a notebook can send anything: this is what
    keeps "a widget message without the fields the grader expects" from raising in the grader.
    """

    max_message: int = 64 << 20
    dropped: int = 0

    def feed_identities(self, msg_list, copy=True):  # noqa: ANN001, ANN201 (jupyter_client's signature)
        try:
            total = sum(len(part) if isinstance(part, bytes) else len(part.buffer) for part in msg_list)
            if total > self.max_message:
                raise ValueError(f"a message of {total} bytes")
            return super().feed_identities(msg_list, copy=copy)
        except Exception:
            return [], None

    def deserialize(self, msg_list, content=True, copy=True):  # noqa: ANN001, ANN201
        if msg_list is None:
            self.dropped += 1
            return _dropped_message()
        try:
            msg = super().deserialize(msg_list, content=content, copy=copy)
        except Exception:
            msg = None
        if not _well_formed(msg):
            self.dropped += 1
            return _dropped_message()
        return msg


def _size(content: Mapping[str, Any]) -> int:
    """Characters an output's content holds (what it costs the executed notebook)."""
    total = 0
    for key in ("text", "evalue", "ename"):
        value = content.get(key)
        total += len(value) if isinstance(value, str) else 0
    traceback = content.get("traceback")
    if isinstance(traceback, list):
        total += sum(len(line) for line in traceback if isinstance(line, str))
    for key in ("data", "metadata"):
        value = content.get(key)
        if isinstance(value, dict):
            total += sum(len(str(k)) + len(v) if isinstance(v, str) else len(str(k)) + len(str(v))
                         for k, v in value.items())
    return total


def _mime_bundle(data: Any) -> bool:
    """Whether ``data`` is a MIME bundle nbformat accepts: text (or lines) per type, any JSON for ``*json``."""
    if not isinstance(data, dict):
        return False
    for key, value in data.items():
        if not isinstance(key, str):
            return False
        if not key.endswith("json") and not (isinstance(value, str) or
                                              isinstance(value, list) and all(isinstance(v, str) for v in value)):
            return False
    return True


def _valid_output(msg_type: str, content: Mapping[str, Any]) -> bool:
    """Whether ``content`` has the fields, of the types, that nbformat needs for an output of ``msg_type``."""
    if msg_type == "stream":
        return content.get("name") in ("stdout", "stderr") and isinstance(content.get("text"), str)
    if msg_type in ("display_data", "execute_result", "update_display_data"):
        count = content.get("execution_count")
        return (_mime_bundle(content.get("data")) and isinstance(content.get("metadata", {}), dict)
                and (msg_type != "execute_result" or count is None or isinstance(count, int) and not isinstance(count, bool)))
    if msg_type == "error":
        return True  # shortened and made well-formed below
    return False


class BoundedClient(NotebookClient):
    """An nbclient client that keeps at most ``cell_limit`` bytes of output per cell and
    ``total_limit`` per notebook, of every kind, dropping the rest as it arrives."""

    def __init__(self, nb: nbformat.NotebookNode, *, cell_limit: int, total_limit: int, **kwargs: Any) -> None:
        super().__init__(nb, **kwargs)
        self.cell_limit, self.total_limit = cell_limit, total_limit
        self.dropped = 0
        """Bytes of output (and comm messages) dropped so far."""
        self._total = 0
        self._used: dict[int, int] = {}
        self._noted: set[int] = set()
        self._errors: set[int] = set()

    def _note(self, outs: list, cell_index: int) -> None:
        if cell_index not in self._noted:
            self._noted.add(cell_index)
            outs.append(nbformat.v4.new_output(
                "stream", name="stderr",
                text=f"\n[grader: output over {format_size(self.cell_limit)} per cell "
                     f"({format_size(self.total_limit)} per notebook) was dropped]\n"))

    def _room(self, cell_index: int) -> int:
        return min(self.cell_limit - self._used.get(cell_index, 0), self.total_limit - self._total)

    def _charge(self, cell_index: int, size: int) -> None:
        self._used[cell_index] = self._used.get(cell_index, 0) + size
        self._total += size

    def process_message(self, msg, cell, cell_index):  # noqa: ANN001, ANN201 (nbclient's signature)
        """Every kind of iopub message, bounded; nothing a kernel sends makes this raise."""
        msg_type, content = msg["msg_type"], msg["content"]
        if msg_type == "status":
            if content.get("execution_state") == "idle":
                raise CellExecutionComplete()
            return None
        if msg_type == "clear_output":
            self.clear_output(cell.outputs, msg, cell_index)
            return None
        if msg_type.startswith("comm"):
            self.dropped += _size(content) + _size(content.get("data") if isinstance(content.get("data"), dict)
                                                   else {})
            return None
        transient = content.get("transient")
        display_id = transient.get("display_id") if isinstance(transient, dict) else None
        display_id = display_id if isinstance(display_id, str) and display_id else None
        if not _valid_output(msg_type, content):
            return None
        if display_id and msg_type in ("display_data", "execute_result", "update_display_data"):
            self._update_displays(display_id, msg)
        if msg_type == "update_display_data":
            return None
        if isinstance(content.get("execution_count"), int):
            cell["execution_count"] = content["execution_count"]
        return self.output(cell.outputs, msg, display_id, cell_index)

    def clear_output(self, outs, msg, cell_index):  # noqa: ANN001, ANN201
        super().clear_output(outs, msg, cell_index)
        if not outs:  # cleared now (not deferred with wait=True): its output no longer counts
            self._total -= self._used.pop(cell_index, 0)

    def _update_displays(self, display_id: str, msg: dict[str, Any]) -> None:
        """Rewrite every earlier output with ``display_id``, if the result fits the limits."""
        targets = []
        for cell_index, indices in self._display_id_map.get(display_id, {}).items():
            outputs = self.nb.cells[cell_index].get("outputs", [])
            targets += [(cell_index, outputs[i]) for i in indices if i < len(outputs)]
        if not targets:
            return
        new = _size(msg["content"])
        growth = {}
        for cell_index, output in targets:
            growth[cell_index] = growth.get(cell_index, 0) + new - _size(output)
        fits = (new <= self.cell_limit and sum(growth.values()) <= self.total_limit - self._total
                and all(self._used.get(c, 0) + g <= self.cell_limit for c, g in growth.items()))
        if not fits:
            self.dropped += new * len(targets)
            return
        data, metadata = msg["content"]["data"], msg["content"].get("metadata", {})
        for _cell, output in targets:
            output["data"], output["metadata"] = nbformat.from_dict(data), nbformat.from_dict(metadata)
        for cell_index, g in growth.items():
            self._charge(cell_index, g)

    def output(self, outs, msg, display_id, cell_index):  # noqa: ANN001 (nbclient's signature)
        content = msg["content"]
        if msg["msg_type"] == "error":
            content["ename"] = _shorten(str(content.get("ename", "Error")), KEEP_NAME)
            content["evalue"] = _shorten(str(content.get("evalue", "")), KEEP_ERROR_TEXT)
            traceback = content.get("traceback")
            traceback = "\n".join(map(str, traceback)) if isinstance(traceback, list) else str(traceback or "")
            content["traceback"] = [traceback[-KEEP_ERROR_TEXT:]]
            size = _size(content)
            if cell_index in self._errors and size > self._room(cell_index):
                self.dropped += size  # the first error of a cell is always kept: its status depends on it
                return None
            self._errors.add(cell_index)
            self._charge(cell_index, size)
            return self._keep(outs, msg, display_id, cell_index)
        size = _size(content)
        room = self._room(cell_index)
        if size > room and msg["msg_type"] == "stream" and room > 0:  # keep the head of the text
            content["text"] = content["text"][:room]
            self.dropped += size - room
            size = room
        elif size > room:
            self.dropped += size
            self._note(outs, cell_index)
            return None
        self._charge(cell_index, size)
        return self._keep(outs, msg, display_id, cell_index)

    def _keep(self, outs, msg, display_id, cell_index):  # noqa: ANN001, ANN202
        try:
            return super().output(outs, msg, display_id, cell_index)
        except Exception:  # nbformat refused the content: nothing to keep
            return None
