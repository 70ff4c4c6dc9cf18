"""The student's side of the grader's re-measurement of task 8.3, in a student process.

In the student's kernel the course's harness measures what ``execute`` allocates with ``tracemalloc``,
which code running in that same kernel could switch off or rewrite. So the grader's judge also replays
the student's ``execute`` (saved by the hidden case, pickled with cloudpickle) in a student process
(:mod:`util.student_process`) and reads the process's peak resident memory itself, from outside
(``/proc``; the process cannot reset it, :func:`util.student_process.harden`): the graph, its inputs,
the weights and the pool are made and touched first, the grader notes the memory, then ``execute``
runs, and what its peak grew by is what ``execute`` allocated.
"""
from __future__ import annotations

import gc

import numpy as np

from util.student_process import Channel, ChannelError


def serve(channel: Channel) -> None:
    """``{"setting": spec}`` + the pickled ``execute``: build everything and run ``execute`` once (code and
    libraries warm), answer ``{"ready": true}``; then ``{"go": true}``: run it again, answer
    ``{"done": true}`` (or ``{"raised": message}``). The grader reads the memory around the second run."""
    import ctypes

    import cloudpickle

    trim = ctypes.CDLL(None).malloc_trim

    from util.labs.lab8.graphs import graph, random_feeds
    from util.labs.lab8.harness import load_weights, make_pool
    from util.labs.lab8.plans import course_plan, course_shapes

    try:
        header, data, _ = channel.receive()
        spec = header["setting"]
        execute = cloudpickle.loads(data)
        model = graph(spec["graph"])
        feeds = random_feeds(model, spec["inputs"], spec.get("seed", 0))
        shapes = course_shapes(model, {name: list(value.shape) for name, value in feeds.items()})
        plan = course_plan(model, shapes)
        pool, weights = make_pool(plan), load_weights(model)
        for array in [*pool, *weights.values(), *feeds.values()]:
            int(np.ascontiguousarray(array).view(np.uint8)[::4096].sum())  # every page resident before the count
        execute(model, weights, dict(feeds), shapes, plan, pool, np.matmul)  # warm: first calls, BLAS buffers
        gc.collect()
        trim(0)  # what the first run freed goes back: the peak starts from what is held
        channel.send({"ready": True})
        header, _, _ = channel.receive()
    except ChannelError:
        return
    except Exception as exc:  # a function that cannot be unpickled, a graph that cannot be built
        channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
        return
    try:
        execute(model, weights, dict(feeds), shapes, plan, pool, np.matmul)
    except Exception as exc:  # the student's code may raise anything
        channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
        return
    channel.send({"done": True})
