"""The grader's own measurements for lab 11's measured cases, taken in the judge process (grader-only).

A measured case never compares a student's number with a number from the reference file: the judge
measures the same quantity itself, here, in its own process, pinned to one CPU with one torch thread,
and :mod:`util.labs.lab11.judge` compares. Every measurement is a best of several runs (noise only ever
adds time), and compute and copy timings use the CPU clock of this thread (``machine.cpu_timer``), which
the other processes of a shared machine do not advance; per-layer profiles use ``torch.profiler``'s own
(wall) clock, as the student's do, with the minimum over runs per layer. The one exception is the convolution a
grading draws for task 11.6: it is measured with :func:`reference_gflops` in a process started as the student's
is (:func:`util.labs.lab11.judge._reference_achieved`), so both measurements share their surroundings. Each result is cached for the
life of the judge process, so two cases that need the same measurement share it; ``fresh=True`` measures
again (the judge does before it fails a case).

This module is also the recorder of the traces the lab ships (:func:`record_traces`; run once by a
maintainer, ``python -m util.labs.lab11.judge_measure DIR``): the recorded files come from this code.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

from util.labs.lab11.machine import build, course_input, cpu_timer

_cache: dict[tuple, Any] = {}


def pin() -> int:
    """Pin this process to one CPU (the highest-numbered it may use), torch to one thread and ``malloc`` to a
    steady heap (:func:`util.labs.lab11.machine.steady_heap`); return the CPU."""
    import torch

    from util.labs.lab11.machine import steady_heap

    steady_heap()
    allowed = os.sched_getaffinity(0)
    cpu = max(allowed)
    if allowed != {cpu}:
        os.sched_setaffinity(0, {cpu})
    torch.set_num_threads(1)
    return cpu


def _cached(key: tuple, fresh: bool, measure):
    if fresh or key not in _cache:
        pin()
        _cache[key] = measure()
    return _cache[key]


def peak(n: int, runs: int = 10, *, fresh: bool = False) -> float:
    """GFLOP/s of an ``n x n`` float32 ``torch.mm`` (2 n^3 FLOPs), best of ``runs`` on the CPU clock."""
    def measure() -> float:
        import torch

        a, b = torch.randn(n, n), torch.randn(n, n)
        return 2 * n ** 3 / cpu_timer(lambda: torch.mm(a, b), runs=runs) / 1e9

    return _cached(("peak", n, runs), fresh, measure)


def bandwidth(mib: int, runs: int = 10, *, fresh: bool = False) -> float:
    """GB/s of ``Tensor.copy_`` between two float32 buffers of ``mib`` MiB (read + write counted), best of
    ``runs`` on the CPU clock."""
    def measure() -> float:
        import torch

        source = torch.ones(mib * 2 ** 20 // 4)
        target = torch.zeros_like(source)
        return 2 * mib * 2 ** 20 / cpu_timer(lambda: target.copy_(source), runs=runs) / 1e9

    return _cached(("bandwidth", mib, runs), fresh, measure)


def profile(model_name: str, shape: Sequence[int], runs: int = 10, *, fresh: bool = False) -> dict[str, float]:
    """``{layer: seconds}``: the fastest call of each ``nn.Conv2d`` / ``nn.Linear`` over ``runs`` profiled
    forward passes (after one that is not profiled), as ``torch.profiler`` times the ``layer:<name>`` events
    (:func:`util.labs.lab11.traces.annotate_layers`)."""
    def measure() -> dict[str, float]:
        return _layer_bests(_profiled(model_name, shape, runs))

    return _cached(("profile", model_name, tuple(shape), runs), fresh, measure)


def drawn_profile(seed: int, runs: int = 10, *, fresh: bool = False) -> dict[str, float]:
    """:func:`profile` of the CNN :func:`util.labs.lab11.machine.drawn_cnn` makes from ``seed``, on its input."""
    def measure() -> dict[str, float]:
        from util.labs.lab11.machine import drawn_cnn

        model, shape = drawn_cnn(seed)
        return _layer_bests(_profiled(model, shape, runs))

    return _cached(("drawn_profile", int(seed), runs), fresh, measure)


def _layer_bests(prof) -> dict[str, float]:
    """``{layer: seconds of its fastest call}`` from the ``layer:<name>`` events of a profile."""
    from util.labs.lab11.traces import LAYER_PREFIX

    best: dict[str, float] = {}
    for event in prof.events():
        if event.name.startswith(LAYER_PREFIX):
            name = event.name[len(LAYER_PREFIX):]
            best[name] = min(best.get(name, float("inf")), event.time_range.elapsed_us() / 1e6)
    return best


def _profiled(model_name, shape: Sequence[int], runs: int):
    """The ``torch.profiler.profile`` of ``runs`` annotated forward passes of a course model (by name) or of
    ``model_name`` itself (a module)."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from util.labs.lab11.traces import annotate_layers

    model = build(model_name) if isinstance(model_name, str) else model_name
    x = course_input(shape)
    with torch.no_grad(), annotate_layers(model):
        model(x)
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(runs):
                model(x)
    return prof


