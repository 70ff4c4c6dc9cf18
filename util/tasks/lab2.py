"""Lab 2, ONNX model analysis (MobileNetV2 exported to ONNX): the one declaration of its tasks.

The notebook exports one answer per task with ``util.submit``; the grader also calls the student's
functions on graphs the notebook never shows: an exported ResNet-18 (residual adds, MaxPool, ReLU)
and ``tiny_shape_graph()`` (int64 shape tensors, Constant nodes, an omitted optional input, a
string attribute, a graph output that is also consumed), so a hard-coded number cannot pass.

Tasks 2.3 and 2.4 receive the reference sizes ``tensor_bytes(model)``, so a size slip in task 2.2
is not charged again there. Exports are cached in ``build/onnx/``: the whole hidden set takes about
0.2 s with a warm cache; a cold one adds a ResNet-18 export (about 1.5 s, torch already loaded).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from util.checks import each, equal, first
from util.contract import Case, Check, Lab, Task, Tolerance

ATTRIBUTES = Tolerance(rtol=1e-6)
"""Float attributes are stored as float32: ``1e-5`` read back directly or rounded both pass."""

TINY = "tiny_shape_graph"
RESNET18 = {"model": "resnet18", "input_shape": [1, 3, 224, 224]}
RESNET18_NODES = ["/conv1/Conv", "/bn1/BatchNormalization", "/maxpool/MaxPool",
                  "/layer1/layer1.0/Add", "/layer2/layer2.0/downsample/downsample.0/Conv",
                  "/Flatten", "/fc/Gemm"]
TINY_NODES = ["const_pads", "pad", "shape", "const_lead_axes", "gather", "const_minus_one", "concat",
              "reshape", "matmul", "const_six", "clip", "add", "leaky_relu"]


def _onnx(spec: Mapping[str, Any]):
    # imported here so that ``util.tasks`` (imported by every ``submit``) does not load onnx
    from util.onnx_models import export_torchvision, load_onnx, tiny_shape_graph

    if spec["model"] == TINY:
        return tiny_shape_graph()
    return load_onnx(export_torchvision(spec["model"], input_shape=spec["input_shape"]))


def _call_model(fn: Callable, spec: Mapping[str, Any]) -> Any:
    return fn(_onnx(spec))


def _call_nodes(fn: Callable, spec: Mapping[str, Any]) -> Any:
    model = _onnx(spec)
    by_name = {node.name: node for node in model.graph.node}
    return {name: fn(model, by_name[name]) for name in spec["nodes"]}


def _call_sizes(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.onnx_models import tensor_bytes

    model = _onnx(spec)
    return fn(model, tensor_bytes(model))


def _call_series(fn: Callable, spec: Mapping[str, Any]) -> Any:
    import matplotlib.pyplot as plt
    try:
        return fn(list(spec["labels"]), list(spec["values"]), spec["title"])
    finally:
        plt.close("all")


# ------------------------------------------------------------------ public checks (util.check)
# Each check tests what the notebook states (the toy graph's hand-worked numbers, MobileNetV2's
# counts quoted in the task text, internal consistency), so it needs no reference file and
# reveals no hidden case. The toy is the notebook's own three-node graph, rebuilt here.

MOBILENET_V2_NODES = 222
"""Nodes of the lab's MobileNetV2 export (stated in the notebook)."""


