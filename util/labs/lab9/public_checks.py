"""Lab 9's public checks (``check("9.3")``): what the notebook states, on inputs small enough to work out
by hand, never a hidden case's input. ``CHECKS[task id]`` is attached to each task's ``checks=`` in
``tasks.py``. torch, onnx and onnxruntime are imported inside the checks only.
"""
from __future__ import annotations

from typing import Any

from util.checks import at_least, equal, first, has_keys, is_int
from util.contract import Check


def _floats(values: Any) -> list[float]:
    import numpy as np

    return [float(v) for v in np.ravel(np.asarray(values, dtype=np.float64))]


def _close(found: Any, expected: list[float], what: str, rtol: float = 1e-6) -> str | None:
    import numpy as np

    try:
        values = _floats(found)
    except (TypeError, ValueError):
        return f"{what} is {found!r}; expected numbers"
    if len(values) != len(expected) or not np.allclose(values, expected, rtol=rtol, atol=0):
        return f"{what} is {values}; expected {expected}"
    return None


# ---------------------------------------------------------------- 9.1

def _asymmetric_by_hand(fn) -> str | None:
    import numpy as np

    q, scale, zero_point = fn(np.array([-1.0, 0.0, 3.0], np.float32))
    return first(_close(scale, [4 / 255], "the scale of [-1, 0, 3]"),
                 equal(int(zero_point), -64, "the zero point of [-1, 0, 3]"),
                 equal(np.asarray(q).tolist(), [-128, -64, 127], "q of [-1, 0, 3]"))


def _ties_to_even(fn) -> str | None:
    import numpy as np

    q, scale, _ = fn(np.array([0.5, 1.5, 2.5, -2.5, 127.0], np.float32), 8, True)
    return first(_close(scale, [1.0], "the scale of [0.5, 1.5, 2.5, -2.5, 127] (symmetric)"),
                 equal(np.asarray(q).tolist(), [0, 2, 2, -2, 127], "q of [0.5, 1.5, 2.5, -2.5, 127] (symmetric)"))


def _float32_scale(fn) -> str | None:
    import numpy as np

    _, scale, _ = fn(np.array([0.0, 1.0], np.float32))
    exact = float(np.float32(1 / 255))
    return None if float(scale) == exact else (
        f"the scale of [0, 1] is {float(scale)!r}; expected the float32 nearest 1/255, {exact!r} exactly")


def _per_channel(fn) -> str | None:
    import numpy as np

    w = np.array([[1.0, -2.0], [0.5, 0.25], [4.0, 4.0]], np.float32)
    q, scale, zero_point = fn(w, 8, True, 0)
    return first(_close(scale, [2 / 127, 0.5 / 127, 4 / 127], "the per-channel scales of [[1, -2], [0.5, 0.25], [4, 4]]"),
                 equal(np.asarray(zero_point).tolist(), [0, 0, 0], "the per-channel zero points"),
                 equal(np.asarray(q).tolist(), [[64, -127], [127, 64], [127, 127]], "q"))


def _sqnr_order(answer: Any) -> str | None:
    return first(at_least(answer["sqnr_per_channel_db"], answer["sqnr_per_tensor_db"],
                          "SQNR per channel (per tensor's is the bound)"),
                 at_least(answer["sqnr_per_channel_db"], answer["sqnr_4bit_per_channel_db"] + 20,
                          "SQNR at 8 bits (4 bits' + 20 dB is the bound: about 6 dB per bit)"),
                 equal(answer["activation_zero_point"], -128, "the zero point of a ReLU output (range [0, max])"))


# ---------------------------------------------------------------- 9.2

def _toy():
    import torch
    from torch import nn

    class Toy(nn.Module):
        def forward(self, x):
            return torch.relu(x - 1.0)

    return Toy()


def _minmax_by_hand(fn) -> str | None:
    import torch

    ranges = fn(_toy(), [torch.tensor([[0.0, 2.0]]), torch.tensor([[3.0, -1.0, 5.0]])], "minmax")
    found = {name: [float(v) for v in pair] for name, pair in ranges.items()}
    return equal(found, {"x": [-1.0, 5.0], "sub": [-2.0, 4.0], "relu": [0.0, 4.0]},
                 "calibrate(relu(x - 1), [[0, 2], [3, -1, 5]], 'minmax')")


def _percentile_by_hand(fn) -> str | None:
    import torch

    ranges = fn(_toy(), [torch.arange(10001.0).reshape(1, -1)], ("percentile", 99.99))
    return _close(ranges["x"], [1.0, 9999.0], "the 'x' range of 0, 1, ..., 10000 at percentile 99.99")


