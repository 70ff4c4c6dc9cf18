"""Lab 9's grader-side checks, named by the tasks' ``grader_check`` (``tasks.py``).

Each is ``check(spec, data, tolerance) -> [problems]`` (empty: the case passes), run in the grader's
judge process on the bytes a hidden case saved; it imports and calls no student code. What it needs
it rebuilds from the case's spec: the integer model and input (``qmodel.case_model``), the float
ONNX model (``onnxq.float_model``), the digits. The bytes are untrusted: arrays are read without
pickle, models parsed by onnx and checked, lists parsed as JSON and validated.

* 9.3 (:func:`check_integer`): the saved int8 outputs equal, byte for byte, those of the course's
  integer reference (``judge_intref``) on the same model and input. A byte comparison cannot see how the
  bytes were made, so every hidden model holds rounding ties (``qmodel.plant_ties``) that each way of
  requantising in floating point gets wrong; only an exact wide float (``np.longdouble``'s 64-bit
  mantissa, Python's fractions) still passes, and it computes the integer rule exactly.
* 9.5 (:func:`check_qdq`): the saved model passes ``onnx.checker``, is the model ``quantize_static``
  makes with the stated options (the same nodes and the same scales and zero points as the judge's own
  call on the same float model and calibration images), and its accuracy on the 360 test digits,
  from the judge's own onnxruntime run, is at least the float model's minus 1 point (ResNet-18, whose
  random weights make accuracy meaningless: its output error within half a decade of the judge's own).
* 9.6 (:func:`check_float_set`): the saved list of nodes, re-quantised by the judge (``quantize_static``
  with those nodes excluded), is **sufficient** (accuracy at least float minus ``max_drop``) and
  **1-minimal** (without any one of its nodes it is not).
"""
from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

ACCURACY_DROP = 0.01
"""9.5: a quantised DigitsCNN must keep its accuracy within 1 point (0.01) of the float model's."""
SCALE_RTOL = 1e-6
"""9.5: the saved scales against the judge's own ``quantize_static`` (the same call gives the same bits)."""
LOG10_BAND = 0.5
"""9.5, ResNet-18: log10 of the output error within half a decade of the judge's own quantisation."""


# ---------------------------------------------------------------- the course's quantize_static call

