"""Lab 13's models: small multilayer perceptrons without BatchNorm, so that data parallelism equals one process.

A BatchNorm in train mode normalises each rank's shard with that shard's statistics, so ranks that split a
batch compute other gradients than one process on the whole batch (15 % apart on DigitsCNN, measured), and
``SyncBatchNorm`` runs on GPUs only. These nets have Linear layers and ReLUs only.
"""
from __future__ import annotations

from typing import Sequence


def build_mlp(widths: Sequence[int], seed: int = 0):
    """``Linear(widths[0], widths[1])``, ReLU, ..., ``Linear(widths[-2], widths[-1])`` (no ReLU after the last),
    initialised from ``seed`` (the same weights on every rank and machine), in train mode."""
    import torch
    from torch import nn

    widths = [int(w) for w in widths]
    if len(widths) < 2 or min(widths) < 1:
        raise ValueError(f"an MLP needs at least two positive widths; got {widths}")
    layers: list = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        for index, (width_in, width_out) in enumerate(zip(widths, widths[1:])):
            layers.append(nn.Linear(width_in, width_out))
            if index < len(widths) - 2:
                layers.append(nn.ReLU())
    return nn.Sequential(*layers).train()


def batch(widths: Sequence[int], rows: int, seed: int):
    """``(x, y)``: ``rows`` standard-normal inputs of ``widths[0]`` features and labels in ``range(widths[-1])``,
    drawn from ``seed``."""
    import torch

    generator = torch.Generator().manual_seed(int(seed))
    x = torch.randn(int(rows), int(widths[0]), generator=generator)
    y = torch.randint(0, int(widths[-1]), (int(rows),), generator=generator)
    return x, y
