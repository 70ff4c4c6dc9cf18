"""The student's side of the grader's re-run of lab 11's measured profiles, in a student process.

A per-layer profile or an achieved GFLOP/s that a graded kernel reports could come from a recording (the lab
ships ResNet-18's traces; a hidden case hands the kernel MobileNetV2's) instead of a measurement. So the
grader's judge (``judge.py``) also runs the student's ``profile_layers`` and ``achieved_gflops`` (pickled by
value by the hidden cases) again, in a student process (:mod:`util.student_process`) running :func:`serve`,
on a CNN and a convolution it draws afresh for each grading (:func:`util.labs.lab11.machine.drawn_cnn`,
:func:`~util.labs.lab11.machine.drawn_conv`) and on the case's own model at an input side it draws: nothing
recorded before the grading can answer them. It then measures the same model itself, with the course's own
function in a second process served by this same harness, the two interleaved, and compares. This module is the course's code in that
process; everything it answers is untrusted data the judge checks.
"""
from __future__ import annotations

import math
import numbers
from typing import Any

from util.student_process import Channel, ChannelError

MAX_FUNCTION = 64 << 10
"""Bytes a pickled ``profile_layers`` or ``achieved_gflops`` may have (the solution's: about 3 KB)."""


def _seconds(value: Any) -> float:
    """A number the student's function returned, as a float (``nan`` when it is not one)."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return math.nan
    return float(value)


def _profile(function, request: dict) -> dict:
    from util.labs.lab11.machine import build, course_input, drawn_cnn

    if "model" in request:  # a course model at an input shape the judge drew
        model, shape = build(str(request["model"])).eval(), [int(d) for d in request["shape"]]
    else:
        model, shape = drawn_cnn(int(request["seed"]))
    found = function(model, course_input(shape), runs=int(request["runs"]))
    if not isinstance(found, dict):
        raise TypeError(f"profile_layers must return a dict {{layer name: seconds}}, not {type(found).__name__}")
    return {"names": [str(name) for name in found][:1000], "seconds": [_seconds(found[name]) for name in found][:1000]}


def _achieved(function, request: dict) -> dict:
    from util.labs.lab11.machine import cpu_timer, drawn_conv

    layer, sample = drawn_conv(int(request["seed"]))
    batches = tuple(int(b) for b in request["batches"])
    found = function(layer, sample, batches=batches, runs=int(request["runs"]), timer=cpu_timer)
    if not isinstance(found, dict):
        raise TypeError(f"achieved_gflops must return a dict {{batch: GFLOP/s}}, not {type(found).__name__}")
    return {"batches": [int(b) if isinstance(b, numbers.Integral) else -1 for b in found][:100],
            "gflops": [_seconds(value) for value in found.values()][:100]}


def serve(channel: Channel) -> None:
    """Answer requests until the socket closes, each in two messages: ``{"load": true}`` + the pickled function
    (``profile_layers`` or ``achieved_gflops``), loaded at once (bounded, :func:`util.judging.student_code.load`,
    before anything of the request is here) and answered ``{"loaded": true}``; then ``{"profile": {"seed", "runs"}}``
    (or ``{"profile": {"model", "shape", "runs"}}``: a course model at that input shape) or ``{"achieved": {"seed",
    "batches", "runs"}}``, answered ``{"names", "seconds"}`` or ``{"batches", "gflops"}``. Anything the student's code
    raises: ``{"raised": message}``. Warms PyTorch up first (one forward pass of a drawn CNN), with one thread."""
    import torch

    from util.judging import student_code
    from util.labs.lab11.machine import course_input, drawn_cnn, steady_heap

    steady_heap()
    torch.set_num_threads(1)
    with torch.no_grad():
        model, shape = drawn_cnn(0)
        model(course_input(shape))
    del model, shape
    while True:
        function = None
        try:
            header, data, _ = channel.receive()
            if header.get("load") is True:
                try:
                    function = student_code.load(data, limit=MAX_FUNCTION)
                    answer = {"loaded": True}
                except Exception as exc:  # the student's code may raise anything (unpickling it included)
                    answer = {"raised": f"{type(exc).__name__}: {exc}"[:300]}
            else:
                answer = {"raised": "the judge sent a request before the function it is for"}
            del header, data
            channel.send(answer)
            if function is None:
                continue
            header, _, _ = channel.receive()
        except ChannelError:
            return
        kind = "profile" if "profile" in header else "achieved" if "achieved" in header else None
        try:
            if kind is None or not isinstance(header[kind], dict):
                raise ValueError("the judge asked for nothing this harness does")
            torch.set_num_threads(1)
            answer = (_profile if kind == "profile" else _achieved)(function, header[kind])
        except Exception as exc:  # the student's code may raise anything
            answer = {"raised": f"{type(exc).__name__}: {exc}"[:300]}
        try:
            channel.send(answer)
        except ChannelError:
            return
