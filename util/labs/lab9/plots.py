"""Lab 9's two figures (given code): accuracy against weight bits, and the quantisation error layer by layer."""
from __future__ import annotations

from typing import Mapping, Sequence


def plot_accuracy_vs_bits(bits: Sequence[int], accuracy: Mapping[str, Sequence[float]], float_accuracy: float,
                          ax=None):
    """One line per label of ``accuracy`` (e.g. ``"per tensor"``, ``"per channel"``): test accuracy against
    the number of weight bits, with the float model's accuracy as a dashed line."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.4))
    for label, values in accuracy.items():
        ax.plot(list(bits), [100 * v for v in values], marker="o", label=label)
    ax.axhline(100 * float_accuracy, color="gray", linestyle="--", label="float32")
    ax.set_xlabel("weight bits (symmetric; activations in float)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_xticks(list(bits))
    ax.set_ylim(0, 102)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    return ax


def plot_layer_errors(errors: Mapping[str, Mapping[str, float]], ax=None):
    """Grouped bars, log scale: for each model (a key of ``errors``), the relative error (``relmax``) of
    every quantised tensor, in graph order; the bars of one tensor stand side by side."""
    import matplotlib.pyplot as plt
    import numpy as np

    if ax is None:
        _, ax = plt.subplots(figsize=(9, 3.4))
    tensors = list(next(iter(errors.values())))
    width = 0.8 / len(errors)
    for i, (label, values) in enumerate(errors.items()):
        heights = [max(values.get(t, np.nan), 1e-6) for t in tensors]
        ax.bar(np.arange(len(tensors)) + (i - (len(errors) - 1) / 2) * width, heights, width, label=label)
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(tensors)))
    ax.set_xticklabels([t.replace("_output_0", "") for t in tensors], rotation=20, ha="right")
    ax.set_ylabel("max |int8 - float| / max |float|")
    ax.axhline(0.1, color="gray", linestyle=":", linewidth=1)
    ax.grid(alpha=0.3, axis="y")
    ax.legend()
    return ax
