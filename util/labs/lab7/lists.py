"""The op lists that decide which nodes of a graph run in float16 (MXNet AMP's lists, for ONNX).

A lists dict has five keys (every one must be present; an empty list is fine):

* ``"target"``: ops that run in float16 (MXNet's ``target_dtype_ops``);
* ``"fp32"``: ops that stay float32 (``fp32_ops``);
* ``"widest"``: ops that run in float16 only when all their activation inputs are float16
  (``widest_dtype_ops``);
* ``"follow"``: ops that take the precision of their activation inputs, with the same rule as widest;
* ``"conditional"``: ``[op, attribute, values]`` triples: the op stays float32 when its attribute's
  value (or the attribute's ONNX default when the node leaves it out) is one of ``values``; otherwise
  it follows its inputs (``conditional_fp32_ops``).

Anything in no list stays float32: a converter must not guess about an op it does not know.
"""
from __future__ import annotations

from typing import Any, Mapping

DEFAULT_LISTS: dict[str, list] = {
    "target": ["Conv", "ConvTranspose", "Gemm", "MatMul"],
    "fp32": ["Softmax", "LogSoftmax", "Exp", "Log", "Pow", "Sqrt", "Reciprocal", "ReduceSum", "ReduceMean",
             "ReduceL2", "ReduceSumSquare", "LayerNormalization", "BatchNormalization", "Erf", "CumSum"],
    "widest": ["Add", "Sub", "Mul", "Div", "Concat", "Sum", "Max", "Min", "Where"],
    "follow": ["Shape", "Relu", "LeakyRelu", "Clip", "MaxPool", "AveragePool", "GlobalAveragePool",
               "GlobalMaxPool", "Flatten", "Reshape", "Transpose", "Identity", "Squeeze", "Unsqueeze",
               "Slice", "Gather", "Split", "Tanh", "Sigmoid"],
    "conditional": [["LpNormalization", "p", [2]]],
}
"""The course's default lists: matrix products in float16; exponentials, logarithms, powers, square
roots, reductions and normalisations in float32 (their results or intermediate sums leave float16's
range or lose its precision); elementwise and data-movement ops adapt; LpNormalization stays float32
for p = 2 (it squares its input), not for p = 1."""

KEYS = ("target", "fp32", "widest", "follow", "conditional")


def all_fp16_lists(model: Any) -> dict[str, list]:
    """Lists that put every op type of ``model`` in ``"target"``: the whole graph in float16."""
    return {"target": sorted({node.op_type for node in model.graph.node}), "fp32": [], "widest": [],
            "follow": [], "conditional": []}


def lists_for(spec: Mapping[str, Any], model: Any) -> dict[str, list]:
    """The lists a case names: ``"default"``, ``"all_fp16"`` or a lists dict written out in the spec."""
    lists = spec.get("lists", "default")
    if lists == "default":
        return {key: [list(c) for c in value] if key == "conditional" else list(value)
                for key, value in DEFAULT_LISTS.items()}
    if lists == "all_fp16":
        return all_fp16_lists(model)
    return {key: [list(c) for c in lists[key]] if key == "conditional" else list(lists[key]) for key in KEYS}
