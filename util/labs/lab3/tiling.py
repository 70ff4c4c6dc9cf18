"""Grader-side checks of Lab 3's ONNX models: their structure and their numbers.

These run in the grader's own process on the model files the student's kernel saved (see
``util/artifacts.py``), never in the kernel, so a notebook cannot talk its way past them. A model
is treated as untrusted input: one that cannot be parsed, checked, shape-inferred or run is a
*problem* reported in a sentence, never a grader crash.

Structure (:func:`structure_problems`):

* the ONNX checker passes and strict shape inference succeeds;
* the IR version is one the pinned onnxruntime loads (at most :data:`MAX_IR_VERSION`);
* only operators of the default domain from an allowed set (no ``Gemm``, no ``Conv`` or ``Einsum``
  doing the multiplication instead), ``Mul`` only to scale by one number (alpha or beta);
* every ``MatMul`` multiplies ``m x k`` by ``k x n`` with ``m, k, n`` within the bounds, taken from
  the last two dimensions of its inferred input shapes, so a batched MatMul is judged per batch slice.

Numbers (:func:`output_problems`): onnxruntime (no graph optimisation, one thread) on random inputs
the grader draws itself, compared with float64 numpy or with the untiled model.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import onnx

from util.contract import Tolerance

MAX_IR_VERSION = 13
"""Highest IR version onnxruntime 1.31 loads; onnx 1.23's ``make_model`` writes 14 unless told otherwise."""

MAX_TENSOR_ELEMENTS = 1 << 27
"""Largest tensor (by shape inference) a checked model may create: 512 MiB of float32. The grader runs
the model in its own process, so a model that would allocate tens of GB is refused before it runs;
AlexNet's largest (the transposed 9216 x 4096 weight) has 38 M elements."""

TILING_OPS = frozenset({"MatMul", "Split", "Slice", "Concat", "Sum", "Add", "ReduceSum", "Mul", "Transpose",
                        "Reshape", "Pad", "Unsqueeze", "Squeeze", "Expand", "Flatten", "Identity", "Constant"})
"""Operators a tiled Gemm may use: tiling, multiplying tiles, accumulating, reassembling, scaling."""


@dataclass(frozen=True)
class MatMulShape:
    """The matrix product one ``MatMul`` node computes (per batch slice)."""

    node: str
    """The node's name (or ``MatMul #i`` when it has none)."""
    m: int
    """Rows of the left operand (1 for a 1-D left operand)."""
    k: int
    """The shared dimension."""
    n: int
    """Columns of the right operand (1 for a 1-D right operand)."""
    batch: tuple[int, ...]
    """The broadcast batch dimensions (empty for a plain 2-D product)."""


def parse(data: bytes) -> tuple[onnx.ModelProto | None, list[str]]:
    """The model in ``data``, or ``None`` and why it is not one."""
    try:
        model = onnx.load_from_string(data)
    except Exception as exc:  # protobuf raises DecodeError and friends
        return None, [f"the saved file is not an ONNX model ({type(exc).__name__})"]
    if not model.graph.node:
        return None, ["the saved model has no nodes"]
    return model, []


def _shapes(model: onnx.ModelProto) -> dict[str, list[int | None]]:
    graph = model.graph
    shapes: dict[str, list[int | None]] = {}
    for value in [*graph.input, *graph.output, *graph.value_info]:
        tensor = value.type.tensor_type
        if tensor.HasField("shape"):
            shapes[value.name] = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
    for init in graph.initializer:
        shapes[init.name] = list(init.dims)
    return shapes