def _toy():
    """The notebook's toy: x -> MatMul(W) -> Relu -> Concat with x (x 1x4, W 4x8, y 1x12, float32)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"], name="matmul"),
         helper.make_node("Relu", ["h"], ["r"], name="relu"),
         helper.make_node("Concat", ["r", "x"], ["y"], name="concat", axis=1)],
        "toy", inputs=[helper.make_tensor_value_info("x", f32, [1, 4])],
        outputs=[helper.make_tensor_value_info("y", f32, [1, 12])],
        initializer=[numpy_helper.from_array(np.ones((4, 8), dtype=np.float32), "W")])
    toy = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    toy.ir_version = 8
    return onnx.shape_inference.infer_shapes(toy)


def _reshape_toy():
    """x (1x4 float32) reshaped by an int64 shape tensor [2, 2]: int64 takes 8 bytes per element."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")], "reshape_toy",
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
        initializer=[numpy_helper.from_array(np.array([2, 2], dtype=np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


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
          "one node each", function=True),
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
          "the notebook's expected output for the toy", function=True),
    Check("inspect_node on a Reshape whose shape input is an int64 tensor [2]",
          lambda f: equal(f(_reshape_toy(), _reshape_toy().graph.node[0])["inputs"][1],
                          {"name": "shape", "shape": [2], "dtype": "int64", "bytes": 16}, "the shape input"),
          "int64 takes 8 bytes per element: ask the numpy dtype for its itemsize", function=True),
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
          "a node reads every input in full, weights included (W: 128 bytes)", function=True),
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
          "x stays live until its last consumer (concat); weights do not count", function=True),
)
CHECKS_2_5 = (
    Check("one point per MobileNetV2 node (222)",
          lambda a: equal(a["points"], MOBILENET_V2_NODES, "points"), "plot every node"),
    Check("plot_schedule on three points",
          lambda f: equal(_plot(f, ["a", "b", "c"], [1, 5, 2], "three points"),
                          {"points": 3, "peak_index": 1, "peak_label": "b", "peak_value": 5}, "the result"),
          "read the number of points back from the line you drew", function=True),
)



def prepare() -> None:
    """Fill the ONNX export cache with the notebook's MobileNetV2 and the hidden ResNet-18."""
    from util.onnx_models import export_torchvision

    export_torchvision("mobilenet_v2")
    export_torchvision(RESNET18["model"], input_shape=RESNET18["input_shape"])


LAB = Lab(
    name="lab2",
    prepare="util.tasks.lab2:prepare",
    title="ONNX model analysis",
    notebook="lab2_onnx_analysis.ipynb",
    modules=("util/tasks/lab2.py", "util/onnx_models.py", "util/models.py"),
    tasks=(
        Task(
            id="2.1", title="Operator counts", points=4,
            answer="a dict {op_type: number of nodes}, e.g. {'Add': 10, 'BatchNormalization': 52, ...}",
            function="operator_counts", run_case=_call_model,
            cases=(
                Case("resnet18", RESNET18, 3),
                Case(TINY, {"model": TINY}, 3),
            ),
            checks=CHECKS_2_1,
        ),
        Task(
            id="2.2", title="Node inspector", points=10,
            answer="a dict {node name: {'name', 'op_type', 'inputs', 'outputs', 'attributes'}}",
            tolerance=ATTRIBUTES,
            function="inspect_node", run_case=_call_nodes,
            cases=(
                Case("resnet18 nodes", {**RESNET18, "nodes": RESNET18_NODES}, 10),
                Case("tiny_shape_graph nodes", {"model": TINY, "nodes": TINY_NODES}, 10),
            ),
            checks=CHECKS_2_2,
        ),
        Task(
            id="2.3", title="Memory bandwidth per node", points=9,
            answer="a dict {'per_node': [rows {'node','op_type','read','written'}], 'peak_node': str, "
                   "'peak_bytes': int, 'written_bytes': int, 'total_bytes': int}",
            keys=("per_node", "peak_node", "peak_bytes", "written_bytes", "total_bytes"),
            function="bandwidth_report", run_case=_call_sizes,
            cases=(
                Case("resnet18", RESNET18, 8),
                Case(TINY, {"model": TINY}, 8),
            ),
            checks=CHECKS_2_3,
        ),
        Task(
            id="2.4", title="Peak live activation memory", points=10,
            answer="a dict {'per_node': [rows {'node','live_bytes'}], 'peak_node': str, 'peak_bytes': int}",
            keys=("per_node", "peak_node", "peak_bytes"),
            function="live_memory", run_case=_call_sizes,
            cases=(
                Case("resnet18", RESNET18, 10),
                Case(TINY, {"model": TINY}, 10),
            ),
            checks=CHECKS_2_4,
        ),
        Task(
            id="2.5", title="Schedule plot", points=1,
            answer="a dict {'points': int, 'peak_index': int, 'peak_label': str, 'peak_value': int}",
            keys=("points", "peak_index", "peak_label", "peak_value"),
            function="plot_schedule", run_case=_call_series,
            cases=(
                Case("series with a tie", {"labels": ["a", "b", "c", "d", "e"], "values": [3, 9, 2, 9, 0],
                                           "title": "tie: the first maximum is the peak"}, 2),
                Case("one node", {"labels": ["only"], "values": [1048576], "title": "a single step"}, 2),
            ),
            checks=CHECKS_2_5,
        ),
    ),
)
