"""The ONNX graphs of lab 8, built by the course (nothing is downloaded).

Every graph is float32, with the course's opset and IR version (17 and 8, from
``util.onnx_models.make_model``) and seeded weights. Graph inputs have a symbolic batch dimension ``N``
(the caller chooses it); graph outputs carry their element type but no shape, and no graph carries
``value_info``: inferring shapes is task 8.1's job. ``help(graph)`` lists them.

* ``mlp``: dlsys's MLP 784-256-100-10 (Gemm, Relu, Gemm, Relu, Gemm, Softmax), weights ``[out, in]``
  with ``transB=1`` as PyTorch's ``Linear`` exports them.
* ``residual_mlp``: 784 -> 256, two residual blocks 256 -> 512 -> 256 with a skip ``Add``, -> 10.
* ``cnn``: a LeNet-like CNN on ``N x 1 x 28 x 28``.
* ``op_zoo``: one node of each operator the shape inference handles, with the awkward attributes.
* ``consumed_output``: a graph whose output ``h`` is also read by later nodes.
* ``chain4``: ``x (1x2) -> Gemm 1x4 -> Gemm 1x8 -> Gemm 1x4 -> Relu y``, small enough to plan by hand.
* ``resnet18``: torchvision's ResNet-18 (10 classes, seeded BatchNorm statistics) at 1x3x64x64, BN kept.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from util.onnx_models import make_model

F32, I64 = TensorProto.FLOAT, TensorProto.INT64
RESNET_SHAPE = (1, 3, 64, 64)


def _linear(rng: np.random.Generator, rows: int, cols: int, name: str) -> onnx.TensorProto:
    bound = 1 / np.sqrt(cols)          # PyTorch's Linear initialisation range
    return numpy_helper.from_array(rng.uniform(-bound, bound, (rows, cols)).astype(np.float32), name)


def _bias(rng: np.random.Generator, size: int, name: str) -> onnx.TensorProto:
    return numpy_helper.from_array(rng.uniform(-0.1, 0.1, size).astype(np.float32), name)


def _gemm(x: str, w: str, b: str | None, y: str) -> onnx.NodeProto:
    return helper.make_node("Gemm", [x, w] + ([b] if b else []), [y], name=y, transB=1)


def _model(name: str, nodes, inputs, outputs, initializers) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs=inputs, initializer=initializers,
                              outputs=[helper.make_tensor_value_info(o, dtype, None) for o, dtype in outputs])
    return make_model(graph, producer="lab8")


def _input(name: str, shape: list, dtype: int = F32) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def mlp(seed: int = 1) -> onnx.ModelProto:
    """dlsys's MLP: ``x [N, 784]`` -> 256 -> 100 -> 10 -> Softmax ``y``."""
    rng = np.random.default_rng(seed)
    sizes, nodes, inits, x = [784, 256, 100, 10], [], [], "x"
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:]), start=1):
        inits += [_linear(rng, n_out, n_in, f"W{i}"), _bias(rng, n_out, f"b{i}")]
        out = f"h{i}" if i < 3 else "logits"
        nodes.append(_gemm(x, f"W{i}", f"b{i}", out))
        if i < 3:
            x = f"a{i}"
            nodes.append(helper.make_node("Relu", [out], [x], name=x))
    nodes.append(helper.make_node("Softmax", ["logits"], ["y"], name="y", axis=-1))
    return _model("mlp", nodes, [_input("x", ["N", 784])], [("y", F32)], inits)


