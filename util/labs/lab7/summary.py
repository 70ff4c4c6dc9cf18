"""Running a model with onnxruntime and summarising a converted one, the way the grader does.

``run`` (a model's outputs by name, onnxruntime on one CPU thread at a graph optimisation level) is the
course's :func:`util.onnx_session.run`, offered here beside the summaries the notebook imports with it.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from util.onnx_session import run

__all__ = ["run", "tensor_types", "param_bytes", "summarize", "row_counts"]


def tensor_types(model: onnx.ModelProto) -> dict[str, int]:
    """Element type (``TensorProto.FLOAT``, ``FLOAT16``, ``INT64``, ...) of every tensor of the graph.

    Runs ONNX shape inference first, so a model without ``value_info`` works too.
    """
    graph = onnx.shape_inference.infer_shapes(model).graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*graph.input, *graph.output, *graph.value_info]}
    types.update({init.name: init.data_type for init in graph.initializer})
    return types


def param_bytes(model: onnx.ModelProto) -> int:
    """Bytes of all initializers (elements x element size)."""
    return int(sum(np.prod(init.dims, dtype=np.int64) * helper.tensor_dtype_to_np_dtype(init.data_type).itemsize
                   for init in model.graph.initializer))


def summarize(model: onnx.ModelProto) -> dict[str, Any]:
    """What the grader reads from a converted model.

    ``nodes``: all nodes; ``casts``: Cast nodes; ``casts_to_fp16``: those with ``to=FLOAT16``;
    ``fp16_nodes``: nodes other than Cast that read or write a float16 tensor; ``param_bytes``: bytes of
    all initializers; ``output_dtypes``: numpy names of the graph outputs' element types.
    """
    types = tensor_types(model)
    graph = model.graph
    casts = [node for node in graph.node if node.op_type == "Cast"]
    fp16 = [node for node in graph.node if node.op_type != "Cast"
            and any(types.get(t) == TensorProto.FLOAT16 for t in [*node.input, *node.output] if t)]
    to = [next((helper.get_attribute_value(a) for a in node.attribute if a.name == "to"), None) for node in casts]
    return {"nodes": len(graph.node), "casts": len(casts), "casts_to_fp16": to.count(TensorProto.FLOAT16),
            "fp16_nodes": len(fp16), "param_bytes": param_bytes(model),
            "output_dtypes": [helper.tensor_dtype_to_np_dtype(o.type.tensor_type.elem_type).name for o in graph.output]}


def row_counts(output: np.ndarray) -> dict[str, int]:
    """Rows (first axis) of ``output`` that are all zero, and rows holding an inf or a NaN."""
    flat = np.asarray(output).reshape(len(output), -1)
    return {"zero_rows": int((flat == 0).all(axis=1).sum()), "nonfinite_rows": int((~np.isfinite(flat)).any(axis=1).sum())}
