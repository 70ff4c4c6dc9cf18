"""The lab's figures: the roofline with the layers on it, measured against predicted time, what a loaded
machine does to two clocks, and achieved GFLOP/s as the batch grows. Each returns the matplotlib ``Axes``.

Units everywhere: intensity in MAC/B (MACs per byte moved), performance in GFLOP/s (2 FLOPs per MAC),
times in seconds. A machine model is a dict ``{"peak_gflops": ..., "bandwidth_gbs": ...}``.
"""
from __future__ import annotations

from typing import Mapping, Sequence


def roof(machine: Mapping[str, float], intensity: float) -> float:
    """Attainable GFLOP/s at ``intensity`` MAC/B: min(peak, 2 x bandwidth x intensity)."""
    return min(machine["peak_gflops"], 2 * machine["bandwidth_gbs"] * intensity)


def plot_roofline(layers: Sequence[Mapping], machines: Mapping[str, Mapping[str, float]],
                  measured: Mapping[str, float] | None = None, title: str = "", ax=None, label: int = 6):
    """The roofs of ``machines`` (label -> machine model) and one point per layer of ``layers`` (rows with
    ``name``, ``macs`` and ``intensity``) on the first roof; with ``measured`` ({name: seconds}) also the
    performance each layer achieved (2 x MACs / seconds), joined to its point on the roof. The ``label``
    layers furthest below their roof are named."""
    import matplotlib.pyplot as plt
    import numpy as np

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 5))
    intensities = [row["intensity"] for row in layers]
    low, high = min(intensities + [0.1]) / 2, max(intensities + [10.0]) * 2
    grid = np.geomspace(low, high, 200)
    first = next(iter(machines.values()))
    for (name, machine), style in zip(machines.items(), ("-", "--", ":", "-.")):
        ridge = machine["peak_gflops"] / (2 * machine["bandwidth_gbs"])
        ax.plot(grid, [roof(machine, i) for i in grid], style, color="black", lw=1.2,
                label=f"{name}: {machine['peak_gflops']:.0f} GFLOP/s, {machine['bandwidth_gbs']:.0f} GB/s, "
                      f"ridge {ridge:.2f} MAC/B")
    on_roof = [roof(first, i) for i in intensities]
    ax.scatter(intensities, on_roof, s=22, color="tab:blue", zorder=3, label="layers: predicted (on the first roof)")
    if measured:
        achieved = [2 * row["macs"] / measured[row["name"]] / 1e9 if row["name"] in measured else np.nan
                    for row in layers]
        ax.scatter(intensities, achieved, s=22, color="tab:red", zorder=3, label="layers: measured")
        for i, a, p in zip(intensities, achieved, on_roof):
            ax.plot([i, i], [a, p], color="tab:red", lw=0.5, alpha=0.5)
        lowest = min([a for a in achieved if a > 0] + on_roof)
        ax.set_ylim(lowest / 3, max(m["peak_gflops"] for m in machines.values()) * 2)
        gaps = sorted(range(len(layers)), key=lambda k: -(on_roof[k] / achieved[k] if achieved[k] > 0 else 0))
        for k in gaps[:label]:
            ax.annotate(layers[k]["name"], (intensities[k], achieved[k]), fontsize=7, xytext=(4, -8),
                        textcoords="offset points")
    ax.set(xscale="log", yscale="log", xlabel="intensity (MAC per byte moved)", ylabel="GFLOP/s",
           title=title or "The roofline")
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=7, loc="lower right")
    return ax


def plot_measured_vs_predicted(predicted: Mapping[str, float], measured: Mapping[str, float], title: str = "",
                               ax=None, label: int = 5):
    """One point per layer: predicted seconds (x) against measured seconds (y), log-log, with the line where
    they are equal and the ``label`` layers furthest above it named."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 5))
    names = [name for name in predicted if name in measured]
    xs, ys = [predicted[n] * 1e6 for n in names], [measured[n] * 1e6 for n in names]
    ax.scatter(xs, ys, s=22, color="tab:red")
    low, high = min(xs + ys) / 2, max(xs + ys) * 2
    ax.plot([low, high], [low, high], color="black", lw=1, label="measured = predicted")
    for factor, style in ((10, ":"),):
        ax.plot([low, high], [low * factor, high * factor], style, color="gray", lw=1, label=f"{factor}x slower")
    for k in sorted(range(len(names)), key=lambda k: -ys[k] / xs[k])[:label]:
        ax.annotate(names[k], (xs[k], ys[k]), fontsize=7, xytext=(4, 2), textcoords="offset points")
    ax.set(xscale="log", yscale="log", xlabel="predicted (us)", ylabel="measured (us)",
           title=title or "Measured against predicted, per layer")
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=7)
    return ax


def plot_clocks(samples: Mapping[str, Sequence[float]], unit: str = "GB/s", title: str = "", ax=None):
    """Each list of ``samples`` (label -> one value per run, e.g. GB/s on each clock) as a row of dots, its best
    marked: how far single runs fall from the best one."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.8 + 0.6 * len(samples)))
    for row, values in enumerate(samples.values()):
        ax.scatter(values, [row] * len(values), s=18, alpha=0.6)
        ax.scatter([max(values)], [row], s=80, marker="|", color="black")
    ax.set_yticks(range(len(samples)), list(samples), fontsize=8)
    ax.set(xlabel=unit, title=title or "One value per run; the bar marks the best")
    ax.set_ylim(-0.6, len(samples) - 0.4)
    ax.grid(True, axis="x", alpha=0.2)
    return ax


def plot_batches(achieved: Mapping[str, Mapping[int, float]], machine: Mapping[str, float] | None = None,
                 title: str = "", ax=None):
    """Achieved GFLOP/s against batch size, one line per layer (label -> {batch: GFLOP/s}); with ``machine``,
    its peak as a dashed line."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    for name, values in achieved.items():
        batches = sorted(int(b) for b in values)
        ax.plot(batches, [values[b] for b in batches], "o-", label=name)
    if machine:
        ax.axhline(machine["peak_gflops"], ls="--", color="black", lw=1,
                   label=f"peak {machine['peak_gflops']:.0f} GFLOP/s")
    ax.set(xscale="log", xlabel="batch size", ylabel="achieved GFLOP/s", title=title or "Batch size and achieved GFLOP/s")
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=8)
    return ax
