"""Running an executor inside a memory plan, exactly as the grader's hidden cases do.

:func:`run_in_plan` gives your ``execute`` (task 8.3) a graph, its inputs, the course's shapes and
plan, a pool of buffers filled with NaN bytes (so a value that was never written shows), and the
weights already loaded. It measures what ``execute`` allocates with ``tracemalloc`` and records,
for every tensor, where ``env[tensor]`` starts inside its buffer. The notebook's checks read the
:class:`PlanRun`; the grader reads the same record from a file and decides.
"""
from __future__ import annotations

import _tracemalloc
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np
import onnx
from onnx import numpy_helper

from util.labs.lab8.plans import course_plan, course_shapes

_TRACING, _START, _STOP = _tracemalloc.is_tracing, _tracemalloc.start, _tracemalloc.stop
_RESET, _TRACED = _tracemalloc.reset_peak, _tracemalloc.get_traced_memory
POISON = 0xFF
"""Every byte of a fresh pool: four of them are a float32 NaN."""


def make_pool(plan: Mapping[str, Any]) -> list[np.ndarray]:
    """One ``uint8`` array per buffer of ``plan``, every byte :data:`POISON`."""
    return [np.full(int(size), POISON, dtype=np.uint8) for size in plan["buffer_bytes"]]


def load_weights(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """Every initializer of ``model`` as a numpy array (loaded once, before anything is timed or traced)."""
    return {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}


def offset_in(array: Any, buffer: np.ndarray) -> int:
    """Byte offset of ``array``'s first element inside ``buffer``; -1 when it does not lie inside it."""
    if not isinstance(array, np.ndarray):
        return -1
    start = array.__array_interface__["data"][0] - buffer.__array_interface__["data"][0]
    return start if 0 <= start and start + array.nbytes <= buffer.nbytes else -1


@dataclass(frozen=True)
class PlanRun:
    """What one run of an executor inside the course's plan produced."""

    outputs: dict[str, np.ndarray]
    """Graph output name -> the array ``execute`` returned for it."""
    env: dict[str, Any]
    """Tensor name -> what ``execute`` returned for it."""
    plan: dict[str, Any]
    """The course's plan the run used."""
    pool: list[np.ndarray]
    """The buffers after the run."""
    offsets: dict[str, int]
    """Node output -> byte offset of ``env[tensor]`` in its buffer (-1: not inside it)."""
    peak_bytes: int
    """Most bytes ``execute`` held allocated at once besides the pool (``tracemalloc``)."""


def run_in_plan(execute: Callable, model: onnx.ModelProto, feeds: Mapping[str, np.ndarray],
                matmul: Callable = np.matmul) -> PlanRun:
    """Call ``execute(model, weights, feeds, shapes, plan, pool, matmul)`` inside the course's plan."""
    shapes = course_shapes(model, {name: list(value.shape) for name, value in feeds.items()})
    plan = course_plan(model, shapes)
    pool, weights = make_pool(plan), load_weights(model)
    started = not _TRACING()
    if started:
        _START()
    try:
        _RESET()
        before = _TRACED()[0]
        outputs, env = execute(model, weights, dict(feeds), shapes, plan, pool, matmul)
        peak = _TRACED()[1] - before
    finally:
        if started:
            _STOP()
    order = [name for node in model.graph.node for name in node.output]
    env = dict(env)
    offsets = {name: offset_in(env.get(name), pool[plan["assign"][name]]) for name in order}
    return PlanRun(dict(outputs), env, plan, pool, offsets, int(peak))


def run_arrays(run: PlanRun) -> dict[str, np.ndarray]:
    """The arrays the grader receives from a run: outputs, buffers, offsets (node order) and the peak."""
    arrays = {f"output/{name}": np.asarray(value, dtype=np.float64) for name, value in run.outputs.items()}
    arrays.update({f"pool/{index}": buffer for index, buffer in enumerate(run.pool)})
    arrays["offsets"] = np.array(list(run.offsets.values()), dtype=np.int64)
    arrays["peak"] = np.array(run.peak_bytes, dtype=np.int64)
    return arrays


def first_row(values: Any) -> list:
    """The first row of an output as floats rounded to 7 decimals (NaN or infinity become None)."""
    row = np.asarray(values, dtype=np.float64).reshape(len(values), -1)[0]
    return [round(float(v), 7) if np.isfinite(v) else None for v in row]


def execution_report(run: PlanRun, output: str = "y", peak_bound: int | None = None) -> dict[str, Any]:
    """Task 8.3's answer: the output's first row, how many tensors sit at the start of their buffer,
    and whether ``execute`` allocated at most ``peak_bound`` bytes besides the pool (default: the
    grader's bound, ``verify.PEAK_BYTES``)."""
    from util.labs.lab8.verify import PEAK_BYTES

    peak_bound = PEAK_BYTES if peak_bound is None else peak_bound
    return {"y_first_row": first_row(run.outputs[output]),
            "tensors_in_place": sum(offset == 0 for offset in run.offsets.values()),
            "peak_within_bound": run.peak_bytes <= peak_bound}


def end_to_end_report(original: onnx.ModelProto, transposed: onnx.ModelProto,
                      outputs: Mapping[str, Any], output: str = "y") -> dict[str, Any]:
    """Task 8.5's answer: how many Gemms had ``transB=1`` before and not after, how many still have
    it, and the output's first row."""
    def trans_b(model: onnx.ModelProto) -> dict[str, int]:
        return {node.name or node.output[0]: next((a.i for a in node.attribute if a.name == "transB"), 0)
                for node in model.graph.node if node.op_type == "Gemm"}

    before, after = trans_b(original), trans_b(transposed)
    return {"gemms_transposed": sum(before[name] == 1 and after.get(name) == 0 for name in before),
            "transB_left": sum(after.values()), "y_first_row": first_row(outputs[output])}
