"""Task 16.7's models: a small residual network whose channels are coupled through additions and a concatenation.

A :class:`ResidualNet` is a ``stem`` convolution (3 x 3, BatchNorm ``stem_bn``, ReLU), then blocks ``block1``,
``block2``, ... of three kinds, then a global average pool and the ``fc`` layer:

* ``["basic", inner]``: ``conv1`` (3 x 3, to ``inner`` channels), ``bn1``, ReLU, ``conv2`` (3 x 3, back to the
  block's input channels), ``bn2``, then ``+`` the block's input (the identity) and a ReLU;
* ``["down", inner, out]``: the same with ``conv1`` of stride 2 and ``conv2`` to ``out`` channels, and a shortcut
  ``short`` (1 x 1, stride 2, to ``out``) with ``short_bn`` in place of the identity;
* ``["concat", left, right]``: ``left`` (3 x 3) with ``left_bn`` and ``right`` (1 x 1) with ``right_bn``, each
  followed by a ReLU, read the same input, and ``torch.cat([left, right], 1)``: ``left`` channels, then ``right``.

A concatenation's output is never added to anything (a ``basic`` block never follows a ``concat`` one), so every
group of coupled channels (the convolutions whose outputs are added together) is made of whole convolutions. Every
convolution has no bias. The network is described by its :meth:`ResidualNet.config` alone (``stem`` and ``blocks``); the widths of a pruned
one are read back from its weights' shapes (:func:`config_from_state`), which is how the grader rebuilds what you
return.
"""
from __future__ import annotations

import copy
from typing import Any, Mapping, Sequence

import torch
from torch import nn

from util.models import seed_bn

GRID = 4096
"""Convolution weights of :func:`build_residual` are multiples of ``1 / GRID``."""
KINDS = {"basic": 1, "down": 2, "concat": 2}
"""Block kind -> how many widths it takes."""
DEFAULT = {"stem": 16, "blocks": [["basic", 16], ["down", 24, 32], ["concat", 16, 16]]}
"""The notebook's network: 16 stem channels, an identity block, a downsampling block to 32, a concatenation of
16 + 16 channels; 8 x 8 inputs of one channel, 10 classes."""


def _conv(cin: int, cout: int, kernel: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, bias=False)


class Basic(nn.Module):
    """``relu(bn2(conv2(relu(bn1(conv1(x))))) + x)``."""

    def __init__(self, channels: int, inner: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = _conv(channels, inner, 3), nn.BatchNorm2d(inner)
        self.conv2, self.bn2 = _conv(inner, channels, 3), nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(h)) + x)


class Down(nn.Module):
    """``relu(bn2(conv2(relu(bn1(conv1(x))))) + short_bn(short(x)))``, ``conv1`` and ``short`` of stride 2."""

    def __init__(self, channels: int, inner: int, out: int) -> None:
        super().__init__()
        self.conv1, self.bn1 = _conv(channels, inner, 3, stride=2), nn.BatchNorm2d(inner)
        self.conv2, self.bn2 = _conv(inner, out, 3), nn.BatchNorm2d(out)
        self.short, self.short_bn = _conv(channels, out, 1, stride=2), nn.BatchNorm2d(out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(h)) + self.short_bn(self.short(x)))


class Concat(nn.Module):
    """``torch.cat([relu(left_bn(left(x))), relu(right_bn(right(x)))], 1)``."""

    def __init__(self, channels: int, left: int, right: int) -> None:
        super().__init__()
        self.left, self.left_bn = _conv(channels, left, 3), nn.BatchNorm2d(left)
        self.right, self.right_bn = _conv(channels, right, 1), nn.BatchNorm2d(right)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.relu(self.left_bn(self.left(x))), torch.relu(self.right_bn(self.right(x)))], 1)


