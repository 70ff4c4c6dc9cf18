"""Ranks on one machine: ``world`` processes forked from this one, joined in a ``torch.distributed`` gloo group.

``run_ranks(fn, world)`` is how the notebook runs code on several ranks, and the grader's re-runs go through the
same :func:`launch`. Each rank is a fork of the calling process (a fork starts in about 0.1 s; a fresh
interpreter would import torch again, 4-16 s), and before any of your code runs in it, it

1. closes every descriptor it inherited but its standard streams and its own line to the launcher, and
   keeps its reading to itself (:mod:`util.labs.lab13.apart`: of ``/proc``, its own entry only, so no rank
   reads another's);
2. uses **one** torch thread (a fork of a process that used OpenMP threads hangs if it uses them again);
3. joins the group: ``dist.init_process_group("gloo", init_method="file://<a fresh folder>", ...)`` over the
   loopback interface, with ``timeout`` seconds for every collective;
4. hands the launcher its TCP connections to the other ranks (all of them in one message, at most
   :data:`MAX_CONNECTIONS`; the launcher checks that every one arrived), so the launcher counts the bytes on the
   wire itself (:mod:`util.labs.lab13.wire`);
5. logs every ``torch.distributed`` call it makes (``Run.messages``: what, with whom, how many bytes of
   tensors), captures what it prints (``Run.output``), and puts itself behind the walls
   (:mod:`util.labs.lab13.walls`): from then on it reaches the other ranks only through the group.

Then your function runs (the grader's re-runs first load the student's function, still before the rank has
received any input: ``load``), and what it returns comes back as numpy arrays (tensors are copied; tuples come
back as lists). A rank that raises makes :func:`launch` raise :class:`RankError` with its traceback; ranks
still running after ``timeout`` seconds (a ``recv`` nobody sends to) are killed, and :class:`RankTimeout`
says which had finished. Nothing a rank sends back is unpickled: results travel as JSON and ``.npz`` arrays.
"""
from __future__ import annotations

import io
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from util.student_process import Channel, ChannelError

MAX_RESULT = 256 << 20
"""Largest result (arrays and all) one rank may send back."""
MAX_OUTPUT = 16 << 10
"""Printed text kept per rank (its end)."""
MAX_MESSAGES = 10_000
"""``torch.distributed`` calls logged per rank."""
MAX_CONNECTIONS = 64
"""Descriptors a rank may hand its launcher (its TCP connections): the group's ``world - 1`` (7 at 8 ranks) and any
strays a loaded machine leaves (:func:`util.labs.lab13.wire.pair_ranks`). The launcher's line to a rank
(:class:`Line`) takes this many in one message; before release 4 it was the course's channel, which takes 4, and the
kernel silently dropped the rest, so an 8-rank group never paired and a 4-rank one failed once a rank held two strays."""
GRACE = 1.0
"""Seconds the other ranks get to finish after one raised, before they are killed."""
LOGGED = ("send", "recv", "isend", "irecv", "all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
          "reduce_scatter_tensor", "broadcast", "reduce", "all_to_all", "all_to_all_single", "gather", "scatter",
          "barrier", "batch_isend_irecv")
"""The ``torch.distributed`` functions whose calls a rank logs."""


class RankError(RuntimeError):
    """A rank raised: ``rank``, its traceback (``details``) and what the ranks printed."""

    def __init__(self, rank: int, details: str, output: list[str]) -> None:
        self.rank, self.details, self.output = rank, details, output
        last = details.strip().splitlines()[-1] if details.strip() else "an error"
        super().__init__(f"rank {rank} raised {last}\n\nits traceback:\n{details}")


class RankTimeout(RuntimeError):
    """Ranks were still running after the launcher's deadline and were killed."""

    def __init__(self, message: str, output: list[str]) -> None:
        super().__init__(message)
        self.output = output