def infer(model: onnx.ModelProto) -> tuple[onnx.ModelProto | None, list[str]]:
    """``(checked and shape-inferred model, [])`` or ``(None, [what failed])``."""
    try:
        onnx.checker.check_model(model)
    except Exception as exc:
        return None, [f"onnx.checker rejects the model: {_first_line(exc)}"]
    try:
        return onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True), []
    except Exception as exc:
        return None, [f"shape inference fails on the model: {_first_line(exc)}"]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def matmul_shapes(model: onnx.ModelProto) -> tuple[list[MatMulShape], list[str]]:
    """Every MatMul's ``m x k x n`` from a shape-inferred ``model``, and the MatMuls whose shapes are unknown."""
    shapes = _shapes(model)
    found, unknown = [], []
    for index, node in enumerate(model.graph.node):
        if node.op_type != "MatMul":
            continue
        name = node.name or f"MatMul #{index}"
        a, b = (shapes.get(t) for t in node.input[:2])
        if not a or not b or None in a or None in b:
            unknown.append(name)
            continue
        a2, b2 = ([1, *a] if len(a) == 1 else a), (b + [1] if len(b) == 1 else b)
        batch = tuple(int(x) for x in np.broadcast_shapes(tuple(a2[:-2]), tuple(b2[:-2]))) if (
            len(a2) > 2 or len(b2) > 2) else ()
        found.append(MatMulShape(name, int(a2[-2]), int(a2[-1]), int(b2[-1]), batch))
    return found, unknown


def structure_problems(model: onnx.ModelProto, *, allowed_ops: frozenset[str] | set[str],
                       bounds: tuple[int, int, int] | None = None, max_nodes: int | None = None) -> list[str]:
    """What is wrong with the structure of ``model`` (empty when nothing is).

    ``bounds`` = ``(m_max, k_max, n_max)`` switches on the tiling rules (no Gemm, MatMuls within the
    bounds); ``max_nodes`` caps the node count (the efficient layout of task 3.6).
    """
    problems = []
    if model.ir_version > MAX_IR_VERSION:
        problems.append(f"the model has IR version {model.ir_version}, but onnxruntime 1.31 loads at most "
                        f"{MAX_IR_VERSION}: set model.ir_version = 8 after helper.make_model")
    foreign = sorted({f"{n.domain}::{n.op_type}" for n in model.graph.node if n.domain not in ("", "ai.onnx")})
    if foreign:
        problems.append(f"operators outside the default ONNX domain are not allowed: {', '.join(foreign)}")
    ops = {n.op_type for n in model.graph.node if n.domain in ("", "ai.onnx")}
    if bounds is not None and "Gemm" in ops:
        count = sum(n.op_type == "Gemm" for n in model.graph.node)
        problems.append(f"{count} Gemm node{'s are' if count > 1 else ' is'} left; every Gemm must be replaced")
    extra = sorted(ops - set(allowed_ops) - ({"Gemm"} if bounds is not None else set()))
    if extra:
        problems.append(f"operator{'s' if len(extra) > 1 else ''} {', '.join(extra)} not allowed here; "
                        f"allowed: {', '.join(sorted(allowed_ops))}")
    if max_nodes is not None and len(model.graph.node) > max_nodes:
        problems.append(f"the model has {len(model.graph.node):,} nodes; this layout may have at most {max_nodes:,}")
    inferred, failed = infer(model)
    if inferred is None:
        return problems + failed
    problems += _size_problems(inferred)
    if bounds is not None:
        problems += _bound_problems(inferred, bounds)
        problems += _mul_problems(inferred)
    return problems


def _size_problems(model: onnx.ModelProto) -> list[str]:
    for name, shape in _shapes(model).items():
        if None not in shape and math.prod(shape) > MAX_TENSOR_ELEMENTS:
            return [f"tensor {name!r} would hold {math.prod(shape):,} elements (shape {shape}); the grader runs "
                    f"models with at most {MAX_TENSOR_ELEMENTS:,} elements per tensor"]
    return []


