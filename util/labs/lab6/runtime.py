"""Course-side onnxruntime helpers: outputs at a level, the optimised graph, bitwise comparison, relative error.

The grader's judges (``judge.py``), the hidden cases' error function (``search.py``) and the public
checks use these; the notebook writes its own. Sessions come from ``util.onnx_session`` (CPU, one
thread, warnings silenced), so results do not depend on the machine's core count; levels are
``DISABLE_ALL``, ``BASIC``, ``EXTENDED`` or ``ALL``.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from util.onnx_session import run, session

LOG10_OF_ZERO = -12.0
"""``relmax_log10`` reported for a relative error of exactly 0 (log10 of 0 is minus infinity)."""


def outputs(model: Any, feeds: Mapping[str, np.ndarray], level: str = "DISABLE_ALL",
            disabled: Iterable[str] = ()) -> list[np.ndarray]:
    """Every output of ``model`` on ``feeds`` at ``level`` minus ``disabled``, in graph order."""
    return list(run(model, feeds, level, disabled=disabled).values())


def optimized(model: Any, level: str, disabled: Iterable[str] = ()):
    """The graph onnxruntime builds at ``level`` (an ``onnx.ModelProto``), read back from its saved file."""
    import onnx

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "optimized.onnx")
        session(model, level, disabled=disabled, save_to=path)
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