@dataclass
class Run:
    """What one launch of ``world`` ranks did."""

    world: int
    """How many ranks ran."""
    results: list = field(default_factory=list)
    """What each rank's function returned (tensors as numpy arrays, tuples as lists)."""
    messages: list = field(default_factory=list)
    """Per rank, every ``torch.distributed`` call it made, in order: ``{"op", "peer", "bytes"}`` (``peer``: the
    other rank of a point-to-point call, else ``None``; ``bytes``: of the tensors it passed)."""
    wire: list = field(default_factory=list)
    """``wire[i][j]``: bytes rank ``j`` received from rank ``i`` over their connection while the functions ran,
    counted by the kernel: tensors and gloo's framing (empty on a machine that cannot count them: not Linux)."""
    output: list = field(default_factory=list)
    """What each rank printed."""
    walls: bool = True
    """Whether the ranks ran behind the walls (False on a machine without the filter)."""
    apart: bool = True
    """Whether each rank could read only its own ``/proc`` entry (False on a machine without Landlock:
    :mod:`util.labs.lab13.apart`)."""

    def sent_bytes(self, rank: int) -> int:
        """Bytes of tensors ``rank`` passed to ``send``/``isend``."""
        return sum(m["bytes"] for m in self.messages[rank] if m["op"] in ("send", "isend"))

    def sends(self, rank: int) -> int:
        """How many ``send``/``isend`` calls ``rank`` made."""
        return sum(m["op"] in ("send", "isend") for m in self.messages[rank])

    def wire_sent(self, rank: int) -> int | None:
        """Bytes on the wire from ``rank`` to all others (``sum(wire[rank])``; ``None`` where not counted)."""
        return sum(self.wire[rank]) if self.wire else None

    def summary(self) -> str:
        """A line per rank: messages sent, bytes of tensors sent, bytes on the wire sent and received."""
        lines = [f"{'rank':>4} {'sends':>6} {'tensor bytes sent':>18} {'wire bytes sent':>16} {'received':>10}"]
        for rank in range(self.world):
            sent, got = (f"{self.wire_sent(rank):,}", f"{sum(row[rank] for row in self.wire):,}") if self.wire \
                else ("not counted", "-")
            lines.append(f"{rank:>4} {self.sends(rank):>6} {self.sent_bytes(rank):>18,} {sent:>16} {got:>10}")
        return "\n".join(lines)


# ------------------------------------------------------------------ results as JSON and arrays (no pickle)


def pack(value: Any) -> tuple[Any, bytes]:
    """``value`` (tensors, arrays, numbers, strings, ``None``, and lists, tuples and string-keyed dicts of them)
    as a JSON tree whose arrays are ``{"$array": k}``, and the ``.npz`` bytes holding them."""
    import numpy as np

    arrays: dict[str, Any] = {}

    def walk(item: Any) -> Any:
        if hasattr(item, "detach") and hasattr(item, "numpy"):
            item = item.detach().cpu().contiguous().numpy().copy()
        if isinstance(item, np.ndarray) or isinstance(item, np.generic):
            array = np.asarray(item)
            if array.dtype == object:
                raise TypeError("a result holds an array of Python objects; return numbers or tensors")
            arrays[str(len(arrays))] = array
            return {"$array": len(arrays) - 1}
        if item is None or isinstance(item, (bool, int, float, str)):
            return item
        if isinstance(item, (list, tuple)):
            return [walk(each) for each in item]
        if isinstance(item, dict):
            if not all(isinstance(key, str) for key in item) or set(item) == {"$array"}:
                raise TypeError("a result's dict keys must be strings (and not the one key '$array')")
            return {key: walk(each) for key, each in item.items()}
        raise TypeError(f"a rank returned a {type(item).__name__}; return tensors, arrays, numbers, or lists, tuples "
                        "and dicts of them")

    tree = walk(value)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return tree, buffer.getvalue()


def unpack(tree: Any, data: bytes) -> Any:
    """The value :func:`pack` packed (arrays read without pickle); ``ValueError`` on anything else."""
    from util.artifacts import read_saved_arrays

    arrays, problems = read_saved_arrays(data)
    if problems:
        raise ValueError(problems[0])

    def walk(item: Any, depth: int = 0) -> Any:
        if depth > 50:
            raise ValueError("a result nested more than 50 deep")
        if isinstance(item, dict):
            if set(item) == {"$array"}:
                if str(item["$array"]) not in arrays:
                    raise ValueError("a result names an array it did not send")
                return arrays[str(item["$array"])]
            return {str(key): walk(each, depth + 1) for key, each in item.items()}
        if isinstance(item, list):
            return [walk(each, depth + 1) for each in item]
        if item is None or isinstance(item, (bool, int, float, str)):
            return item
        raise ValueError("a result holds something that is not JSON")

    return walk(tree)


# ------------------------------------------------------------------ the line between a rank and its launcher


