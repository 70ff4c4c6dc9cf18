"""An integer-only model as lab 9 describes it: a list of layers holding int8 weights, int32 biases,
float64 multipliers and int8 zero points. Nothing here computes a layer: that is task 9.3.

* :class:`QLayer` and :class:`QModel`: what ``run_integer(qmodel, xq)`` receives;
* :func:`maxpool2d_int8` (given): max pooling on int8 values (the maximum commutes with a positive
  scale and a shift, so the pooled values keep the scale and zero point of the input);
* :func:`case_model`: the seeded integer models the grader's hidden cases of 9.3 run (the notebook
  never shows them): layers with chosen zero points and multipliers, random int8 weights and inputs;
  the last layer of each also holds three pruned channels whose accumulators sit at rounding ties
  (:func:`plant_ties`), where requantising in floating point instead of int64 rounds the other way.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

KINDS = ("conv", "linear", "maxpool", "flatten")


@dataclass
class QLayer:
    """One layer of an integer model.

    ``kind`` is ``"conv"`` (a Conv2d), ``"linear"``, ``"maxpool"`` (``kernel_size`` x ``kernel_size``,
    stride ``kernel_size``) or ``"flatten"`` (``N x C x H x W`` -> ``N x CHW``, channel-major as
    ``torch.flatten(x, 1)``). Conv and linear layers hold:
    """

    kind: str
    weight: np.ndarray | None = None
    """int8, ``C_out x C_in/groups x kh x kw`` (conv) or ``C_out x C_in`` (linear); zero point 0."""
    bias: np.ndarray | None = None
    """int32, ``C_out``, in units of ``s_x * s_w[c]`` (``None``: no bias)."""
    multiplier: np.ndarray | None = None
    """float64, ``C_out``: ``M[c] = s_x * s_w[c] / s_y``, the real factor from accumulator to output."""
    x_zero_point: int = 0
    """The input's zero point (the integer that means real 0)."""
    y_zero_point: int = 0
    """The output's zero point."""
    stride: int = 1
    padding: int = 0
    groups: int = 1
    relu: bool = False
    """A fused ReLU: the output is clamped below at ``y_zero_point`` (real 0)."""
    kernel_size: int = 2
    """Max pooling only."""


@dataclass
class QModel:
    """An integer-only model: ``layers`` in order; the input and output quantisation parameters."""

    layers: list[QLayer] = field(default_factory=list)
    input_scale: float = 1.0
    input_zero_point: int = 0
    output_scale: float = 1.0
    output_zero_point: int = 0


