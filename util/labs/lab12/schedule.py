"""Task 12.3's input: a ``torch.fx`` graph turned into the nodes of a training step, with what each
node's backward reads (:func:`training_graph`, whose docstring says exactly what each node holds).
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.fx as fx

from util.labs.lab12.graphs import forward_values, op_name

SAVES = {
    "linear": "its input x (for the weight's gradient; the weight itself is a parameter)",
    "conv2d": "its input x",
    "relu": "its output (the mask: where the output is positive)",
    "add": "nothing",
    "mul": "both operands (each is the other's gradient factor), parameters left out",
    "max_pool2d": "its input and the indices of the maxima",
    "log_softmax": "its output",
    "nll_loss": "its input (the log-probabilities) and the labels y",
    "sum": "nothing (only the input's shape)",
}
"""What the backward of each operator reads besides the gradient of its result (as ``torch.autograd`` saves)."""
VIEWS = ("flatten",)
"""Operators whose result is a view of their input: no tensor of their own."""


def training_graph(gm: fx.GraphModule, inputs: Mapping[str, torch.Tensor]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """``(nodes, nbytes)`` for the training step of ``gm`` on ``inputs``.

    :func:`training_graph` runs the graph once (to learn every tensor's size) and lists its
    ``call_function`` nodes in order, each as a dict::

        {"name": "relu_1", "op": "relu", "inputs": ["linear_1"], "outputs": ["relu_1"], "saves": ["relu_1"]}

    * ``inputs``: the tensors the node reads in the forward pass (placeholders and earlier outputs;
      parameters are not listed: they are not activations);
    * ``outputs``: what it writes; the first is its result, the one gradients flow through; a max pool
      also writes the int64 positions of its maxima (``"<name>.indices"``), which only its backward reads;
    * ``saves``: the tensors its backward reads besides the gradient of its result (:data:`SAVES`, the
      tensors ``torch.autograd`` saves for that operator, parameters left out).

    ``flatten`` is a view (its result shares its input's storage): the list leaves it out, and the nodes
    after it read its input instead. ``nbytes`` gives every tensor's size in bytes (elements x 4 for
    float32, x 8 for the int64 labels and indices); a gradient has the size of its tensor.
    """
    values = forward_values(gm, inputs)
    params = {node.name for node in gm.graph.nodes if node.op == "get_attr"}
    alias: dict[str, str] = {}
    nbytes = {node.name: _bytes(values[node.name]) for node in gm.graph.nodes if node.op == "placeholder"}
    nodes = []
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        op = op_name(node)
        reads = [alias.get(arg.name, arg.name) for arg in node.all_input_nodes if arg.name not in params]
        if op in VIEWS:
            alias[node.name] = reads[0]
            continue
        outputs = [node.name]
        nbytes[node.name] = _bytes(values[node.name])
        if op == "max_pool2d":
            outputs.append(f"{node.name}.indices")
            nbytes[outputs[1]] = values[node.name].numel() * 8
        saves = {"linear": reads[:1], "conv2d": reads[:1], "relu": [node.name], "add": [], "mul": reads,
                 "max_pool2d": [reads[0], outputs[-1]], "log_softmax": [node.name], "nll_loss": reads,
                 "sum": []}[op]
        nodes.append({"name": node.name, "op": op, "inputs": reads, "outputs": outputs,
                      "saves": list(dict.fromkeys(saves))})
    return nodes, nbytes


def _bytes(value: torch.Tensor) -> int:
    return value.numel() * value.element_size()