class Line(Channel):
    """The course's :class:`~util.student_process.Channel`, taking up to ``max_fds`` descriptors a message (the
    course's takes 4) and failing, never dropping one silently, where the kernel truncated them (``MSG_CTRUNC``)."""

    def __init__(self, sock: socket.socket, *, max_fds: int = MAX_CONNECTIONS, **kwargs: Any) -> None:
        super().__init__(sock, **kwargs)
        self.max_fds = max_fds

    def _read(self, size: int, deadline: float | None, fds: list[int]) -> bytes:
        import array

        chunks, got = [], 0
        while got < size:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and (left <= 0 or not select.select([self.sock], [], [], left)[0]):
                self._close_fds(fds)
                raise ChannelError(f"{self.peer} did not answer within the time allowed")
            try:
                chunk, ancillary, flags, _ = self.sock.recvmsg(min(size - got, 1 << 20),
                                                               socket.CMSG_SPACE(self.max_fds * 4))
            except OSError as exc:
                self._close_fds(fds)
                raise ChannelError(f"{self.peer} is gone ({exc.strerror or exc})") from None
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    received = array.array("i")
                    received.frombytes(payload[:len(payload) - len(payload) % 4])
                    fds.extend(received)
            if flags & getattr(socket, "MSG_CTRUNC", 0):  # the kernel dropped descriptors that did not fit
                self._close_fds(fds)
                raise ChannelError(f"{self.peer} sent more file descriptors in one message than the {self.max_fds} "
                                   "this line takes; the kernel dropped the rest")
            if not chunk:
                self._close_fds(fds)
                raise ChannelError(f"{self.peer} closed the connection")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)


# ------------------------------------------------------------------ a rank


class _Log:
    """The rank's log of ``torch.distributed`` calls (the wrappers write it)."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def wrap(self, dist: Any) -> None:
        for name in LOGGED:
            original = getattr(dist, name, None)
            if original is not None:
                setattr(dist, name, self._wrapper(name, original))

    def _wrapper(self, name: str, original: Callable) -> Callable:
        log = self.calls

        def call(*args, **kwargs):
            if len(log) < MAX_MESSAGES:
                log.append({"op": name, "peer": _peer(name, args, kwargs), "bytes": _nbytes(args, kwargs)})
            return original(*args, **kwargs)

        call.__name__ = call.__qualname__ = name
        call.__doc__ = original.__doc__
        call.__wrapped__ = original
        return call


def _peer(name: str, args: tuple, kwargs: dict) -> int | None:
    if name in ("send", "isend"):
        peer = kwargs.get("dst", args[1] if len(args) > 1 else None)
    elif name in ("recv", "irecv"):
        peer = kwargs.get("src", args[1] if len(args) > 1 else None)
    else:
        return None
    return int(peer) if isinstance(peer, int) else None


def _nbytes(args: tuple, kwargs: dict) -> int:
    """Bytes of every tensor among the arguments (in lists too)."""
    total = 0
    for item in [*args, *kwargs.values()]:
        for each in (item if isinstance(item, (list, tuple)) else [item]):
            if hasattr(each, "element_size") and hasattr(each, "numel"):
                total += each.numel() * each.element_size()
    return total


def _rank(rank: int, world: int, store: str, line: socket.socket, job: Callable | None, timeout: float,
          load: Callable[[], Callable] | None) -> None:
    """The body of a forked rank (see the module's docstring); never returns."""
    code = 0
    try:
        fd = line.fileno()
        limit = os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 1024
        os.closerange(3, fd)
        os.closerange(fd + 1, max(limit, fd + 2))
        from util.labs.lab13 import apart

        apart_ = apart.install()  # one thread now: every thread started later (gloo's) inherits it
        channel = Channel(line, max_data=MAX_RESULT, peer="the launcher")
        captured = io.StringIO()
        sys.stdout = sys.stderr = captured
        from datetime import timedelta

        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
        dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=timeout))
        from util.labs.lab13 import walls, wire

        sockets = wire.connected_sockets() if wire.available() else []
        if len(sockets) > MAX_CONNECTIONS:
            raise RuntimeError(f"this rank holds {len(sockets)} TCP connections after joining a group of {world}; "
                               f"the launcher takes at most {MAX_CONNECTIONS}")
        channel.send({"ready": True, "connections": len(sockets)}, fds=tuple(s.fileno() for s in sockets))
        for sock in sockets:
            sock.close()
        log = _Log()
        log.wrap(dist)
        walled = walls.install()
        try:
            if load is not None:  # the student's code, loaded before anything of the run is in this process
                job = load()
                load = None
            header, data, fds = channel.receive()
            Channel._close_fds(fds)
            result = job(rank, world, header.get("go") or {}, data)
            tree, arrays = pack(result)
        except BaseException:  # the notebook's code may raise anything; say what and where
            channel.send({"raised": traceback.format_exc()[-8000:], "output": captured.getvalue()[-MAX_OUTPUT:],
                          "messages": log.calls[:MAX_MESSAGES]})
            code = 1
        else:
            channel.send({"done": tree, "output": captured.getvalue()[-MAX_OUTPUT:], "walls": walled,
                          "apart": apart_, "messages": log.calls[:MAX_MESSAGES]}, data=arrays)
    except BaseException:  # set-up failed: tell the launcher if it can still hear
        code = 2
        try:
            Channel(line, peer="the launcher").send({"raised": traceback.format_exc()[-8000:]})
        except Exception:  # noqa: BLE001 - the line is gone
            pass
    finally:
        os._exit(code)


