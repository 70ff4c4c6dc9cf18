"""Lab 14's figures: a kernel's traffic against its tile size (counted and closed form), and the roofline with
the lab's kernels on it. Each returns the matplotlib ``Axes``."""
from __future__ import annotations

from typing import Mapping, Sequence

from util.labs.lab14.machines import ridge, roof


def plot_traffic(tiles: Sequence[int], closed_form: Sequence[float], counted: Mapping[int, float], title: str = "",
                 ax=None, ylabel: str = "bytes loaded"):
    """The closed form as a line over ``tiles`` (tile sizes, log scale) and the interpreter's counts (``{tile:
    bytes}``) as points on it: where a point leaves the line, the kernel moves other bytes than the formula says."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    ax.plot(list(tiles), [b / 2**20 for b in closed_form], "-", color="black", lw=1.2, label="closed form")
    ax.plot(list(counted), [b / 2**20 for b in counted.values()], "o", color="tab:red", ms=7,
            label="counted by the interpreter")
    ax.set(xscale="log", xlabel="tile size", ylabel=f"{ylabel} (MiB)", title=title)
    ax.set_xticks(list(tiles), [str(t) for t in tiles])
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=8)
    return ax


def plot_roofline(machine: dict, kernels: Mapping[str, Mapping[str, float]],
                  measured: Mapping[str, float] | None = None, title: str = "", ax=None):
    """The roof of ``machine`` and one point per kernel (``{name: {"flops": ..., "bytes": ...}}``) at its
    intensity, on the roof (predicted); with ``measured`` (``{name: seconds}``, on a GPU) also the FLOP/s each
    achieved, joined to its predicted point."""
    import matplotlib.pyplot as plt
    import numpy as np

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 5))
    points = {name: k["flops"] / k["bytes"] for name, k in kernels.items()}
    low, high = min(list(points.values()) + [1.0]) / 4, max(list(points.values()) + [10 * ridge(machine)]) * 2
    grid = np.geomspace(low, high, 200)
    ax.plot(grid, [roof(machine, i) / 1e12 for i in grid], color="black", lw=1.2,
            label=f"{machine['name']}: {machine['flops'] / 1e12:.0f} TFLOP/s, {machine['bandwidth'] / 1e12:.2f} TB/s, "
                  f"ridge {ridge(machine):.0f} FLOP/B")
    for (name, intensity), color in zip(points.items(), plt.cm.tab10.colors):
        predicted = roof(machine, intensity) / 1e12
        ax.plot([intensity], [predicted], "o", color=color, label=f"{name}: {intensity:,.3g} FLOP/B")
        if measured and name in measured:
            achieved = kernels[name]["flops"] / measured[name] / 1e12
            ax.plot([intensity], [achieved], "x", color=color, ms=9)
            ax.plot([intensity, intensity], [achieved, predicted], color=color, lw=0.7)
    ax.set(xscale="log", yscale="log", xlabel="intensity (FLOPs per byte of global-memory traffic)",
           ylabel="TFLOP/s", title=title or "The roofline with the lab's kernels (o predicted, x measured)")
    ax.grid(True, which="both", alpha=0.2)
    ax.legend(fontsize=7, loc="lower right")
    return ax