def residual_mlp(seed: int = 2, width: int = 256, hidden: int = 512, blocks: int = 2) -> onnx.ModelProto:
    """``x [N, 784]`` -> ``width``, ``blocks`` residual blocks (``width -> hidden -> width``, plus the
    block's input), -> 10 -> Softmax ``y``. Each block's input is read twice: by its first Gemm and by
    its Add, several nodes later."""
    rng = np.random.default_rng(seed)
    inits = [_linear(rng, width, 784, "W_in"), _bias(rng, width, "b_in")]
    nodes = [_gemm("x", "W_in", "b_in", "h0"), helper.make_node("Relu", ["h0"], ["a0"], name="a0")]
    skip = "a0"
    for k in range(1, blocks + 1):
        inits += [_linear(rng, hidden, width, f"W{k}_up"), _bias(rng, hidden, f"b{k}_up"),
                  _linear(rng, width, hidden, f"W{k}_down"), _bias(rng, width, f"b{k}_down")]
        nodes += [_gemm(skip, f"W{k}_up", f"b{k}_up", f"u{k}"),
                  helper.make_node("Relu", [f"u{k}"], [f"v{k}"], name=f"v{k}"),
                  _gemm(f"v{k}", f"W{k}_down", f"b{k}_down", f"d{k}"),
                  helper.make_node("Add", [f"d{k}", skip], [f"s{k}"], name=f"s{k}"),
                  helper.make_node("Relu", [f"s{k}"], [f"a{k}"], name=f"a{k}")]
        skip = f"a{k}"
    inits += [_linear(rng, 10, width, "W_out"), _bias(rng, 10, "b_out")]
    nodes += [_gemm(skip, "W_out", "b_out", "logits"),
              helper.make_node("Softmax", ["logits"], ["y"], name="y", axis=-1)]
    return _model("residual_mlp", nodes, [_input("x", ["N", 784])], [("y", F32)], inits)