# ------------------------------------------------------------------ the launcher


def launch(world: int, job: Callable[[int, int, dict, bytes], Any] | None, *, timeout: float = 60.0,
           feed: Callable[[int], tuple[dict, bytes]] | None = None, load: Callable[[], Callable] | None = None) -> Run:
    """Fork ``world`` ranks, set each up (see the module's docstring), then call ``job(rank, world, header,
    data)`` in each, behind the walls; ``feed(rank) -> (header, data)``, called here after the ranks are
    forked and ready, gives each rank its own input (so no rank is forked holding another's). ``load() ->
    job``, where given, runs in each rank behind the walls before its input arrives (the grader's re-runs
    unpickle the student's function there, so that nothing of the run is in the process while it loads).
    Returns the :class:`Run`; raises :class:`RankError` or :class:`RankTimeout` (every rank is ended either way)."""
    import torch  # noqa: F401  (imported once here, so that no rank imports it again)
    import torch.distributed  # noqa: F401

    from util.labs.lab13 import wire
    from util.labs.lab13.wire import Meter, difference

    if not 1 <= int(world) <= 8:
        raise ValueError(f"world must be 1 to 8 ranks on this machine; got {world}")
    deadline = time.monotonic() + timeout
    folder = tempfile.mkdtemp(prefix="ranks-")
    store = os.path.join(folder, "store")
    lines = [socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(world)]
    pids: list[int] = []
    meter = Meter(world)
    channels: list[Channel] = []
    outputs = [""] * world
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        for rank in range(world):
            pid = os.fork()
            if pid == 0:
                _rank(rank, world, store, lines[rank][1], job, timeout, load)
            pids.append(pid)
        for _, theirs in lines:
            theirs.close()
        channels = [Line(ours, max_data=MAX_RESULT, peer=f"rank {rank}") for rank, (ours, _) in enumerate(lines)]
        for rank, header, _, fds in _gather(channels, deadline, "join the group"):
            if "raised" in header:
                Channel._close_fds(fds)
                raise RankError(rank, str(header["raised"]), outputs)
            meter.add(rank, [socket.socket(fileno=fd) for fd in fds])
            if header.get("connections") != len(fds):  # every connection the rank found must have arrived
                raise RankError(rank, f"the rank found {header.get('connections')} connections after joining and "
                                f"{len(fds)} reached its launcher", outputs)
        before, strays = meter.matrix(), meter.stray_bytes()
        for rank, channel in enumerate(channels):
            header, data = feed(rank) if feed is not None else ({}, b"")
            channel.send({"go": header}, data=data)
        run = Run(world=world, results=[None] * world, messages=[[] for _ in range(world)], output=outputs)
        failed: dict[int, str] = {}
        try:
            for rank, header, data, fds in _gather(channels, deadline, "finish"):
                Channel._close_fds(fds)
                outputs[rank] = str(header.get("output", ""))[-MAX_OUTPUT:]
                run.messages[rank] = _messages(header.get("messages"))
                if "done" in header:
                    run.results[rank] = unpack(header["done"], data)
                    run.walls = run.walls and header.get("walls") is True
                    run.apart = run.apart and header.get("apart") is True
                else:
                    if not failed:
                        deadline = min(deadline, time.monotonic() + GRACE)
                    failed[rank] = str(header.get("raised", "an error it did not describe"))
        except RankTimeout:
            if not failed:
                raise
        if failed:  # the lowest rank that raised, whichever came first: the same report every time
            first = min(failed)
            raise RankError(first, failed[first], outputs)
        run.wire = difference(_settled(meter), before) if wire.available() else []
        for rank, count in meter.stray_bytes().items():
            if count != strays.get(rank, 0):
                raise RankError(rank, f"{count - strays.get(rank, 0):,} bytes crossed a connection of this rank that "
                                "no other rank holds: outside the process group, where nothing is counted", outputs)
        return run
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in pids:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
        for channel in channels:
            channel.close()
        for ours, theirs in lines:
            ours.close()
            theirs.close()
        meter.close()
        shutil.rmtree(folder, ignore_errors=True)