class ResidualNet(nn.Module):
    """A stem convolution, residual blocks and a global-average-pooled ``fc``, described by ``stem`` and ``blocks``.

    ``stem`` is the first convolution's width (3 x 3, ``stem_bn``, ReLU); each entry of ``blocks`` is one of

    * ``["basic", inner]``: ``conv1`` to ``inner`` channels and ``conv2`` back, plus the identity (the block's
      output channels are coupled to its input's);
    * ``["down", inner, out]``: ``conv1`` of stride 2, ``conv2`` to ``out``, plus the shortcut ``short``
      (1 x 1, stride 2) with ``short_bn``: ``conv2``'s and ``short``'s outputs are coupled;
    * ``["concat", left, right]``: ``left`` (3 x 3) and ``right`` (1 x 1) read the same input and are
      concatenated, ``left``'s channels first (never added to anything).

    ``ResidualNet()`` is the notebook's network (:data:`DEFAULT`): 21,418 parameters, 560,448 MACs on an 8 x 8 image.
    ``config()`` gives back ``{"stem": ..., "blocks": ...}``; a pruned network's widths are read from its weights'
    shapes by :func:`config_from_state`."""

    def __init__(self, stem: int = DEFAULT["stem"], blocks: Sequence[Sequence[Any]] = tuple(DEFAULT["blocks"]),
                 in_channels: int = 1, classes: int = 10) -> None:
        super().__init__()
        self.blocks_config = [[str(b[0]), *(int(w) for w in b[1:])] for b in blocks]
        self.stem_width, self.in_channels, self.classes = int(stem), int(in_channels), int(classes)
        for number, block in enumerate(self.blocks_config, start=1):
            kind = block[0]
            if kind not in KINDS or len(block) != 1 + KINDS[kind]:
                raise ValueError(f"block {number} is {block}; a block is ['basic', inner], ['down', inner, out] or "
                                 "['concat', left, right]")
            if kind == "basic" and number > 1 and self.blocks_config[number - 2][0] == "concat":
                raise ValueError("a basic block may not follow a concat block (its identity would add a "
                                 "concatenation)")
        self.stem = _conv(self.in_channels, self.stem_width, 3)
        self.stem_bn = nn.BatchNorm2d(self.stem_width)
        channels = self.stem_width
        for number, (kind, *widths) in enumerate(self.blocks_config, start=1):
            block = {"basic": Basic, "down": Down, "concat": Concat}[kind](channels, *widths)
            setattr(self, f"block{number}", block)
            channels = channels if kind == "basic" else widths[-1] if kind == "down" else sum(widths)
        self.fc = nn.Linear(channels, self.classes)

    def config(self) -> dict[str, Any]:
        """What builds this network again: ``ResidualNet(**net.config())``."""
        return {"stem": self.stem_width, "blocks": [list(b) for b in self.blocks_config],
                "in_channels": self.in_channels, "classes": self.classes}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem_bn(self.stem(x)))
        for number in range(1, len(self.blocks_config) + 1):
            x = getattr(self, f"block{number}")(x)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def build_residual(arch: Mapping[str, Any] | None = None, seed: int = 0) -> ResidualNet:
    """A :class:`ResidualNet` of ``arch`` (keyword arguments of ``ResidualNet``; ``None``: the notebook's) with
    weights drawn from ``seed`` and non-trivial BatchNorm statistics and scales (``util.models.seed_bn``), in eval
    mode. Every convolution's weight is rounded to a multiple of 2^-12 (:data:`GRID`), so a filter's L1 norm and
    their sum over a group are exact in float32, whatever the order of the additions: two channels' importances are
    equal only when they really are. The same ``arch`` and ``seed`` give the same network on every machine."""
    torch.manual_seed(seed)
    net = ResidualNet(**dict(arch or {}))
    seed_bn(net, seed)
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, nn.Conv2d):
                module.weight.copy_(torch.round(module.weight * GRID) / GRID)
    return net.eval()


def convolutions(config: Mapping[str, Any]) -> list[str]:
    """The names of a network's convolutions, in order: ``["stem", "block1.conv1", "block1.conv2", ...]``."""
    names = ["stem"]
    for number, block in enumerate(config["blocks"], start=1):
        parts = {"basic": ("conv1", "conv2"), "down": ("conv1", "conv2", "short"), "concat": ("left", "right")}
        names += [f"block{number}.{part}" for part in parts[block[0]]]
    return names


def batchnorm_of(conv: str) -> str:
    """The BatchNorm after convolution ``conv``: ``stem_bn``, ``block2.bn1``, ``block2.short_bn``, ..."""
    head, _, last = conv.rpartition(".")
    name = {"stem": "stem_bn", "conv1": "bn1", "conv2": "bn2", "short": "short_bn", "left": "left_bn",
            "right": "right_bn"}[last]
    return f"{head}.{name}" if head else name


