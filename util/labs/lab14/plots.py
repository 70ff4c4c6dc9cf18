"""Lab 14's figures: a kernel's traffic against its tile size (counted and closed form), the FlashAttention
backward's traffic against the sequence length, the roofline with the lab's kernels on it, and what the compiler made of each tile (registers, shared memory) with the occupancy that
follows. Each returns the matplotlib ``Axes``."""
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


def plot_backward_traffic(lengths: Sequence[int], counted: Mapping[str, Sequence[float]], title: str = "", ax=None):
    """Bytes loaded against the sequence length (log-log), one line of points per run in ``counted`` (``{label:
    [bytes at each length]}``): a line of slope 2 grows as ``N^2`` (K, V or Q read once per block of the other),
    a causal one sits about half as high."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    for (label, values), style in zip(counted.items(), ("o-", "s-", "^--", "v:")):
        ax.plot(list(lengths), [b / 2**20 for b in values], style, ms=6, label=label)
    ax.set(xscale="log", yscale="log", xlabel="sequence length N", ylabel="bytes loaded (MiB)", title=title)
    ax.set_xticks(list(lengths), [str(n) for n in lengths])
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


def plot_compiled(rows: Sequence[Mapping], limits: Mapping[str, int], title: str = "", axes=None):
    """What the compiler made of each configuration (``rows`` as :func:`util.labs.lab14.compiled.load` gives
    them): registers per thread (the 255 a thread may have drawn, bytes spilled written above a bar that spilled)
    and shared memory per block (the 227 KiB a block may ask for drawn), one bar per configuration. Returns the
    two ``Axes``."""
    import matplotlib.pyplot as plt

    from util.labs.lab14.compiled import config_name

    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    names = [config_name(row["config"]).replace(", ", "\n", 1) for row in rows]
    places = list(range(len(rows)))
    registers = [row["compiled"]["registers"] for row in rows]
    shared = [row["compiled"]["shared"] / 1024 for row in rows]
    left, right = axes
    left.bar(places, registers, color=["tab:red" if row["compiled"]["spills"] else "tab:blue" for row in rows])
    left.axhline(limits["registers_per_thread"], color="black", lw=1, ls="--", label="255 registers a thread")
    for place, row in zip(places, rows):
        if row["compiled"]["spills"]:
            left.annotate(f"{row['compiled']['spills']:,} B\nspilled", (place, row["compiled"]["registers"]),
                          ha="center", va="bottom", fontsize=7)
    left.set(ylabel="registers per thread (ptxas)", ylim=(0, 310))
    right.bar(places, shared, color=["tab:red" if s * 1024 > limits["shared_per_block"] else "tab:green"
                                     for s in shared])
    right.axhline(limits["shared_per_block"] / 1024, color="black", lw=1, ls="--", label="227 KiB a block")
    right.set(ylabel="shared memory per block (KiB, Triton)")
    for ax in axes:
        ax.set_xticks(places, names, rotation=60, ha="right", fontsize=7)
        ax.grid(True, axis="y", alpha=0.2)
        ax.legend(fontsize=8, loc="upper left")
    left.figure.suptitle(title or "What Triton's compiler made of each tile for an H100 (red: over a limit)")
    left.figure.tight_layout()
    return axes


def plot_occupancy(occupancy, shared: int, warps: Sequence[int] = (4, 8), ax=None):
    """Warps an SM holds against registers per thread (32 to 255), for programs of each of ``warps`` warps asking
    for ``shared`` bytes of shared memory, by ``occupancy(registers, shared, num_warps)`` (task 14.7). Returns the
    ``Axes``."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    registers = list(range(32, 256))
    for num_warps in warps:
        ax.step(registers, [occupancy(r, shared, num_warps)["warps"] for r in registers], where="post",
                label=f"{num_warps} warps a block")
    ax.set(xlabel="registers per thread", ylabel="warps an SM holds (of 64)", ylim=(0, 66),
           title=f"Occupancy against registers per thread ({shared / 1024:g} KiB of shared memory a block)")
    ax.grid(True, alpha=0.2)
    ax.legend(fontsize=8)
    return ax


def plot_launch(candidates, times: Sequence, occupancy, ax=None):
    """Task 14.9: each candidate's predicted time (``times``, seconds, ``None`` when excluded) as a bar, labelled
    with the warps an SM holds (``occupancy(registers, shared, num_warps)``, task 14.7); excluded candidates marked
    where their bar would be, with the reason (spills, or no block fits an SM); the chosen one (the first of the
    fastest) in another colour.
    Returns the ``Axes``."""
    import matplotlib.pyplot as plt

    from util.labs.lab14.compiled import config_name

    if ax is None:
        _, ax = plt.subplots(figsize=(9, 4))
    allowed = [t for t in times if t is not None]
    chosen = times.index(min(allowed)) if allowed else None  # the first of the fastest, as the chooser picks
    top = max(allowed) * 1e6 if allowed else 1.0
    for index, (row, seconds) in enumerate(zip(candidates, times)):
        figures = row["compiled"]
        warps = occupancy(figures["registers"], figures["shared"], row["config"]["num_warps"])["warps"]
        if seconds is None:
            why = f"spills {figures['spills']:,} B" if figures["spills"] else "fits no SM"
            ax.bar(index, top, color="none", edgecolor="tab:red", hatch="//", linewidth=0.8)
            ax.text(index, top * 0.5, f"excluded:\n{why}", ha="center", va="center", fontsize=7, color="tab:red",
                    rotation=90)
            continue
        ax.bar(index, seconds * 1e6, color="tab:green" if index == chosen else "tab:blue")
        ax.text(index, seconds * 1e6, f"{warps} warps", ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(candidates)))
    ax.set_xticklabels([config_name(row["config"]).replace(" fp16", "").replace(", ", "\n") for row in candidates],
                       fontsize=6)
    ax.set(ylabel="predicted time (us)", title="Predicted time of each candidate, with the warps an SM holds "
           "(hatched: excluded)")
    ax.grid(True, axis="y", alpha=0.2)
    return ax
