"""Lab 14's hidden cases: the inputs the grader runs the student's functions on, which the notebook never shows.

Grader-only (``util.labs.GRADER_ONLY``): never in the students' copy, the student image or a graded kernel, which
receives each case's input only when the grader runs it (``util.hidden``). ``tasks.py`` states what each task's
cases are worth (``Task.hidden_points``); the registry attaches these to it (``Lab.with_cases``).

Random inputs (14.2 to 14.5) are drawn by the judge from the grading secret and the case's spec
(:mod:`util.judging.secret`), so any seed makes a valid case (``seeds=("seed",)``: a term secret draws them anew).
Shapes are chosen for what they catch: a last block cut short (masks, ``cdiv``, ``min``), a matrix given transposed
(strides), values large enough (around 1,000) that an exponential taken before the maximum overflows even in
float64 (past 709), causal blocks on and off the diagonal (14.8: query blocks larger and smaller than the key
blocks, so that a key block's first query block is not always its own), and in 14.6 shapes where rounding the
number of tiles up picks another tile than the formula without it. 14.7's configurations are in
``cases_tiles.py``, their compiler figures in ``cases_compiled.json``. Interpreter time: every Triton case keeps
N <= 256 with blocks >= 32 (about 0.2 to 1 s each).
"""
from __future__ import annotations

import json

from util.contract import Case
from util.labs.lab14 import choice
from util.labs.lab14.cases_launch import LAUNCH_CASES
from util.labs.lab14.cases_tiles import TILE_CONFIGS
from util.labs.lab14.compiled import HIDDEN_FILE, config_name
from util.labs.lab14.machines import H100, H100_FP16

A100 = {"name": "A100-like", "bandwidth": 2.039e12, "flops": 156e12, "on_chip_bytes": 164 * 1024}
SMALL = {"name": "48 KiB of shared memory", "bandwidth": 0.9e12, "flops": 14e12, "on_chip_bytes": 48 * 1024}


def _tile_cases() -> tuple[Case, ...]:
    """Two cases a configuration, shared memory's first. A shared-memory case's spec is the configuration alone (the
    compiler's figure, its expected value, is in the references, never in what the kernel receives); an occupancy
    case's spec is the registers and shared memory the grader's compile gave and ``num_warps``, without the
    configuration (never a figure of the student's)."""
    stored = {json.dumps(row["config"], sort_keys=True): row["compiled"]
              for row in json.loads(HIDDEN_FILE.read_text(encoding="utf-8"))} if HIDDEN_FILE.exists() else {}
    shared, occupancy = [], []
    for config in TILE_CONFIGS:  # a configuration not stored yet has no figures: its case fails, and regen says why
        compiled = stored.get(json.dumps(config, sort_keys=True))
        name = config_name(config)
        stages = name.rsplit(", ", 1)[0]
        shared.append(Case(f"shared memory of {stages}", {"part": "shared", "block": config["block"],
                                                          "dtype": config["dtype"],
                                                          "num_stages": config["num_stages"]}, 1, since=4))
        figures = ({"registers": compiled["registers"], "shared": compiled["shared"]} if compiled
                   else {"registers": None, "shared": None})
        occupancy.append(Case(f"occupancy of {name}", {"part": "occupancy", **figures,
                                                       "num_warps": config["num_warps"]}, 1, since=4))
    return tuple(shared + occupancy)


def _launch_cases() -> tuple[Case, ...]:
    """Task 14.9's cases (``cases_launch.py``), 2 points each: the product, the machine and the candidates with the
    grader's own compiler figures (``cases_launch.json``, stored when the references were written); the chosen
    configuration and the model's times are the references'. Since release 6 (the task's)."""
    return tuple(Case(case["id"], {"m": case["m"], "n": case["n"], "k": case["k"], "machine": H100_FP16,
                                   "candidates": choice.candidates(case["candidates"])}, 2, since=6)
                 for case in LAUNCH_CASES)


def _seeded(id_: str, spec: dict, points: float, since: int = 1) -> Case:
    return Case(id_, spec, points, seeds=("seed",), since=since)