def _input_range(answer: Any) -> str | None:
    return first(_close(answer["minmax"]["x"], [0.0, 1.0], "the minmax range of the input 'x'"),
                 _close(answer["qparams"]["x"][0], [1 / 255], "the input's scale"),
                 equal(answer["qparams"]["x"][1], -128, "the input's zero point"))


# ---------------------------------------------------------------- 9.3

def _one_layer(weight, multiplier: float, zx: int, zy: int, padding: int = 0):
    import numpy as np

    from util.labs.lab9.qmodel import QLayer, QModel

    c_out = weight.shape[0]
    layer = QLayer("conv", weight.astype(np.int8), np.zeros(c_out, np.int32), np.full(c_out, multiplier),
                   x_zero_point=zx, y_zero_point=zy, padding=padding)
    return QModel([layer], input_zero_point=zx, output_zero_point=zy)


def _halves(fn) -> str | None:
    import numpy as np

    model = _one_layer(np.ones((1, 1, 1, 1)), 0.5, 0, 0)
    y = np.asarray(fn(model, np.array([1, 3, -3, 5], np.int8).reshape(1, 1, 1, 4)))
    return equal(y.ravel().tolist(), [1, 2, -1, 3], "[1, 3, -3, 5] times M = 1/2 (round half up)")


def _zero_stays_zero(fn) -> str | None:
    import numpy as np

    model = _one_layer(np.ones((1, 1, 3, 3)), 0.01, -128, -128, padding=1)
    y = np.asarray(fn(model, np.full((1, 1, 4, 4), -128, np.int8)))
    return equal(y.ravel().tolist(), [-128] * 16, "a 3x3 conv (padding 1) of an image of real zeros (zx = -128)")


def _integer_answer(answer: Any) -> str | None:
    return first(is_int(answer["shift_min"], "shift_min"),
                 equal(30 <= answer["shift_min"] <= answer["shift_max"] <= 50, True, "30 <= shift_min <= shift_max <= 50"),
                 equal(len(answer["first_logits"]), 10, "len(first_logits)"),
                 at_least(answer["agreement"], 0.97, "the agreement with the float model"),
                 equal(answer["accumulator_bits"] <= 32, True, "accumulator_bits <= 32 (int32 is enough)"))


# ---------------------------------------------------------------- 9.4

def _linear_by_hand(fn) -> str | None:
    import torch
    from torch import nn

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        layer = nn.Linear(3, 2)
    return first(equal(fn(layer, 8, True, True), 22, "Linear(3, 2), 8-bit per channel (6 + 2 x 4 scale + 2 x 4 bias)"),
                 equal(fn(layer, 4, False, True), 15, "Linear(3, 2), 4-bit per tensor (3 + 4 scale + 8 bias)"),
                 equal(fn(layer, 8, False, False), 19, "Linear(3, 2), 8-bit asymmetric per tensor (6 + 4 + 1 + 8)"))


def _bytes_answer(answer: Any) -> str | None:
    return first(*(is_int(answer[k], k) for k in answer),
                 equal(answer["digits_fp32"], 4 * 19178, "digits_fp32 (19,178 float32 parameters once folded)"),
                 equal(answer["digits_int4_per_channel"] < answer["digits_int8_per_channel"] < answer["digits_fp32"],
                       True, "int4 per channel < int8 per channel < fp32"))


# ---------------------------------------------------------------- 9.5 and 9.6

def _qdq_counts(answer: Any) -> str | None:
    return equal({k: answer[k] for k in ("QuantizeLinear", "DequantizeLinear", "per_channel_weights")},
                 {"QuantizeLinear": 7, "DequantizeLinear": 15, "per_channel_weights": 4}, "DigitsCNN's QDQ counts")


def _quantize_checks(fn) -> str | None:
    import tempfile
    from pathlib import Path

    import onnx

    from util.labs.lab9.onnxq import digits_arrays, quiet_onnxruntime, write_float_model

    quiet_onnxruntime()
    with tempfile.TemporaryDirectory() as folder:
        path = fn(write_float_model({"model": {}}, folder), digits_arrays()["x_train"][:16], per_channel=True)
        if not Path(str(path)).is_file():
            return f"quantize_onnx returned {path!r}, which is not a file"
        model = onnx.load(str(path))
    onnx.checker.check_model(model, full_check=True)
    return None


