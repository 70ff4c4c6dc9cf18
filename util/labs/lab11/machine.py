"""What lab 11's notebook and hidden cases are given: the machine models, the course's timer, the scripted
workloads ``best_time`` is graded on, and the models the layers come from.

* :data:`GRADER_MACHINE`: the grader-supplied machine model (100 GFLOP/s, 40 GB/s, ridge 1.25 MAC/B) under
  which every intensity, bound and prediction is graded exactly; :data:`WIDE_BUS` and :data:`SLOW_CORE`,
  two more for the hidden cases of task 11.4.
* :func:`fixed_timer`: a timer whose answer is known, so a measurement's arithmetic (FLOPs, bytes, units)
  can be graded exactly.
* :func:`cpu_timer`: the course's timer, the best of ``runs`` calls on this thread's CPU clock. The grader
  passes it to ``measure_peak``, ``measure_bandwidth`` and ``achieved_gflops`` when it grades them (their
  ``timer`` argument), so what those cases grade is the work and the units, whatever moment they ran at.
* :class:`ScriptedWork`: a stand-in workload with a clock of its own, for which every call "takes" the next
  duration of a script. ``best_time`` on it has one right answer, whatever the machine does.
* :func:`build`, :func:`course_input`, :func:`mlp`, :func:`layer_of`: the models (built as ``util.models``
  builds them: seeded, eval mode, nothing downloaded) and inputs.

Nothing here imports torch at module level.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Sequence

GRADER_MACHINE = {"peak_gflops": 100.0, "bandwidth_gbs": 40.0}
"""The grader-supplied machine model: 100 GFLOP/s, 40 GB/s; ridge = 100 / (2 x 40) = 1.25 MAC/B."""
WIDE_BUS = {"peak_gflops": 100.0, "bandwidth_gbs": 4000.0}
"""A machine whose memory is so fast that every layer of the course's models is compute-bound."""
SLOW_CORE = {"peak_gflops": 8.0, "bandwidth_gbs": 25.0}
"""A small core with a comparatively wide bus: ridge 0.16 MAC/B."""
RESNET = "resnet18_bnstats"
"""ResNet-18 with 10 classes (``util.models``; its BatchNorm statistics do not matter here)."""
INPUT = (1, 3, 64, 64)
"""The notebook's input shape: one 64 x 64 RGB image."""
MLP_SIZES = (784, 256, 256, 10)
"""The course MLP of the hidden cases: Linear 784->256, ReLU, Linear 256->256, ReLU, Linear 256->10."""


def cpu_timer(fn: Callable[[], Any], runs: int = 10, warmup: int = 1, **_ignored: Any) -> float:
    """Seconds of the fastest of ``runs`` calls of ``fn()`` on this thread's CPU clock (``time.thread_time``),
    after ``warmup`` calls that are not timed. Other keyword arguments (a ``clock``) are ignored: this timer
    always uses the CPU clock, which counts only the time this thread ran, not the time other processes
    held the core. The grader times ``measure_peak``, ``measure_bandwidth`` and ``achieved_gflops`` with it."""
    for _ in range(int(warmup)):
        fn()
    best = float("inf")
    for _ in range(max(1, int(runs))):
        start = time.thread_time()
        fn()
        best = min(best, time.thread_time() - start)
    return best


def fixed_timer(seconds: float) -> Callable[..., float]:
    """A timer whose answer is known: it calls ``fn()`` once (so the work is really done) and always says it
    took ``seconds``. With it, ``measure_peak(n=512, timer=fixed_timer(1e-3))`` must be 2 x 512^3 FLOPs in
    1 ms: 268.435456 GFLOP/s, on any machine. The grader checks the arithmetic of a measurement this way."""
    def timer(fn: Callable[[], Any], runs: int = 10, warmup: int = 1, **_ignored: Any) -> float:
        fn()
        return float(seconds)

    return timer


class ScriptedWork:
    """A workload that runs on a clock of its own: each call "takes" the next duration of ``script_ns``
    (nanoseconds; the last one repeats once the script runs out), and :meth:`clock` reads the time.

    >>> work = ScriptedWork([50_000_000, 10_000_000])   # a cold first call of 50 ms, then 10 ms
    >>> best_time(work, runs=1, warmup=1, clock=work.clock)                  # doctest: +SKIP
    0.01
    """

    def __init__(self, script_ns: Sequence[int]) -> None:
        self.script = [int(d) for d in script_ns]
        self.now_ns = 0
        self.calls = 0

    def __call__(self) -> None:
        self.now_ns += self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1

    def clock(self) -> float:
        """The workload's time in seconds (as ``time.perf_counter`` would return it)."""
        return self.now_ns / 1e9


def mlp():
    """The course MLP (:data:`MLP_SIZES`), seeded, in eval mode."""
    import torch
    from torch import nn

    from util import SEED

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(MLP_SIZES, MLP_SIZES[1:])):
            layers += [nn.Linear(a, b)] + ([nn.ReLU()] if i < len(MLP_SIZES) - 2 else [])
        return nn.Sequential(*layers).eval()


def build(name: str):
    """A course model by name: ``"mlp"`` or any of ``util.models`` (``"resnet18_bnstats"``, ``"mobilenet_v2"``)."""
    if name == "mlp":
        return mlp()
    from util.models import build_model

    return build_model(name)


def course_input(shape: Sequence[int]):
    """A reproducible standard-normal input of ``shape`` (``util.models.example_input``)."""
    from util.models import example_input

    return example_input(tuple(int(d) for d in shape))


def layer_of(model_name: str, layer: str):
    """The module called ``layer`` (a dotted name, e.g. ``"layer4.1.conv1"``) of course model ``model_name``."""
    return build(model_name).get_submodule(layer)
