"""Task 16.8's loop: gradual magnitude pruning with fine-tuning between the steps, which the notebook and the grader
share (since release 4).

:func:`prune_gradually` takes a trained model and a **schedule**, the sparsity to reach at each pruning step (your
``cubic_schedule`` makes one), and for each step in turn: asks ``masks_fn(model, sparsity)`` for the masks (in the
notebook your ``magnitude_masks`` of 16.1, global scope; in the grader its own global magnitude masks), multiplies
them in, and fine-tunes the model for ``batches`` batches of :data:`BATCH` training images with the masks held (a
fresh Adam, learning rate :data:`LR`, the mean cross-entropy, BatchNorm in train mode, the masks applied again after
every step so a pruned weight stays zero). The batches run through the training images in orders drawn from
``seed`` (one permutation after another, across the steps). In float64 on one thread (the same weights on every
machine). One-shot pruning is the same loop with a schedule of one step.
"""
from __future__ import annotations

import copy
from typing import Callable, Mapping, Sequence

import torch
from torch import nn

BATCH = 64
"""Training images per fine-tuning batch."""
LR = 3e-3
"""Adam's learning rate while fine-tuning between the steps."""

Masks = Callable[[nn.Module, float], Mapping[str, torch.Tensor]]


def prune_gradually(model: nn.Module, schedule: Sequence[float], masks_fn: Masks, x: torch.Tensor, y: torch.Tensor,
                    batches: int, seed: int = 0, lr: float = LR) -> list[nn.Module]:
    """Gradual magnitude pruning: for each sparsity of ``schedule`` in turn, the masks ``masks_fn(model, sparsity)``
    multiplied in, then ``batches`` batches of :data:`BATCH` images of ``x``, ``y`` fine-tuned with the masks held
    (a fresh Adam at ``lr``, batch orders drawn from ``seed``, float64 on one thread).

    Returns the model after each step, each a copy in float32 and eval mode with its pruned weights zero: the last
    is the pruned model. ``model`` itself is left as it was. A step whose masks are not boolean tensors of their
    weights' shapes raises ``ValueError``. One-shot pruning is a schedule of one step."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        net = copy.deepcopy(model).double().train()
        weights = net.state_dict()
        images = x.double()
        draws = torch.Generator().manual_seed(int(seed))
        order = torch.empty(0, dtype=torch.long)
        after: list[nn.Module] = []
        for sparsity in schedule:
            masks = dict(masks_fn(copy.deepcopy(net).float().eval(), float(sparsity)))
            for name, mask in masks.items():
                if name not in weights or not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool \
                        or mask.shape != weights[name].shape:
                    raise ValueError(f"the masks for {name} must be a torch.bool tensor of its weight's shape")
            held = {name: mask.to(torch.float64) for name, mask in masks.items()}
            with torch.no_grad():
                for name, mask in held.items():
                    weights[name].mul_(mask)
            adam = torch.optim.Adam(net.parameters(), lr=lr)
            for _ in range(int(batches)):
                if len(order) < BATCH:
                    order = torch.cat([order, torch.randperm(len(y), generator=draws)])
                rows, order = order[:BATCH], order[BATCH:]
                adam.zero_grad()
                nn.functional.cross_entropy(net(images[rows]), y[rows]).backward()
                adam.step()
                with torch.no_grad():  # the masks held: a pruned weight stays zero
                    for name, mask in held.items():
                        weights[name].mul_(mask)
            after.append(copy.deepcopy(net).float().eval())
    finally:
        torch.set_num_threads(threads)
    return after


def zero_fraction(model: nn.Module) -> float:
    """The fraction of the weights of every ``nn.Conv2d`` and ``nn.Linear`` of ``model`` that are zero."""
    weights = [m.weight for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    return sum(int((w == 0).sum()) for w in weights) / sum(w.numel() for w in weights)
