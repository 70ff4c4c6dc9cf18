"""Task 14.9's hidden shapes and candidate lists (grader-only, as ``cases.py``, which makes them cases with the
compiler figures stored in ``cases_launch.json`` by ``python -m util.labs.lab14.choice --write``).

Each is chosen for what decides it under the model (:mod:`util.labs.lab14.choice`): a square product where the
fastest candidate ignoring spills is a 256 x 256 tile that spills, and 4 stages halve a 128 x 128 tile's
occupancy, so a 4-warp 128 x 128 x 32 wins; a thin product (256 rows, a batch of tokens) where the spilling
128 x 256 x 64 at 4 warps would win if spills were ignored; a ragged product (1,000 x 5,000) whose only spilling
candidate does not fit either, where a 128 x 128 tile at 16 warps wins by occupancy over the 128 x 256 tile that
moves fewer bytes. No two candidates of a case tie for the fastest.
"""
from __future__ import annotations


def _c(block, stages: int, warps: int, dtype: str = "fp16") -> dict:
    return {"block": list(block), "dtype": dtype, "num_stages": stages, "num_warps": warps}


LAUNCH_CASES = (
    {"id": "3,072 x 6,144 x 4,096: a spilling 256 x 256 tile, and 4 stages that halve the occupancy",
     "m": 3072, "n": 6144, "k": 4096,
     "candidates": [_c((64, 64, 32), 3, 4), _c((128, 128, 64), 4, 8), _c((128, 128, 32), 4, 4),
                    _c((256, 256, 32), 3, 8), _c((128, 256, 64), 3, 8), _c((256, 256, 64), 4, 8)]},
    {"id": "256 x 8,192 x 8,192 (a batch of 256 tokens): the spilling 128 x 256 x 64 at 4 warps",
     "m": 256, "n": 8192, "k": 8192,
     "candidates": [_c((64, 64, 32), 3, 4), _c((64, 128, 64), 3, 4), _c((128, 256, 64), 2, 4),
                    _c((128, 64, 64), 4, 4), _c((64, 256, 32), 4, 4), _c((256, 64, 64), 3, 8)]},
    {"id": "1,000 x 5,000 x 2,048 (ragged): occupancy against bytes, a candidate that fits no SM",
     "m": 1000, "n": 5000, "k": 2048,
     "candidates": [_c((128, 128, 32), 3, 8), _c((128, 128, 64), 3, 4), _c((64, 128, 32), 3, 4),
                    _c((128, 64, 32), 3, 4), _c((128, 256, 32), 3, 8), _c((256, 256, 64), 4, 8)]},
)
"""Task 14.9's hidden cases: an id, the product ``m x n x k`` (float16) and its candidates, in order."""
