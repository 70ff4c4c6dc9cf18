"""The lab's own small ONNX graphs: a chain of Gemms with every attribute, and a perturbed copy.

Its notebook, its hidden cases, its public checks and its judge all build them from here.
(``producer_name`` stays ``util.onnx_models``, where they were first written, so the graph's bytes
and everything derived from them are unchanged.)
"""
from __future__ import annotations

import math

import onnx
from onnx import TensorProto, helper, numpy_helper

from util.onnx_models import make_model


def gemm_chain_graph() -> onnx.ModelProto:
    """Three Gemms with awkward sizes and every attribute, for testing a Gemm rewriter.

    ``x`` (float32, 5x37) -> Gemm(transB=1, W1 23x37, b1) -> Relu -> Gemm(W2 23x70, b2, alpha=0.5,
    beta=2) -> Relu -> Transpose -> Gemm(transA=1, transB=1, W3 9x70, b3, alpha=1.5, beta=0.25) -> ``y``
    (5x9). No size is a multiple of 8 or 16, so every tiling has partial tiles. Every Gemm has a
    bias ``C`` of shape ``[N]``, like those torch exports. Weights are seeded.
    """
    import numpy as np

    rng = np.random.default_rng(7)
    f32 = TensorProto.FLOAT

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) / math.sqrt(shape[-1])).astype(np.float32), name)

    nodes = [
        helper.make_node("Gemm", ["x", "W1", "b1"], ["h1"], name="gemm1", transB=1),
        helper.make_node("Relu", ["h1"], ["r1"], name="relu1"),
        helper.make_node("Gemm", ["r1", "W2", "b2"], ["h2"], name="gemm2", alpha=0.5, beta=2.0),
        helper.make_node("Relu", ["h2"], ["r2"], name="relu2"),
        helper.make_node("Transpose", ["r2"], ["r2_t"], name="transpose", perm=[1, 0]),
        helper.make_node("Gemm", ["r2_t", "W3", "b3"], ["y"], name="gemm3", transA=1, transB=1,
                         alpha=1.5, beta=0.25),
    ]
    graph = helper.make_graph(
        nodes, "gemm_chain",
        inputs=[helper.make_tensor_value_info("x", f32, [5, 37])],
        outputs=[helper.make_tensor_value_info("y", f32, [5, 9])],
        initializer=[weight("W1", 23, 37), weight("b1", 23), weight("W2", 23, 70), weight("b2", 70),
                     weight("W3", 9, 70), weight("b3", 9)])
    model = make_model(graph, producer="util.onnx_models")
    return onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)


def perturbed(model: onnx.ModelProto, initializer: str, delta: float, index: int | None = None) -> onnx.ModelProto:
    """A copy of ``model`` with ``delta`` added to one initializer (to one flat element, or all).

    It builds a model that is *almost* the same, to test an equivalence check (task 3.4).
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for init in out.graph.initializer:
        if init.name == initializer:
            values = numpy_helper.to_array(init).copy()
            if index is None:
                values += values.dtype.type(delta)
            else:
                values.reshape(-1)[index] += values.dtype.type(delta)
            init.CopyFrom(numpy_helper.from_array(values, initializer))
            return out
    raise KeyError(f"the model has no initializer {initializer!r}")
