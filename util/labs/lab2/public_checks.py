"""The lab's public checks (``util.check("2.4")``): what ``check`` tests for each task.

Each check tests what the notebook states (the toy graph's hand-worked numbers, MobileNetV2's counts quoted in the task text, internal consistency), so it needs no reference file and reveals no hidden case. The toy is the notebook's own three-node graph, rebuilt here.
"""
from __future__ import annotations

import math

from util.checks import each, equal, first
from util.contract import Check

MOBILENET_V2_NODES = 222
"""Nodes of the lab's MobileNetV2 export (stated in the notebook)."""


def _toy():
    """The notebook's toy: x -> MatMul(W) -> Relu -> Concat with x (x 1x4, W 4x8, y 1x12, float32)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from util.onnx_models import make_model

    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"], name="matmul"),
         helper.make_node("Relu", ["h"], ["r"], name="relu"),
         helper.make_node("Concat", ["r", "x"], ["y"], name="concat", axis=1)],
        "toy", inputs=[helper.make_tensor_value_info("x", f32, [1, 4])],
        outputs=[helper.make_tensor_value_info("y", f32, [1, 12])],
        initializer=[numpy_helper.from_array(np.ones((4, 8), dtype=np.float32), "W")])
    return onnx.shape_inference.infer_shapes(make_model(graph))


def _toy2():
    """The notebook's second toy: const -> scale (x * c) -> double (m + m) -> shape (of y, unused) -> relu (of m)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from util.onnx_models import make_model

    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["c"], name="const",
                          value=numpy_helper.from_array(np.array(2.0, dtype=np.float32), "c")),
         helper.make_node("Mul", ["x", "c"], ["m"], name="scale"),
         helper.make_node("Add", ["m", "m"], ["y"], name="double"),
         helper.make_node("Shape", ["y"], ["s"], name="shape"),
         helper.make_node("Relu", ["m"], ["z"], name="relu")],
        "toy2", inputs=[helper.make_tensor_value_info("x", f32, [1, 4])],
        outputs=[helper.make_tensor_value_info("y", f32, [1, 4]), helper.make_tensor_value_info("z", f32, [1, 4])])
    return onnx.shape_inference.infer_shapes(make_model(graph))