def achieved(model_name: str, layer: str, sample: Sequence[int], batches: Sequence[int], runs: int = 10, *,
             fresh: bool = False) -> dict[int, float]:
    """``{batch: GFLOP/s}`` of one layer of a course model on a ``batch x sample`` input: 2 x its MACs over
    the best of ``runs`` calls on the CPU clock."""
    def measure() -> dict[int, float]:
        return _achieved_by(build(model_name).get_submodule(layer), sample, batches, runs)

    return _cached(("achieved", model_name, layer, tuple(sample), tuple(batches), runs), fresh, measure)


def drawn_achieved(seed: int, batches: Sequence[int], runs: int = 10, *, fresh: bool = False) -> dict[int, float]:
    """:func:`achieved` of the convolution :func:`util.labs.lab11.machine.drawn_conv` makes from ``seed``."""
    def measure() -> dict[int, float]:
        from util.labs.lab11.machine import drawn_conv

        module, sample = drawn_conv(seed)
        return _achieved_by(module, sample, batches, runs)

    return _cached(("drawn_achieved", int(seed), tuple(batches), runs), fresh, measure)


def _achieved_by(module, sample: Sequence[int], batches: Sequence[int], runs: int) -> dict[int, float]:
    return reference_gflops(module, sample, batches, runs, cpu_timer)


def reference_gflops(layer, sample_shape, batches=(1, 8, 32), runs=10, timer=None) -> dict[int, float]:
    """The course's own ``achieved_gflops`` (the signature task 11.6 asks for): 2 x the MACs of the whole batch
    over ``timer``'s best of ``runs`` calls, at each batch. The judge runs it in a process started as the
    student's is (:func:`util.labs.lab11.judge._reference_achieved`), pickled by value."""
    import torch

    out = {}
    with torch.no_grad():
        for batch in batches:
            x = torch.randn(int(batch), *sample_shape)
            macs = _macs(layer, x)
            out[int(batch)] = 2 * macs / timer(lambda x=x: layer(x), runs=runs) / 1e9
    return out


def reference_profile(model, x, runs=10) -> dict[str, float]:
    """The course's own ``profile_layers`` (the signature task 11.5 asks for): each ``nn.Conv2d`` / ``nn.Linear``'s
    fastest call over ``runs`` profiled forward passes after one that is not, as ``torch.profiler`` times the
    ``layer:<name>`` events. The judge runs it in a process started as the student's is
    (:func:`util.labs.lab11.judge._reference_profile`), pickled by value, interleaved with the student's."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from util.labs.lab11.traces import LAYER_PREFIX, annotate_layers

    with torch.no_grad(), annotate_layers(model):
        model(x)
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(int(runs)):
                model(x)
    best: dict[str, float] = {}
    for event in prof.events():
        if event.name.startswith(LAYER_PREFIX):
            name = event.name[len(LAYER_PREFIX):]
            best[name] = min(best.get(name, float("inf")), event.time_range.elapsed_us() / 1e6)
    return best


def _macs(module, x) -> int:
    """MACs of one call of a ``Conv2d`` or ``Linear`` on ``x`` (lab 1's convention)."""
    import math

    from torch import nn

    out = module(x)
    if isinstance(module, nn.Conv2d):
        return out.numel() * (module.in_channels // module.groups) * math.prod(module.kernel_size)
    return out.numel() * module.in_features


def record_traces(folder: str | os.PathLike, runs: int = 5) -> list[str]:
    """Record the traces the lab ships (``util/labs/lab11/traces``, and ``cases_data`` for the hidden cases' MobileNetV2
    ones) into ``folder``: for ResNet-18 and MobileNetV2 at 1x3x64x64, a ``torch.profiler`` Chrome trace (one warm-up, ``runs`` profiled runs, layers
    annotated) and an onnxruntime profile at the EXTENDED level (one warm-up, ``runs`` runs, all in the
    profile), each gzipped. Returns the files written."""
    import tempfile
    from pathlib import Path

    import numpy as np

    from util.labs.lab11.traces import HIDDEN_TRACES, TRACES
    from util.onnx_models import export_torchvision
    from util.onnx_session import session as onnx_session

    pin()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written, names = [], {**TRACES, **HIDDEN_TRACES}
    with tempfile.TemporaryDirectory() as tmp:
        for short, model_name in (("resnet18", "resnet18_bnstats"), ("mobilenet_v2", "mobilenet_v2")):
            raw = Path(tmp) / f"{short}.json"
            _profiled(model_name, (1, 3, 64, 64), runs).export_chrome_trace(str(raw))
            written.append(_gzip(raw, folder / names[f"{short}_torch"]))
            model = export_torchvision(model_name, input_shape=(1, 3, 64, 64), fold_batchnorm=True)
            session = onnx_session(model, "extended", profile_prefix=Path(tmp) / short)
            x = course_input((1, 3, 64, 64)).numpy().astype(np.float32)
            for _ in range(runs + 1):
                session.run(None, {"input": x})
            written.append(_gzip(Path(session.end_profiling()), folder / names[f"{short}_ort"]))
    return written


def _gzip(source, target) -> str:
    """Write ``source`` (a JSON file) to ``target`` gzipped, compact and reproducible (no time stamp in the header)."""
    import gzip
    import json

    with open(source, encoding="utf-8") as handle:
        data = json.load(handle)
    text = json.dumps(data, separators=(",", ":")).encode()
    with open(target, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as handle:
        handle.write(text)
    return str(target)


if __name__ == "__main__":
    import sys

    for path in record_traces(sys.argv[1] if len(sys.argv) > 1 else "traces"):
        print(path)
