"""What lab 5's hidden cases save for the grader, and how the grader reads it back.

A case whose verdict is a known constant ("the folded conv matches a float64 fold", "the outputs
agree") must not be decided in the student's kernel, which can replace any function there. So the
kernel saves what the student's function built, as plain arrays (``util.artifacts.save_arrays``:
an ``.npz`` without pickles), and the grader's judge (:mod:`util.labs.lab5.judge`) rebuilds and
checks it in its own process. A convolution is saved as its weight, optional bias, geometry and
padding mode; the judge rebuilds it in float64 from nothing else.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def conv_arrays(conv: Any, function: str, prefix: str = "") -> dict[str, np.ndarray]:
    """The arrays that describe ``conv`` (what ``function`` returned), keys prefixed with ``prefix``.

    Raises ``TypeError`` (reported as the case's error) when it is not an ``nn.Conv2d``, and
    ``ValueError`` for a padding given as a string (``"same"``): give the numbers.
    """
    from torch import nn

    if not isinstance(conv, nn.Conv2d):
        raise TypeError(f"{function}() must return an nn.Conv2d, not {type(conv).__name__}")
    if isinstance(conv.padding, str):
        raise ValueError(f"{function}() returned a conv with padding={conv.padding!r}; give the padding as numbers")
    arrays = {f"{prefix}weight": conv.weight.detach().cpu().float().numpy(),
              f"{prefix}geometry": np.array([*conv.stride, *conv.padding, *conv.dilation, conv.groups], np.int64),
              f"{prefix}padding_mode": np.array(conv.padding_mode)}
    if conv.bias is not None:
        arrays[f"{prefix}bias"] = conv.bias.detach().cpu().float().numpy()
    return arrays


def conv_from_arrays(arrays: Mapping[str, np.ndarray], prefix: str = ""):
    """``(conv, None)``: a float64 ``nn.Conv2d`` rebuilt from :func:`conv_arrays`' arrays, or ``(None, problem)``.

    The arrays come from the student's kernel: every shape, number and string is checked before use.
    """
    import torch
    from torch import nn

    try:
        weight = np.asarray(arrays[f"{prefix}weight"], dtype=np.float64)
        geometry = [int(v) for v in np.asarray(arrays[f"{prefix}geometry"]).reshape(-1)]
        mode = str(np.asarray(arrays[f"{prefix}padding_mode"]).reshape(()))
        bias = arrays.get(f"{prefix}bias")
        bias = None if bias is None else np.asarray(bias, dtype=np.float64)
    except (KeyError, ValueError, TypeError) as exc:
        return None, f"the saved convolution is incomplete or malformed ({type(exc).__name__}: {exc})"
    if (weight.ndim != 4 or len(geometry) != 7 or mode not in PADDING_MODES or geometry[6] < 1
            or min(geometry[:2] + geometry[4:6]) < 1 or min(geometry[2:4]) < 0 or weight.shape[0] % geometry[6]
            or max(weight.shape) > 4096 or (bias is not None and bias.shape != weight.shape[:1])):
        return None, "the saved convolution is malformed (shapes or geometry out of range)"
    stride, padding, dilation, groups = geometry[0:2], geometry[2:4], geometry[4:6], geometry[6]
    conv = nn.Conv2d(weight.shape[1] * groups, weight.shape[0], tuple(weight.shape[2:]), stride=tuple(stride),
                     padding=tuple(padding), dilation=tuple(dilation), groups=groups, bias=bias is not None,
                     padding_mode=mode).double().eval()
    with torch.no_grad():
        conv.weight.copy_(torch.from_numpy(weight))
        if bias is not None:
            conv.bias.copy_(torch.from_numpy(bias))
    return conv, None


def max_rel(found: np.ndarray, expected: np.ndarray) -> float:
    """``max |found - expected| / max |expected|`` in float64 (``max |found - expected|`` if ``expected`` is all 0)."""
    found, expected = np.asarray(found, np.float64), np.asarray(expected, np.float64)
    if expected.size == 0:
        return 0.0
    diff = float(np.abs(found - expected).max())
    scale = float(np.abs(expected).max())
    return diff / scale if scale > 0 else diff
