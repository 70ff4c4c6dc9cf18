"""The graphs lab 7 converts, each with the inputs it is run on; nothing is downloaded.

Hand-built graphs (opset 17, IR version 8, every shape inferred, named like exported graphs):

* ``toy()``: MatMul -> Softmax -> MatMul, small enough to count its casts by hand;
* ``mixer()``: 16 nodes that exercise every rule of the op lists;
* ``frag()``: a row normalisation whose sum of squares overflows float16 in most rows;
* ``rms_chain()``: ``x * 1000 -> Pow -> ReduceMean -> Sqrt -> Div``, an RMS norm that squares values
  float16 cannot hold;
* ``gate()``: an RMS norm and a Softmax gate;
* ``toy_mixed()``: a mixed-precision graph with its Casts written out (float16 weights).

``resnet18()`` is torchvision's ResNet-18 (10 classes, seeded weights and BN statistics) exported at
1x3x64x64, BatchNormalization kept; ``resnet18(folded=True)`` is the same network exported with
constant folding, which folds every BatchNormalization into the Conv before it.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from util.onnx_models import make_model

F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16
RESNET_SHAPE = (1, 3, 64, 64)


def _model(nodes, name: str, inputs, outputs, inits) -> onnx.ModelProto:
    model = make_model(helper.make_graph(nodes, name, inputs, outputs, initializer=inits), producer="lab7")
    return onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)


def _weight(rng, name: str, *shape: int, scale: float | None = None) -> onnx.TensorProto:
    scale = 1 / math.sqrt(shape[0]) if scale is None else scale
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _value(name: str, shape, dtype=F32):
    return helper.make_tensor_value_info(name, dtype, list(shape))


def toy() -> onnx.ModelProto:
    """``x`` (2x4) -> MatMul(W1 4x4) -> ``m1`` -> Softmax -> ``p`` -> MatMul(W2 4x3) -> ``y`` (2x3)."""
    rng = np.random.default_rng(7)
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["m1"], name="mm1"),
             helper.make_node("Softmax", ["m1"], ["p"], name="softmax", axis=-1),
             helper.make_node("MatMul", ["p", "W2"], ["y"], name="mm2")]
    return _model(nodes, "toy", [_value("x", [2, 4])], [_value("y", [2, 3])],
                  [_weight(rng, "W1", 4, 4), _weight(rng, "W2", 4, 3)])


def mixer() -> onnx.ModelProto:
    """16 nodes, three outputs (``y``, ``r``, ``q``), one rule or more per node.

    ``mm1``/``mm2``/``mm3`` are MatMuls (``W1`` used by two of them); ``lpnorm_p2`` leaves ``p`` out
    (ONNX default 2), ``lpnorm_p1`` sets ``p=1``; ``mul_mixed`` and ``concat`` get one float16 and one
    float32 input, ``add_fp16`` two float16 ones; ``B`` feeds a float16 ``Sub`` and a float32 ``Add``;
    ``r`` is a graph output that two nodes also read; ``Shape`` reads a float16 tensor; ``Abs`` is in no
    list.
    """
    rng = np.random.default_rng(70)
    node = helper.make_node
    nodes = [
        node("MatMul", ["x", "W1"], ["h1"], name="mm1"),
        node("LpNormalization", ["h1"], ["a"], name="lpnorm_p2", axis=-1),
        node("LpNormalization", ["h1"], ["b"], name="lpnorm_p1", axis=-1, p=1),
        node("MatMul", ["b", "W1"], ["h2"], name="mm2"),
        node("Mul", ["a", "h2"], ["m"], name="mul_mixed"),
        node("Relu", ["h2"], ["r"], name="relu"),
        node("Add", ["r", "h1"], ["s"], name="add_fp16"),
        node("Sub", ["s", "B"], ["t"], name="sub_bias"),
        node("Softmax", ["r"], ["p"], name="softmax", axis=-1),
        node("Add", ["p", "B"], ["pb"], name="add_bias"),
        node("Concat", ["m", "t"], ["c"], name="concat", axis=-1),
        node("LayerNormalization", ["c", "ln_scale", "ln_bias"], ["l"], name="layernorm", axis=-1),
        node("MatMul", ["l", "W2"], ["y"], name="mm3"),
        node("Shape", ["t"], ["shp"], name="shape"),
        node("Reshape", ["pb", "shp"], ["pr"], name="reshape"),
        node("Abs", ["pr"], ["q"], name="abs_unlisted"),
    ]
    inits = [_weight(rng, "W1", 16, 16), _weight(rng, "W2", 32, 8),
             numpy_helper.from_array((0.1 * rng.standard_normal(16)).astype(np.float32), "B"),
             numpy_helper.from_array((1 + 0.1 * rng.standard_normal(32)).astype(np.float32), "ln_scale"),
             numpy_helper.from_array((0.1 * rng.standard_normal(32)).astype(np.float32), "ln_bias")]
    return _model(nodes, "mixer", [_value("x", [4, 16])],
                  [_value("y", [4, 8]), _value("r", [4, 16]), _value("q", [4, 16])], inits)


def frag() -> onnx.ModelProto:
    """``x`` (16x64) -> MatMul -> ``h``; ``h / sqrt(ReduceSum(h * h))`` -> MatMul -> ``y`` (16x16)."""
    rng = np.random.default_rng(71)
    node = helper.make_node
    nodes = [
        node("MatMul", ["x", "W1"], ["/MatMul_output_0"], name="/MatMul"),
        node("Mul", ["/MatMul_output_0", "/MatMul_output_0"], ["/Mul_output_0"], name="/Mul"),
        node("ReduceSum", ["/Mul_output_0", "axes"], ["/ReduceSum_output_0"], name="/ReduceSum", keepdims=1),
        node("Sqrt", ["/ReduceSum_output_0"], ["/Sqrt_output_0"], name="/Sqrt"),
        node("Div", ["/MatMul_output_0", "/Sqrt_output_0"], ["/Div_output_0"], name="/Div"),
        node("MatMul", ["/Div_output_0", "W2"], ["y"], name="/MatMul_1"),
    ]
    inits = [_weight(rng, "W1", 64, 64), _weight(rng, "W2", 64, 16),
             numpy_helper.from_array(np.array([-1], np.int64), "axes")]
    return _model(nodes, "frag", [_value("x", [16, 64])], [_value("y", [16, 16])], inits)


def frag_feeds() -> dict[str, np.ndarray]:
    """16 rows; 14 have a sum of squares far above 65,504 after the first MatMul, rows 3 and 11 do not."""
    rng = np.random.default_rng(72)
    scale = np.full((16, 1), 60.0)
    scale[[3, 11]] = 8.0
    return {"x": (rng.standard_normal((16, 64)) * scale).astype(np.float32)}


def rms_chain() -> onnx.ModelProto:
    """``s = x * 1000``; ``y = s / sqrt(ReduceMean(Pow(s, 2)))`` (8x32 -> 8x32)."""
    node = helper.make_node
    nodes = [
        node("Mul", ["x", "/Constant_output_0"], ["/Mul_output_0"], name="/Mul"),
        node("Pow", ["/Mul_output_0", "/Constant_1_output_0"], ["/Pow_output_0"], name="/Pow"),
        node("ReduceMean", ["/Pow_output_0"], ["/ReduceMean_output_0"], name="/ReduceMean", axes=[-1],
             keepdims=1),
        node("Sqrt", ["/ReduceMean_output_0"], ["/Sqrt_output_0"], name="/Sqrt"),
        node("Div", ["/Mul_output_0", "/Sqrt_output_0"], ["y"], name="/Div"),
    ]
    inits = [numpy_helper.from_array(np.array(1000.0, np.float32), "/Constant_output_0"),
             numpy_helper.from_array(np.array(2.0, np.float32), "/Constant_1_output_0")]
    return _model(nodes, "rms_chain", [_value("x", [8, 32])], [_value("y", [8, 32])], inits)


def rms_feeds() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(73).standard_normal((8, 32)).astype(np.float32)}


def gate() -> onnx.ModelProto:
    """``h = x @ W1``; ``u = h / sqrt(ReduceMean(h * h))``; ``y = Softmax(u @ W2)`` (8x32 -> 8x10)."""
    rng = np.random.default_rng(74)
    node = helper.make_node
    nodes = [
        node("MatMul", ["x", "W1"], ["/MatMul_output_0"], name="/MatMul"),
        node("Mul", ["/MatMul_output_0", "/MatMul_output_0"], ["/Mul_output_0"], name="/Mul"),
        node("ReduceMean", ["/Mul_output_0"], ["/ReduceMean_output_0"], name="/ReduceMean", axes=[-1],
             keepdims=1),
        node("Sqrt", ["/ReduceMean_output_0"], ["/Sqrt_output_0"], name="/Sqrt"),
        node("Div", ["/MatMul_output_0", "/Sqrt_output_0"], ["/Div_output_0"], name="/Div"),
        node("MatMul", ["/Div_output_0", "W2"], ["/MatMul_1_output_0"], name="/MatMul_1"),
        node("Softmax", ["/MatMul_1_output_0"], ["y"], name="/Softmax", axis=-1),
    ]
    inits = [_weight(rng, "W1", 32, 32, scale=1.0), _weight(rng, "W2", 32, 10, scale=0.3)]
    return _model(nodes, "gate", [_value("x", [8, 32])], [_value("y", [8, 10])], inits)


def gate_feeds() -> dict[str, np.ndarray]:
    return {"x": (np.random.default_rng(75).standard_normal((8, 32)) * 60).astype(np.float32)}


def toy_mixed() -> onnx.ModelProto:
    """The toy in mixed precision, Casts written out: float16 MatMuls (float16 weights), float32 Softmax."""
    rng = np.random.default_rng(76)
    node = helper.make_node
    nodes = [
        node("Cast", ["x"], ["x_float16"], name="x/Cast", to=F16),
        node("MatMul", ["x_float16", "W1"], ["m1"], name="mm1"),
        node("Cast", ["m1"], ["m1_float32"], name="m1/Cast", to=F32),
        node("Softmax", ["m1_float32"], ["p"], name="softmax", axis=-1),
        node("Cast", ["p"], ["p_float16"], name="p/Cast", to=F16),
        node("MatMul", ["p_float16", "W2"], ["y_float16"], name="mm2"),
        node("Cast", ["y_float16"], ["y"], name="y/Cast", to=F32),
    ]
    inits = [numpy_helper.from_array((rng.standard_normal((8, 8)) * 40).astype(np.float16), "W1"),
             numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float16), "W2")]
    return _model(nodes, "toy_mixed", [_value("x", [6, 8])], [_value("y", [6, 4])], inits)


def toy_mixed_feeds() -> dict[str, np.ndarray]:
    x = np.random.default_rng(77).standard_normal((6, 8)).astype(np.float32)
    x[[1, 4]] *= 1000
    return {"x": x}


def all_fp16(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` entirely in float16: float initializers stored as float16, one Cast after each float32
    graph input and one before each graph output (which stay float32)."""
    graph = model.graph
    inputs = {v.name for v in graph.input if v.type.tensor_type.elem_type == F32}
    outputs = {v.name for v in graph.output}
    inits = [numpy_helper.from_array(numpy_helper.to_array(i).astype(np.float16), i.name)
             if i.data_type == F32 else i for i in graph.initializer]
    rename = {name: f"{name}_float16" for name in inputs | outputs}
    nodes = [helper.make_node("Cast", [name], [rename[name]], name=f"{name}/Cast", to=F16) for name in sorted(inputs)]
    for original in graph.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(original)
        copy.input[:] = [rename.get(t, t) for t in copy.input]
        copy.output[:] = [rename.get(t, t) for t in copy.output]
        nodes.append(copy)
    nodes += [helper.make_node("Cast", [rename[name]], [name], name=f"{name}/Cast", to=F32)
              for name in sorted(outputs)]
    new = helper.make_graph(nodes, graph.name, graph.input, graph.output, initializer=inits)
    out = make_model(new, producer="lab7", like=model)
    return onnx.shape_inference.infer_shapes(out, strict_mode=True, data_prop=True)


