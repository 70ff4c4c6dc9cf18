"""The course's float16 emulator: "float16 storage, float32 compute" (what the grader judges with).

onnxruntime's CPU provider has float16 kernels for almost no op: it runs a float16 graph in float32
and cancels the Casts it inserts, so a float16 overflow never shows. The emulator makes every float16
tensor explicit instead: the graph runs in float32, and each value that float16 would store is rounded
through a ``Cast(to=FLOAT16) -> Cast(to=FLOAT)`` pair (values beyond 65,504 become inf, as in float16).
It runs at ``ORT_DISABLE_ALL``, where onnxruntime keeps explicit Cast pairs, with one thread.

* :func:`emulate` emulates a converted (mixed-precision) model: float16 initializers are widened
  exactly, every Cast to float16 and every float16 output of a node is rounded;
* :func:`emulate_assignment` emulates a float32 model in which every node runs in float16 except those
  named: each float16 node's float inputs and outputs are rounded. It needs no converter, and gives
  bit for bit what ``emulate`` gives on the converted model (a test checks it).
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from util.labs.lab7.summary import tensor_types
from util.onnx_models import make_model
from util.onnx_session import run

F32, F16 = TensorProto.FLOAT, TensorProto.FLOAT16


def _round(source: str, target: str) -> list[onnx.NodeProto]:
    """``target`` = ``source`` rounded to float16 and widened back to float32."""
    return [helper.make_node("Cast", [source], [f"{target}__half"], name=f"{target}__to_half", to=F16),
            helper.make_node("Cast", [f"{target}__half"], [target], name=f"{target}__to_float", to=F32)]


def _model(model: onnx.ModelProto, nodes, initializers) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, model.graph.name, model.graph.input, model.graph.output, initializer=initializers)
    return make_model(graph, like=model)


def emulated_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """The float32 model that :func:`emulate` runs for a mixed-precision ``model``."""
    types = tensor_types(model)
    initializers = [numpy_helper.from_array(numpy_helper.to_array(i).astype(np.float32), i.name)
                    if i.data_type == F16 else i for i in model.graph.initializer]
    nodes = []
    for original in model.graph.node:
        node = onnx.NodeProto()
        node.CopyFrom(original)
        to = next((a for a in node.attribute if a.name == "to"), None) if node.op_type == "Cast" else None
        if to is not None and to.i == F16:
            to.i = F32
            rounded = list(range(len(node.output)))
        else:
            rounded = [k for k, t in enumerate(node.output) if types.get(t) == F16]
        for k in rounded:
            node.output[k] = f"{original.output[k]}__float"
        nodes.append(node)
        for k in rounded:
            nodes += _round(node.output[k], original.output[k])
    return _model(model, nodes, initializers)


def emulate(model: onnx.ModelProto, feeds: dict) -> dict[str, np.ndarray]:
    """Outputs of the mixed-precision ``model`` on ``feeds`` as float16 storage would give them."""
    return run(emulated_model(model), feeds)


def emulate_assignment(model: onnx.ModelProto, fp32_nodes: Iterable[str], feeds: dict) -> dict[str, np.ndarray]:
    """Outputs of the float32 ``model`` with every node in float16 except those named in ``fp32_nodes``."""
    keep = set(fp32_nodes)
    types = tensor_types(model)
    half_made: set[str] = set()          # float tensors a float16 node wrote: already rounded
    rounded_copy: dict[str, str] = {}    # float32 tensor -> its rounded copy for float16 readers
    nodes = []
    for original in model.graph.node:
        node = onnx.NodeProto()
        node.CopyFrom(original)
        if original.name in keep:
            nodes.append(node)
            continue
        for j, t in enumerate(original.input):
            if t and types.get(t) == F32 and t not in half_made:
                if t not in rounded_copy:
                    rounded_copy[t] = f"{t}__rounded"
                    nodes += _round(t, rounded_copy[t])
                node.input[j] = rounded_copy[t]
        after = []
        for k, t in enumerate(original.output):
            if types.get(t) == F32:
                node.output[k] = f"{t}__float"
                after += _round(node.output[k], t)
                half_made.add(t)
        nodes += [node, *after]
    return run(_model(model, nodes, list(model.graph.initializer)), feeds)


def close(outputs: dict, reference: dict, rtol: float, atol: float) -> bool:
    """Every output finite and within ``|out - ref| <= atol + rtol * |ref|`` of the float32 reference."""
    return all(np.isfinite(outputs[name]).all() and np.allclose(outputs[name], value, rtol=rtol, atol=atol)
               for name, value in reference.items())
