"""The seeded tensors, small models and calibration batches of lab 9's hidden cases (and its public checks).

Everything is built from a spec (a JSON-able dict) and a seed, the same on every machine: numpy's
``default_rng`` for tensors, ``util.models.build_model`` / ``torch.manual_seed`` for weights.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch
from torch import nn

# ---------------------------------------------------------------- 9.1: tensors to quantise

def tensor(spec: Mapping[str, Any]) -> np.ndarray:
    """The float32 tensor of a 9.1 case: ``spec["tensor"]`` names its kind, ``spec["seed"]`` seeds it."""
    rng = np.random.default_rng(int(spec["seed"]))
    kind = spec["tensor"]
    if kind == "all_positive":          # an activation that never reaches 0 (after a shift, say)
        x = rng.uniform(0.5, 3.0, size=(4, 16, 6, 6))
    elif kind == "pruned_filter":       # conv weights with one output channel pruned to zeros
        x = rng.normal(0.0, 0.1, size=(8, 4, 3, 3))
        x[5] = 0.0
    elif kind == "weights":             # a plain conv weight
        x = rng.normal(0.0, 0.05, size=(16, 8, 3, 3))
    elif kind == "one_channel_x100":    # one output channel 100 times larger than the others
        x = rng.normal(0.0, 0.05, size=(16, 8, 3, 3))
        x[3] *= 100.0
    else:
        raise ValueError(f"unknown tensor kind {kind!r}")
    return x.astype(np.float32)


# ---------------------------------------------------------------- 9.2: models and calibration batches

class ConvNet(nn.Module):
    """conv (1 -> 8, 3x3, pad 1) + ReLU, conv (8 -> 4, 3x3) + ReLU: fx nodes ``x, conv1, relu, conv2, relu_1``."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv2(torch.relu(self.conv1(x))))


class PoolThenBN(nn.Module):
    """conv + ReLU, max pool, **BatchNorm after the pool** (nothing to fold it into), conv.

    fx nodes ``x, conv1, relu, pool, bn, conv2``."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.bn = nn.BatchNorm2d(6)
        self.conv2 = nn.Conv2d(6, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(self.bn(self.pool(torch.relu(self.conv1(x)))))


class InPlaceNet(nn.Module):
    """conv, **in-place** ReLU, conv, in-place ReLU, flatten, linear: the ReLUs overwrite the convs' outputs.

    fx nodes ``x, conv1, act, conv2, act_1, flatten, fc``."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.act = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act(self.conv2(self.act(self.conv1(x))))
        return self.fc(torch.flatten(x, 1))


CALIBRATION_NETS = {"conv_net": ConvNet, "pool_then_bn": PoolThenBN, "in_place": InPlaceNet}


def calibration_net(spec: Mapping[str, Any]) -> nn.Module:
    """The model of a 9.2 case, seeded (its BatchNorms with non-trivial statistics), in eval mode unless
    ``spec["train_mode"]``."""
    from util.models import seed_bn

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(spec["seed"]))
        model = CALIBRATION_NETS[spec["model"]]()
    seed_bn(model, int(spec["seed"]))
    return model.train() if spec.get("train_mode") else model.eval()


def calibration_batches(spec: Mapping[str, Any]) -> list[torch.Tensor]:
    """The batches of a 9.2 case: ``spec["batches"]`` images of 1 x 8 x 8 each, N(0.5, 0.5), with
    ``spec["outlier"]`` (if any) written into one pixel of the second batch."""
    generator = torch.Generator().manual_seed(int(spec["seed"]))
    batches = [0.5 + 0.5 * torch.randn((int(n), 1, 8, 8), generator=generator) for n in spec["batches"]]
    if spec.get("outlier"):
        batches[1][0, 0, 3, 4] = float(spec["outlier"])
    return batches


# ---------------------------------------------------------------- 9.4: models whose bytes are counted

class OddSizes(nn.Module):
    """Tensors with odd element counts (int4 packs two per byte, so each rounds up), a conv without a bias
    and a BatchNorm that stays (its weight and bias are float32). 3 x 5 x 3 = 45, 5 x 7 x 1 x 1 = 35, 7 x 9."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 5, (3, 1), bias=False)
        self.bn = nn.BatchNorm2d(5)
        self.conv2 = nn.Conv2d(5, 7, 1)
        self.fc = nn.Linear(7, 9)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv2(torch.relu(self.bn(self.conv1(x)))))
        return self.fc(x.mean(dim=(2, 3)))


def bytes_net(name: str) -> nn.Module:
    """A model of a 9.4 case: ``"odd_sizes"`` (:class:`OddSizes`) or any ``util.models`` name."""
    from util.models import build_model

    if name == "odd_sizes":
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            return OddSizes().eval()
    return build_model(name)
