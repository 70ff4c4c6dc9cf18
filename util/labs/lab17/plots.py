"""Lab 17's figures (given code): total against activated, KV bytes against context, the fitted loss surface with
its compute-optimal frontier, and a training plan's memory per GPU by part."""
from __future__ import annotations

from typing import Mapping, Sequence


def plot_moe_counts(counts: Mapping[str, Mapping[str, int]], ax=None):
    """Per model of ``counts`` (name -> ``moe_counts(cfg)``): total and activated parameters (billions, bars) and
    FLOPs per token (billions, dots on the right axis). Returns the left axes."""
    import matplotlib.pyplot as plt
    import numpy as np

    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 3.6))
    names = list(counts)
    x = np.arange(len(names))
    ax.bar(x - 0.2, [counts[n]["total"] / 1e9 for n in names], 0.4, label="total parameters", color="#9ecae1")
    ax.bar(x + 0.2, [counts[n]["activated"] / 1e9 for n in names], 0.4, label="activated per token", color="#3182bd")
    right = ax.twinx()
    right.plot(x, [counts[n]["flops_per_token"] / 1e9 for n in names], "o", color="tab:red",
               label="GFLOPs per token (right)")
    ax.set_xticks(x, names)
    ax.set_yscale("log")
    ax.set_ylabel("parameters (billions, log)")
    right.set_ylabel("GFLOPs per token")
    right.set_ylim(bottom=0)
    ax.legend(loc="upper left", fontsize=8)
    right.legend(loc="upper right", fontsize=8)
    ax.set_title("Total against activated: memory pays for the total, compute for the activated")
    return ax


def plot_kv_bytes(contexts: Sequence[int], curves: Mapping[str, Sequence[float]], free_bytes: float, ax=None):
    """KV-cache bytes of one sequence (GB) against its context, one line per attention kind of ``curves``, with the
    memory left after the weights (``free_bytes``) as a dashed line. Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 3.8))
    for label, values in curves.items():
        ax.plot(contexts, [v / 1e9 for v in values], marker="o", label=label)
    ax.axhline(free_bytes / 1e9, color="gray", linestyle="--", label="free memory after the weights")
    ax.set(xscale="log", yscale="log", xlabel="context (tokens)", ylabel="KV cache of one sequence (GB)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("KV bytes by attention kind")
    return ax


def plot_loss_surface(law: Mapping[str, float], runs: Sequence[Mapping[str, float]],
                      frontier: Sequence[Mapping[str, float]], ax=None):
    """Contours of ``law``'s loss over parameters N and tokens D (log axes), the runs it was fitted to (dots) and
    the compute-optimal points of ``frontier`` (``compute_optimal`` at several budgets, joined). Returns the axes."""
    import matplotlib.pyplot as plt
    import numpy as np

    from util.labs.lab17.scaling import law as loss

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.6))
    N, D = np.meshgrid(np.logspace(7, 12, 120), np.logspace(8, 14, 120))
    contours = ax.contour(N, D, loss(law, N, D), levels=np.linspace(1.9, 3.6, 18), cmap="viridis")
    ax.clabel(contours, fontsize=7, fmt="%.2f")
    ax.scatter([r["N"] for r in runs], [r["D"] for r in runs], s=10, color="black", label="the course's runs")
    ax.plot([p["N"] for p in frontier], [p["D"] for p in frontier], "o-", color="tab:red",
            label="compute-optimal (C = 6 N D)")
    ax.plot(N[0], 20 * N[0], ":", color="tab:orange", label="20 tokens per parameter")
    ax.set(xscale="log", yscale="log", xlabel="parameters N", ylabel="tokens D", ylim=(1e8, 1e14))
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("The fitted loss and its compute-optimal frontier")
    return ax


def plot_memory_parts(memories: Mapping[str, Mapping[str, float]], gpu_memory: float, ax=None):
    """Memory per GPU (GB) by part (weights, gradients, optimizer, activations), one stacked bar per plan of
    ``memories`` (label -> ``training_plan(...)["memory"]``), with the GPU's memory as a dashed line."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 3.8))
    names = list(memories)
    bottom = [0.0] * len(names)
    for part, color in zip(("weights", "gradients", "optimizer", "activations"),
                           ("#3182bd", "#6baed6", "#fd8d3c", "#74c476")):
        values = [memories[n][part] / 1e9 for n in names]
        ax.bar(names, values, bottom=bottom, label=part, color=color)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.axhline(gpu_memory / 1e9, color="tab:red", linestyle="--", label="the GPU's memory")
    ax.set_ylabel("memory per GPU (GB)")
    ax.legend(fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.set_title("A training plan's memory per GPU, by part")
    return ax
