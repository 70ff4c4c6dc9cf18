"""The small ``torch.fx`` graphs of lab 12 (tasks 12.1 and 12.3), their inputs, and the given helpers.

Every graph computes a **mean cross-entropy loss**: its placeholders are ``x`` (float32) and ``y``
(int64 labels), its parameters are ``get_attr`` nodes, and its other nodes call one of these
operators (every constant argument positional, except ``log_softmax``'s and ``nll_loss``'s, which
``torch.fx`` records as keyword arguments):

========================  ==============================================  ==================================
:func:`op_name`           the call                                        notes
========================  ==============================================  ==================================
``linear``                ``F.linear(x, w, b)`` or ``F.linear(x, w)``     ``x @ w.T + b``
``conv2d``                ``F.conv2d(x, w, None, stride, padding)``       no bias; :func:`conv2d_vjp`
``relu``                  ``torch.relu(x)``
``add``                   ``a + b``                                       either side may broadcast
``mul``                   ``a * b``                                       either side may broadcast
``max_pool2d``            ``F.max_pool2d(x, k)``                          stride ``k``; :func:`max_pool2d_vjp`
``flatten``               ``torch.flatten(x, 1)``
``log_softmax``           ``F.log_softmax(x, dim=1)``
``nll_loss``              ``F.nll_loss(logp, y)``                         the mean over the batch
``sum``                   ``torch.sum(x)``
========================  ==============================================  ==================================

The parameters are seeded (PyTorch's default initialisation, drawn from a ``torch.Generator``), so a
graph is the same on every machine; ``digits_cnn`` takes its weights from the course's DigitsCNN
(:func:`util.models.build_model`), without its BatchNorms.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable, Mapping

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn

GRAPHS = ("mlp", "residual_mlp", "broadcast", "digits_cnn", "tied", "chain", "sum_mul", "tiny")
"""Every graph :func:`build_graph` makes."""
INPUTS = {"mlp": (64,), "residual_mlp": (64,), "broadcast": (1, 8, 8), "digits_cnn": (1, 8, 8), "tied": (64,),
          "chain": (256,), "sum_mul": (3,), "tiny": (2,)}
"""The shape of one example of each graph's ``x`` (the batch dimension comes first)."""
CLASSES = {"mlp": 10, "residual_mlp": 10, "broadcast": 10, "digits_cnn": 10, "tied": 10, "chain": 256, "tiny": 2}
"""How many classes each graph's labels ``y`` take (``sum_mul`` has no labels)."""
_OPS: dict[Any, str] = {F.linear: "linear", F.conv2d: "conv2d", torch.relu: "relu", operator.add: "add",
                        operator.mul: "mul", F.max_pool2d: "max_pool2d", torch.flatten: "flatten",
                        F.log_softmax: "log_softmax", F.nll_loss: "nll_loss", torch.sum: "sum"}


def op_name(node: fx.Node) -> str:
    """The operator a ``call_function`` node calls, by the names of the table above (``"linear"``, ...)."""
    try:
        return _OPS[node.target]
    except (KeyError, TypeError):
        raise ValueError(f"node {node.name!r} calls {node.target!r}, which is not one of lab 12's operators") from None


def _uniform(generator: torch.Generator, shape: tuple[int, ...], fan_in: int) -> nn.Parameter:
    bound = 1.0 / math.sqrt(fan_in)
    return nn.Parameter((torch.rand(shape, generator=generator) * 2 - 1) * bound)


