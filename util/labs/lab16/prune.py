"""Given helpers for task 16.1: apply pruning masks, and fine-tune a pruned model with its masks held.

A mask is a boolean tensor of its weight's shape, ``True`` where the weight is kept; masks are keyed by the
weight's name in ``model.state_dict()`` (``"conv2.weight"``).
"""
from __future__ import annotations

import copy
from typing import Mapping

import torch
from torch import nn


def prunable(model: nn.Module) -> dict[str, torch.Tensor]:
    """The weights pruning applies to: ``"<module>.weight"`` of every ``nn.Conv2d`` and ``nn.Linear``, in the
    order of ``model.named_modules()`` (``"weight"`` when ``model`` is itself one; biases and BatchNorm are never
    pruned)."""
    return {f"{name}.weight" if name else "weight": module.weight for name, module in model.named_modules()
            if isinstance(module, (nn.Conv2d, nn.Linear))}


def apply_masks(model: nn.Module, masks: Mapping[str, torch.Tensor]) -> nn.Module:
    """A copy of ``model`` with every weight ``masks`` names multiplied by its mask (zeros where it is ``False``).
    The copy has exactly as many parameters and MACs as ``model``: a zero is still stored and multiplied."""
    pruned = copy.deepcopy(model)
    state = pruned.state_dict()
    with torch.no_grad():
        for name, mask in masks.items():
            state[name].mul_(mask.to(state[name].dtype))
    return pruned.eval()


def fine_tune(model: nn.Module, masks: Mapping[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
              epochs: int = 1, seed: int = 0, lr: float = 1e-3) -> nn.Module:
    """A copy of ``model`` (masks applied) trained on ``(x, y)`` for ``epochs`` epochs with its masks held: Adam
    (``lr``), the mean cross-entropy, batches of 64 in an order drawn from ``seed``, BatchNorm in train mode (which
    also re-estimates its statistics), the masks applied again after every step so a pruned weight stays zero.
    In float64 on one thread (the same weights on every machine); returned in float32 and eval mode."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        tuned = apply_masks(model, masks).double().train()
        weights = tuned.state_dict()
        adam = torch.optim.Adam(tuned.parameters(), lr=lr)
        draws = torch.Generator().manual_seed(seed)
        images = x.double()
        for _epoch in range(epochs):
            for rows in torch.randperm(len(y), generator=draws).split(64):
                adam.zero_grad()
                nn.functional.cross_entropy(tuned(images[rows]), y[rows]).backward()
                adam.step()
                with torch.no_grad():  # the masks held: a pruned weight stays zero
                    for name, mask in masks.items():
                        weights[name].mul_(mask.to(torch.float64))
    finally:
        torch.set_num_threads(threads)
    return tuned.float().eval()
