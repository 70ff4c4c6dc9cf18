"""A timeline of one data-parallel step on a rank: when each layer's backward ran and when each all-reduce was in
flight (for the figure of task 13.8, :func:`util.labs.lab13.plots.plot_timeline`; nothing here is graded).

``with traced(model) as events: ...`` records, while the block runs on a rank,

* ``{"kind": "compute", "label": "layer i", "start", "end"}`` for the backward of each ``Linear`` ``i``: from the
  moment the gradient of its output arrived (a hook on the output tensor, set in the forward pass) to the moment
  its last parameter's gradient was accumulated (a post-accumulate-gradient hook);
* ``{"kind": "comm", "label": "<bytes> B", "start", "end"}`` for each ``dist.all_reduce`` the block calls: from the
  call to the moment its result was ready (for ``async_op=True``, a callback on the work's future, which gloo's
  own thread runs when the bytes have arrived).

Times are ``time.perf_counter()`` seconds, the same clock on every rank of one machine; subtract the earliest to
plot them. A grade never depends on them: the grader sees overlap on the wire (:mod:`util.labs.lab13.hold`).
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def traced(model) -> Iterator[list[dict]]:
    """Record the backward of every ``Linear`` of ``model`` and every ``dist.all_reduce`` while the block runs
    (see the module's docstring); yields the list of events, filled as they happen."""
    import torch
    import torch.distributed as dist

    events: list[dict] = []
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    started: dict[int, float] = {}
    handles = []
    for index, layer in enumerate(linears):
        def on_output(module, inputs, output, index=index):
            if output.requires_grad:
                output.register_hook(lambda grad: started.__setitem__(index, time.perf_counter()))

        def on_ready(parameter, index=index, last=layer.weight):
            if parameter is last and index in started:
                events.append({"kind": "compute", "label": f"layer {index}", "start": started.pop(index),
                               "end": time.perf_counter()})

        handles.append(layer.register_forward_hook(on_output))
        handles += [p.register_post_accumulate_grad_hook(on_ready) for p in layer.parameters()]
    original = dist.all_reduce

    def all_reduce(tensor, *args, **kwargs):
        event = {"kind": "comm", "label": f"{tensor.numel() * tensor.element_size():,} B",
                 "start": time.perf_counter(), "end": None}
        events.append(event)
        work = original(tensor, *args, **kwargs)
        if work is None:
            event["end"] = time.perf_counter()
        else:
            work.get_future().add_done_callback(lambda _: event.__setitem__("end", time.perf_counter()))
        return work

    all_reduce.__wrapped__ = original
    dist.all_reduce = all_reduce
    try:
        yield events
    finally:
        dist.all_reduce = original
        for handle in handles:
            handle.remove()
