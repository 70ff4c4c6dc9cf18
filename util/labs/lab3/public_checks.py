"""Lab 3's public checks (``util.check("3.2")``): what the notebook states, on inputs it shows or small
hand-made ones, never a hidden case's. ``CHECKS[task id]`` is attached to each task's ``checks=`` in
``tasks.py``.

The function checks build a model with the student's function, run it with onnxruntime against
float64 numpy, and read every MatMul's (m, k, n) from ONNX shape inference (for a batched MatMul,
the last two dimensions: the bounds hold per batch slice).
"""
from __future__ import annotations

from typing import Any

from util.checks import equal, first, has_keys
from util.contract import Check

SUMMARY_KEYS = ("gemms", "inputs", "ir_version_ok", "matmuls", "max_matmul", "outputs", "valid")
TOLERANCE = 1e-5
"""Tiled float32 results against float64 numpy: float32 rounding is about 1e-6 on these sizes."""


def _gemm_feeds(m: int, k: int, n: int, *, trans_a: bool = False, trans_b: bool = False, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    return {"A": rng.uniform(-1, 1, (k, m) if trans_a else (m, k)).astype(np.float32),
            "B": rng.uniform(-1, 1, (n, k) if trans_b else (k, n)).astype(np.float32),
            "C": rng.uniform(-1, 1, (n,)).astype(np.float32)}


def _numpy_gemm(feeds, *, trans_a=False, trans_b=False, alpha=1.0, beta=1.0):
    a, b = feeds["A"].astype("float64"), feeds["B"].astype("float64")
    return alpha * (a.T if trans_a else a) @ (b.T if trans_b else b) + beta * feeds["C"].astype("float64")


def _run(model, feeds):
    """The model's first output, at onnxruntime's default optimisation level ("all")."""
    from util.onnx_session import run

    return next(iter(run(model, feeds, "all").values()))


def _matmuls(model) -> list[tuple[int, int, int]]:
    """(m, k, n) of every MatMul, from shape inference (the last two dimensions of each operand)."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in [*graph.input, *graph.output, *graph.value_info]}
    shapes.update({init.name: list(init.dims) for init in graph.initializer})
    out = []
    for node in graph.node:
        if node.op_type == "MatMul":
            a, b = shapes.get(node.input[0], []), shapes.get(node.input[1], [])
            if len(a) < 2 or len(b) < 2:
                raise ValueError(f"MatMul {node.name or node.output[0]}: shape inference cannot tell its operand "
                                 "shapes; give every tensor a static shape")
            out.append((a[-2], a[-1], b[-1]))
    return out


def _structure(model, bounds, what: str) -> str | None:
    """No Gemm left, at least one MatMul, every MatMul within ``bounds``."""
    ops = [node.op_type for node in model.graph.node]
    if "Gemm" in ops:
        return f"{what} still has {ops.count('Gemm')} Gemm node(s)"
    shapes = _matmuls(model)
    if not shapes:
        return f"{what} has no MatMul"
    over = [s for s in shapes if any(x > bound for x, bound in zip(s, bounds))]
    return f"{what}: MatMul (m, k, n) {list(over[0])} exceeds the bounds {list(bounds)}" if over else None


def _close(found, expected, what: str) -> str | None:
    import numpy as np

    if found.shape != expected.shape:
        return f"{what} has shape {list(found.shape)}; expected {list(expected.shape)}"
    worst = float(np.abs(found.astype("float64") - expected).max())
    return None if worst <= TOLERANCE else f"{what} differs from numpy by up to {worst:.2g} (allowed {TOLERANCE:g})"


def _one_gemm_model():
    """x (3 x 10) -> Gemm with an initializer weight W (6 x 10, transB) and bias b (6): a tiny linear layer."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from util.onnx_models import make_model

    rng = np.random.default_rng(7)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W", "b"], ["y"], name="fc", transB=1, alpha=1.0, beta=1.0)], "one_gemm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 6])],
        [numpy_helper.from_array(rng.uniform(-1, 1, (6, 10)).astype(np.float32), "W"),
         numpy_helper.from_array(rng.uniform(-1, 1, (6,)).astype(np.float32), "b")])
    return onnx.shape_inference.infer_shapes(make_model(graph))


def _chain():
    from util.labs.lab3.graphs import gemm_chain_graph

    return gemm_chain_graph()


def _x():
    import numpy as np

    return {"x": np.random.default_rng(8).standard_normal((3, 10)).astype(np.float32)}


def _replaced(fn, bounds, max_extra_nodes: int | None = None) -> str | None:
    original = _one_gemm_model()
    rewritten = fn(original, bounds)
    extra = len(rewritten.graph.node) - len(original.graph.node)
    return first(_structure(rewritten, bounds, "the rewritten model"),
                 None if max_extra_nodes is None or extra <= max_extra_nodes else
                 f"one Gemm became {extra + 1} nodes; at most {max_extra_nodes + 1} allowed",
                 _close(_run(rewritten, _x()), _run(original, _x()).astype("float64"), "the output"))


def _gemm_check(fn) -> str | None:
    feeds = _gemm_feeds(4, 3, 2, trans_a=True, seed=1)
    model = fn(4, 3, 2, trans_a=True, alpha=0.5, beta=2.0)
    ops = [node.op_type for node in model.graph.node]
    return first(equal(ops, ["Gemm"], "the nodes"),
                 _close(_run(model, feeds), _numpy_gemm(feeds, trans_a=True, alpha=0.5, beta=2.0), "Y"))


