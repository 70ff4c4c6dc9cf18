"""The grader's hold on a backward pass: what makes overlap (task 13.8) observable from outside the student's code.

An overlapping data-parallel step all-reduces a bucket of gradients while the backward pass goes on computing
the earlier layers' gradients. The grader does not ask the student's code when its all-reduces ran (a time it
reports proves nothing). It builds the model itself, with a :class:`Hold` between the first ``Linear`` and what
follows it, and the hold's backward (which autograd runs after every later layer's gradients, before the first
layer's) **waits until the rank has received, on its own connections to the other ranks, the bytes of the
buckets that closed before the first layer**: counted by the kernel (``tcpi_bytes_received`` of the process
group's TCP sockets, :mod:`util.labs.lab13.wire`), which nothing in the rank can raise but bytes that really
arrive. So:

* a step that starts each bucket's all-reduce as the bucket fills (an ``async_op=True`` call from a
  post-accumulate-gradient hook) lets the bytes arrive while the hold waits, and the backward finishes;
* a step that all-reduces after ``backward()`` returns can never send them: ``backward()`` cannot return while
  the hold waits, and after :data:`SECONDS` the hold raises :class:`Held`, which names what it waited for.

The bytes it waits for, ``(p - 1) / p`` of those buckets' bytes, are computed by the grader's judge from the stated
bucket rule and passed in as a number (this module knows no rule): less than any all-reduce delivers (a rank must
learn, for each of a bucket's elements, the sum of the other ranks' values; a ring moves twice that, plus gloo's
framing). Extra traffic before the first layer (a dummy all-reduce) would open the hold, and the held run's bytes
on the wire, compared with the stated step's, catch it.
"""
from __future__ import annotations

import time

SECONDS = 5.0
"""How long the hold waits for the first buckets' bytes before it gives up (a correct overlapping step waits
milliseconds: the other ranks' time to reach their own first buckets)."""


class Held(RuntimeError):
    """The hold waited :data:`SECONDS` and the bytes of the first buckets never arrived."""


def received_now(sockets=None) -> int:
    """Bytes this rank has received so far on its connections to the other ranks (the kernel's counts), on
    ``sockets`` (from :func:`util.labs.lab13.wire.connected_sockets`) or on those it holds now."""
    from util.labs.lab13 import wire

    if sockets is not None:
        return sum(wire.received(sock) for sock in sockets)
    found = wire.connected_sockets()
    try:
        return sum(wire.received(sock) for sock in found)
    finally:
        for sock in found:
            sock.close()


def make_hold(floor: int, what: str):
    """A ``torch.nn.Module`` that is the identity forward and whose backward waits until this rank has received
    ``floor`` more bytes than when the module was made (see the module's docstring); ``what`` says in
    :class:`Held`'s message which buckets it waited for."""
    import torch

    from util.labs.lab13 import wire

    sockets = wire.connected_sockets()  # the group's connections, found once (a rank opens no socket later)
    start = received_now(sockets)
    state = {"passed": False}

    class _Wait(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            deadline = time.monotonic() + SECONDS
            got = received_now(sockets) - start
            while got < floor:
                if time.monotonic() > deadline:
                    raise Held(f"the grader held the backward pass of the first layer until the bytes of {what} "
                               f"had arrived on this rank's connections (at least {floor:,} bytes): after "
                               f"{SECONDS:g} s, {got:,} had. Start each bucket's all-reduce as soon as its last "
                               "gradient is ready (dist.all_reduce(..., async_op=True) from a "
                               "post-accumulate-gradient hook) and wait for them after backward(), before the step")
                time.sleep(0.001)
                got = received_now(sockets) - start
            state["passed"] = True
            return grad

    class Hold(torch.nn.Module):
        """The grader's hold (``util.labs.lab13.hold``): the identity forward; its backward waits for the bytes
        of the buckets that closed before the first layer. It has no parameters."""

        def forward(self, x):
            return _Wait.apply(x)

        @property
        def passed(self) -> bool:
            """Whether a backward pass has gone through the hold (the grader checks it after your function)."""
            return state["passed"]

    return Hold()


def held_model(model, floor_bytes: int):
    """``model`` (the course's MLP, :func:`util.labs.lab13.nets.build_mlp`) with a hold after its first Linear that
    waits until this rank has received ``floor_bytes`` more bytes on its connections than when it was made: the
    grader passes ``(world - 1) // world`` of the bytes of every bucket that closes, by 13.3's rule, before the
    first layer's gradients are ready (``(world - 1) * bytes // world``). The same parameters, in the same order;
    ``model`` itself when ``floor_bytes`` is 0 (nothing to wait for)."""
    import torch

    if floor_bytes <= 0:
        return model
    what = "the buckets that close before the first layer's gradients"
    return torch.nn.Sequential(model[0], make_hold(int(floor_bytes), what), *list(model)[1:]).train()