def _bound_problems(model: onnx.ModelProto, bounds: tuple[int, int, int]) -> list[str]:
    found, unknown = matmul_shapes(model)
    problems = []
    if unknown:
        problems.append(f"shape inference cannot tell the input shapes of {len(unknown)} MatMul(s) (e.g. "
                        f"{unknown[0]!r}), so they cannot be shown to fit the bounds")
    over = [s for s in found if s.m > bounds[0] or s.k > bounds[1] or s.n > bounds[2]]
    if over:
        s = over[0]
        per = " per batch slice" if s.batch else ""
        problems.append(f"{len(over)} MatMul(s) exceed the bounds {'x'.join(map(str, bounds))} (m x k x n); "
                        f"e.g. {s.node!r} multiplies {s.m}x{s.k} by {s.k}x{s.n}{per}")
    if not found and not unknown:
        problems.append("the model has no MatMul: the tiles must be multiplied with MatMul")
    return problems


def _mul_problems(model: onnx.ModelProto) -> list[str]:
    shapes = _shapes(model)
    for index, node in enumerate(model.graph.node):
        if node.op_type == "Mul":
            sizes = [math.prod(shapes[t]) if t in shapes and None not in shapes[t] else None for t in node.input]
            if not any(size == 1 for size in sizes):
                return [f"Mul {node.name or f'#{index}'!r} multiplies two tensors elementwise; Mul may only "
                        "scale by a single number (alpha or beta), products belong in MatMul"]
    return []


def run_model(data: bytes, feeds: Mapping[str, np.ndarray]) -> tuple[dict[str, np.ndarray] | None, list[str]]:
    """Outputs of the model in ``data`` on ``feeds`` with onnxruntime (no optimisation, one thread), or
    ``None`` and why onnxruntime cannot run it."""
    from util.onnx_session import run

    try:
        return run(data, feeds), []
    except Exception as exc:
        return None, [f"onnxruntime cannot run the model: {_first_line(exc)}"]


def output_problems(actual: np.ndarray, expected: np.ndarray, tolerance: Tolerance, what: str) -> list[str]:
    """Whether ``actual`` matches ``expected`` within ``tolerance``; the worst element if not."""
    actual = np.asarray(actual)
    if actual.shape != expected.shape:
        return [f"{what} has shape {list(actual.shape)}, expected {list(expected.shape)}"]
    if actual.dtype != np.float32:
        return [f"{what} is {actual.dtype}, expected float32"]
    error = np.abs(actual.astype(np.float64) - expected)
    excess = error - (tolerance.atol + tolerance.rtol * np.abs(expected))
    if not np.isfinite(actual).all():
        return [f"{what} contains NaN or infinity"]
    if (excess > 0).any():
        where = np.unravel_index(int(np.argmax(excess)), excess.shape)
        count = int((excess > 0).sum())
        return [f"{what} differs on the grader's random inputs: {count:,} of {error.size:,} elements are off, "
                f"the worst by {float(error[where]):.3g} at index {list(map(int, where))} "
                f"(allowed: atol + rtol x |expected|, {tolerance.describe()})"]
    return []


def rng_for(spec: Mapping[str, Any]) -> np.random.Generator:
    """A generator seeded by the case's input: the same inputs on every run, never shown to students."""
    text = json.dumps(spec, sort_keys=True)
    return np.random.default_rng(int(hashlib.sha256(text.encode()).hexdigest()[:12], 16))


def io_problems(model: onnx.ModelProto, inputs: Mapping[str, list[int]], outputs: Mapping[str, list[int]]) -> list[str]:
    """Whether the graph's inputs and outputs have the expected names and float32 shapes."""
    problems = []
    inits = {init.name for init in model.graph.initializer}
    for kind, values, want in (("input", [v for v in model.graph.input if v.name not in inits], inputs),
                               ("output", list(model.graph.output), outputs)):
        have = {v.name: v for v in values}
        if sorted(have) != sorted(want):
            problems.append(f"the graph {kind}s are {sorted(have)}, expected {sorted(want)}")
            continue
        for name, shape in want.items():
            tensor = have[name].type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in tensor.shape.dim]
            if tensor.elem_type != onnx.TensorProto.FLOAT or dims != list(shape):
                dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type).name if tensor.elem_type else "?"
                problems.append(f"graph {kind} {name!r} is {dtype} {dims}, expected float32 {list(shape)}")
    return problems
