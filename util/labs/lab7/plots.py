"""Where the casts went: a strip of a converted model's nodes, coloured by precision, with its Casts."""
from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from util.labs.lab7.summary import tensor_types

COLOURS = {"float16": "tab:orange", "float32": "tab:blue"}


def plot_casts(model: onnx.ModelProto, title: str = "", ax=None):
    """Draw ``model``'s nodes in graph order: one bar per node that is not a Cast (orange: it reads or
    writes float16, blue: float32 only), with a triangle for every Cast at the place it stands in the
    graph (up: to float16, down: back to float32). Returns the matplotlib axes."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    types = tensor_types(model)
    if ax is None:
        _, ax = plt.subplots(figsize=(12, 2.6))
    position, ups, downs, labels = -1, {}, {}, []
    for node in model.graph.node:
        if node.op_type == "Cast":
            to = next(helper.get_attribute_value(a) for a in node.attribute if a.name == "to")
            where = ups if to == TensorProto.FLOAT16 else downs
            where[position + 0.5] = where.get(position + 0.5, 0) + 1
            continue
        position += 1
        half = any(types.get(t) == TensorProto.FLOAT16 for t in [*node.input, *node.output] if t)
        ax.bar(position, 1, width=0.9, color=COLOURS["float16" if half else "float32"])
        labels.append(node.op_type)
    for marks, symbol, y, colour in ((ups, "^", 1.15, "tab:orange"), (downs, "v", -0.15, "tab:blue")):
        for x, count in marks.items():
            ax.scatter([x] * count, [y + 0.12 * k * (1 if y > 0 else -1) for k in range(count)], marker=symbol,
                       color=colour, s=18, zorder=3)
    if len(labels) <= 30:
        ax.set_xticks(range(len(labels)), labels, rotation=60, fontsize=7)
    else:
        ax.set_xlabel("node (graph order)")
    ax.set_yticks([])
    ax.set_ylim(-0.9, 1.9)
    ax.set_xlim(-1, len(labels))
    casts = sum(ups.values()) + sum(downs.values())
    ax.set_title(title or f"{len(labels)} nodes, {casts} Casts (^ to float16, v to float32)", fontsize=10)
    ax.legend(handles=[Patch(color=c, label=k) for k, c in COLOURS.items()], loc="upper right", fontsize=8, ncol=2)
    return ax
