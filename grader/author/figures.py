"""Figures in the handouts: drawn by a lab's ``figures.py``, embedded as PNG attachments by the build.

A lab that wants a figure students see *before* running anything (a diagram, not a result) lists
it in ``util/labs/labN/figures.py``::

    FIGURES = {"tile_grid.png": draw_tile_grid}     # attachment name -> function returning a Figure

and writes ``![what it shows](attachment:tile_grid.png)`` in one markdown cell of its solution
notebook. ``python -m grader build`` draws every figure and stores it as that cell's attachment
(PNG: the only image type JupyterLab renders from an attachment), in the solution and therefore in
the generated copies; ``build --check`` fails when a drawing changed and was not embedded again.
Figures are compared by their pixels, not their bytes, so another PNG encoder does not count as a
change.
"""
from __future__ import annotations

import base64
import io
from typing import Callable

import nbformat

from util import labs
from util.contract import Lab

MIME = "image/png"
DPI = 100


def lab_figures(lab: Lab) -> dict[str, Callable]:
    """Attachment name -> drawing function, from the lab's ``figures.py`` (empty if it has none)."""
    module = labs.part(lab, "figures")
    return dict(getattr(module, "FIGURES", {})) if module is not None else {}


def render(draw: Callable) -> bytes:
    """The PNG of the figure ``draw()`` returns (Agg, fixed DPI, no software metadata)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    figure = draw()
    buffer = io.BytesIO()
    try:
        figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    finally:
        plt.close(figure)
    return buffer.getvalue()


def _pixels(png: bytes):
    import matplotlib.image

    return matplotlib.image.imread(io.BytesIO(png), format="png")


def same_picture(first: bytes, second: bytes) -> bool:
    """Whether two PNGs show the same pixels."""
    import numpy as np

    try:
        a, b = _pixels(first), _pixels(second)
    except Exception:  # an attachment that is not a PNG at all
        return False
    return a.shape == b.shape and bool(np.array_equal(a, b))


def embed(lab: Lab, nb: nbformat.NotebookNode, where: str) -> list[str]:
    """Store every figure of ``lab`` as an attachment of the markdown cell that shows it, in place.

    An attachment that already shows the same pixels is kept as it is. Returns the problems found
    (a figure no cell shows, or more than one cell shows); raises nothing.
    """
    problems = []
    for name, draw in lab_figures(lab).items():
        cells = [c for c in nb.cells if c.cell_type == "markdown" and f"attachment:{name}" in c.source]
        if len(cells) != 1:
            problems.append(f"{where}: figure {name} must be shown by exactly one markdown cell "
                            f"(![...](attachment:{name})); {len(cells)} show it")
            continue
        cell = cells[0]
        png = render(draw)
        old = cell.get("attachments", {}).get(name, {}).get(MIME)
        if old is not None and same_picture(base64.b64decode(old), png):
            continue
        cell.setdefault("attachments", {})[name] = {MIME: base64.b64encode(png).decode("ascii")}
    for index, cell in enumerate(nb.cells):
        for name in cell.get("attachments", {}):
            if f"attachment:{name}" not in cell.source:
                problems.append(f"{where}: cell {index} carries attachment {name} but does not show it")
    return problems
