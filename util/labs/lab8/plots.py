"""Plotting a memory plan: which tensor occupies which buffer at each node of the schedule."""
from __future__ import annotations

from typing import Any, Mapping

import onnx

from util.labs.lab8.plans import lifetimes, tensor_nbytes


def plot_plan(model: onnx.ModelProto, shapes: Mapping[str, Any], plan: Mapping[str, Any], title: str = "",
              ax=None, label_min_steps: int = 1):
    """Draw ``plan`` as a chart: one row per buffer, one bar per tensor from the node that produces it
    to the last node that reads it. A tensor that fills only part of its buffer is lighter and shows
    the share in its label; a graph output (alive to the end) has a dashed outline. Returns the
    matplotlib ``Axes``. Tensors alive for fewer than ``label_min_steps`` nodes are not labelled.
    """
    import matplotlib.pyplot as plt

    alive, nbytes = lifetimes(model), tensor_nbytes(model, shapes)
    sizes, assign = plan["buffer_bytes"], plan["assign"]
    steps = len(model.graph.node)
    if ax is None:
        _, ax = plt.subplots(figsize=(min(14, 3 + 0.35 * steps), 0.9 + 0.55 * len(sizes)))
    cmap = plt.get_cmap("Blues")
    for name, (first, last) in alive.items():
        buffer = assign[name]
        fill = nbytes[name] / sizes[buffer] if sizes[buffer] else 1.0
        end = min(last, steps - 1) + 1
        ax.barh(buffer, end - first, left=first, height=0.7, color=cmap(0.3 + 0.6 * fill), edgecolor="black",
                linestyle="--" if last >= steps else "-")
        if end - first >= label_min_steps:
            short = name if len(name) <= 14 else "..." + name[-11:]
            ax.text((first + end) / 2, buffer, short if fill > 0.99 else f"{short} ({fill:.0%})", ha="center",
                    va="center", fontsize=7, color="white" if fill > 0.6 else "black")
    ax.set_yticks(range(len(sizes)), [f"buffer {b}\n{size:,} B" for b, size in enumerate(sizes)], fontsize=8)
    ax.set_xlim(0, steps)
    ax.invert_yaxis()
    ax.set_xlabel("node index (schedule order)")
    ax.set_title(title or f"{model.graph.name}: {sum(sizes):,} bytes in {len(sizes)} buffers")
    return ax
