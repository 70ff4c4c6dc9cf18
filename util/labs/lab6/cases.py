"""Lab 6's hidden cases: the inputs the grader runs the student's functions on, which the notebook never shows.

Grader-only (``util.labs.GRADER_ONLY``): never in the students' copy, the student image or a graded kernel,
which receives each case's input only when the grader runs it (``util.hidden``). ``tasks.py`` states what
each task's cases are worth (``Task.hidden_points``); the registry attaches these to it (``Lab.with_cases``).
"""
from __future__ import annotations

from typing import Any

from util.contract import Case


def _model(name: str, seed: int, **extra: Any) -> dict[str, Any]:
    return {"model": name, "seed": seed, **extra}


CASES = {
    '6.1': (Case("conv_relu_gemm", _model("conv_relu_gemm", 11), 5),
           Case("ln_first", _model("ln_first", 12), 5)),
    '6.2': (
        Case("zeros in ref", {"dtype": "float32", "out": [1e-3, 2.0, -2e-3, -4.5, 0.5, 8.25],
                              "ref": [0.0, 2.0, 0.0, -4.0, 0.5, 8.0]}, 2),
        Case("float16 near its limit", {"dtype": "float16", "out": [-60000.0, 60000.0, 1.0, 2.001],
                                        "ref": [60000.0, -60000.0, 1.0, 2.0]}, 2),
        Case("a signed zero", {"dtype": "float32", "out": [-0.0, 1.5, -2.0],
                               "ref": [0.0, 1.5, -2.0]}, 2),
    ),
    '6.3': (Case("ln_first in [0, 1]", _model("ln_first", 31, low=0.0, high=1.0, budget=50), 5),
           Case("ln_wide in [-100, 100]", _model("ln_wide", 32, low=-100.0, high=100.0, budget=50), 5),
           Case("ln_narrow in [-1, 1]", _model("ln_narrow", 33, low=-1.0, high=1.0, budget=50), 5)),
    '6.4': (Case("ln_first EXTENDED", _model("ln_first", 41, level="EXTENDED", disabled=[]), 4),
           Case("gelu_erf EXTENDED", _model("gelu_erf", 42, level="EXTENDED", disabled=[]), 4),
           Case("ln_first EXTENDED without LayerNormFusionL1",
                _model("ln_first", 43, level="EXTENDED", disabled=["LayerNormFusionL1"]), 4),
           Case("conv_add EXTENDED", _model("conv_add", 44, level="EXTENDED", disabled=[]), 4)),
    '6.5': (Case("conv_mul", _model("conv_mul", 51), 7),
           Case("ln_first", _model("ln_first", 52), 7),
           Case("rms_norm", _model("rms_norm", 53), 7),
           Case("conv_add", _model("conv_add", 54), 7)),
}
"""Task id -> its hidden cases (``Lab.with_cases``)."""
