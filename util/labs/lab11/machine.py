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
* :func:`drawn_cnn` and :func:`drawn_conv`: a small CNN and one convolution made from a seed, which the
  grader draws afresh for each grading and runs the student's ``profile_layers`` and ``achieved_gflops`` on
  again, in a process of its own (``measure_harness``): no recording of another run can answer them.

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


STEADY_HEAP = 32 << 20
"""glibc's largest ``M_MMAP_THRESHOLD``: blocks up to 32 MiB come from the heap once :func:`steady_heap` ran."""


def steady_heap() -> bool:
    """Make this process's ``malloc`` keep what it frees (glibc: ``M_MMAP_THRESHOLD`` 32 MiB, ``M_TRIM_THRESHOLD``
    unlimited), so that a layer's output of a few MiB lands in memory already touched instead of pages the kernel
    must zero on every call. Left to glibc's own thresholds, which move with what the process allocated before, the
    same convolution timed in two processes differed by 1.6x (page faults on every call in one of them), more on
    a virtual machine, where a page fault costs more. The grader's measuring processes all call it before they
    time anything; ``False`` where the C library has no ``mallopt`` (not glibc)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(mallopt(m_mmap_threshold, STEADY_HEAP)) and bool(mallopt(m_trim_threshold, 2 ** 31 - 1))


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


def drawn_cnn(seed: int):
    """``(model, input shape)``: a CNN made from ``seed`` (the grader draws one for each grading of task 11.5).

    A stem convolution of stride 2, then 12 to 16 layers, each a convolution of a kind drawn from ``seed`` (3 x 3,
    1 x 1, 5 x 5, depthwise 3 x 3, grouped 3 x 3 or dilated 3 x 3; stride 1 or 2; channel counts that are not all
    multiples of 8) followed by a ReLU, then a global average pool and a ``Linear`` to 10 classes; the input is one
    RGB image of 48 to 72 pixels a side. Seeded weights, eval mode. PyTorch runs these kinds at very different
    speeds per multiply-add, so a layer's time is a measurement, not a count: its layers' times span two orders of
    magnitude in an order the seed decides."""
    import random

    import torch
    from torch import nn

    draw = random.Random(int(seed))
    size = side = draw.choice((48, 56, 64, 72))
    widths = (12, 20, 24, 32, 40, 48, 56, 72, 96, 112, 160)
    channels, kernel = draw.choice((12, 16, 24, 32)), draw.choice((3, 5, 7))
    layers: list[nn.Module] = [nn.Conv2d(3, channels, kernel, stride=2, padding=kernel // 2), nn.ReLU()]
    side = (side + 1) // 2
    for _ in range(draw.randint(12, 16)):
        kind = draw.choice(("3x3", "3x3", "1x1", "5x5", "depthwise", "grouped", "dilated"))
        stride = 2 if side >= 8 and kind != "dilated" and draw.random() < 0.3 else 1
        if kind == "depthwise":
            conv = nn.Conv2d(channels, channels, 3, stride=stride, padding=1, groups=channels, bias=False)
        elif kind == "grouped":
            groups = draw.choice((2, 4)) if channels % 4 == 0 else 2 if channels % 2 == 0 else 1
            conv = nn.Conv2d(channels, groups * max(1, draw.choice(widths) // groups), 3, stride=stride, padding=1,
                             groups=groups, bias=False)
        else:
            width = {"3x3": 3, "1x1": 1, "5x5": 5, "dilated": 3}[kind]
            dilation = 2 if kind == "dilated" else 1
            conv = nn.Conv2d(channels, draw.choice(widths), width, stride=stride, padding=dilation * (width // 2),
                             dilation=dilation, bias=False)
        layers += [conv, nn.ReLU()]
        channels, side = conv.out_channels, (side + stride - 1) // stride
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, 10)]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = nn.Sequential(*layers).eval()
    return model, (1, 3, size, size)


def drawn_conv(seed: int):
    """``(layer, sample shape)``: a convolution made from ``seed`` (the grader draws one for each grading of task
    11.6): a dense 3 x 3 or 1 x 1, a depthwise 3 x 3 or a grouped 3 x 3, 16 to 512 channels, on samples of 2 x 2 to
    16 x 16 pixels (at least a million multiply-adds a sample). Such layers achieve from about one to a hundred
    GFLOP/s, differently at each batch size, so no number measured on another layer answers them. Seeded weights,
    eval mode."""
    import random

    import torch
    from torch import nn

    draw = random.Random(int(seed))
    while True:
        kind = draw.choice(("3x3", "3x3", "1x1", "depthwise", "grouped"))
        channels, side = draw.choice((16, 24, 48, 64, 96, 160, 256, 384, 512)), draw.choice((2, 3, 4, 6, 8, 12, 16))
        out = channels if kind == "depthwise" else draw.choice((16, 32, 64, 96, 192, 256, 512))
        groups = {"depthwise": channels, "grouped": 4 if channels % 4 == 0 and out % 4 == 0 else 1}.get(kind, 1)
        width = 1 if kind == "1x1" else 3
        if out * side * side * (channels // groups) * width * width >= 1_000_000:
            break
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        layer = nn.Conv2d(channels, out, width, padding=width // 2, groups=groups, bias=False).eval()
    return layer, (channels, side, side)