def maxpool2d_int8(xq: np.ndarray, kernel_size: int = 2) -> np.ndarray:
    """Given: ``kernel_size`` x ``kernel_size`` max pooling, stride ``kernel_size``, of an int8 ``N x C x H x W``
    array (H and W multiples of ``kernel_size``); the result is int8 with the input's scale and zero point."""
    n, c, h, w = xq.shape
    k = kernel_size
    return xq.reshape(n, c, h // k, k, w // k, k).max(axis=(3, 5))


# ---------------------------------------------------------------- the hidden cases' integer models

def _int8(rng: np.random.Generator, shape, low: int = -127, high: int = 127) -> np.ndarray:
    return rng.integers(low, high + 1, size=shape).astype(np.int8)


def _conv(rng: np.random.Generator, c_in: int, c_out: int, k: int, *, groups: int = 1, stride: int = 1,
          padding: int = 0, relu: bool = False, zx: int, zy: int, target: float = 40.0,
          multiplier: float | None = None) -> QLayer:
    """A conv layer with random int8 weights and int32 biases and multipliers that map a typical
    accumulator to about ``target`` output steps (the inputs are uniform int8)."""
    weight = _int8(rng, (c_out, c_in // groups, k, k))
    depth = c_in // groups * k * k
    typical = np.sqrt(depth) * 74.0 * 74.0        # std of (x - zx) * w for uniform int8 x and w
    bias = rng.integers(-int(typical), int(typical) + 1, size=c_out).astype(np.int32)
    m = (np.full(c_out, multiplier) if multiplier is not None
         else target / typical * rng.uniform(0.5, 1.5, size=c_out))
    return QLayer("conv", weight, bias, m.astype(np.float64), zx, zy, stride, padding, groups, relu)


# Three pruned (all-zero) filters per hidden model, each with one multiplier and one bias: every accumulator of the
# channel is the bias, at (or within a few units of) a rounding tie of the fixed-point rule. The three ties are
# chosen so that each way of requantising in floating point gets at least one of them wrong (tests/labs/
# test_lab9_ties.py checks every way named here against every hidden case):
#
# * "A" (M0 = 3 * 2**29, shift 40, acc * M0 exactly at a tie): the real multiplier M is 2**-40 below (or above) M0 *
#   2**-shift, so floor(acc * M + 0.5) in float64 lands on the other side of the tie; np.rint / np.round (half to
#   even, in float64 or float32) round the tie itself the other way;
# * "B" (acc * M0 a few units below a tie, near 2**60): float64 rounds the product onto the tie, so acc * M0 *
#   2**-shift (or acc * M0 / 2**shift) computed in float64 rounds up where int64 rounds down;
# * "C" (M = 2**-20, acc one below a tie, near 2**26): float32 rounds acc itself onto the tie.
#
# (acc, M0, shift) per tie, for an output a little above zy ("+") or a little below it ("-", when zy is near 127).
TIES = {
    "+": (("A", 39 * 2 ** 10, 3 * 2 ** 29, 40),                     # 58.5: half up 59; below the tie 58
          ("B", 905_216_231, 1_203_989_801, 54),                   # 121 * 2**53 - 1: exactly 60; float64 61
          ("C", 121 * 2 ** 19 - 1, 2 ** 30, 50)),                  # 60.5 - 2**-20: exactly 60; float32 61
    "-": (("A", -41 * 2 ** 10, 3 * 2 ** 29, 40),                    # -61.5: half up -61; below the tie -62
          ("B", -581_980_340, 1_903_647_653, 54),                  # -123 * 2**53 - 4: exactly -62; float64 -61
          ("C", -121 * 2 ** 19 - 1, 2 ** 30, 50)),                 # -60.5 - 2**-20: exactly -61; float32 -60
}
"""The rounding-tie channels :func:`plant_ties` adds: ``(name, accumulator, M0, shift)``."""


def tie_multiplier(name: str, acc: int, m0: int, shift: int) -> float:
    """The float64 multiplier ``M`` of a tie channel: ``M0 * 2**-shift`` itself (B, C), or for A that value moved by a
    relative 2**-40 towards zero output (below it for a positive accumulator): ``fixed_point(M)`` still gives
    ``(M0, shift)``, while ``acc * M`` is no longer a tie."""
    exact = m0 * 2.0 ** -shift
    return exact * (1 - 2.0 ** -40) if name == "A" and acc > 0 else exact * (1 + 2.0 ** -40) if name == "A" else exact


def plant_ties(layer: QLayer) -> QLayer:
    """``layer`` (conv or linear) with three rounding-tie channels (:data:`TIES`): appended as pruned filters (all-zero
    weights, so the accumulator is the bias) or, in a grouped conv, made of its last three channels. Their outputs lie
    a little above the layer's output zero point, or below it when that is near 127."""
    sign = "+" if layer.y_zero_point + 62 <= 127 else "-"
    if sign == "-" and layer.relu:
        raise ValueError("a fused ReLU clamps below the zero point: no room for the ties below it")
    ties = TIES[sign]
    bias = np.array([acc for _, acc, _, _ in ties], np.int64)
    multiplier = np.array([tie_multiplier(*tie) for tie in ties])
    if layer.kind == "conv" and layer.groups > 1:
        layer.weight[-3:] = 0
        layer.bias = np.concatenate([layer.bias[:-3].astype(np.int64), bias]).astype(np.int32)
        layer.multiplier = np.concatenate([layer.multiplier[:-3], multiplier])
        return layer
    zeros = np.zeros((3, *layer.weight.shape[1:]), np.int8)
    layer.weight = np.concatenate([layer.weight, zeros])
    layer.bias = np.concatenate([layer.bias.astype(np.int64), bias]).astype(np.int32)
    layer.multiplier = np.concatenate([layer.multiplier, multiplier])
    return layer


def case_model(spec: Mapping[str, Any]) -> tuple[QModel, np.ndarray]:
    """The integer model and int8 input of a hidden case of task 9.3, from its ``spec`` (seeded)."""
    rng = np.random.default_rng(int(spec["seed"]))
    kind = spec["model"]
    if kind == "padded_conv":          # input zero point -128, padding 1: a padded pixel is integer -128
        layers = [_conv(rng, 3, 4, 3, padding=1, zx=-128, zy=-7)]
        x = _int8(rng, (2, 3, 6, 6), -128, 127)
    elif kind == "depthwise_saturating":   # zy = 127: every positive output saturates
        layers = [_conv(rng, 8, 8, 3, groups=8, stride=2, padding=1, zx=3, zy=127, target=60.0)]
        x = _int8(rng, (2, 8, 9, 9), -128, 127)
    elif kind == "multiplier_near_one":    # m = 1 - 2^-34 on half the channels: rint(m * 2^31) = 2^31
        layers = [_conv(rng, 4, 6, 1, zx=5, zy=-3, multiplier=1.0 - 2.0 ** -34)]
        layers[0].multiplier[3:] = rng.uniform(0.2, 0.9, size=3)
        layers[0].weight = _int8(rng, (6, 4, 1, 1), -3, 3)
        layers[0].bias = rng.integers(-20, 21, size=6).astype(np.int32)
        x = _int8(rng, (2, 4, 5, 5), -20, 30)
    elif kind == "deep_linear":            # 2,304-deep dot products near 2^26: acc * M0 near 2^56
        weight = rng.choice(np.array([120, 127], np.int8), size=(10, 2304))
        weight[::2] *= -1
        multiplier = 100.0 / (2304 * 255 * 127) * rng.uniform(0.9, 1.1, size=10)
        layers = [QLayer("flatten"),
                  QLayer("linear", weight.astype(np.int8), rng.integers(-1000, 1001, 10).astype(np.int32),
                         multiplier, x_zero_point=-128, y_zero_point=-20)]
        x = _int8(rng, (3, 256, 3, 3), 120, 127)
    elif kind == "digits_cnn":             # DigitsCNN's shapes end to end, fused ReLUs, per-channel multipliers
        layers = [_conv(rng, 1, 16, 3, padding=1, relu=True, zx=-128, zy=-128),
                  _conv(rng, 16, 32, 3, padding=1, relu=True, zx=-128, zy=-128),
                  QLayer("maxpool", kernel_size=2),
                  _conv(rng, 32, 32, 3, padding=1, relu=True, zx=-128, zy=-128),
                  QLayer("flatten")]
        fc = _conv(rng, 512, 10, 1, zx=-128, zy=4)
        layers.append(QLayer("linear", fc.weight.reshape(10, 512), fc.bias, fc.multiplier, -128, 4))
        x = _int8(rng, (int(spec.get("batch", 16)), 1, 8, 8), -128, 127)
    else:
        raise ValueError(f"unknown integer case model {kind!r}")
    plant_ties(next(layer for layer in reversed(layers) if layer.kind in ("conv", "linear")))
    model = QModel(layers, input_scale=1.0 / 255, input_zero_point=layers[0].x_zero_point if layers[0].kind != "flatten"
                   else layers[1].x_zero_point)
    return model, x
