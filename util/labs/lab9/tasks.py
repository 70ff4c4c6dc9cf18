"""Lab 9, quantization from integer arithmetic to an ONNX QDQ model: the one declaration of its tasks.

DigitsCNN trained on scikit-learn's bundled digits, BatchNorm folded (lab 5.1's function, given), is
quantised by hand (9.1 affine quantisation, 9.2 calibration), run on integers only (9.3: int8 x int8
into int64 accumulators, a fixed-point multiplier and shift, saturation), costed in bytes (9.4), then
quantised by onnxruntime's ``quantize_static`` into a QDQ graph (9.5), whose error is localised layer
by layer and repaired by keeping a 1-minimal set of layers in float (9.6, delta debugging).

How each kind of value is graded:

* integers exactly (zero points, counts, bytes, node names); scales and ranges within ``rtol=1e-6``
  (float32 against float64 arithmetic: one float32 ulp is 6e-8); accuracies within 0.01 (one point)
  in the answers, and by threshold in the grader's judge; rounding-error sizes as log10 within 0.5;
* 9.3's hidden cases are compared as **bytes** against the course's integer reference
  (``judge_intref.py``, grader-only), in the grader's judge process (``judge.py``); each hidden model
  holds rounding ties that requantising in floating point gets wrong (``qmodel.plant_ties``, release 2);
* 9.5's saved QDQ models and 9.6's saved node lists are judged there too: the judge re-runs
  ``quantize_static`` itself. Nothing whose expected verdict is a constant is decided in the kernel.
"""
from __future__ import annotations

import json
import tempfile
from typing import Any, Callable, Mapping

from util.contract import EXACT, Lab, Release, Task, Tolerance, Written
from util.labs.lab9.public_checks import CHECKS as PUBLIC

LAB_NAME = "lab9"
JUDGE = "util.labs.lab9.judge"
SCALES = Tolerance(rtol=1e-6)
"""Scales, ranges and SQNRs: float32 against float64 arithmetic."""
ACCURACY = Tolerance(atol=0.01)
"""Accuracies and agreements (fractions of 360 test images): within one point."""
LOG10 = Tolerance(atol=0.5)
"""log10 of relative errors: half a decade (rounding differs between CPUs' kernels)."""
OUTLIER = {"outlier": 1000, "where": "conv1", "channel": 0}
"""The answer's outlier model: channel 0 of conv1 1000 times larger, conv2 1000 times smaller on it."""


# ---------------------------------------------------------------- 9.1

def _quantized_summary(x, result, spec: Mapping[str, Any], axis) -> dict[str, Any]:
    """What a call of ``quantize_tensor`` is compared by; the SQNR is the course's, from the student's
    integers and scales."""
    import numpy as np

    if not (isinstance(result, (tuple, list)) and len(result) == 3):
        raise TypeError("quantize_tensor must return a tuple (q, scale, zero_point)")
    q, scale, zero_point = (np.asarray(v) for v in result)
    channels = () if axis is None else (x.shape[axis],)
    if q.shape != x.shape or q.dtype.kind not in "iu":
        raise TypeError(f"q must be an integer array of the input's shape {list(x.shape)}; got {q.dtype} "
                        f"{list(q.shape)}")
    if scale.shape != channels or np.asarray(zero_point).shape != channels:
        raise TypeError(f"scale and zero_point must have shape {list(channels)} (axis={axis}); got "
                        f"{list(scale.shape)} and {list(np.asarray(zero_point).shape)}")
    shape = [1] * x.ndim
    if axis is not None:
        shape[axis] = -1
    restored = (q.astype(np.float64) - zero_point.astype(np.float64).reshape(shape)) * \
        scale.astype(np.float64).reshape(shape)
    noise = float(((x.astype(np.float64) - restored) ** 2).sum())
    return {"scale": scale.astype(np.float64).ravel().tolist(), "zero_point": zero_point.astype(np.int64).ravel().tolist(),
            "q_min": int(q.min()), "q_max": int(q.max()), "q_sum": int(q.astype(np.int64).sum()),
            "sqnr_db": 10 * float(np.log10(float((x.astype(np.float64) ** 2).sum()) / noise)) if noise else 999.0}


