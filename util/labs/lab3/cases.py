"""Lab 3's hidden cases: the inputs the grader runs the student's functions on, which the notebook never shows.

Grader-only (``util.labs.GRADER_ONLY``): never in the students' copy, the student image or a graded kernel,
which receives each case's input only when the grader runs it (``util.hidden``). ``tasks.py`` states what
each task's cases are worth (``Task.hidden_points``); the registry attaches these to it (``Lab.with_cases``).
"""
from __future__ import annotations

from typing import Any

from util.contract import Case

EFFICIENT_NODES_PER_GEMM = 16
"""Task 3.6: at most this many nodes may replace one Gemm (the naive layout needs thousands)."""


def _gemm(**spec: Any) -> dict[str, Any]:
    return {"trans_a": False, "trans_b": False, "alpha": 1.0, "beta": 1.0, **spec}


CASES = {
    '3.1': (
        Case("7x5x3", _gemm(M=7, K=5, N=3), 2),
        Case("20x9x6 transA alpha", _gemm(M=20, K=9, N=6, trans_a=True, alpha=0.75), 2),
        Case("4x33x12 transB beta", _gemm(M=4, K=33, N=12, trans_b=True, beta=-1.5), 2),
        Case("16x8x24 both transposed", _gemm(M=16, K=8, N=24, trans_a=True, trans_b=True,
                                              alpha=2.0, beta=0.5), 2),
    ),
    '3.2': (
        Case("128x64x192 divisible", _gemm(M=128, K=64, N=192, bounds=[64, 64, 64]), 6),
        Case("100x70x130 partial tiles", _gemm(M=100, K=70, N=130, bounds=[64, 64, 64]), 6),
        Case("33x65x17 transA, bounds 16x32x8",
             _gemm(M=33, K=65, N=17, bounds=[16, 32, 8], trans_a=True), 6),
        Case("50x40x30 transB alpha beta, bounds 32x16x8",
             _gemm(M=50, K=40, N=30, bounds=[32, 16, 8], trans_b=True, alpha=0.5, beta=2.0), 6),
        Case("45x77x29 both transposed, bounds 8x24x16",
             _gemm(M=45, K=77, N=29, bounds=[8, 24, 16], trans_a=True, trans_b=True, alpha=-1.0,
                   beta=0.0), 6),
        Case("3x5x7 smaller than the bounds", _gemm(M=3, K=5, N=7, bounds=[64, 64, 64]), 6),
    ),
    '3.3': (
        Case("gemm_chain, bounds 64x64x64", {"model": "gemm_chain", "bounds": [64, 64, 64]}, 4),
        Case("gemm_chain, bounds 4x8x16", {"model": "gemm_chain", "bounds": [4, 8, 16]}, 6),
        Case("alexnet, bounds 64x64x64", {"model": "alexnet", "bounds": [64, 64, 64]}, 6),
    ),
    '3.4': (
        Case("one bias element +0.5", {"initializer": "b3", "delta": 0.5, "index": 4, "seed": 11,
                                       "rtol": 1e-4, "atol": 1e-4}, 4, seeds=("seed",)),
        Case("every bias +2e-4 within atol", {"initializer": "b1", "delta": 2e-4, "seed": 12,
                                              "rtol": 1e-4, "atol": 1e-3}, 4, seeds=("seed",)),
    ),
    '3.5': (Case("tiny_shape_graph", {"file": "hidden_tiny.onnx"}, 3),),
    '3.6': (
        Case("gemm_chain, bounds 4x8x16", {"model": "gemm_chain", "bounds": [4, 8, 16],
                                           "max_nodes_per_gemm": EFFICIENT_NODES_PER_GEMM}, 6),
        Case("alexnet, bounds 64x64x64", {"model": "alexnet", "bounds": [64, 64, 64],
                                          "max_nodes_per_gemm": EFFICIENT_NODES_PER_GEMM}, 6),
    ),
}
"""Task id -> its hidden cases (``Lab.with_cases``)."""
