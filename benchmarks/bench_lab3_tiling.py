"""Lab 3: what tiling AlexNet's Gemms into 64 x 64 x 64 MatMuls costs in onnxruntime, in one run.

Builds the untiled AlexNet export, the naive tiled layout (task 3.3: Split / MatMul / Sum / Concat)
and the efficient layout (task 3.6: pre-tiled weights, one batched MatMul, ReduceSum) with the
*solution's* functions (``grader.author.solution.solution_namespace``), then measures for each, on
``--threads`` intra-op threads: session creation time and median latency of one 1x3x224x224 image,
and prints the ratios to the untiled model.

Targets (issue 4): efficient layout <= 1.3 x the untiled latency, its session creation <= 2 s.

The untiled and efficient models are measured at onnxruntime's default optimisation level
(ORT_ENABLE_ALL), as a deployment would run them. The naive layout is measured with optimisation
off (ORT_DISABLE_ALL): at the default level its session takes about a minute to create (FACTS.md);
``--naive-optimized`` measures that too.

    python benchmarks/bench_lab3_tiling.py [--threads 2] [--repeats 20] [--naive-optimized]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

from grader.author.solution import solution_namespace  # noqa: E402

LATENCY_TARGET, SESSION_TARGET = 1.3, 2.0


def create(model, *, threads: int, optimize: bool) -> dict:
    """A session for ``model`` and how long creating it took (s)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize
                                        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    data = model.SerializeToString()
    start = time.perf_counter()
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    return {"nodes": len(model.graph.node), "session": time.perf_counter() - start, "optimized": optimize,
            "sess": session, "times": []}


def time_interleaved(rows: dict, feeds, repeats: int) -> None:
    """Median latency of each session, runs interleaved so every layout sees the same machine load."""
    for row in rows.values():
        row["output"] = row["sess"].run(None, feeds)[0]          # warm-up
    for _ in range(repeats):
        for row in rows.values():
            start = time.perf_counter()
            row["sess"].run(None, feeds)
            row["times"].append(time.perf_counter() - start)
    for row in rows.values():
        row["latency"] = statistics.median(row["times"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--naive-optimized", action="store_true",
                        help="also create the naive layout's session with default optimisation (about a minute)")
    args = parser.parse_args()

    start = time.perf_counter()
    ns = solution_namespace("lab3", ("3.1", "3.2", "3.3", "3.4", "3.6"))   # the notebook without netron
    print(f"(ran the solution's cells in {time.perf_counter() - start:.0f} s)")
    alexnet = ns["alexnet"]
    start = time.perf_counter()
    naive = ns["replace_gemms"](alexnet, (64, 64, 64))
    naive_build = time.perf_counter() - start
    start = time.perf_counter()
    efficient = ns["replace_gemms_batched"](alexnet, (64, 64, 64))
    efficient_build = time.perf_counter() - start
    feeds = {"input": np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)}

    kw = {"threads": args.threads}
    rows = {"untiled": create(alexnet, optimize=True, **kw),
            "naive": create(naive, optimize=False, **kw),
            "efficient": create(efficient, optimize=True, **kw)}
    if args.naive_optimized:
        rows["naive (optimised)"] = create(naive, optimize=True, **kw)
    rows["untiled (no opt)"] = create(alexnet, optimize=False, **kw)
    rows["efficient (no opt)"] = create(efficient, optimize=False, **kw)
    time_interleaved(rows, feeds, args.repeats)

    print(f"AlexNet 1x3x224x224, every Gemm within 64x64x64, onnxruntime {ort.__version__}, "
          f"{args.threads} threads; build: naive {naive_build:.1f} s, efficient {efficient_build:.1f} s")
    print(f"{'layout':20s} {'opt':>4s} {'nodes':>7s} {'session s':>10s} {'latency ms':>11s} {'x untiled':>10s} "
          f"{'max |diff|':>11s}")
    for name, row in rows.items():
        base = rows["untiled (no opt)"] if not row["optimized"] else rows["untiled"]
        diff = float(np.abs(row["output"] - rows["untiled"]["output"]).max())
        print(f"{name:20s} {'on' if row['optimized'] else 'off':>4s} {row['nodes']:7,d} {row['session']:10.2f} "
              f"{row['latency'] * 1e3:11.2f} {row['latency'] / base['latency']:10.2f} {diff:11.1e}")
    ratio = rows["efficient"]["latency"] / rows["untiled"]["latency"]
    session = rows["efficient"]["session"]
    print(f"\nefficient / untiled latency: {ratio:.2f} (target <= {LATENCY_TARGET}) "
          f"{'OK' if ratio <= LATENCY_TARGET else 'MISSED'}; efficient session {session:.2f} s "
          f"(target <= {SESSION_TARGET} s) {'OK' if session <= SESSION_TARGET else 'MISSED'}")
    print(f"naive / untiled latency (both without optimisation): "
          f"{rows['naive']['latency'] / rows['untiled (no opt)']['latency']:.2f}; naive session "
          f"{rows['naive']['session']:.2f} s")


if __name__ == "__main__":
    main()
