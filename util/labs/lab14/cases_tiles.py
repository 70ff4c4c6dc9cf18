"""Task 14.7's hidden configurations of the course's tile kernel (grader-only, as ``cases.py``, which makes them
cases with their stored compiler figures)."""

TILE_CONFIGS = (
    {"block": [128, 128, 32], "dtype": "fp16", "num_stages": 3, "num_warps": 8},
    {"block": [64, 256, 32], "dtype": "fp16", "num_stages": 4, "num_warps": 4},
    {"block": [128, 256, 64], "dtype": "bf16", "num_stages": 3, "num_warps": 8},
    {"block": [256, 256, 64], "dtype": "fp16", "num_stages": 4, "num_warps": 8},
    {"block": [64, 32, 32], "dtype": "fp16", "num_stages": 2, "num_warps": 4},
)
"""14.7's hidden configurations of the course's tile kernel (:mod:`util.labs.lab14.compiled`), chosen for what
limits them: registers (2 blocks of 8 warps at ~100 registers), shared memory (80 KiB a block), both at once (one
block of 144 KiB at ~200 registers), a block that fits no SM (256 KiB, and registers spilled), a small tile limited
by registers at 17 blocks' worth of shared memory. Their compiler figures are the grader's own, compiled when the
references were written (``cases_compiled.json``, ``python -m util.labs.lab14.compiled --write``)."""
