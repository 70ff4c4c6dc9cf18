"""The student's side of the grader's re-runs of lab 13's parallel functions, in a student process.

The grader never takes a parallel result from the notebook's kernel. Its judge (``judge.py``) asks the grader
for a student process (:mod:`util.student_process`) running :func:`serve`, and for each case sends the
student's function (pickled by value by the hidden case) and each rank's own inputs. This module never
unpickles anything itself: for every run it forks the ranks with :func:`util.labs.lab13.ranks.launch`
(each sets up, keeps its reading to itself, hands over its connections, goes behind the walls, and loads the
function with :func:`util.judging.student_code.load`, bounded by :data:`MAX_FUNCTION`), and only then reads
each rank's inputs from the judge and passes them to that rank alone: no rank holds anything of the run while
the function unpickles, and none ever holds another rank's inputs, the case's spec or a seed. The rank calls it
(:func:`util.labs.lab13.calls.call`) and sends its result back; this process counts the bytes on the wire
itself and answers the judge with the results, the wire counts, the ranks' logs and what they printed, or
with the rank that raised or the ranks that hung. It can serve any number of runs: the student's code runs
only in the ranks, which end with their run.

Protocol, per run: ``{"run": {"world", "call", "header", "timeout"}}`` + the pickled function, then one message
per rank: ``{"rank": r}`` + that rank's arrays (``.npz``). Answer: ``{"done": results tree, "wire", "messages",
"output", "walls", "apart"}`` + the results' arrays, or ``{"raised": {"rank", "details"}, "output"}``, ``{"timeout":
message, "output"}``, ``{"failed": message}``.
"""
from __future__ import annotations

from typing import Any

from util.student_process import Channel, ChannelError

MAX_TIMEOUT = 60.0
"""Longest a run may ask its ranks to wait (seconds)."""
MAX_FUNCTION = 256 << 10
"""Largest pickled function a rank loads: the course's solutions pickle to 1.9-3.8 KB with the helpers they call
(by value, measured); 256 KiB leaves room for many more helpers and small tables, not for a data set."""


def _loader(name: str, pickled: bytes):
    """What a rank loads, behind the walls, before its input arrives: the student's function (bounded,
    :func:`util.judging.student_code.load`), and the job that calls it on that rank's arrays."""

    def load():
        from util.judging.student_code import load as load_code

        fn = load_code(pickled, limit=MAX_FUNCTION, what=f"the pickled {name}")

        def job(rank: int, world: int, header: dict, data: bytes) -> Any:
            from util.labs.lab13.calls import call
            from util.labs.lab13.ranks import unpack

            arrays = unpack({key: {"$array": key} for key in header.get("arrays", [])}, data) if data else {}
            return call(name, fn, header.get("header") or {}, arrays, rank, world)

        return job

    return load


def serve(channel: Channel) -> None:
    """Answer the judge's runs until it closes the channel (see the module's docstring)."""
    import torch
    import torch.distributed  # noqa: F401  (imported here once: every rank is a fork of this process)

    torch.set_num_threads(1)
    from util.labs.lab13.calls import CALLS, prepare
    from util.labs.lab13.ranks import RankError, RankTimeout, launch, pack

    while True:
        try:
            header, pickled, fds = channel.receive()
        except ChannelError:
            return
        Channel._close_fds(fds)
        request = header.get("run")
        if not isinstance(request, dict):
            channel.send({"failed": "the judge sent no run"})
            continue
        world, name = request.get("world"), request.get("call")
        fed = 0

        def feed(rank: int, request: dict = request) -> tuple[dict, bytes]:
            nonlocal fed
            message, data, extra = channel.receive(timeout=60.0)
            Channel._close_fds(extra)
            fed += 1
            if message.get("rank") != rank:
                raise ChannelError(f"the judge sent rank {message.get('rank')!r}'s inputs where rank {rank}'s belong")
            return {"header": request.get("header") or {}, "arrays": list(message.get("arrays") or [])}, data

        try:
            if not isinstance(world, int) or not 1 <= world <= 8 or name not in CALLS:
                raise ValueError(f"a run of {world!r} ranks of {name!r} is not one this harness makes")
            timeout = min(float(request.get("timeout") or MAX_TIMEOUT), MAX_TIMEOUT)
            prepare(name)
            run = launch(world, None, timeout=timeout, feed=feed, load=_loader(name, pickled))
            tree, arrays = pack(run.results)
            reply: dict = {"done": tree, "wire": run.wire, "messages": run.messages, "output": run.output,
                           "walls": run.walls, "apart": run.apart}
        except RankError as exc:
            reply, arrays = {"raised": {"rank": exc.rank, "details": exc.details[-4000:]}, "output": exc.output}, b""
        except RankTimeout as exc:
            reply, arrays = {"timeout": str(exc), "output": exc.output}, b""
        except (ChannelError, OSError, ValueError, TypeError) as exc:
            reply, arrays = {"failed": f"{type(exc).__name__}: {exc}"[:400]}, b""
        try:
            for _ in range(fed, world if isinstance(world, int) and 1 <= world <= 8 else 0):
                _, _, extra = channel.receive(timeout=60.0)  # inputs a failed start never took
                Channel._close_fds(extra)
            channel.send(reply, data=arrays)
        except ChannelError:
            return
