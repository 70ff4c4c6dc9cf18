"""Lab 16's two figures (given code): accuracy against sparsity, layer by layer, and accuracy against rank."""
from __future__ import annotations

from typing import Mapping, Sequence


def plot_sensitivity(sparsities: Sequence[float], curves: Mapping[str, Sequence[float]], dense_accuracy: float,
                     ax=None, title: str = ""):
    """One line per label of ``curves`` (a layer pruned alone, or a whole-model scope): test accuracy (%) against
    the fraction of weights pruned, with the unpruned model's accuracy as a dashed line. Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.8))
    for label, values in curves.items():
        dashed = label.startswith(("global", "per layer"))
        ax.plot([100 * s for s in sparsities], [100 * v for v in values], marker="o",
                linestyle="--" if dashed else "-", linewidth=2.2 if dashed else 1.4, label=label)
    ax.axhline(100 * dense_accuracy, color="gray", linestyle=":", label="not pruned")
    ax.set_xlabel("weights pruned (%), by magnitude")
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(0, 102)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    if title:
        ax.set_title(title)
    return ax


def plot_rank(ranks: Sequence[int], accuracy: Sequence[float], params: Sequence[int], dense_params: int,
              dense_accuracy: float, ax=None, title: str = ""):
    """Test accuracy (%) against the rank of a factorised layer (left axis) and the layer's parameters (right
    axis, bars), with the dense layer's accuracy and parameters as dashed lines. Returns the left axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.8))
    right = ax.twinx()
    right.bar([str(r) for r in ranks], params, color="#cccccc", label="parameters (right axis)")
    right.axhline(dense_params, color="#999999", linestyle="--", linewidth=1, label=f"dense: {dense_params:,}")
    right.set_ylabel("parameters of the layer")
    ax.set_zorder(right.get_zorder() + 1)
    ax.patch.set_visible(False)
    ax.plot([str(r) for r in ranks], [100 * a for a in accuracy], marker="o", color="#1f77b4", label="test accuracy")
    ax.axhline(100 * dense_accuracy, color="#1f77b4", linestyle=":", label="dense accuracy")
    ax.set_xlabel("rank r")
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(0, 102)
    ax.grid(alpha=0.3)
    lines = ax.get_legend_handles_labels()
    bars = right.get_legend_handles_labels()
    ax.legend(lines[0] + bars[0], lines[1] + bars[1], loc="lower right", fontsize=8)
    if title:
        ax.set_title(title)
    return ax
