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

from typing import Any, Callable, Mapping

from util.contract import Lab, Release, Task, Tolerance, Written
from util.labs.lab2.public_checks import CHECKS

ATTRIBUTES = Tolerance(rtol=1e-6)
"""Float attributes are stored as float32: ``1e-5`` read back directly or rounded both pass."""

TINY = "tiny_shape_graph"

def _onnx(spec: Mapping[str, Any]):
    # imported here so that ``util.labs`` (imported by every ``submit``) does not load onnx
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


def prepare() -> None:
    """Fill the ONNX export cache with the notebook's MobileNetV2 and the hidden cases' models (the grader's side:
    it reads the grader-only cases)."""
    from util.labs import get_lab
    from util.onnx_models import export_torchvision

    export_torchvision("mobilenet_v2")
    for model, shape in sorted({(c.spec["model"], tuple(c.spec["input_shape"])) for t in get_lab(LAB.name).tasks
                                for c in t.cases if c.spec.get("model", TINY) != TINY}):  # 2.5's cases are series
        export_torchvision(model, input_shape=shape)


WRITTEN = {
    "2.4": (Written("2.Q1", "MobileNetV2's peak live memory is about twice its largest activation. Why is "
                     "the peak more than the largest tensor, why could another valid order of the "
                     "same graph have another peak, and why would a runtime's measured peak differ "
                     "from yours?",
                     6, words=(40, 250), since=2),),
}
"""The lab's questions answered in words, marked by hand against ``rubrics.py`` (release 2): their
points came out of their task's exported answer."""


LAB = Lab(
    name="lab2",
    prepare="util.labs.lab2.tasks:prepare",
    title="ONNX model analysis",
    notebook="lab2_onnx_analysis.ipynb",
    packages=("torch", "torchvision", "onnx", "onnxscript", "onnxruntime", "numpy"),
    releases=(
        Release(1, "2026-11-22", "The first release: operator counts, a node inspector, per-node bandwidth, peak live "
                "activation memory and a schedule plot of MobileNetV2 exported to ONNX."),
        Release(2, "2026-11-26", "Task 2.4 asks a written question, Q1 (6 points, marked by hand): why the peak of live "
                "memory is more than the largest tensor, and why orders and runtimes change it; its "
                "points came from 2.4's exported answer.",
                marker="(written, 6 points of task 2.4, marked by hand)"),
    ),
    tasks=(
        Task(
            id="2.1", title="Operator counts", answer_points=4,
            answer="a dict {op_type: number of nodes}, e.g. {'Add': 10, 'BatchNormalization': 52, ...}",
            function="operator_counts", run_case=_call_model,
            hidden_points=6,
            checks=CHECKS["2.1"],
        ),
        Task(
            id="2.2", title="Node inspector", answer_points=10,
            answer="a dict {node name: {'name', 'op_type', 'inputs', 'outputs', 'attributes'}}",
            tolerance=ATTRIBUTES,
            function="inspect_node", run_case=_call_nodes,
            hidden_points=20,
            checks=CHECKS["2.2"],
        ),
        Task(
            id="2.3", title="Memory bandwidth per node", answer_points=9,
            answer="a dict {'per_node': [rows {'node','op_type','read','written'}], 'peak_node': str, "
                   "'peak_bytes': int, 'written_bytes': int, 'total_bytes': int}",
            keys=("per_node", "peak_node", "peak_bytes", "written_bytes", "total_bytes"),
            function="bandwidth_report", run_case=_call_sizes,
            hidden_points=16,
            checks=CHECKS["2.3"],
        ),
        Task(
            id="2.4", title="Peak live activation memory", answer_points=4, written=WRITTEN["2.4"],
            answer="a dict {'per_node': [rows {'node','live_bytes'}], 'peak_node': str, 'peak_bytes': int}",
            keys=("per_node", "peak_node", "peak_bytes"),
            function="live_memory", run_case=_call_sizes,
            hidden_points=20,
            checks=CHECKS["2.4"],
        ),
        Task(
            id="2.5", title="Schedule plot", answer_points=1,
            answer="a dict {'points': int, 'peak_index': int, 'peak_label': str, 'peak_value': int}",
            keys=("points", "peak_index", "peak_label", "peak_value"),
            function="plot_schedule", run_case=_call_series,
            hidden_points=4,
            checks=CHECKS["2.5"],
        ),
    ),
)