CASES = {
    "14.1": (
        Case("GPT-2 small at 1,000 tokens, causal, blocks of 128",
             {"n": 1000, "d": 64, "heads": 12, "block": 128, "causal": True}, 1),
        Case("32 heads of 128 at 2,048 tokens, blocks of 64",
             {"n": 2048, "d": 128, "heads": 32, "block": 64, "causal": False}, 1),
        Case("300 tokens in blocks of 128 (a last block of 44)",
             {"n": 300, "d": 64, "heads": 4, "block": 128, "causal": False}, 1),
        Case("200 tokens, causal, blocks of 64 (a last block of 8)",
             {"n": 200, "d": 32, "heads": 2, "block": 64, "causal": True}, 1),
    ),
    "14.2": (
        _seeded("2 heads of 200 queries in blocks of 64 (a last block of 8)",
                {"heads": 2, "n": 200, "d": 32, "block": 64, "causal": False, "seed": 1}, 1),
        _seeded("causal, 4 heads of 128 x 64 in blocks of 32",
                {"heads": 4, "n": 128, "d": 64, "block": 32, "causal": True, "seed": 2}, 1),
        _seeded("causal, 130 queries in blocks of 32 (a last block of 2)",
                {"heads": 1, "n": 130, "d": 32, "block": 32, "causal": True, "seed": 3}, 1),
        _seeded("causal, 2,048 queries within a memory budget smaller than one score matrix",
                {"heads": 1, "n": 2048, "d": 32, "block": 128, "causal": True, "seed": 4}, 1),
    ),
    "14.3": (
        _seeded("96 x 128 x 64 in tiles of 32", {"m": 96, "n": 128, "k": 64, "block": [32, 32, 32], "seed": 1}, 3),
        _seeded("100 x 72 x 90 in tiles of 32 (every edge ragged)",
                {"m": 100, "n": 72, "k": 90, "block": [32, 32, 32], "seed": 2}, 4),
        _seeded("B stored transposed, 128 x 96 x 64 in 64 x 32 tiles",
                {"m": 128, "n": 96, "k": 64, "block": [64, 32, 32], "b_transposed": True, "seed": 3}, 3),
        _seeded("136 x 100 x 72 in 64 x 32 tiles (ragged rows, columns and depth)",
                {"m": 136, "n": 100, "k": 72, "block": [64, 32, 32], "seed": 4}, 4),
    ),
    "14.4": (
        _seeded("16 rows of 1,000 values of size 1,000 (exp overflows float32 and float64 without the maximum)",
                {"rows": 16, "cols": 1000, "scale": 1000.0, "seed": 1}, 2, since=3),  # was size 50 until release 3
        _seeded("12 rows of 777", {"rows": 12, "cols": 777, "seed": 2}, 2),
        _seeded("8 rows of exactly 256 (no masked lane)", {"rows": 8, "cols": 256, "seed": 3}, 2),
    ),
    "14.5": (
        _seeded("2 heads of 96 x 32 in blocks of 32",
                {"heads": 2, "n": 96, "d": 32, "block": [32, 32], "causal": False, "seed": 1}, 4),
        _seeded("136 x 64, query blocks of 64 and key blocks of 32 (ragged)",
                {"heads": 1, "n": 136, "d": 64, "block": [64, 32], "causal": False, "seed": 2}, 5),
        _seeded("causal, 256 x 32 in blocks of 64",
                {"heads": 1, "n": 256, "d": 32, "block": [64, 64], "causal": True, "seed": 3}, 4),
        _seeded("causal, 150 x 32 in blocks of 32 (a ragged diagonal)",
                {"heads": 1, "n": 150, "d": 32, "block": [32, 32], "causal": True, "seed": 4}, 5),
    ),
    "14.6": (
        Case("H100-like, 200 x 4,096 x 1,024 (rows in one partial tile)",
             {"m": 200, "n": 4096, "k": 1024, "machine": H100}, 1),
        Case("H100-like, 16 x 4,096 x 4,096 (16 tokens: a thin product)",
             {"m": 16, "n": 4096, "k": 4096, "machine": H100}, 1),
        Case("A100-like, 3,000 x 11,008 x 4,096", {"m": 3000, "n": 11008, "k": 4096, "machine": A100}, 1),
        Case("48 KiB of shared memory, 100 x 5,000 x 1,024 (compute-bound)",
             {"m": 100, "n": 5000, "k": 1024, "machine": SMALL}, 1),
    ),
    "14.7": _tile_cases(),
    "14.8": (  # since release 5 (the task's: Task.since); each a compile of its own constexprs (about 3 s)
        _seeded("2 heads of 80 x 16, query blocks of 32 and key blocks of 16 (ragged)",
                {"heads": 2, "n": 80, "d": 16, "block": [32, 16], "causal": False, "seed": 1}, 3, since=5),
        _seeded("causal, 2 heads of 90 x 16, query blocks of 32 and key blocks of 16 (key blocks inside a query "
                "block, a ragged diagonal)",
                {"heads": 2, "n": 90, "d": 16, "block": [32, 16], "causal": True, "seed": 2}, 3, since=5),
        _seeded("causal, 72 x 32, query blocks of 16 and key blocks of 32",
                {"heads": 1, "n": 72, "d": 32, "block": [16, 32], "causal": True, "seed": 3}, 2, since=5),
    ),
    "14.9": _launch_cases(),  # since release 6 (the task's: Task.since)
}
"""Task id -> its hidden cases (``Lab.with_cases``)."""
