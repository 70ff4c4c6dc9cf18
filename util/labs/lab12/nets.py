"""The models of task 12.2 (training memory), as ordinary ``nn.Module`` s.

* ``digits_cnn``: the course's DigitsCNN (:func:`util.models.build_model`), BatchNorms included.
* ``chain8``: eight blocks ``Linear(256, 256)`` + ``ReLU`` (a ReLU's output is the next Linear's input).
* ``frozen_mlp``: an MLP 64-128-64-10 whose first Linear is frozen (``requires_grad=False``).
* ``tied_mlp``: 64-64-64-10 whose first two Linears share one weight tensor (a tied weight: one
  parameter that two modules hold, so ``model.parameters()`` yields it once).

Each is built from a fixed seed and returned in eval mode, as :func:`util.models.build_model` does;
the output width is the number of classes of its labels.
"""
from __future__ import annotations

import torch
from torch import nn

NETS = ("digits_cnn", "chain8", "frozen_mlp", "tied_mlp")
"""Every model :func:`build_net` makes."""


class TiedMLP(nn.Module):
    """64-64-64-10 with ReLUs; ``second.weight`` is ``first.weight`` (one 64 x 64 tensor, two modules)."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(64, 64)
        self.second = nn.Linear(64, 64)
        self.second.weight = self.first.weight
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.second(torch.relu(self.first(x)))))


def _chain8() -> nn.Module:
    return nn.Sequential(*(nn.Sequential(nn.Linear(256, 256), nn.ReLU()) for _ in range(8)))


def _frozen_mlp() -> nn.Module:
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 10))
    model[0].requires_grad_(False)
    return model


def build_net(name: str, seed: int = 12) -> nn.Module:
    """Model ``name`` (one of :data:`NETS`), its weights initialised from ``seed``, in eval mode."""
    from util.models import build_model

    if name == "digits_cnn":
        return build_model("digits_cnn", seed=seed)
    builders = {"chain8": _chain8, "frozen_mlp": _frozen_mlp, "tied_mlp": TiedMLP}
    if name not in builders:
        raise KeyError(f"unknown model {name!r}; choose one of {', '.join(NETS)}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = builders[name]()
    return model.eval()