def resnet18(folded: bool = False) -> onnx.ModelProto:
    """ResNet-18 at 1x3x64x64 (``input`` -> ``output``, 10 classes), BN kept (69 nodes) or folded (49)."""
    from util.onnx_models import export_torchvision

    return export_torchvision("resnet18_bnstats", input_shape=RESNET_SHAPE, fold_batchnorm=folded)


def resnet_feeds() -> dict[str, np.ndarray]:
    return {"input": np.random.default_rng(78).standard_normal(RESNET_SHAPE).astype(np.float32)}


GRAPHS = {"toy": (toy, None), "mixer": (mixer, None), "frag": (frag, frag_feeds), "rms_chain": (rms_chain, rms_feeds),
          "gate": (gate, gate_feeds), "toy_mixed": (toy_mixed, toy_mixed_feeds),
          "resnet18": (resnet18, resnet_feeds), "resnet18_folded": (lambda: resnet18(folded=True), resnet_feeds)}
"""Name -> (builder, feeds) for the graphs the cases name."""


def build(spec: Mapping[str, Any]) -> onnx.ModelProto:
    """The fp32 model a case names (``spec["model"]``)."""
    return GRAPHS[spec["model"]][0]()


def feeds_for(spec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The inputs the graph ``spec["model"]`` is run on (seeded; the same on every machine)."""
    make = GRAPHS[spec["model"]][1]
    if make is not None:
        return make()
    model = build(spec)
    rng = np.random.default_rng(79)
    return {v.name: rng.standard_normal([d.dim_value for d in v.type.tensor_type.shape.dim]).astype(np.float32)
            for v in model.graph.input}
