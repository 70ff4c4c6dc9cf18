"""Lab 9's onnxruntime helpers: quiet quantisation, the digits as arrays, the ONNX models of 9.5 and 9.6,
and what a quantised (QDQ) model is summarised by. Given code: nothing here quantises anything.

* :func:`quiet_onnxruntime`: ``quantize_static`` warns through Python's root logger ("Please consider
  to run pre-processing before quantization", twice per call) and onnxruntime's own logger prints
  warnings of its sessions; this silences both (errors still show);
* :func:`digits_arrays`: the digits split as float32 / int64 numpy arrays (read once per process);
* :func:`float_model` / :func:`write_float_model`: the float ONNX model a case names (a DigitsCNN
  variant of ``util.labs.lab9.digits``, or ResNet-18 with BatchNorm folded at 1x3x64x64) and its
  calibration and test inputs;
* :func:`summarize_qdq`: QuantizeLinear / DequantizeLinear counts and how many Conv/Gemm weights have
  one scale per output channel; :func:`accuracy`, :func:`relmax`.
"""
from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any, Mapping

import numpy as np

RESNET_SHAPE = (1, 3, 64, 64)
"""ResNet-18 (10 classes, seeded BatchNorm statistics, folded) is exported at batch 1: feed one image at a time."""


def quiet_onnxruntime() -> None:
    """Silence onnxruntime's warnings and ``quantize_static``'s root-logger warnings (errors still show)."""
    import onnxruntime as ort

    ort.set_default_logger_severity(3)
    logging.getLogger().setLevel(logging.ERROR)


@functools.lru_cache(maxsize=1)
def _split():
    from util.data import digits_split

    split = digits_split()
    return {name: getattr(split, name).numpy() for name in ("x_train", "y_train", "x_test", "y_test")}


def digits_arrays() -> dict[str, np.ndarray]:
    """``util.data.digits_split()`` as numpy arrays (fresh copies; the split is read once per process):
    ``x_train`` (1437 x 1 x 8 x 8 float32), ``y_train``, ``x_test`` (360 x 1 x 8 x 8), ``y_test`` (int64)."""
    return {name: array.copy() for name, array in _split().items()}


def float_model(spec: Mapping[str, Any]) -> bytes:
    """The float ONNX model (bytes) of a 9.5 / 9.6 case: ``spec["model"]`` is ``"resnet18"`` or a
    DigitsCNN variant (``{}``: plain; ``{"outlier": K, "where": "conv1", "channel": c}``)."""
    if spec["model"] == "resnet18":
        from util.onnx_models import export_torchvision

        return export_torchvision("resnet18_bnstats", input_shape=RESNET_SHAPE, fold_batchnorm=True).SerializeToString()
    from util.labs.lab9.digits import digits_onnx

    return digits_onnx(spec["model"])


def write_float_model(spec: Mapping[str, Any], folder: str | Path) -> str:
    """Write :func:`float_model` ``(spec)`` as ``float.onnx`` in ``folder`` and return its path."""
    path = Path(folder) / "float.onnx"
    path.write_bytes(float_model(spec))
    return str(path)


def calibration_images(spec: Mapping[str, Any]) -> np.ndarray:
    """The calibration images of a case: the first ``spec["calib"]`` training digits, or for ResNet-18
    ``spec["calib"]`` seeded 3 x 64 x 64 images."""
    if spec["model"] == "resnet18":
        from util.models import example_input

        return example_input((int(spec["calib"]), *RESNET_SHAPE[1:]), seed=5).numpy()
    return digits_arrays()["x_train"][:int(spec["calib"])]


def evaluation_images(spec: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray | None]:
    """The inputs a case's model is judged on, and their labels (``None`` for ResNet-18: its random
    weights predict one class for every input, so only the size of its error is judged)."""
    if spec["model"] == "resnet18":
        from util.models import example_input

        return example_input((4, *RESNET_SHAPE[1:]), seed=6).numpy(), None
    arrays = digits_arrays()
    return arrays["x_test"], arrays["y_test"]


def outputs(model: Any, images: np.ndarray) -> np.ndarray:
    """The model's first output on ``images`` (one run per image when its batch dimension is fixed at 1)."""
    import onnx

    from util.onnx_session import session

    proto = model if isinstance(model, onnx.ModelProto) else onnx.load_from_string(bytes(model))
    sess = session(proto)
    name = sess.get_inputs()[0].name
    batch = sess.get_inputs()[0].shape[0]
    images = np.asarray(images, dtype=np.float32)
    if batch == 1:
        return np.concatenate([sess.run(None, {name: images[i:i + 1]})[0] for i in range(len(images))])
    return sess.run(None, {name: images})[0]


def run_all(model: Any, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every output of ``model`` (an ``onnx.ModelProto`` or its bytes) on ``feeds``, by output name
    (onnxruntime on the CPU, one thread, graph optimisations off, warnings silenced)."""
    import onnx

    from util.onnx_session import run

    proto = model if isinstance(model, onnx.ModelProto) else onnx.load_from_string(bytes(model))
    return run(proto, feeds)


def accuracy(model: Any, images: np.ndarray, labels: np.ndarray) -> float:
    """Top-1 accuracy (a fraction) of ``model`` (an ``onnx.ModelProto`` or its bytes) on ``images``."""
    return float((outputs(model, images).argmax(axis=1) == np.asarray(labels)).mean())


def relmax(found: np.ndarray, reference: np.ndarray) -> float:
    """``max|found - reference| / max|reference|`` in float64 (``max|found - reference|`` for an all-zero reference)."""
    found, reference = np.asarray(found, np.float64), np.asarray(reference, np.float64)
    worst, scale = float(np.abs(found - reference).max()), float(np.abs(reference).max())
    return worst / scale if scale > 0 else worst


def summarize_qdq(model: Any) -> dict[str, int]:
    """What a QDQ model is summarised by: ``QuantizeLinear`` and ``DequantizeLinear`` node counts, and
    ``per_channel_weights``, the Conv/Gemm weights whose DequantizeLinear has one scale per output channel."""
    import onnx
    from onnx import numpy_helper

    proto = model if isinstance(model, onnx.ModelProto) else onnx.load_from_string(bytes(model))
    graph = proto.graph
    scales = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    vector = 0
    for node in graph.node:
        if node.op_type in ("Conv", "Gemm") and len(node.input) > 1 and node.input[1] in producer:
            dq = producer[node.input[1]]
            scale = scales.get(dq.input[1]) if dq.op_type == "DequantizeLinear" and len(dq.input) > 1 else None
            vector += int(scale is not None and scale.size > 1)
    ops = [node.op_type for node in graph.node]
    return {"QuantizeLinear": ops.count("QuantizeLinear"), "DequantizeLinear": ops.count("DequantizeLinear"),
            "per_channel_weights": vector}