def cnn(seed: int = 5) -> onnx.ModelProto:
    """LeNet-like: Conv 6@5x5 pad 2, Relu, MaxPool 2, Conv 16@5x5, Relu, MaxPool 2, Flatten, three Gemms."""
    rng = np.random.default_rng(seed)

    def conv(o: int, i: int, k: int, name: str) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.uniform(-1, 1, (o, i, k, k)) / np.sqrt(i * k * k)).astype(np.float32),
                                       name)

    inits = [conv(6, 1, 5, "C1"), _bias(rng, 6, "c1"), conv(16, 6, 5, "C2"), _bias(rng, 16, "c2"),
             _linear(rng, 120, 400, "W1"), _bias(rng, 120, "b1"), _linear(rng, 84, 120, "W2"),
             _bias(rng, 84, "b2"), _linear(rng, 10, 84, "W3"), _bias(rng, 10, "b3")]
    nodes = [helper.make_node("Conv", ["x", "C1", "c1"], ["conv1"], name="conv1", kernel_shape=[5, 5],
                              pads=[2, 2, 2, 2]),
             helper.make_node("Relu", ["conv1"], ["relu1"], name="relu1"),
             helper.make_node("MaxPool", ["relu1"], ["pool1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["pool1", "C2", "c2"], ["conv2"], name="conv2", kernel_shape=[5, 5]),
             helper.make_node("Relu", ["conv2"], ["relu2"], name="relu2"),
             helper.make_node("MaxPool", ["relu2"], ["pool2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["pool2"], ["flat"], name="flat", axis=1),
             _gemm("flat", "W1", "b1", "fc1"), helper.make_node("Relu", ["fc1"], ["relu3"], name="relu3"),
             _gemm("relu3", "W2", "b2", "fc2"), helper.make_node("Relu", ["fc2"], ["relu4"], name="relu4"),
             _gemm("relu4", "W3", "b3", "logits")]
    return _model("cnn", nodes, [_input("x", ["N", 1, 28, 28])], [("logits", F32)], inits)


def op_zoo(seed: int = 6) -> onnx.ModelProto:
    """One node per operator, with the attributes that trip shape inference up (see the notebook)."""
    rng = np.random.default_rng(seed)

    def weight(shape: tuple[int, ...], name: str) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    def ints(values: list[int], name: str) -> onnx.TensorProto:
        return numpy_helper.from_array(np.array(values, dtype=np.int64), name)

    inits = [weight((4, 3, 3, 3), "K"), weight((4,), "kb"), weight((4, 1, 1), "scale"),
             ints([0, 12], "keep_rows"), ints([2, -1, 3], "infer_middle"), weight((4, 3, 7), "B3"),
             weight((6, 9), "W69"), weight((5, 6), "G"), weight((1, 9), "gb")]
    node = helper.make_node
    nodes = [
        node("Conv", ["img", "K", "kb"], ["conv"], name="conv", kernel_shape=[3, 3], pads=[1, 0, 2, 1],
             strides=[2, 1], dilations=[2, 2]),
        node("Mul", ["conv", "scale"], ["scaled"], name="scaled"),
        node("MaxPool", ["scaled"], ["pool"], name="pool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
        node("GlobalAveragePool", ["pool"], ["gap"], name="gap"),
        node("Flatten", ["conv"], ["flat2"], name="flat2", axis=2),
        node("Reshape", ["seq", "keep_rows"], ["rows"], name="rows"),
        node("Reshape", ["seq", "infer_middle"], ["middle"], name="middle"),
        node("Transpose", ["seq"], ["transposed"], name="transposed"),
        node("MatMul", ["batch4d", "B3"], ["bmm"], name="bmm"),
        node("MatMul", ["vec", "W69"], ["vm"], name="vm"),
        node("Gemm", ["G", "mat", "gb"], ["gemm"], name="gemm", transA=1),
        node("Concat", ["gemm", "gemm"], ["cat"], name="cat", axis=-1),
        node("Softmax", ["cat"], ["probs"], name="probs", axis=-1),
        node("Shape", ["bmm"], ["bmm_shape"], name="bmm_shape"),
    ]
    inputs = [_input("img", ["N", 3, 17, 13]), _input("seq", [7, 3, 4]), _input("batch4d", [2, 1, 5, 3]),
              _input("vec", [6]), _input("mat", [5, 9])]
    outputs = [("gap", F32), ("flat2", F32), ("rows", F32), ("middle", F32), ("transposed", F32), ("vm", F32),
               ("probs", F32), ("bmm_shape", I64)]
    return _model("op_zoo", nodes, inputs, outputs, inits)


def consumed_output(seed: int = 3) -> onnx.ModelProto:
    """``x [N, 8]`` -> Gemm ``h`` (a graph output) -> Relu -> Gemm -> Add ``h`` -> Relu ``y``."""
    rng = np.random.default_rng(seed)
    inits = [_linear(rng, 16, 8, "W1"), _bias(rng, 16, "b1"), _linear(rng, 16, 16, "W2"), _bias(rng, 16, "b2")]
    nodes = [_gemm("x", "W1", "b1", "h"), helper.make_node("Relu", ["h"], ["r"], name="r"),
             _gemm("r", "W2", "b2", "g"), helper.make_node("Add", ["g", "h"], ["s"], name="s"),
             helper.make_node("Relu", ["s"], ["y"], name="y")]
    return _model("consumed_output", nodes, [_input("x", ["N", 8])], [("h", F32), ("y", F32)], inits)


def chain4(seed: int = 4) -> onnx.ModelProto:
    """``x [1, 2]`` -> Gemm ``t1 [1, 4]`` -> Gemm ``t2 [1, 8]`` -> Gemm ``t3 [1, 4]`` -> Relu ``y``."""
    rng = np.random.default_rng(seed)
    inits = [_linear(rng, 4, 2, "W1"), _linear(rng, 8, 4, "W2"), _linear(rng, 4, 8, "W3")]
    nodes = [_gemm("x", "W1", None, "t1"), _gemm("t1", "W2", None, "t2"), _gemm("t2", "W3", None, "t3"),
             helper.make_node("Relu", ["t3"], ["y"], name="y")]
    return _model("chain4", nodes, [_input("x", [1, 2])], [("y", F32)], inits)


def resnet18() -> onnx.ModelProto:
    """torchvision's ResNet-18 (seeded, no download) at 1x3x64x64, shapes removed like the other graphs."""
    from util.onnx_models import export_torchvision

    model = export_torchvision("resnet18_bnstats", input_shape=RESNET_SHAPE)
    del model.graph.value_info[:]
    for output in model.graph.output:
        output.type.tensor_type.ClearField("shape")
    return model


GRAPHS: dict[str, Callable[[], onnx.ModelProto]] = {
    "mlp": mlp, "residual_mlp": residual_mlp, "cnn": cnn, "op_zoo": op_zoo,
    "consumed_output": consumed_output, "chain4": chain4, "resnet18": resnet18}
"""Every graph of the lab by name (the hidden cases name theirs in their spec)."""


def graph(name: str) -> onnx.ModelProto:
    """The graph called ``name`` (one of :data:`GRAPHS`), freshly built."""
    try:
        return GRAPHS[name]()
    except KeyError:
        raise KeyError(f"no graph {name!r}; the graphs are {', '.join(GRAPHS)}") from None


def random_feeds(model: onnx.ModelProto, input_shapes: Mapping[str, Any], seed: int) -> dict[str, np.ndarray]:
    """Standard-normal float32 inputs of the given shapes, drawn from ``seed`` in graph-input order."""
    rng = np.random.default_rng(seed)
    return {v.name: rng.standard_normal(tuple(input_shapes[v.name])).astype(np.float32) for v in model.graph.input}