def _tiled_check(fn) -> str | None:
    feeds = _gemm_feeds(5, 7, 3, trans_b=True, seed=2)
    model = fn(5, 7, 3, (2, 3, 2), trans_b=True, alpha=-1.0, beta=0.5)
    return first(_structure(model, (2, 3, 2), "the model"),
                 equal(len(_matmuls(model)), 18, "the number of MatMuls"),
                 _close(_run(model, feeds), _numpy_gemm(feeds, trans_b=True, alpha=-1.0, beta=0.5), "Y"))


def _equivalence_check(fn) -> str | None:
    import numpy as np
    from onnx import numpy_helper

    original = _one_gemm_model()
    same = fn(original, original, _x(), rtol=1e-4, atol=1e-4)
    shifted = _one_gemm_model()
    bias = numpy_helper.to_array(shifted.graph.initializer[1]).copy()
    bias[2] += 0.5                                                   # one output column moves by exactly 0.5
    shifted.graph.initializer[1].CopyFrom(numpy_helper.from_array(bias.astype(np.float32), "b"))
    moved = fn(original, shifted, _x(), rtol=1e-4, atol=1e-4)
    return first(equal(same, {"max_abs_diff": 0.0, "agree": True}, "a model against itself"),
                 equal(moved["agree"], False, "agree, with one bias element moved by 0.5"),
                 None if abs(moved["max_abs_diff"] - 0.5) < 1e-6 else
                 f"max_abs_diff is {moved['max_abs_diff']:g} with one bias element moved by 0.5; expected 0.5")


def _summary(bounds: tuple[int, int, int] | None, gemms: int, matmuls: int | None = None):
    def test(answer: Any) -> str | None:
        return first(has_keys(answer, SUMMARY_KEYS, "summarize(...)"),
                     equal(answer["valid"] and answer["ir_version_ok"], True, "valid and ir_version_ok"),
                     equal(answer["gemms"], gemms, "gemms"),
                     None if matmuls is None else equal(answer["matmuls"], matmuls, "matmuls"),
                     None if bounds is None or all(x <= b for x, b in zip(answer["max_matmul"], bounds)) else
                     f"max_matmul {answer['max_matmul']} exceeds the bounds {list(bounds)}")
    return test


CHECKS: dict[str, tuple[Check, ...]] = {
    "3.1": (
        Check("one Gemm, no MatMul, a valid model", _summary(None, gemms=1, matmuls=0),
              "one Gemm node; set ir_version to 8 (onnx 1.23 writes a version onnxruntime refuses)"),
        Check("gemm_model(4, 3, 2, trans_a=True, alpha=0.5, beta=2.0) computes alpha * A.T @ B + beta * C",
              _gemm_check, "pass alpha, beta, transA and transB as the Gemm's attributes; A is K x M when "
              "transposed", calls_function=True),
    ),
    "3.2": (
        Check("no Gemm; 2 x 2 x 4 = 16 MatMuls, each within (16, 32, 32)", _summary((16, 32, 32), gemms=0, matmuls=16),
              "32/16 row tiles x 64/32 inner tiles x 128/32 column tiles"),
        Check("tiled_gemm_model(5, 7, 3, (2, 3, 2), trans_b=True, alpha=-1.0, beta=0.5): 18 MatMuls within "
              "the bounds, the Gemm's result", _tiled_check,
              "3 x 3 x 2 tiles, the last ones partial (5 = 2 + 2 + 1); sum over K before concatenating",
              calls_function=True),
    ),
    "3.3": (
        Check("AlexNet: no Gemm left, every MatMul within (64, 64, 64), a valid model",
              _summary((64, 64, 64), gemms=0), "replace every Gemm, keep the other nodes in order"),
        Check("replace_gemms on a one-Gemm model (a 3 x 10 input, W 6 x 10 transposed) with bounds (2, 4, 4)",
              lambda fn: _replaced(fn, (2, 4, 4)),
              "read M, K, N from the shapes of the Gemm's inputs; the result must equal the original", calls_function=True),
    ),
    "3.4": (
        Check("max_abs_diff is a float >= 0 and agree a bool",
              lambda a: None if isinstance(a["agree"], bool) and isinstance(a["max_abs_diff"], float)
              and a["max_abs_diff"] >= 0 else f"found {a!r}", "return float(...) and bool(...)"),
        Check("equivalence_report: a model against itself agrees exactly; one bias element moved by 0.5 does not",
              _equivalence_check, "compare every output with np.allclose(rtol, atol); report the largest "
              "absolute difference", calls_function=True),
    ),
    "3.5": (
        Check("the saved file holds the whole chain and netron served it",
              lambda a: first(equal(a["saved_nodes"], len(_chain().graph.node), "saved_nodes"),
                              equal(a["serving"], True, "serving")),
              "save with onnx.save into output_dir('lab3'), then return show(path)"),
    ),
    "3.6": (
        Check("AlexNet's three Gemms replaced, within the bounds, at most 16 nodes each",
              lambda a: equal(a, {"gemms": 0, "within_bounds": True, "nodes_per_gemm_at_most_16": True}, "the answer"),
              "pre-tile the weight into one initializer and use one batched MatMul per Gemm"),
        Check("replace_gemms_batched on a one-Gemm model with bounds (2, 4, 4): few nodes, within the bounds, "
              "the same output", lambda fn: _replaced(fn, (2, 4, 4), max_extra_nodes=15),
              "the bounds hold per batch slice of the MatMul: its last two dimensions", calls_function=True),
    ),
}
