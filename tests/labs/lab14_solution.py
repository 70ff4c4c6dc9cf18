"""The solution notebook's Triton kernels and functions, for lab 14's tests (not a test module).

``grader.author.solution.solution_namespace`` executes cells without recording their source, and Triton's
interpreter, like the grader, reads a kernel's source (``inspect.getsource``): so the cells run here are
registered in ``linecache`` first, as IPython registers a notebook's cells.
"""
from __future__ import annotations

import ast
import hashlib
import linecache
import os
from functools import lru_cache

from grader.author.build import SOLUTIONS
from grader.author.markers import remove_markers
from grader.core.notebook import cell_tasks, read
from util.labs import get_lab

LAB = get_lab("lab14")
KERNELS = {"matmul": "matmul_kernel", "softmax": "softmax_kernel", "flash": "flash_kernel",
           "backward": "flash_backward_kernel"}


@lru_cache(maxsize=None)
def namespace(replacements: tuple[tuple[str, str], ...] = ()) -> dict:
    """The functions and classes every task cell of the solution defines (nothing else of the cells runs), in one
    namespace that imports what they use; ``replacements``: ``(old, new)`` pairs applied to the cells first (a
    mistake's, each ``old`` found exactly once), as ``grader build`` makes an example submission."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    nb = read(SOLUTIONS / LAB.notebook)
    for old, _ in replacements:
        found_in = sum(cell.source.count(old) for cell in nb.cells if cell.cell_type == "code")
        assert found_in == 1, f"{old[:60]!r} occurs {found_in} times in the solution's code cells"
    found: dict = {"__name__": f"__lab14_solution_{len(replacements)}__"}  # not importable: pickled by value
    exec("import math, torch, triton\nimport triton.language as tl\nfrom util.labs.lab14.compiled import DTYPES, H100_LIMITS\n"
         "from util.labs.lab14.choice import FULL_WARPS\n", found)
    for index, (cell, task) in enumerate(zip(nb.cells, cell_tasks(nb))):
        if cell.cell_type != "code" or task is None:
            continue
        text = cell.source
        for old, new in replacements:
            text = text.replace(old, new)
        source = remove_markers(text, f"{LAB.notebook} cell {index}")
        tree = ast.parse(source)
        tree.body = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
        if tree.body:  # the cell's definitions only: what it runs besides is the notebook's business
            changed = hashlib.sha256(repr(replacements).encode()).hexdigest()[:12] if replacements else "as written"
            filename = f"<lab14 solution cell {index}, {changed}>"
            linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
            exec(compile(tree, filename, "exec"), found)
    return found


def kernel(kind: str):
    """The solution's ``matmul_kernel``, ``softmax_kernel``, ``flash_kernel`` or ``flash_backward_kernel``."""
    return namespace()[KERNELS[kind]]


def source(kind: str) -> str:
    """The source of a solution kernel, as a hidden case saves it."""
    from util.labs.lab14.rules import kernel_source

    return kernel_source(kernel(kind))
