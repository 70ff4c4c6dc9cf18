"""Course-side onnxruntime helpers: sessions at a level, bitwise comparison, relative error.

The grader's judges (``judge.py``), the hidden cases' error function (``search.py``) and the public
checks use these; the notebook writes its own. Every session runs on the CPU with one thread, so
results do not depend on the machine's core count.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

LOG10_OF_ZERO = -12.0
"""``relmax_log10`` reported for a relative error of exactly 0 (log10 of 0 is minus infinity)."""


def session(model: Any, level: str = "DISABLE_ALL", disabled: Iterable[str] = (), save_to: str | None = None):
    """An ``onnxruntime.InferenceSession`` at ``level`` (``DISABLE_ALL``, ``BASIC``, ``EXTENDED``, ``ALL``),
    with the passes named in ``disabled`` switched off, one thread, warnings silenced.

    ``model`` is an ``onnx.ModelProto`` or its serialised bytes. ``save_to`` writes the optimised graph there.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, f"ORT_{level}" if level == "DISABLE_ALL"
                                               else f"ORT_ENABLE_{level}")
    options.log_severity_level = 3
    if save_to is not None:
        options.optimized_model_filepath = str(save_to)
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"],
                                disabled_optimizers=list(disabled))


def outputs(model: Any, feeds: Mapping[str, np.ndarray], level: str = "DISABLE_ALL",
            disabled: Iterable[str] = ()) -> list[np.ndarray]:
    """Every output of ``model`` on ``feeds`` at ``level`` minus ``disabled``."""
    return session(model, level, disabled).run(None, dict(feeds))


def optimized(model: Any, level: str, disabled: Iterable[str] = ()):
    """The graph onnxruntime builds at ``level`` (an ``onnx.ModelProto``), read back from its saved file."""
    import onnx

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "optimized.onnx")
        session(model, level, disabled, save_to=path)
        return onnx.load(path)


def same_bits(first: Sequence[np.ndarray], second: Sequence[np.ndarray]) -> bool:
    """True when both lists hold arrays of the same dtypes, shapes and bytes (``-0.0`` differs from ``0.0``)."""
    return len(first) == len(second) and all(
        a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes() for a, b in zip(first, second))


def relmax(out: np.ndarray, ref: np.ndarray) -> float:
    """``max|out - ref| / max|ref|`` in float64 (``max|out - ref|`` when ``ref`` is all zeros)."""
    out64, ref64 = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    worst, scale = float(np.max(np.abs(out64 - ref64))), float(np.max(np.abs(ref64)))
    return worst / scale if scale else worst
