"""The figure of task 3.2: how a Gemm is cut into tiles that fit the bounds.

``python -m grader build`` draws it and embeds it as an attachment of the task's markdown cell
(``FIGURES``), so students see it before they run anything. ``draw_tile_grid`` also works in the
notebook, for other sizes: ``draw_tile_grid(33, 65, 17, (16, 32, 8))``.
"""
from __future__ import annotations

FULL, PARTIAL, PICKED = "#cfe3f6", "#f6dfc4", "#f4a259"
"""Fill of a full tile, a partial (last) tile, and the tiles of the highlighted block."""


def tile_sizes(total: int, bound: int) -> list[int]:
    """Full tiles, then one partial tile: ``tile_sizes(100, 64) == [64, 36]`` (the rule of step 2)."""
    return [min(bound, total - start) for start in range(0, total, bound)]


def _grid(ax, x0: float, y0: float, rows: list[int], cols: list[int], name: str, picked: set) -> None:
    """A matrix drawn as tiles, top-left corner at (x0, y0), y growing downwards."""
    from matplotlib.patches import Rectangle

    y = y0
    for i, height in enumerate(rows):
        x = x0
        for j, width in enumerate(cols):
            partial = height < max(rows) or width < max(cols)
            fill = PICKED if (i, j) in picked else PARTIAL if partial else FULL
            ax.add_patch(Rectangle((x, y), width, height, facecolor=fill, edgecolor="#35587a", lw=1))
            if width >= 14 and height >= 10:
                ax.text(x + width / 2, y + height / 2, f"{name}{i}{j}", ha="center", va="center", fontsize=8)
            x += width
        y += height


def _sizes(ax, x0: float, y0: float, sizes: list[int], horizontal: bool) -> None:
    """Tile sizes written along the top edge (horizontal) or the left edge of a matrix."""
    pos = 0
    for size in sizes:
        if horizontal:
            ax.text(x0 + pos + size / 2, y0 - 2, str(size), ha="center", va="bottom", fontsize=7, color="#555")
        else:
            ax.text(x0 - 2, y0 + pos + size / 2, str(size), ha="right", va="center", fontsize=7, color="#555")
        pos += size


def draw_tile_grid(M: int = 100, K: int = 90, N: int = 150, bounds: tuple[int, int, int] = (64, 64, 64),
                   block: tuple[int, int] = (1, 1)):
    """``A (M x K) @ B (K x N)`` cut into tiles within ``bounds``, block ``block`` of the result highlighted.

    A is cut along M and K, B along K and N, the result along M and N; block ``(i, j)`` of the
    result is the sum over k of ``A[i][k] @ B[k][j]`` (the highlighted tiles). Returns the figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    ms, ks, ns = tile_sizes(M, bounds[0]), tile_sizes(K, bounds[1]), tile_sizes(N, bounds[2])
    bi, bj = min(block[0], len(ms) - 1), min(block[1], len(ns) - 1)
    unit = max(M, K, N) / 100                         # text offsets scale with the matrices
    gap = 30 * unit
    a, b = (0.0, K + gap), (K + gap, 0.0)             # A below-left, B above-right, the result below-right
    c = (K + gap, K + gap)
    notes_width = 125 * unit
    left, right = -14 * unit, K + gap + N + notes_width
    top, bottom = -18 * unit, K + gap + M + 34 * unit
    fig, ax = plt.subplots(figsize=(8.5, 8.5 * (bottom - top) / (right - left)))
    fig.subplots_adjust(0, 0, 1, 1)
    _grid(ax, *a, ms, ks, "A", {(bi, k) for k in range(len(ks))})
    _grid(ax, *b, ks, ns, "B", {(k, bj) for k in range(len(ks))})
    _grid(ax, *c, ms, ns, "Y", {(bi, bj)})
    _sizes(ax, *a, ks, horizontal=True)
    _sizes(ax, *a, ms, horizontal=False)
    _sizes(ax, *b, ns, horizontal=True)
    _sizes(ax, *b, ks, horizontal=False)
    title = dict(fontsize=10, fontweight="bold", ha="center")
    ax.text(a[0] + K / 2, a[1] - 9 * unit, f"A ({M} x {K})", va="bottom", **title)
    ax.text(b[0] + N / 2, b[1] - 9 * unit, f"B ({K} x {N})", va="bottom", **title)
    ax.text(c[0] + N / 2, c[1] + M + 3 * unit, f"Y = A @ B ({M} x {N})", va="top", **title)
    terms = " + ".join(f"A{bi}{k} @ B{k}{bj}" for k in range(len(ks)))
    shapes = [f"   {ms[bi]} x {k} @ {k} x {ns[bj]}" for k in ks]
    notes = [f"Y{bi}{bj} = {terms}", "", "one MatMul per term:", *shapes, "then one Sum over k", "",
             f"bounds (m, k, n) = {tuple(bounds)}", f"M: {' + '.join(map(str, ms))} = {M}",
             f"K: {' + '.join(map(str, ks))} = {K}", f"N: {' + '.join(map(str, ns))} = {N}",
             f"{len(ms)} x {len(ks)} x {len(ns)} = {len(ms) * len(ks) * len(ns)} MatMuls"]
    ax.text(c[0] + N + 6 * unit, c[1], "\n".join(notes), ha="left", va="top", fontsize=8.5, linespacing=1.45)
    legend = [(FULL, "full tile"), (PARTIAL, "partial (last) tile"), (PICKED, f"the tiles of block Y{bi}{bj}")]
    ax.legend(handles=[Patch(facecolor=f, edgecolor="#35587a", label=t) for f, t in legend],
              loc="upper left", bbox_to_anchor=(0.01, 0.97), fontsize=8.5, frameon=False)
    ax.text(left + 2 * unit, bottom - 4 * unit,
            "Split A along M, then K; split B along K, then N; one MatMul per tile pair; Sum over K; "
            "Concat along N, then M", fontsize=8, color="#444", va="bottom")
    ax.set_xlim(left, right)
    ax.set_ylim(bottom, top)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig


FIGURES = {"tile_grid.png": draw_tile_grid}
"""Attachment name -> the function that draws it (``python -m grader build`` embeds each one in the
solution's markdown cell that shows ``attachment:<name>``)."""
