"""The student's side of the grader's re-run of task 8.3, in a student process.

In the student's kernel the course's harness measures what ``execute`` allocates with ``tracemalloc``,
which code running in that same kernel could switch off or rewrite. So the grader's judge also runs the
student's ``execute`` (saved by the hidden case, pickled with cloudpickle) again in a student process
(:mod:`util.student_process`) and reads the process's peak resident memory itself, from outside (``/proc``;
the process cannot reset it, :func:`util.student_process.harden`), and checks what that very run left in the
pool. This module is the course's code in that process:

1. it builds the graph, its inputs, the weights, the shapes, the plan and a pool of NaN bytes, touches every
   page, and warms numpy and its BLAS up on the graph's own matrix products, keeping the scratch arrays (course
   code: no student code has run), so the process's peak memory is what it holds, and settles the heap
   (:func:`util.judging.heap.settle`: what the set-up freed is neither resident nor reusable, so what student code
   allocates lands on new pages, packed);
   then the process may start no other process (:func:`util.student_process.no_processes`), so its memory is
   all the student's code can use, and it says it is ready;
2. the grader restarts the peak (a root grader; another reads the peak as it stands), the judge sends the
   pickled ``execute``: unpickling it and one call of it happen after that, inside the measurement;
3. asked for its report, it sends the pool's bytes as they are (before any object ``execute`` returned is looked
   at, and without copying them) and where each tensor ``execute`` returned lies in it; the judge checks them
   against onnxruntime and reads the peak once everything is done, so whatever the student's code did, when,
   counts.
"""
from __future__ import annotations

import numpy as np

from util.student_process import Channel, ChannelError, no_processes


def _warm_up(model, shapes) -> list:
    """numpy and its BLAS warmed up on scratch arrays: a product of each of the graph's matrix sizes (with ``B`` as
    it is and transposed), and the element-wise and reducing operations an executor uses (``out=``), so their
    one-off buffers are not charged to the student's first call; and the graph's attributes read once. The scratch
    arrays are returned, to be kept: freed, they would be memory the student's temporaries could use unseen, and
    the process's peak would lie above what it holds (a grader that cannot restart the peak measures from it)."""
    from onnx import helper

    from util.labs.lab8.verify import matmul_sizes

    kept = []
    for m, k, n in matmul_sizes(model, shapes):
        a, out = np.ones((m, k), dtype=np.float32), np.empty((m, n), dtype=np.float32)
        for b in (np.ones((k, n), dtype=np.float32), np.ones((n, k), dtype=np.float32).T):
            np.matmul(a, b, out=out)
            kept.append(b)
        np.add(out, np.ones(n, dtype=np.float32), out=out)
        np.maximum(out, 0, out=out)
        np.multiply(out, 0.5, out=out)
        np.subtract(out, out.max(axis=-1, keepdims=True), out=out)
        np.exp(out, out=out)
        np.divide(out, out.sum(axis=-1, keepdims=True), out=out)
        kept += [a, out]
    for node in model.graph.node:
        {attribute.name: helper.get_attribute_value(attribute) for attribute in node.attribute}
    return kept


def serve(channel: Channel) -> None:
    """``{"setting": spec}``: build everything (course code only), answer ``{"ready": true}``; then ``{"go":
    true}`` + the pickled ``execute``: unpickle it and run it once inside the plan, answer ``{"done": true}`` or
    ``{"raised": message}``; then ``{"report": true}``: answer ``{"buffer": i}`` + the bytes of buffer ``i`` of the
    pool, for each, then ``{"offsets": [byte offset of each node output in its buffer, -1 when not there]}``."""
    import cloudpickle

    from util.judging import heap
    from util.labs.lab8.graphs import graph, random_feeds
    from util.labs.lab8.harness import load_weights, make_pool, offset_in
    from util.labs.lab8.plans import course_plan, course_shapes

    try:
        header, _, _ = channel.receive()
        spec = header["setting"]
        model = graph(spec["graph"])
        feeds = random_feeds(model, spec["inputs"], spec.get("seed", 0))
        shapes = course_shapes(model, {name: list(value.shape) for name, value in feeds.items()})
        plan = course_plan(model, shapes)
        pool, weights = make_pool(plan), load_weights(model)
        for array in [*pool, *weights.values(), *feeds.values()]:
            int(np.ascontiguousarray(array).view(np.uint8)[::4096].sum())  # every page resident before the count
        kept = _warm_up(model, shapes)
        order = [name for node in model.graph.node for name in node.output]
        no_processes()
        heap.settle()  # what the set-up freed is neither resident nor reusable: what execute allocates is new pages
        channel.send({"ready": True})
        header, pickled, _ = channel.receive()
    except ChannelError:
        return
    except Exception as exc:  # a graph that cannot be built: the course's fault, reported as it is
        channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
        return
    try:
        execute = cloudpickle.loads(pickled)
        returned = execute(model, weights, dict(feeds), shapes, plan, pool, np.matmul)
    except Exception as exc:  # the student's code may raise anything (unpickling it included)
        channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
        return
    channel.send({"done": True})
    try:
        channel.receive()
    except ChannelError:
        return
    try:  # the pool as that run left it, before anything execute returned is looked at (and without a copy)
        for index, buffer in enumerate(pool):
            channel.send({"buffer": index}, data=memoryview(buffer))
    except ChannelError:
        return
    offsets = []
    try:
        env = returned[1] if isinstance(returned, tuple) and len(returned) == 2 else {}
        env = env if type(env) is dict else {}
        for name in order:
            value = env.get(name)
            offsets.append(offset_in(value, pool[plan["assign"][name]]) if type(value) is np.ndarray else -1)
    except Exception:  # noqa: BLE001 - what execute returned is the student's; a broken one places nothing
        offsets = [-1] * len(order)
    channel.send({"offsets": offsets, "kept": len(kept)})
