"""The student's side of the grader's re-run of task 12.1, in a student process where autograd cannot run.

Task 12.1 asks for reverse-mode autodiff written by the student: autograd is not allowed inside ``grad``. In the
notebook that rule is kept by saved-tensor hooks that refuse autograd; but PyTorch keeps such hooks per thread
and in state the student's code shares, so the grader does not take the kernel's gradients on trust. Its judge
(``judge.py``) asks for a student process running :func:`serve`, which, **before any student code is loaded**:

* imports PyTorch and the course's graphs and data, on one thread;
* puts the process behind a seccomp filter that refuses every new thread and process
  (:func:`util.student_process.no_processes` with ``threads=False``): the one thread there is, is where the
  student's code runs;
* installs the hooks that refuse autograd in that thread, and removes the functions PyTorch gives Python to
  take them off again;

then loads the student's ``grad`` (pickled by value by the hidden case) and, for each case the judge names,
builds the course's graph and inputs, calls ``grad`` and sends back the gradients, which the judge compares
with float64 autograd in its own process.
"""
from __future__ import annotations

import numpy as np

from util.student_process import Channel, ChannelError, no_processes

SEALED = ("_push_saved_tensors_default_hooks", "_pop_saved_tensors_default_hooks", "_saved_tensors_hooks_disable",
          "_saved_tensors_hooks_enable")
"""What PyTorch offers Python to push, pop or turn off saved-tensor hooks: gone before the student's code loads."""


def _refuse(_tensor):
    raise RuntimeError("grad must work the gradients out itself: autograd (backward(), torch.autograd.grad, "
                       "torch.func) is not available inside it")


def seal() -> None:
    """Make autograd unusable in this process from here on: no new thread or process, the refusing hooks on in
    the only thread, and no Python-level way to take them off."""
    import torch

    no_processes(threads=False)
    torch.autograd.graph.saved_tensors_hooks(_refuse, _refuse).__enter__()
    for name in SEALED:
        if hasattr(torch._C._autograd, name):
            delattr(torch._C._autograd, name)


MAX_FUNCTION = 64 << 10
"""Bytes the pickled ``grad`` may have: an autodiff with its helpers (the solution's: about 7 KB), and no data."""


def serve(channel: Channel) -> None:
    """``{"function": true}`` + the pickled ``grad``: set up, seal (:func:`seal`), load it, answer
    ``{"ready": true}`` (or ``{"raised": ...}``); then for each ``{"case": {"graph", "batch", "start"}}``, answer
    ``{"done": [[name, shape], ...]}`` + the float64 gradients' bytes, or ``{"raised": message}``."""
    import torch

    torch.set_num_threads(1)
    from util.data import digits_split
    from util.labs.lab12.graphs import build_graph, feeds, parameter_names

    digits_split()  # scikit-learn and the data loaded before the seal
    build_graph("tiny")
    try:
        _, pickled, _ = channel.receive()
    except ChannelError:
        return
    try:
        seal()
        from util.judging import student_code

        grad = student_code.load(pickled, limit=MAX_FUNCTION)  # before any case is received
    except Exception as exc:  # a function that cannot be unpickled here
        channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
        return
    channel.send({"ready": True})
    while True:
        try:
            header, _, _ = channel.receive()
        except ChannelError:
            return
        try:
            spec = header["case"]
            gm = build_graph(str(spec["graph"]))
            gm.requires_grad_(False)
            names = parameter_names(gm)
            found = grad(gm, feeds(str(spec["graph"]), int(spec["batch"]), int(spec["start"])), list(names))
            listed, parts = [], []
            for name in names:
                value = found[name]
                array = np.ascontiguousarray(np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach")
                                                        else value, dtype=np.float64))
                listed.append([name, list(array.shape)])
                parts.append(array.tobytes())
        except Exception as exc:  # the student's code may raise anything
            channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        channel.send({"done": listed}, data=b"".join(parts))