def _quantize(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab9.nets import tensor

    x = tensor(spec)
    axes = spec["axis"] if isinstance(spec["axis"], list) else [spec["axis"]]
    found = {f"axis={axis}": _quantized_summary(x, fn(x.copy(), spec["bits"], spec["symmetric"], axis), spec, axis)
             for axis in axes}
    return found if len(found) > 1 else next(iter(found.values()))


# ---------------------------------------------------------------- 9.2

def _calibrate(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab9.nets import calibration_batches, calibration_net

    method = spec["method"] if isinstance(spec["method"], str) else tuple(spec["method"])
    ranges = fn(calibration_net(spec), calibration_batches(spec), method)
    if not isinstance(ranges, Mapping):
        raise TypeError(f"calibrate must return a dict {{node name: (lo, hi)}}, not {type(ranges).__name__}")
    out = {}
    for name, pair in ranges.items():
        lo, hi = (float(v) for v in pair)
        out[str(name)] = [lo, hi]
    return out


# ---------------------------------------------------------------- 9.3

def _integer(fn: Callable, spec: Mapping[str, Any]) -> Any:
    import numpy as np

    from util.artifacts import save_arrays
    from util.labs.lab9.qmodel import case_model

    model, xq = case_model(spec)
    y = np.asarray(fn(model, xq.copy()))
    if y.dtype.kind not in "iu":
        raise TypeError(f"run_integer must return an integer array (int8), not {y.dtype}")
    save_arrays({"y": y}, spec, LAB_NAME)
    return {"shape": list(y.shape)}


# ---------------------------------------------------------------- 9.4

def _bytes(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab9.nets import bytes_net

    return {f"{bits}-bit": fn(bytes_net(spec["model"]), bits, spec["per_channel"], spec["symmetric"])
            for bits in spec["bits"]}


# ---------------------------------------------------------------- 9.5 and 9.6

def _quantize_onnx(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from pathlib import Path

    from util.artifacts import save_file
    from util.labs.lab9.onnxq import calibration_images, quiet_onnxruntime, summarize_qdq, write_float_model

    quiet_onnxruntime()
    with tempfile.TemporaryDirectory() as folder:
        path = fn(write_float_model(spec, folder), calibration_images(spec), per_channel=spec["per_channel"])
        if not isinstance(path, (str, Path)) or not Path(path).is_file():
            raise TypeError(f"quantize_onnx must return the path of the model it wrote, not {path!r}")
        data = Path(path).read_bytes()
    save_file(data, spec, LAB_NAME, ".onnx")
    return summarize_qdq(data)


def _keep_in_float(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.artifacts import save_file
    from util.labs.lab9.onnxq import calibration_images, evaluation_images, quiet_onnxruntime, write_float_model

    quiet_onnxruntime()
    images, labels = evaluation_images(spec)
    with tempfile.TemporaryDirectory() as folder:
        names = fn(write_float_model(spec, folder), calibration_images(spec), images, labels,
                   max_drop=spec["max_drop"])
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"keep_in_float must return a list of node names, not {type(names).__name__}")
    save_file(json.dumps(list(names)).encode(), spec, LAB_NAME, ".json")
    return {"nodes": len(names)}


def prepare() -> None:
    """Fill the export cache: the trained DigitsCNN, the ONNX exports of its variants, ResNet-18 folded."""
    from util.labs import get_lab
    from util.labs.lab9.onnxq import float_model

    for task in get_lab(LAB.name).tasks:  # with its hidden cases: the grader's side
        for case in task.cases:
            if "model" in case.spec and task.id in ("9.5", "9.6"):
                float_model(case.spec)
    for model in ({}, OUTLIER):
        float_model({"model": model})


RELEASES = (
    Release(1, "2026-11-25", "The first release: affine quantisation, calibration, integer-only inference, weight "
            "bytes, quantize_static and a 1-minimal float set, on DigitsCNN and ResNet-18."),
    Release(2, "2026-11-26",
            "Task 9.3's rule is unchanged (integers only: acc * M0 in int64, half up by the shift), and its hidden "
            "models now check it: each holds three pruned channels whose accumulators sit at, or just below, a "
            "rounding tie, where requantising in floating point (float32 or float64) rounds the other way. Integer "
            "code that passed before passes these too.",
            marker="each hidden model also holds three pruned channels"),
    Release(3, "2026-11-26", "Tasks 9.3 and 9.6 ask written questions, Q1 (3 points) and Q2 (2 points), marked by "
            "hand: where an integer-only model loses information, and why one wide channel forces two "
            "layers to stay float; their points came from the two tasks' exported answers.",
            marker="(written, 3 points of task 9.3, marked by hand)"),
)
"""The lab's changelog (``Lab.releases``); release 2 planted rounding ties in 9.3's hidden models."""


WRITTEN = {
    "9.3": (Written("9.Q1", "Your integer DigitsCNN agrees with the float model on most test images but not "
                     "on all. Which steps of the integer pipeline round or clip, and why do a few "
                     "images change class while most do not?",
                     3, words=(30, 200), since=3),),
    "9.6": (Written("9.Q2", "The outlier model computes the same function as DigitsCNN, yet quantised per "
                     "tensor it loses accuracy, and neither conv1 nor conv2 alone kept in float "
                     "restores it. Why does one wide channel ruin the other fifteen, and why must "
                     "both layers stay float?",
                     2, words=(20, 150), since=3),),
}
"""The lab's questions answered in words, marked by hand against ``rubrics.py`` (release 3): their
points came out of their task's exported answer."""


LAB = Lab(
    name=LAB_NAME,
    title="Quantization, from integer arithmetic to an ONNX QDQ model",
    notebook="lab9_quantization.ipynb",
    packages=("torch", "onnx", "onnxruntime", "numpy", "scikit-learn", "torchvision"),
    prepare="util.labs.lab9.tasks:prepare",
    releases=RELEASES,
    tasks=(
        Task(
            id="9.1", title="Affine quantisation", answer_points=4,
            answer="a dict of conv2's weight scales, SQNRs and the input activation's scale and zero point",
            keys=("per_tensor_scale", "per_channel_scales", "sqnr_per_tensor_db", "sqnr_per_channel_db",
                  "sqnr_4bit_per_channel_db", "activation_scale", "activation_zero_point"),
            tolerance=SCALES, function="quantize_tensor", run_case=_quantize, checks=PUBLIC["9.1"],
            hidden_points=12,
        ),
        Task(
            id="9.2", title="Calibration after BN folding", answer_points=3,
            answer="a dict {'minmax': ranges, 'percentile': ranges, 'qparams': {node: [scale, zero_point]}}",
            keys=("minmax", "percentile", "qparams"), tolerance=SCALES, function="calibrate",
            run_case=_calibrate, checks=PUBLIC["9.2"],
            hidden_points=12,
        ),
        Task(
            id="9.3", title="Integer-only inference", answer_points=2, written=WRITTEN["9.3"],
            answer="a dict for DigitsCNN run on integers only: accuracy, agreement with float, shifts, "
                   "first image's int8 logits, accumulator bits",
            keys=("accuracy", "agreement", "shift_min", "shift_max", "first_logits", "accumulator_bits"),
            tolerance=ACCURACY, function="run_integer", run_case=_integer,
            grader_check=f"{JUDGE}:check_integer", checks=PUBLIC["9.3"],
            hidden_points=20,
        ),
        Task(
            id="9.4", title="Weight bytes at 8 and 4 bits", answer_points=4,
            answer="a dict of bytes for DigitsCNN (folded) and ResNet-18",
            keys=("digits_fp32", "digits_int8_per_channel", "digits_int8_per_tensor", "digits_int4_per_channel",
                  "resnet18_fp32", "resnet18_int8_per_channel", "resnet18_int4_per_channel"),
            tolerance=EXACT, function="quantized_weight_bytes", run_case=_bytes, checks=PUBLIC["9.4"],
            hidden_points=6,
        ),
        Task(
            id="9.5", title="quantize_static to a QDQ model", answer_points=4,
            answer="a dict for DigitsCNN quantised per channel: Q/DQ counts, accuracy, agreement with 9.3",
            keys=("QuantizeLinear", "DequantizeLinear", "per_channel_weights", "accuracy", "agreement_with_integer"),
            tolerance=ACCURACY, function="quantize_onnx", run_case=_quantize_onnx,
            grader_check=f"{JUDGE}:check_qdq", checks=PUBLIC["9.5"],
            hidden_points=10,
        ),
        Task(
            id="9.6", title="Localise the error; a 1-minimal float set", answer_points=3, written=WRITTEN["9.6"],
            answer="a dict for the outlier model: layer errors as log10 and the nodes keep_in_float keeps",
            keys=("log10_errors", "keep_in_float"), tolerance=LOG10, function="keep_in_float",
            run_case=_keep_in_float, grader_check=f"{JUDGE}:check_float_set", checks=PUBLIC["9.6"],
            hidden_points=15,
        ),
    ),
)