def _gather(channels: list[Channel], deadline: float, what: str):
    """Yield ``(rank, header, data, fds)`` from each rank once, as they arrive, until ``deadline``."""
    waiting = {channel.sock.fileno(): rank for rank, channel in enumerate(channels)}
    while waiting:
        left = deadline - time.monotonic()
        ready = select.select(list(waiting), [], [], max(left, 0))[0] if left > 0 else []
        if not ready:
            late = sorted(waiting.values())
            raise RankTimeout(f"rank{'s' if len(late) > 1 else ''} {', '.join(map(str, late))} did not {what} in time "
                              f"and {'were' if len(late) > 1 else 'was'} stopped (a recv nobody sends to, or a send "
                              "nobody receives, waits for ever)", [])
        for fd in ready:
            rank = waiting.pop(fd)
            try:
                header, data, fds = channels[rank].receive(timeout=max(deadline - time.monotonic(), 0.1))
            except ChannelError as exc:
                header, data, fds = {"raised": f"the rank ended without an answer ({exc}): it crashed or was killed"}, \
                    b"", []
            yield rank, header, data, fds


def _messages(found: Any) -> list[dict]:
    if not isinstance(found, list):
        return []
    out = []
    for item in found[:MAX_MESSAGES]:
        if isinstance(item, dict) and isinstance(item.get("op"), str) and isinstance(item.get("bytes"), int):
            peer = item.get("peer")
            out.append({"op": item["op"][:40], "peer": peer if isinstance(peer, int) else None, "bytes": item["bytes"]})
    return out


def _settled(meter) -> list[list[int]]:
    """The wire matrix once it stops changing (a last frame may still be on its way): read until two reads
    5 ms apart agree, for at most half a second."""
    last = meter.matrix()
    for _ in range(100):
        time.sleep(0.005)
        now = meter.matrix()
        if now == last:
            return now
        last = now
    return last


def run_ranks(fn: Callable[[int, int], Any], world: int, *, timeout: float = 60.0) -> Run:
    """Run ``fn(rank, world)`` on ``world`` ranks (processes forked from this one) and return the :class:`Run`.

    Each rank first uses one torch thread, joins a gloo process group (``torch.distributed``, over the loopback
    interface, every collective limited to ``timeout`` seconds), logs its ``torch.distributed`` calls, captures
    what it prints, and goes behind the walls: from then on it cannot write files, create sockets or pipes,
    start threads or processes, signal other processes or read their ``/proc`` entries, so the group is its only
    way to the other ranks. Then it calls ``fn``.

    ``run.results[rank]`` is what rank ``rank`` returned (tensors as numpy arrays, tuples as lists);
    ``run.messages[rank]`` its ``torch.distributed`` calls (``{"op", "peer", "bytes"}``), ``run.sent_bytes(rank)``
    and ``run.sends(rank)`` its ``send``/``isend`` tensor bytes and calls; ``run.wire[i][j]`` the bytes rank ``j``
    received from rank ``i``, counted by the kernel (tensors and gloo's framing); ``run.output[rank]`` what it
    printed (also printed here, rank by rank). Raises :class:`RankError`, with the rank's traceback, when a rank
    raises; :class:`RankTimeout` when ranks are still running after ``timeout`` seconds (a ``recv`` nobody sends
    to waits for ever): every rank is killed either way."""
    run = launch(world, lambda rank, size, header, data: fn(rank, size), timeout=timeout)
    for rank, text in enumerate(run.output):
        if text.strip():
            print(f"--- rank {rank} printed:\n{text.rstrip()}")
    return run
