"""The course's integer reference for task 9.3 (grader-only: it is the reference implementation of the
graded kernels, so graded kernels cannot import it and the students' copy leaves it out).

Everything is exact integer arithmetic in int64 (Python ints for the multiplier), following the
conventions the notebook states:

* ``fixed_point(M)``: ``M = m * 2**e`` with ``m`` in [0.5, 1) (``frexp``), ``M0 = rint(m * 2**31)``;
  when ``M0 == 2**31`` it is halved and ``e`` grows by one; ``shift = 31 - e``;
* ``requantize``: ``y = clip(zy + ((acc * M0 + 2**(shift-1)) >> shift), lo, 127)`` with ``lo = zy`` for a
  fused ReLU and -128 otherwise (round half up: ``>>`` floors);
* ``int_conv2d`` / ``int_linear``: the zero point is subtracted *before* padding, so a padded pixel
  is real 0; weights are symmetric (zero point 0); the int32 bias is added to the int64 accumulator.

onnxruntime's own kernels agree with these rules on random data but round in float, so the grader
compares a student's bytes with this module, never with onnxruntime.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from util.labs.lab9.qmodel import QModel, maxpool2d_int8


def fixed_point(multiplier) -> tuple[np.ndarray, np.ndarray]:
    """``(M0, shift)`` as int64 arrays of ``multiplier``'s shape (every M > 0 and below 2**30)."""
    m = np.asarray(multiplier, dtype=np.float64)
    if not (np.all(m > 0) and np.all(m < 2.0 ** 30)):
        raise ValueError("every multiplier must lie in (0, 2**30)")
    mantissa, exponent = np.frexp(m)
    m0 = np.rint(mantissa * 2.0 ** 31).astype(np.int64)
    carry = m0 == 2 ** 31
    m0 = np.where(carry, m0 // 2, m0)
    exponent = exponent.astype(np.int64) + carry
    return m0, 31 - exponent


def requantize(acc: np.ndarray, m0: np.ndarray, shift: np.ndarray, zy: int, relu: bool = False,
               axis: int = 1) -> np.ndarray:
    """int8 outputs from int64 accumulators; ``m0`` and ``shift`` per channel along ``axis``."""
    acc = np.asarray(acc, dtype=np.int64)
    shape = [1] * acc.ndim
    shape[axis] = -1
    m0 = np.asarray(m0, dtype=np.int64).reshape(shape)
    shift = np.asarray(shift, dtype=np.int64).reshape(shape)
    scaled = (acc * m0 + (np.int64(1) << (shift - 1))) >> shift
    return np.clip(scaled + int(zy), int(zy) if relu else -128, 127).astype(np.int8)


def int_conv2d(xq: np.ndarray, zx: int, wq: np.ndarray, bq: np.ndarray | None, stride: int = 1,
               padding: int = 0, groups: int = 1) -> np.ndarray:
    """int64 accumulators ``N x C_out x H_out x W_out`` of a convolution of int8 ``xq`` (zero point ``zx``)."""
    x = np.asarray(xq, dtype=np.int64) - int(zx)
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))   # real zeros
    w = np.asarray(wq, dtype=np.int64)
    c_out, c_group, kh, kw = w.shape
    windows = sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]
    out_group = c_out // groups
    parts = [np.tensordot(windows[:, g * c_group:(g + 1) * c_group], w[g * out_group:(g + 1) * out_group],
                          axes=([1, 4, 5], [1, 2, 3])) for g in range(groups)]
    acc = np.concatenate(parts, axis=-1).transpose(0, 3, 1, 2)
    if bq is not None:
        acc = acc + np.asarray(bq, dtype=np.int64).reshape(1, -1, 1, 1)
    return acc


def int_linear(xq: np.ndarray, zx: int, wq: np.ndarray, bq: np.ndarray | None) -> np.ndarray:
    """int64 accumulators ``N x C_out`` of a linear layer on int8 ``xq`` (``N x C_in``, zero point ``zx``)."""
    acc = (np.asarray(xq, dtype=np.int64) - int(zx)) @ np.asarray(wq, dtype=np.int64).T
    return acc if bq is None else acc + np.asarray(bq, dtype=np.int64)


def run_integer(qmodel: QModel, xq: np.ndarray) -> np.ndarray:
    """The int8 output of ``qmodel`` on the int8 input ``xq``."""
    y = np.asarray(xq)
    for layer in qmodel.layers:
        if layer.kind == "maxpool":
            y = maxpool2d_int8(y, layer.kernel_size)
        elif layer.kind == "flatten":
            y = y.reshape(y.shape[0], -1)
        else:
            m0, shift = fixed_point(layer.multiplier)
            acc = (int_conv2d(y, layer.x_zero_point, layer.weight, layer.bias, layer.stride, layer.padding,
                              layer.groups) if layer.kind == "conv"
                   else int_linear(y, layer.x_zero_point, layer.weight, layer.bias))
            y = requantize(acc, m0, shift, layer.y_zero_point, layer.relu)
    return y