def _plain_keeps_nothing(fn) -> str | None:
    import tempfile

    from util.labs.lab9.onnxq import digits_arrays, quiet_onnxruntime, write_float_model

    quiet_onnxruntime()
    arrays = digits_arrays()
    with tempfile.TemporaryDirectory() as folder:
        kept = fn(write_float_model({"model": {}}, folder), arrays["x_train"][:32], arrays["x_test"], arrays["y_test"],
                  max_drop=0.01)
    return equal(list(kept), [], "keep_in_float on the plain DigitsCNN (int8 everywhere keeps its accuracy)")


CHECKS: dict[str, tuple[Check, ...]] = {
    "9.1": (
        Check("[-1, 0, 3] asymmetric: scale 4/255, zero point -64, q [-128, -64, 127] (hand count)", _asymmetric_by_hand,
              "lo = min(x, 0), hi = max(x, 0), scale = (hi - lo) / 255, zero point = rint(-128 - lo / scale)",
              calls_function=True),
        Check("ties round half to even, as QuantizeLinear: [0.5, 1.5, 2.5, -2.5] -> [0, 2, 2, -2]", _ties_to_even,
              "np.rint rounds half to even; Python's int(x + 0.5) and np.floor(x + 0.5) do not", calls_function=True),
        Check("a scale is a float32: [0, 1] gives float32(1/255) = 0.0039215688593685627", _float32_scale,
              "compute in float64, then np.float32(scale): ONNX stores scales as float32", calls_function=True),
        Check("per channel (axis 0): one scale per row, zero points 0", _per_channel,
              "reduce max |x| over every axis but `axis`", calls_function=True),
        Check("per channel beats per tensor; 8 bits beat 4 by more than 20 dB", _sqnr_order,
              "SQNR = 10 log10(sum x^2 / sum (x - dequantize(quantize(x)))^2)"),
    ),
    "9.2": (
        Check("relu(x - 1) on [[0, 2], [3, -1, 5]]: x (-1, 5), sub (-2, 4), relu (0, 4) (hand count)", _minmax_by_hand,
              "one entry per torch.fx node, the placeholder included; min and max over every batch",
              calls_function=True),
        Check("percentile 99.99 of 0, 1, ..., 10000 is (1, 9999)", _percentile_by_hand,
              "np.percentile (linear interpolation) of all the values of all batches together", calls_function=True),
        Check("the input's range is (0, 1): scale 1/255, zero point -128", _input_range,
              "the digits are scaled to [0, 1]; qparams of np.array(range)"),
    ),
    "9.3": (
        Check("M = 1/2 rounds half up: [1, 3, -3, 5] -> [1, 2, -1, 3]", _halves,
              "(acc * M0 + 2**(shift - 1)) >> shift, in int64; fixed_point(0.5) = (2**30, 31)", calls_function=True),
        Check("a 3x3 conv with padding 1 keeps an image of real zeros at the zero point", _zero_stays_zero,
              "pad after subtracting the zero point: a padded pixel is real 0, the integer zx", calls_function=True),
        Check("DigitsCNN on integers agrees with float; shifts 30..50; int32 accumulators suffice", _integer_answer,
              "the answer of the notebook's task 9.3 cell"),
    ),
    "9.4": (
        Check("Linear(3, 2): 22 bytes at 8-bit per channel, 15 at 4-bit per tensor, 19 asymmetric (hand count)",
              _linear_by_hand, "ceil(numel * bits / 8) + 4 per scale (+ 1 per zero point) for a weight; 4 bytes per "
              "element for every other parameter", calls_function=True),
        Check("integers; DigitsCNN folded is 19,178 float32 parameters", _bytes_answer,
              "count model.parameters(): each tensor once"),
    ),
    "9.5": (
        Check("DigitsCNN per channel: 7 QuantizeLinear, 15 DequantizeLinear, 4 per-channel weights", _qdq_counts,
              "quantize_static with QuantFormat.QDQ, QInt8 activations and weights, per_channel=True"),
        Check("quantize_onnx writes a model that passes onnx.checker", _quantize_checks,
              "return the path quantize_static wrote", calls_function=True),
    ),
    "9.6": (
        Check("the plain DigitsCNN keeps nothing in float", _plain_keeps_nothing,
              "test the empty set first: if int8 everywhere is good enough, return []", calls_function=True),
        Check("the outlier model needs two nodes in float", lambda a: first(
            has_keys(a, ("log10_errors", "keep_in_float")),
            equal(len(a["keep_in_float"]), 2, "len(keep_in_float)")),
              "no single node is enough: the outlier tensor stays quantised while its producer or its consumer is int8"),
    ),
}
