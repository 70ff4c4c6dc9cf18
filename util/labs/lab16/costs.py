"""What a model costs, under the course's conventions (lab 1): parameters, multiply-accumulates, bytes.

* **Parameters**: every element of ``model.parameters()`` (a tensor two modules share counts once); a
  zeroed weight is still a parameter.
* **MACs** (lab 1's convention): a convolution costs its output elements x (input channels / groups) x kernel
  elements, a Linear its output elements x input features; bias, BatchNorm, activations and pooling cost 0; a
  module called twice counts twice. Measured with forward hooks on ``nn.Conv2d`` and ``nn.Linear``, so a
  product written as ``x @ w.T`` inside another module is not seen: count such products by hand.
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn


def count_params(model: nn.Module, trainable_only: bool = False) -> int:
    """Elements of ``model.parameters()`` (with ``trainable_only``: those with ``requires_grad``)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def count_macs(model: nn.Module, input_shape: Sequence[int] = (1, 1, 8, 8)) -> int:
    """MACs of one forward pass of ``model`` on zeros of ``input_shape``, lab 1's convention: each ``nn.Conv2d``
    call costs its output elements x (input channels / groups) x kernel elements, each ``nn.Linear`` call its output
    elements x input features; BatchNorm, activations, pooling and biases cost 0, and a module called twice counts
    twice. Products written outside those modules (``x @ w.T``) are not seen: count them by hand.

    >>> count_macs(nn.Linear(4, 3), (2, 4))
    24
    """
    total = [0]

    def hook(module, inputs, output):
        if isinstance(module, nn.Conv2d):
            kernel = module.kernel_size[0] * module.kernel_size[1]
            total[0] += output.numel() * (module.in_channels // module.groups) * kernel
        else:
            total[0] += output.numel() * module.in_features

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    try:
        dtype = next(model.parameters()).dtype
        with torch.no_grad():
            model(torch.zeros(tuple(input_shape), dtype=dtype))
    finally:
        for handle in handles:
            handle.remove()
    return total[0]