class _Params(nn.Module):
    """Seeded parameters as plain attributes (``self.w0``), so tracing makes them ``get_attr`` nodes."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self._generator = torch.Generator().manual_seed(seed)

    def linear(self, name: str, n_in: int, n_out: int, bias: bool = True) -> None:
        setattr(self, f"w{name}", _uniform(self._generator, (n_out, n_in), n_in))
        if bias:
            setattr(self, f"b{name}", _uniform(self._generator, (n_out,), n_in))


class MLP(_Params):
    """64-128-64-10 with ReLUs (the notebook's MLP)."""

    def __init__(self) -> None:
        super().__init__(seed=1201)
        self.linear("0", 64, 128)
        self.linear("1", 128, 64)
        self.linear("2", 64, 10)

    def forward(self, x, y):
        h = torch.relu(F.linear(x, self.w0, self.b0))
        h = torch.relu(F.linear(h, self.w1, self.b1))
        return F.nll_loss(F.log_softmax(F.linear(h, self.w2, self.b2), dim=1), y)


class ResidualMLP(_Params):
    """Two residual blocks ``h = h + relu(linear(h))`` of width 64: each block's input is read twice."""

    def __init__(self) -> None:
        super().__init__(seed=1202)
        for name in ("0", "1", "2"):
            self.linear(name, 64, 64)
        self.linear("3", 64, 10)

    def forward(self, x, y):
        h = torch.relu(F.linear(x, self.w0, self.b0))
        h = h + torch.relu(F.linear(h, self.w1, self.b1))
        h = h + torch.relu(F.linear(h, self.w2, self.b2))
        return F.nll_loss(F.log_softmax(F.linear(h, self.w3, self.b3), dim=1), y)


class Broadcast(_Params):
    """Biases and a scale added and multiplied by broadcasting: ``[8, 1, 1]`` over ``N x 8 x 8 x 8``,
    ``[1, 8, 1, 1]`` too, and ``[10]`` over ``N x 10``."""

    def __init__(self) -> None:
        super().__init__(seed=1203)
        self.wc = _uniform(self._generator, (8, 1, 3, 3), 9)
        self.bc = _uniform(self._generator, (8, 1, 1), 9)
        self.scale = nn.Parameter(0.5 + torch.rand((1, 8, 1, 1), generator=self._generator))
        self.linear("f", 512, 10, bias=False)
        self.bf = _uniform(self._generator, (10,), 512)

    def forward(self, x, y):
        h = torch.relu(F.conv2d(x, self.wc, None, 1, 1) + self.bc) * self.scale
        return F.nll_loss(F.log_softmax(F.linear(torch.flatten(h, 1), self.wf) + self.bf, dim=1), y)


class DigitsGraph(_Params):
    """The course's DigitsCNN without its BatchNorms: conv1 + ReLU, conv2 + ReLU, max pool 2, conv3 + ReLU, fc."""

    def __init__(self) -> None:
        from util.models import build_model

        super().__init__(seed=1204)
        cnn = build_model("digits_cnn")
        for name in ("conv1", "conv2", "conv3"):
            setattr(self, name, nn.Parameter(getattr(cnn, name).weight.detach().clone()))
        self.fc_w = nn.Parameter(cnn.fc.weight.detach().clone())
        self.fc_b = nn.Parameter(cnn.fc.bias.detach().clone())

    def forward(self, x, y):
        h = torch.relu(F.conv2d(x, self.conv1, None, 1, 1))
        h = F.max_pool2d(torch.relu(F.conv2d(h, self.conv2, None, 1, 1)), 2)
        h = torch.relu(F.conv2d(h, self.conv3, None, 1, 1))
        return F.nll_loss(F.log_softmax(F.linear(torch.flatten(h, 1), self.fc_w, self.fc_b), dim=1), y)


class Tied(_Params):
    """One 64 x 64 weight ``w`` used by two linears in a row (a tied weight)."""

    def __init__(self) -> None:
        super().__init__(seed=1205)
        self.linear("", 64, 64)
        self.linear("_out", 64, 10)

    def forward(self, x, y):
        h = torch.relu(F.linear(x, self.w, self.b))
        h = torch.relu(F.linear(h, self.w))
        return F.nll_loss(F.log_softmax(F.linear(h, self.w_out, self.b_out), dim=1), y)


class Chain(_Params):
    """Eight blocks ``relu(linear(h))`` of width 256, the loss over 256 classes (tasks 12.3 and 12.4)."""

    def __init__(self) -> None:
        super().__init__(seed=1206)
        for index in range(8):
            self.linear(str(index), 256, 256)

    def forward(self, x, y):
        h = x
        for index in range(8):
            h = torch.relu(F.linear(h, getattr(self, f"w{index}"), getattr(self, f"b{index}")))
        return F.nll_loss(F.log_softmax(h, dim=1), y)


class SumMul(_Params):
    """``sum(x * w)`` with ``w`` of 3 elements: its gradient is ``x`` (summed over the batch)."""

    def __init__(self) -> None:
        super().__init__(seed=1207)
        self.w = nn.Parameter(torch.tensor([0.5, -1.0, 2.0]))

    def forward(self, x):
        return torch.sum(x * self.w)


class Tiny(_Params):
    """``F.linear(x, w, b)`` with ``w`` (2 x 2) and ``b`` all zeros, then the loss over 2 classes: small
    enough to work out by hand (both classes get probability 1/2)."""

    def __init__(self) -> None:
        super().__init__(seed=1208)
        self.w = nn.Parameter(torch.zeros(2, 2))
        self.b = nn.Parameter(torch.zeros(2))

    def forward(self, x, y):
        return F.nll_loss(F.log_softmax(F.linear(x, self.w, self.b), dim=1), y)


_BUILDERS: dict[str, Callable[[], nn.Module]] = {
    "mlp": MLP, "residual_mlp": ResidualMLP, "broadcast": Broadcast, "digits_cnn": DigitsGraph, "tied": Tied,
    "chain": Chain, "sum_mul": SumMul, "tiny": Tiny}


def build_graph(name: str, dtype: torch.dtype = torch.float32) -> fx.GraphModule:
    """Graph ``name`` (one of :data:`GRAPHS`) traced with ``torch.fx``, its parameters in ``dtype``.

    >>> gm = build_graph("mlp")
    >>> [node.op for node in gm.graph.nodes][:3]
    ['placeholder', 'placeholder', 'get_attr']
    """
    if name not in _BUILDERS:
        raise KeyError(f"unknown graph {name!r}; choose one of {', '.join(GRAPHS)}")
    with torch.random.fork_rng(devices=[]):
        module = _BUILDERS[name]()
    return fx.symbolic_trace(module.to(dtype))


def parameter_names(gm: fx.GraphModule) -> list[str]:
    """The graph's parameters (the targets of its ``get_attr`` nodes), in graph order, each once."""
    return list(dict.fromkeys(node.target for node in gm.graph.nodes if node.op == "get_attr"))


def feeds(name: str, batch: int, start: int = 0, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """Inputs for graph ``name``: ``x`` and ``y`` (the labels).

    The digits graphs (``mlp``, ``residual_mlp``, ``tied``: flattened to 64 values; ``broadcast`` and
    ``digits_cnn``: ``1 x 8 x 8``) read training images ``start .. start + batch - 1`` of
    :func:`util.data.digits_split` and their labels; ``chain``, ``sum_mul`` and ``tiny`` get uniform
    values in [0, 1) from a generator seeded with ``start`` (and labels of their classes).
    """
    if name in ("chain", "sum_mul", "tiny"):
        generator = torch.Generator().manual_seed(start)
        x = torch.rand((batch, *INPUTS[name]), generator=generator).to(dtype)
        if name == "sum_mul":
            return {"x": x}
        return {"x": x, "y": torch.randint(0, CLASSES[name], (batch,), generator=generator)}
    from util.data import digits_split

    split = digits_split()
    if start + batch > len(split.y_train):
        raise ValueError(f"there are {len(split.y_train)} training images; {start} + {batch} is past them")
    x = split.x_train[start:start + batch].reshape((batch, *INPUTS[name])).to(dtype).clone()   # its own storage
    return {"x": x, "y": split.y_train[start:start + batch].clone()}


def forward_values(gm: fx.GraphModule, inputs: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every node's value on ``inputs`` (placeholder name -> tensor), by node name: placeholders,
    parameters (``get_attr``) and every ``call_function`` node, as the graph computes them (no autograd)."""
    values: dict[str, Any] = {}
    with torch.no_grad():
        for node in gm.graph.nodes:
            if node.op == "placeholder":
                values[node.name] = inputs[node.target]
            elif node.op == "get_attr":
                values[node.name] = getattr(gm, node.target).detach()
            elif node.op == "call_function":
                args = fx.node.map_arg(node.args, lambda n: values[n.name])
                kwargs = fx.node.map_arg(node.kwargs, lambda n: values[n.name])
                values[node.name] = node.target(*args, **kwargs)
    return values


def conv2d_vjp(x: torch.Tensor, w: torch.Tensor, grad_out: torch.Tensor, stride: int = 1,
               padding: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The gradients of ``F.conv2d(x, w, None, stride, padding)`` with respect to ``x`` and ``w``, given
    the gradient of its output: ``(grad_x, grad_w)`` (no autograd: PyTorch's own backward kernels)."""
    grad_x = torch.nn.grad.conv2d_input(x.shape, w, grad_out, stride, padding)
    grad_w = torch.nn.grad.conv2d_weight(x, w.shape, grad_out, stride, padding)
    return grad_x, grad_w


def max_pool2d_vjp(x: torch.Tensor, grad_out: torch.Tensor, kernel: int) -> torch.Tensor:
    """The gradient of ``F.max_pool2d(x, kernel)`` (stride ``kernel``) with respect to ``x``, given the
    gradient of its output: each window's gradient goes to the element that was its maximum."""
    _, indices = F.max_pool2d(x, kernel, return_indices=True)
    return torch.ops.aten.max_pool2d_with_indices_backward(grad_out, x, [kernel, kernel], [kernel, kernel], [0, 0],
                                                           [1, 1], False, indices)