def _reshape_toy():
    """x (1x4 float32) reshaped by an int64 shape tensor [2, 2]: int64 takes 8 bytes per element."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from util.onnx_models import make_model

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")], "reshape_toy",
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
        initializer=[numpy_helper.from_array(np.array([2, 2], dtype=np.int64), "shape")])
    return onnx.shape_inference.infer_shapes(make_model(graph))


def _sizes(model):
    from util.onnx_models import tensor_bytes

    return tensor_bytes(model)


def _tensor_bytes_consistent(entry) -> str | None:
    import numpy as np

    for side in ("inputs", "outputs"):
        for t in entry[side]:
            expected = math.prod(t["shape"]) * np.dtype(t["dtype"]).itemsize
            if t["bytes"] != expected:
                return (f"{entry['name']}: {side} {t['name']} is {t['dtype']} {t['shape']} but has {t['bytes']:,} "
                        f"bytes; elements x itemsize = {expected:,}")
    return None


def _peak(rows, value, peak_node, peak_bytes) -> str | None:
    """The peak is the largest value, the first one on a tie."""
    values = [value(row) for row in rows]
    top = values.index(max(values))
    return first(equal(peak_bytes, values[top], "peak_bytes"),
                 equal(peak_node, rows[top]["node"], "peak_node (the first node with the largest value)"))


def _plot(fn, labels, values, title):
    import matplotlib.pyplot as plt

    try:
        return fn(labels, values, title)
    finally:
        plt.close("all")


FIRST_CONV = "/features/features.0/features.0.0/Conv"

CHECKS_2_1 = (
    Check("the counts add up to MobileNetV2's 222 nodes",
          lambda a: equal(sum(a.values()), MOBILENET_V2_NODES, "the sum of the counts"),
          "count every node, Constant nodes included"),
    Check("52 Conv, 52 BatchNormalization, 35 Clip",
          lambda a: equal({k: a.get(k) for k in ("Conv", "BatchNormalization", "Clip")},
                          {"Conv": 52, "BatchNormalization": 52, "Clip": 35}, "the counts"),
          "use node.op_type as the key"),
    Check("keys in alphabetical order",
          lambda a: equal(list(a), sorted(a), "the keys"), "a dict keeps insertion order: insert the keys sorted"),
    Check("operator_counts on the toy graph",
          lambda f: equal(f(_toy()), {"Concat": 1, "MatMul": 1, "Relu": 1}, "the result"),
          "one node each", calls_function=True),
)
CHECKS_2_2 = (
    Check("each entry is under its node's name",
          lambda a: each(a.items(), lambda kv: equal(kv[1]["name"], kv[0], "name"), "entries"),
          "the answer maps node name -> inspect_node(model, node)"),
    Check("every tensor's bytes = elements x itemsize of its dtype",
          lambda a: each(a.values(), _tensor_bytes_consistent, "entries"),
          "math.prod(shape) * dtype.itemsize; a scalar ([]) has 1 element"),
    Check("the first Conv reads 602,112 + 3,456 bytes, writes 1,605,632, strides [2, 2]",
          lambda a: equal(([t["bytes"] for t in a[FIRST_CONV]["inputs"]], [t["bytes"] for t in a[FIRST_CONV]["outputs"]],
                           a[FIRST_CONV]["attributes"].get("strides")),
                          ([602112, 3456], [1605632], [2, 2]), "(input bytes, output bytes, strides)"),
          "look up each name in graph.initializer, graph.input, graph.output and graph.value_info"),
    Check("inspect_node on the toy's concat",
          lambda f: equal(f(_toy(), _toy().graph.node[2]),
                          {"name": "concat", "op_type": "Concat",
                           "inputs": [{"name": "r", "shape": [1, 8], "dtype": "float32", "bytes": 32},
                                      {"name": "x", "shape": [1, 4], "dtype": "float32", "bytes": 16}],
                           "outputs": [{"name": "y", "shape": [1, 12], "dtype": "float32", "bytes": 48}],
                           "attributes": {"axis": 1}}, "the result"),
          "the notebook's expected output for the toy", calls_function=True),
    Check("inspect_node on a Reshape whose shape input is an int64 tensor [2]",
          lambda f: equal(f(_reshape_toy(), _reshape_toy().graph.node[0])["inputs"][1],
                          {"name": "shape", "shape": [2], "dtype": "int64", "bytes": 16}, "the shape input"),
          "int64 takes 8 bytes per element: ask the numpy dtype for its itemsize", calls_function=True),
)
CHECKS_2_3 = (
    Check("one row per node (222)",
          lambda a: equal(len(a["per_node"]), MOBILENET_V2_NODES, "the number of rows"), "every node, in graph order"),
    Check("peak_node and peak_bytes are the first largest read + written",
          lambda a: _peak(a["per_node"], lambda r: r["read"] + r["written"], a["peak_node"], a["peak_bytes"]),
          "on a tie the first node in graph order wins"),
    Check("written_bytes and total_bytes are the sums of the rows",
          lambda a: first(equal(a["written_bytes"], sum(r["written"] for r in a["per_node"]), "written_bytes"),
                          equal(a["total_bytes"], sum(r["read"] + r["written"] for r in a["per_node"]), "total_bytes")),
          "written_bytes sums what nodes write; total_bytes sums read + written"),
    Check("bandwidth_report on the toy graph",
          lambda f: equal(f(_toy(), _sizes(_toy())),
                          {"per_node": [{"node": "matmul", "op_type": "MatMul", "read": 144, "written": 32},
                                        {"node": "relu", "op_type": "Relu", "read": 32, "written": 32},
                                        {"node": "concat", "op_type": "Concat", "read": 48, "written": 48}],
                           "peak_node": "matmul", "peak_bytes": 176, "written_bytes": 112, "total_bytes": 336},
                          "the result"),
          "a node reads every input in full, weights included (W: 128 bytes)", calls_function=True),
    Check("bandwidth_report on the second toy (a Constant, m + m, an unused int64 Shape)",
          lambda f: equal(f(_toy2(), _sizes(_toy2())),
                          {"per_node": [{"node": "const", "op_type": "Constant", "read": 0, "written": 4},
                                        {"node": "scale", "op_type": "Mul", "read": 20, "written": 16},
                                        {"node": "double", "op_type": "Add", "read": 32, "written": 16},
                                        {"node": "shape", "op_type": "Shape", "read": 16, "written": 16},
                                        {"node": "relu", "op_type": "Relu", "read": 16, "written": 16}],
                           "peak_node": "double", "peak_bytes": 48, "written_bytes": 68, "total_bytes": 152},
                          "the result"),
          "a name in two input slots is read twice (m + m reads 32 bytes); a Constant reads nothing and "
          "writes its value; Shape writes int64 (8 bytes per element)", calls_function=True),
)
CHECKS_2_4 = (
    Check("one row per node (222)",
          lambda a: equal(len(a["per_node"]), MOBILENET_V2_NODES, "the number of rows"), "one step per node"),
    Check("peak_node and peak_bytes are the first largest live_bytes",
          lambda a: _peak(a["per_node"], lambda r: r["live_bytes"], a["peak_node"], a["peak_bytes"]),
          "on a tie the first step wins"),
    Check("live_memory on the toy graph",
          lambda f: equal(f(_toy(), _sizes(_toy())),
                          {"per_node": [{"node": "matmul", "live_bytes": 48}, {"node": "relu", "live_bytes": 80},
                                        {"node": "concat", "live_bytes": 96}],
                           "peak_node": "concat", "peak_bytes": 96}, "the result"),
          "x stays live until its last consumer (concat); weights do not count", calls_function=True),
    Check("live_memory on the second toy (a Constant, a graph output read again, an unused tensor)",
          lambda f: equal(f(_toy2(), _sizes(_toy2())),
                          {"per_node": [{"node": "const", "live_bytes": 20}, {"node": "scale", "live_bytes": 36},
                                        {"node": "double", "live_bytes": 32}, {"node": "shape", "live_bytes": 48},
                                        {"node": "relu", "live_bytes": 48}],
                           "peak_node": "shape", "peak_bytes": 48}, "the result"),
          "Constant outputs count; a graph output (y) stays live to the last step; a tensor nothing reads "
          "(s) is live only at its producer's step; on a tie the first step is the peak", calls_function=True),
)
CHECKS_2_5 = (
    Check("one point per MobileNetV2 node (222)",
          lambda a: equal(a["points"], MOBILENET_V2_NODES, "points"), "plot every node"),
    Check("plot_schedule on three points",
          lambda f: equal(_plot(f, ["a", "b", "c"], [1, 5, 2], "three points"),
                          {"points": 3, "peak_index": 1, "peak_label": "b", "peak_value": 5}, "the result"),
          "read the number of points back from the line you drew", calls_function=True),
)


CHECKS: dict[str, tuple[Check, ...]] = {"2.1": CHECKS_2_1, "2.2": CHECKS_2_2, "2.3": CHECKS_2_3, "2.4": CHECKS_2_4, "2.5": CHECKS_2_5}
"""Task id -> its public checks (attached with ``checks=`` in ``tasks.py``)."""
