"""The student's side of the grader's re-run of task 15.10, in a student process.

The grader replays traces the notebook never shows, drawn from the grading secret in its judge, on the student's
swapping scheduler. The scheduler is student code, so it runs here, in a student process
(:mod:`util.student_process`), never in the judge: :func:`serve` loads it first (bounded, before any trace
reaches this process), then plays each trace the judge sends with the course's engine
(:func:`~util.labs.lab15.swapping.simulate_swapping`) and sends back the record of every iteration, plain data
the judge compares with its own run of the stated policy. This process never sees the grading secret, a case's
spec or a seed: only each trace's requests and limits.
"""
from __future__ import annotations

import json

from util.student_process import Channel, ChannelError

MAX_CODE = 1 << 20
"""The most bytes the pickled scheduler may take: code, not tables of answers."""


def serve(channel: Channel) -> None:
    """``{"function": true}`` + the pickled scheduler, then for each trace ``{"limits": [num_blocks, cpu_blocks,
    block_size, max_tokens, max_running, swap_ns_per_block], "arrivals": [[id, arrival, prompt, output], ...]}``:
    the trace served with the scheduler, answered with ``{"record": bytes}`` + the JSON of ``{"iterations",
    "deadlock"}``, or ``{"raised": message}``; until the judge closes the socket."""
    try:
        _, pickled, _ = channel.receive()
    except ChannelError:
        return
    try:
        from util.judging.student_code import load

        function = load(pickled, limit=MAX_CODE)   # first, before any trace reaches this process
    except Exception as exc:  # a function that cannot be unpickled here
        channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
        return
    from util.labs.lab15.serving import Request
    from util.labs.lab15.swapping import SwapConfig, simulate_swapping

    while True:
        try:
            header, _, _ = channel.receive()
        except ChannelError:
            return
        try:
            config = SwapConfig(*(int(x) for x in header["limits"]))
            requests = [Request(*(int(x) for x in r)) for r in header["arrivals"]]
            run = simulate_swapping(function, requests, config)
            record = json.dumps({"iterations": run.iterations, "deadlock": run.deadlock}).encode()
        except Exception as exc:  # the student's code may raise anything: say what, as the kernel would
            channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        try:
            channel.send({"record": len(record)}, data=record)
        except ChannelError:
            return
