"""Lab 16's models: the course's DigitsCNN as a configurable :class:`ConvNet`, and the small student of task 16.5.

A :class:`ConvNet` is a stack of convolution blocks (3 x 3 convolution without bias, BatchNorm, ReLU, a 2 x 2
max pool after the blocks ``pools`` names), then ``flatten``, hidden ``Linear`` + ReLU layers and the ``fc``
layer. ``ConvNet()`` is DigitsCNN (``util.models``), with the same parameter names and the same forward, so its
weights load as they are. Task 16.2's channel surgery returns a :class:`ConvNet` with smaller widths, so a pruned
model is described by its :meth:`ConvNet.config` and its ``state_dict`` alone.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn

from util.models import seed_bn


class ConvNet(nn.Module):
    """Convolution blocks, then Linear layers, on ``in_channels x size x size`` images.

    * ``widths``: output channels of ``conv1``, ``conv2``, ... (each 3 x 3, padding 1, no bias), each
      followed by ``bn<i>`` (BatchNorm2d) and a ReLU;
    * ``pools``: the blocks (numbered from 1) followed by a 2 x 2 max pool;
    * ``hidden``: widths of the Linear layers ``hidden1``, ``hidden2``, ... (each followed by a ReLU) between
      ``flatten`` and ``fc``, the last layer (``classes`` outputs).

    ``ConvNet()`` is DigitsCNN: widths (16, 32, 32), a pool after block 2, no hidden layer, 19,258 parameters.
    """

    def __init__(self, widths=(16, 32, 32), pools=(2,), hidden=(), in_channels: int = 1, size: int = 8,
                 classes: int = 10) -> None:
        super().__init__()
        self.widths, self.pools, self.hidden = tuple(int(w) for w in widths), tuple(int(p) for p in pools), \
            tuple(int(h) for h in hidden)
        self.in_channels, self.size, self.classes = int(in_channels), int(size), int(classes)
        channels, side = self.in_channels, self.size
        for i, width in enumerate(self.widths, start=1):
            setattr(self, f"conv{i}", nn.Conv2d(channels, width, 3, padding=1, bias=False))
            setattr(self, f"bn{i}", nn.BatchNorm2d(width))
            channels = width
            if i in self.pools:
                side //= 2
        features = channels * side * side
        for j, width in enumerate(self.hidden, start=1):
            setattr(self, f"hidden{j}", nn.Linear(features, width))
            features = width
        self.fc = nn.Linear(features, self.classes)
        self.side = side
        """Height and width of the last block's output (8 -> 4 after one pool)."""

    def config(self) -> dict[str, Any]:
        """What builds this network again: ``ConvNet(**net.config())``."""
        return {"widths": list(self.widths), "pools": list(self.pools), "hidden": list(self.hidden),
                "in_channels": self.in_channels, "size": self.size, "classes": self.classes}

    def convs(self) -> list[str]:
        """The names of the convolutions, in order: ``["conv1", "conv2", ...]``."""
        return [f"conv{i}" for i in range(1, len(self.widths) + 1)]

    def linears(self) -> list[str]:
        """The names of the Linear layers, in order: ``["hidden1", ..., "fc"]``."""
        return [f"hidden{j}" for j in range(1, len(self.hidden) + 1)] + ["fc"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(1, len(self.widths) + 1):
            x = torch.relu(getattr(self, f"bn{i}")(getattr(self, f"conv{i}")(x)))
            if i in self.pools:
                x = nn.functional.max_pool2d(x, 2)
        x = torch.flatten(x, 1)
        for j in range(1, len(self.hidden) + 1):
            x = torch.relu(getattr(self, f"hidden{j}")(x))
        return self.fc(x)


def build_convnet(arch: Mapping[str, Any] | None = None, seed: int = 0) -> ConvNet:
    """A :class:`ConvNet` of architecture ``arch`` (the keyword arguments of ``ConvNet``; ``None``: DigitsCNN)
    with weights drawn from ``seed`` and non-trivial BatchNorm statistics (``util.models.seed_bn``, same
    seed), in eval mode. The same ``arch`` and ``seed`` give the same network on every machine."""
    torch.manual_seed(seed)
    net = ConvNet(**dict(arch or {}))
    seed_bn(net, seed)
    return net.eval()


def small_student(seed: int = 0) -> nn.Sequential:
    """Task 16.5's student: a 3 x 3 convolution from 1 to 8 channels (with bias), ReLU, a 2 x 2 max pool,
    ``flatten`` and a Linear layer from 128 to 10: 1,370 parameters (DigitsCNN has 19,258). Weights drawn
    from ``seed``."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(128, 10))


def zero_fraction(net: nn.Module, fraction: float, seed: int) -> nn.Module:
    """``net`` with a random ``fraction`` of the elements of every Conv2d and Linear weight set to zero, in place
    (positions drawn from ``seed``): a model pruned before, to prune further."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in net.modules():
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                weight = module.weight.view(-1)
                weight[torch.randperm(weight.numel(), generator=generator)[:round(fraction * weight.numel())]] = 0
    return net


def build_matrix(shape, seed: int, kind: str = "normal") -> torch.Tensor:
    """A weight for task 16.3 of ``shape`` (2-D, or 4-D like a convolution's) drawn from ``seed``: ``"normal"``
    values, or ``"ties"``: small whole numbers from -3 to 3, so that many magnitudes are equal."""
    generator = torch.Generator().manual_seed(seed)
    if kind == "ties":
        return torch.randint(-3, 4, tuple(shape), generator=generator).float()
    return torch.randn(tuple(shape), generator=generator)


def build_layer(spec: Mapping[str, Any], seed: int) -> nn.Module:
    """A layer for task 16.4 from ``spec``: ``{"kind": "linear", "in", "out", "bias"}`` or ``{"kind": "conv", "in",
    "out", "kernel", "stride", "padding", "bias"}``, weights drawn from ``seed``."""
    torch.manual_seed(seed)
    if spec["kind"] == "linear":
        return nn.Linear(spec["in"], spec["out"], bias=spec["bias"])
    return nn.Conv2d(spec["in"], spec["out"], spec["kernel"], stride=spec.get("stride", 1),
                     padding=spec.get("padding", 0), bias=spec["bias"])


def lora_values(seed: int, out_features: int, in_features: int, r: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Values for an adapter's ``lora_A`` (``r x in_features``) and ``lora_B`` (``out_features x r``), drawn from
    ``seed`` (0.2 times normal draws): what task 16.6's cases put into your adapters before they compare the
    adapted model with its merged one (a fresh ``lora_B`` is zero, and merging zero changes nothing)."""
    generator = torch.Generator().manual_seed(seed)
    return (0.2 * torch.randn(r, in_features, generator=generator),
            0.2 * torch.randn(out_features, r, generator=generator))
