"""Choosing a launch configuration (task 14.9): the tile kernel's configuration a model extended by occupancy
predicts fastest, among those the compiler built without spilling and that fit an SM.

A candidate is a row of the kind :func:`util.labs.lab14.compiled.load` gives, ``{"config": {...}, "compiled":
{"registers", "spills", "shared"}}``: a configuration of :data:`util.labs.lab14.compiled.TILE_KERNEL` and what
Triton's compiler and ``ptxas`` made of it for an H100. The notebook's candidates (:data:`PUBLIC_CANDIDATES`,
float16, for the product :data:`PUBLIC_SHAPE`) are stored in ``launch_public.json``; the grader's hidden shapes and
candidate lists, compiled the same way when the course wrote its references, in the grader-only
``cases_launch.json``: nothing is compiled while a notebook is graded. ``python -m util.labs.lab14.choice`` (in a
shell without ``TRITON_INTERPRET``) compiles the public candidates again and says whether it found the stored
figures; ``--write`` (course-side) stores both tables, compiling only configurations no stored table holds.

The model (the handout states it; :data:`FULL_WARPS`): task 14.6's roofline on the tile's traffic, with the
throughput an SM reaches scaled by the warps it holds (task 14.7's occupancy), ``min(1, warps / FULL_WARPS)``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Mapping

from util.labs.lab14.compiled import DTYPES, HERE, compile_tile, config_name, load
from util.labs.lab14.compiled import HIDDEN_FILE as TILE_HIDDEN_FILE
from util.labs.lab14.compiled import PUBLIC_FILE as TILE_PUBLIC_FILE

PUBLIC_FILE = HERE / "launch_public.json"
HIDDEN_FILE = HERE / "cases_launch.json"  # grader-only (util.labs.GRADER_ONLY: "cases*")

FULL_WARPS = 16
"""Warps an SM must hold for the model to give it the roofline's full throughput (4 on each of its 4 schedulers,
so that one warp's wait for memory is hidden behind the others' work); with fewer, the bandwidth and the FLOP/s
it reaches are both ``warps / 16`` of the machine's."""

PUBLIC_SHAPE = (4096, 4096, 4096)
"""The notebook's product (``M, N, K``): task 14.6's, in float16."""


def _config(block, stages: int, warps: int, dtype: str = "fp16") -> dict[str, Any]:
    return {"block": list(block), "dtype": dtype, "num_stages": stages, "num_warps": warps}


PUBLIC_CANDIDATES = (
    _config((64, 64, 32), 3, 4),
    _config((128, 64, 32), 3, 4),
    _config((128, 128, 64), 1, 8),
    _config((128, 128, 64), 2, 8),
    _config((128, 128, 64), 3, 8),
    _config((128, 128, 64), 4, 8),
    _config((128, 128, 64), 3, 4),
    _config((128, 256, 32), 3, 8),
    _config((128, 256, 64), 2, 4),
    _config((256, 128, 64), 3, 8),
    _config((256, 256, 64), 3, 8),
)
"""The notebook's candidates (float16): task 14.7's table without its float32 tile, the 128 x 128 x 64 tile at 4
warps instead of 8, and two that spill (128 x 256 x 64 at 4 warps, 256 x 256 x 64)."""


def _stored() -> dict[str, dict[str, int]]:
    """Every configuration some stored table holds -> its compiler figures."""
    found: dict[str, dict[str, int]] = {}
    for path in (TILE_PUBLIC_FILE, TILE_HIDDEN_FILE, PUBLIC_FILE, HIDDEN_FILE):
        if path.exists():
            found.update({json.dumps(row["config"], sort_keys=True): row["compiled"] for row in load(path)})
    return found


def _table(configs, stored: dict) -> list[dict[str, Any]]:
    rows = []
    for config in configs:
        key = json.dumps(dict(config), sort_keys=True)
        if key not in stored:
            stored[key] = compile_tile(config)
        rows.append({"config": dict(config), "compiled": stored[key]})
    return rows


def _write() -> None:
    """Store the public candidates' figures and those of every hidden case's candidates (course-side)."""
    from util.labs.lab14.cases_launch import LAUNCH_CASES

    stored = _stored()
    PUBLIC_FILE.write_text(json.dumps(_table(PUBLIC_CANDIDATES, stored), indent=1) + "\n", encoding="utf-8")
    hidden = {json.dumps(c, sort_keys=True): c for case in LAUNCH_CASES for c in case["candidates"]}
    HIDDEN_FILE.write_text(json.dumps(_table(hidden.values(), stored), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {PUBLIC_FILE.name}: {len(PUBLIC_CANDIDATES)} configurations; {HIDDEN_FILE.name}: {len(hidden)}")


def candidates(configs, path: Path = HIDDEN_FILE) -> list[dict[str, Any]]:
    """The stored rows of ``configs``, in their order (a configuration not stored gets ``"compiled": None``)."""
    stored = {json.dumps(row["config"], sort_keys=True): row["compiled"] for row in load(path)} if path.exists() else {}
    return [{"config": dict(c), "compiled": stored.get(json.dumps(dict(c), sort_keys=True))} for c in configs]


def tile_traffic(m: int, n: int, k: int, config: Mapping[str, Any]) -> int:
    """Bytes the tile kernel moves: task 14.6's count in the configuration's element type (C stored in it too)."""
    block_m, block_n, _ = config["block"]
    return DTYPES[config["dtype"]] * (m * k * -(-n // block_n) + k * n * -(-m // block_m) + m * n)


def main(argv: list[str]) -> int:
    """Compile :data:`PUBLIC_CANDIDATES` again; exit status 1 if any differs from ``launch_public.json``
    (``--write``, course-side: store both tables)."""
    if argv == ["--write"]:
        _write()
        return 0
    stored = {json.dumps(row["config"], sort_keys=True): row["compiled"] for row in load(PUBLIC_FILE)}
    differ = 0
    for config in PUBLIC_CANDIDATES:
        found = compile_tile(config)
        same = stored.get(json.dumps(dict(config), sort_keys=True)) == found
        differ += not same
        print(f"{config_name(config):36} {found}{'' if same else '   (the stored table says otherwise)'}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
