"""The figure of lab 2's toy graph: the three nodes, their tensors and sizes, and the hand-worked
numbers of tasks 2.3 (bytes each node moves) and 2.4 (bytes live at each step).

``python -m grader build`` draws it and embeds it as an attachment of the markdown cell that
introduces the toy (``FIGURES``), so students see it before they run anything.
"""
from __future__ import annotations

TENSOR, WEIGHT, NODE, LIVE, PEAK = "#e8f1fa", "#f3f3f3", "#cfe3f6", "#9ec5e8", "#f4a259"

STEPS = ("matmul", "relu", "concat")
"""The schedule: step i runs node i."""
SIZES = {"x": 16, "h": 32, "r": 32, "y": 48}
"""Bytes of each activation (float32: 4 bytes per element)."""
LIVE_AT = {"x": (0, 1, 2), "h": (0, 1), "r": (1, 2), "y": (2,)}
"""Steps at which each tensor is live (task 2.4's rule: producer, or 0 for a graph input, to last consumer)."""
MOVED = (144 + 32, 32 + 32, 48 + 48)
"""Task 2.3: bytes each node reads plus writes (matmul reads x and W: 16 + 128)."""


def _box(ax, x: float, y: float, text: str, fill: str, width: float = 2.3, dashed: bool = False) -> None:
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x - width / 2, y - 0.32), width, 0.64, boxstyle="round,pad=0.04",
                                facecolor=fill, edgecolor="#35587a", lw=1, ls="--" if dashed else "-"))
    ax.text(x, y, text, ha="center", va="center", fontsize=8.5)


def _arrow(ax, start, end, label: str = "", side: float = 0.12, rad: float = 0.0) -> None:
    ax.annotate("", xy=end, xytext=start,
                arrowprops=dict(arrowstyle="-|>", color="#35587a", lw=1.2, connectionstyle=f"arc3,rad={rad}"))
    if label:
        ax.text((start[0] + end[0]) / 2 + side, (start[1] + end[1]) / 2, label, fontsize=8, va="center",
                color="#333")


def draw_toy_graph():
    """The toy graph (left) and, per step, which tensors are live and how many bytes move (right)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    fig, (graph, table) = plt.subplots(1, 2, figsize=(9.5, 4.3), gridspec_kw={"width_ratios": [1.05, 1]})
    # ---- the graph, top to bottom
    _box(graph, 1.0, 0.0, "x: graph input\n1x4 float32, 16 B", TENSOR)
    _box(graph, 3.9, 0.0, "W: initializer\n4x8 float32, 128 B", WEIGHT, dashed=True)
    _box(graph, 2.2, 1.5, "step 0: matmul (MatMul)", NODE)
    _box(graph, 2.2, 3.0, "step 1: relu (Relu)", NODE)
    _box(graph, 2.2, 4.5, "step 2: concat (Concat, axis=1)", NODE, width=2.9)
    _box(graph, 2.2, 6.0, "y: graph output\n1x12 float32, 48 B", TENSOR)
    _arrow(graph, (1.3, 0.34), (1.9, 1.16))
    _arrow(graph, (3.6, 0.34), (2.6, 1.16))
    _arrow(graph, (2.2, 1.84), (2.2, 2.66), "h: 1x8, 32 B")
    _arrow(graph, (2.2, 3.34), (2.2, 4.16), "r: 1x8, 32 B")
    _arrow(graph, (2.2, 4.84), (2.2, 5.66))
    _arrow(graph, (0.55, 0.34), (1.0, 4.16), "x again\n(skip)", side=-0.95, rad=0.25)
    graph.set_xlim(-0.5, 5.3)
    graph.set_ylim(6.6, -0.6)
    graph.axis("off")
    graph.set_title("the toy graph (graph order = the schedule)", fontsize=10)
    # ---- per step: live tensors (task 2.4) and bytes moved (task 2.3)
    rows = list(SIZES)
    for r, name in enumerate(rows):
        table.text(-0.1, r + 0.5, f"{name} ({SIZES[name]} B)", ha="right", va="center", fontsize=9)
        for step in range(len(STEPS)):
            live = step in LIVE_AT[name]
            table.add_patch(Rectangle((step, r + 0.1), 0.92, 0.8, facecolor=LIVE if live else "white",
                                      edgecolor="#bbbbbb", lw=0.8))
            if live:
                table.text(step + 0.46, r + 0.5, "live", ha="center", va="center", fontsize=8, color="#234")
    totals = [sum(SIZES[n] for n in rows if step in LIVE_AT[n]) for step in range(len(STEPS))]
    peak = totals.index(max(totals))
    for label, row, values in (("live bytes (2.4)", len(rows) + 0.25, totals),
                               ("bytes moved (2.3)", len(rows) + 1.25, MOVED)):
        table.text(-0.1, row + 0.45, label, ha="right", va="center", fontsize=9, fontweight="bold")
        top = values.index(max(values))
        for step, value in enumerate(values):
            table.add_patch(Rectangle((step, row + 0.05), 0.92, 0.8, facecolor=PEAK if step == top else "white",
                                      edgecolor="#888888", lw=0.8))
            table.text(step + 0.46, row + 0.45, str(value), ha="center", va="center", fontsize=9)
    for step, name in enumerate(STEPS):
        table.text(step + 0.46, -0.15, f"step {step}\n{name}", ha="center", va="bottom", fontsize=8.5)
    table.set_xlim(-1.9, len(STEPS) + 0.1)
    table.set_ylim(len(rows) + 2.4, -0.9)
    table.axis("off")
    table.set_title(f"per step: peak live memory {totals[peak]} B at {STEPS[peak]}", fontsize=10)
    fig.tight_layout()
    return fig


FIGURES = {"toy_graph.png": draw_toy_graph}
"""Attachment name -> the function that draws it (``python -m grader build`` embeds each one in the
solution's markdown cell that shows ``attachment:<name>``)."""
