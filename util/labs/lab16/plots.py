"""Lab 16's figures (given code): accuracy against sparsity, layer by layer, accuracy against rank, latency
against parameters for channels cut and unstructured zeros, and accuracy against sparsity for a gradual schedule and
one-shot pruning."""
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


def plot_latency(channels: Sequence[tuple[int, float]], unstructured: Sequence[tuple[int, float]],
                 dense: tuple[int, float], ax=None, title: str = ""):
    """Latency (ms a forward pass) against parameters: one line for networks cut by whole channels, one for the
    dense network with unstructured zeros at the same parameter counts, and the dense network as a point. Each
    entry is ``(parameters, milliseconds)``. Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.8))
    for points, label, marker in ((channels, "channels cut (a smaller network)", "o"),
                                  (unstructured, "unstructured zeros (same shapes)", "s")):
        ax.plot([p for p, _ in points], [ms for _, ms in points], marker=marker, label=label)
    ax.plot([dense[0]], [dense[1]], marker="*", markersize=12, color="black", linestyle="", label="dense")
    ax.set_xlabel("parameters (a zeroed weight still counts: it is stored and multiplied)")
    ax.set_ylabel("latency (ms, best of rounds)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    if title:
        ax.set_title(title)
    return ax


def plot_schedule(schedule: Sequence[float], gradual: Sequence[float], one_shot_at: Sequence[float],
                  one_shot: Sequence[float], dense_accuracy: float, ax=None, title: str = ""):
    """Test accuracy (%) against the fraction of weights pruned: the gradual schedule after each of its steps
    (``schedule``, ``gradual``), and one cut of the unpruned model to each sparsity of ``one_shot_at`` (``one_shot``,
    each with the same fine-tuning as one step of the schedule), with the unpruned model's accuracy as a dotted line.
    Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.8))
    ax.plot([100 * s for s in schedule], [100 * a for a in gradual], marker="o",
            label="gradual: the cubic schedule, step by step")
    ax.plot([100 * s for s in one_shot_at], [100 * a for a in one_shot], marker="s", linestyle="--",
            label="one-shot: one cut to that sparsity")
    ax.axhline(100 * dense_accuracy, color="gray", linestyle=":", label="not pruned")
    ax.set_xlabel("weights pruned (%), global magnitude")
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(0, 102)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)
    if title:
        ax.set_title(title)
    return ax