def kept_channels(net: ResidualNet, group: Sequence[str], keep: int) -> torch.Tensor:
    """The ``keep`` channels of ``group`` with the largest summed importance (the L1 norms of each member's filter
    for the channel, added over the group's convolutions; the earlier on a tie), in increasing order."""
    importance = sum(net.get_submodule(name).weight.detach().double().abs().sum(dim=(1, 2, 3)) for name in group)
    return importance.argsort(descending=True, stable=True)[:keep].sort().values


def masked_residual(net: ResidualNet, group: Sequence[str], keep: int) -> ResidualNet:
    """A copy of ``net`` whose dropped channels of ``group`` are zero: each member's filters and its BatchNorm's
    scale and shift set to zero, no shape changed (what the pruned network must compute)."""
    masked = copy.deepcopy(net).eval()
    dropped = torch.ones(net.get_submodule(group[0]).out_channels, dtype=torch.bool)
    dropped[kept_channels(net, group, keep)] = False
    with torch.no_grad():
        for name in group:
            masked.get_submodule(name).weight[dropped] = 0
            bn = masked.get_submodule(batchnorm_of(name))
            bn.weight[dropped] = 0
            bn.bias[dropped] = 0
    return masked


def config_from_state(shapes: Mapping[str, Sequence[int]], blocks: Sequence[Sequence[Any]]) -> dict[str, Any] | None:
    """The config of a network of these block kinds whose weights have these ``shapes`` (name -> shape), read from
    the convolutions' output channels; ``None`` when a weight it needs is missing or not 4-D."""
    def out(name: str) -> int | None:
        shape = shapes.get(f"{name}.weight")
        return int(shape[0]) if shape is not None and len(shape) == 4 else None

    stem = out("stem")
    found = []
    for number, block in enumerate(blocks, start=1):
        kind = block[0]
        parts = {"basic": ("conv1",), "down": ("conv1", "conv2"), "concat": ("left", "right")}[kind]
        widths = [out(f"block{number}.{part}") for part in parts]
        found.append([kind, *widths])
    fc = shapes.get("fc.weight")
    if stem is None or any(w is None for b in found for w in b[1:]) or fc is None or len(fc) != 2:
        return None
    return {"stem": stem, "blocks": found, "in_channels": int(shapes["stem.weight"][1]), "classes": int(fc[0])}


def unstructured_like(net: nn.Module, params: int) -> nn.Module:
    """A copy of ``net`` with unstructured zeros: the weights of its convolutions and ``fc`` of smallest magnitude
    (one global ranking, the earlier on a tie) set to zero until as many are zero as ``net`` has parameters more
    than ``params``. Every shape is unchanged: it counts, stores and multiplies exactly what ``net`` does."""
    from util.labs.lab16.costs import count_params

    sparse = copy.deepcopy(net).eval()
    weights = [m.weight for m in sparse.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    drop = count_params(net) - int(params)
    if drop <= 0:
        return sparse
    magnitudes = torch.cat([w.detach().abs().flatten() for w in weights])
    mask = torch.ones_like(magnitudes, dtype=torch.bool)
    mask[magnitudes.argsort(stable=True)[:drop]] = False
    with torch.no_grad():
        start = 0
        for w in weights:
            w.mul_(mask[start:start + w.numel()].reshape(w.shape).to(w.dtype))
            start += w.numel()
    return sparse


def best_latency(model: nn.Module, x: torch.Tensor, rounds: int = 5, calls: int = 10) -> float:
    """Seconds one forward pass of ``model`` on ``x`` takes: one call first, not timed (the first call of a
    network pays one-off costs: PyTorch choosing and preparing its kernels, memory first touched), then the best of
    ``rounds`` rounds of ``calls`` calls each (noise only ever adds time), without autograd. Time two networks with
    it one after the other, each warmed up by its own first call: a timer without a warm-up bills the network timed
    first for those one-off costs."""
    import time

    with torch.no_grad():
        model(x)
        best = float("inf")
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(calls):
                model(x)
            best = min(best, (time.perf_counter() - start) / calls)
    return best