def course_quantize(float_path: str, calib: np.ndarray, per_channel: bool, exclude: Sequence[str] = ()) -> bytes:
    """The QDQ model (bytes) ``quantize_static`` makes with the lab's options: QDQ format, int8
    activations and weights, MinMax calibration on ``calib`` (one image per run), ``nodes_to_exclude``."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    from util.labs.lab9.onnxq import quiet_onnxruntime

    quiet_onnxruntime()

    class Images(CalibrationDataReader):
        def __init__(self) -> None:
            self.index = 0

        def get_next(self):
            if self.index >= len(calib):
                return None
            self.index += 1
            return {"input": np.asarray(calib[self.index - 1:self.index], dtype=np.float32)}

    out = str(Path(float_path).with_name("course_int8.onnx"))
    quantize_static(float_path, out, Images(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8, per_channel=per_channel, nodes_to_exclude=list(exclude),
                    calibrate_method=CalibrationMethod.MinMax)
    return Path(out).read_bytes()


# ---------------------------------------------------------------- 9.3

def check_integer(spec: Mapping[str, Any], data: bytes, tolerance: Any = None) -> list[str]:
    """Task 9.3: ``run_integer``'s saved output equals the course's integer reference, byte for byte."""
    from util.artifacts import read_saved_arrays
    from util.labs.lab9.judge_intref import run_integer
    from util.labs.lab9.qmodel import case_model

    arrays, problems = read_saved_arrays(data, expected=["y"])
    if problems:
        return problems
    found = arrays["y"]
    model, xq = case_model(spec)
    expected = run_integer(model, xq)
    if found.dtype != np.int8:
        return [f"run_integer returned {found.dtype} values; expected an int8 array (np.int8): the output "
                "of an integer-only model is int8, saturated to [-128, 127]"]
    if found.shape != expected.shape:
        return [f"run_integer returned shape {list(found.shape)}; expected {list(expected.shape)}"]
    if found.tobytes() == expected.tobytes():
        return []
    differ = found != expected
    steps = np.abs(found.astype(np.int64) - expected.astype(np.int64))
    worst = int(steps.max())
    if not differ[:, :-3].any():  # only the last three channels: the rounding ties (qmodel.plant_ties)
        return [f"{int(differ.sum()):,} of {differ.size:,} int8 outputs differ from the course's integer reference, "
                "each by a single step, all in the channels whose accumulator sits at a rounding tie of the "
                "fixed-point rule: requantise in integers (acc * M0 in int64, add 2**(shift-1), shift), not in "
                "floating point (float32 or float64, with M or with M0 / 2**shift), which rounds these the other way"]
    how = ("each by a single step: look at how the shift rounds (half up)" if worst == 1
           else f"by up to {worst} steps")
    return [f"{int(differ.sum()):,} of {differ.size:,} int8 outputs differ from the course's integer reference, {how}"]


# ---------------------------------------------------------------- 9.5

def _load_model(data: bytes) -> tuple[Any, list[str]]:
    import onnx

    try:
        model = onnx.load_from_string(bytes(data))
    except Exception as exc:  # noqa: BLE001 - protobuf raises several kinds on hostile bytes
        return None, [f"the saved file is not an ONNX model ({type(exc).__name__}); quantize_onnx must return "
                      "the path of the model quantize_static wrote"]
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:  # noqa: BLE001
        return None, [f"onnx.checker.check_model(full_check=True) fails: {str(exc).splitlines()[0][:200]}"]
    return model, []


def _quant_params(model) -> dict[str, np.ndarray]:
    """The scale and zero-point initializers of every QuantizeLinear (the activations, first), then of every
    DequantizeLinear (weights and biases), by name."""
    from onnx import numpy_helper

    inits = {init.name: init for init in model.graph.initializer}
    found = {}
    for op in ("QuantizeLinear", "DequantizeLinear"):
        for node in model.graph.node:
            if node.op_type == op:
                for name in node.input[1:]:
                    if name in inits and name not in found:
                        found[name] = numpy_helper.to_array(inits[name])
    return found


def check_qdq(spec: Mapping[str, Any], data: bytes, tolerance: Any = None) -> list[str]:
    """Task 9.5: the saved model is what ``quantize_static`` makes with the stated options, and it keeps accuracy."""
    from util.labs.lab9.onnxq import (
        accuracy,
        calibration_images,
        evaluation_images,
        float_model,
        outputs,
        relmax,
        summarize_qdq,
    )

    model, problems = _load_model(data)
    if problems:
        return problems
    with tempfile.TemporaryDirectory() as folder:
        float_path = str(Path(folder) / "float.onnx")
        float_bytes = float_model(spec)
        Path(float_path).write_bytes(float_bytes)
        own = _parsed(course_quantize(float_path, calibration_images(spec), bool(spec["per_channel"])))
    mine, theirs = summarize_qdq(own), summarize_qdq(model)
    if mine != theirs:
        return [f"the model has {theirs}; quantize_static with the stated options (QDQ, QInt8 activations and "
                f"weights, per_channel={bool(spec['per_channel'])}) makes {mine}"]
    if sorted(n.op_type for n in model.graph.node) != sorted(n.op_type for n in own.graph.node):
        return ["the model's nodes are not those quantize_static makes with the stated options"]
    want, have = _quant_params(own), _quant_params(model)
    if set(want) != set(have):
        return ["the model's quantisation parameters are not those quantize_static makes with the stated options"]
    for name, value in want.items():
        other = have[name]
        same = other.shape == value.shape and (np.allclose(other, value, rtol=SCALE_RTOL, atol=0)
                                               if value.dtype.kind == "f" else np.array_equal(other, value))
        if not same:
            return [f"{name} differs from MinMax calibration on the case's images (rtol={SCALE_RTOL:g}): was every "
                    "calibration image fed to quantize_static, one per run, and MinMax used?"]
    images, labels = evaluation_images(spec)
    if labels is not None:
        floor = accuracy(float_bytes, images, labels) - ACCURACY_DROP
        found = accuracy(model, images, labels)
        if not found >= floor - 1e-12:
            return [f"the quantised model's accuracy is {found:.4f}; expected at least the float model's minus "
                    f"{ACCURACY_DROP:g} ({floor:.4f})"]
        return []
    reference = outputs(float_bytes, images)
    error, expected = relmax(outputs(model, images), reference), relmax(outputs(own, images), reference)
    if not abs(math.log10(max(error, 1e-30)) - math.log10(max(expected, 1e-30))) <= LOG10_BAND:
        return [f"the quantised model's output error is {error:.2g} relative to the float model; quantize_static "
                f"with the stated options gives an error within half a decade of {expected:.1g}"]
    return []


def _parsed(data: bytes):
    import onnx

    return onnx.load_from_string(data)


# ---------------------------------------------------------------- 9.6

def check_float_set(spec: Mapping[str, Any], data: bytes, tolerance: Any = None, returned: Any = None) -> list[str]:
    """Task 9.6: the nodes kept in float are sufficient and 1-minimal, re-quantised by the judge; the count the case
    returned (compared with the reference) is the saved list's (``returned``, when the grader passes it)."""
    import onnx

    from util.labs.lab9.onnxq import accuracy, calibration_images, evaluation_images, float_model

    try:
        names = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return ["the saved list is not JSON; keep_in_float must return a list of node names"]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return ["the saved value is not a list of node names (strings)"]
    if returned is not None and returned != {"nodes": len(names)}:
        return [f"this case returned {str(returned)[:80]}, but the list it saved has {len(names)} node(s): the grader "
                "reads both from what keep_in_float returned; do not change the course's helpers"]
    float_bytes = float_model(spec)
    candidates = [n.name for n in onnx.load_from_string(float_bytes).graph.node if n.op_type in ("Conv", "Gemm")]
    unknown = [n for n in names if n not in candidates]
    if unknown or len(set(names)) != len(names):
        return [f"the list names {unknown[:3] or 'a node twice'}; expected distinct names of the float model's "
                f"Conv and Gemm nodes ({', '.join(candidates)})"]
    images, labels = evaluation_images(spec)
    floor = accuracy(float_bytes, images, labels) - float(spec["max_drop"])
    calib = calibration_images(spec)
    with tempfile.TemporaryDirectory() as folder:
        float_path = str(Path(folder) / "float.onnx")
        Path(float_path).write_bytes(float_bytes)

        def sufficient(kept: Sequence[str]) -> bool:
            return accuracy(course_quantize(float_path, calib, True, kept), images, labels) >= floor - 1e-12

        if not sufficient(names):
            return [f"not sufficient: with {len(names)} node(s) kept in float the quantised accuracy is below the "
                    f"float model's minus {spec['max_drop']:g}"]
        for name in names:
            if sufficient([n for n in names if n != name]):
                return [f"not 1-minimal: the list is still sufficient without {name}"]
    return []
