"""The solution notebook's Triton kernels and functions, for lab 14's tests (not a test module).

``grader.author.solution.solution_namespace`` executes cells without recording their source, and Triton's
interpreter, like the grader, reads a kernel's source (``inspect.getsource``): so the cells run here are
registered in ``linecache`` first, as IPython registers a notebook's cells.
"""
from __future__ import annotations

import ast
import linecache
import os
from functools import lru_cache

from grader.author.build import SOLUTIONS
from grader.author.markers import remove_markers
from grader.core.notebook import cell_tasks, read
from util.labs import get_lab

LAB = get_lab("lab14")
KERNELS = {"matmul": "matmul_kernel", "softmax": "softmax_kernel", "flash": "flash_kernel"}


@lru_cache(maxsize=None)
def namespace() -> dict:
    """The functions and classes every task cell of the solution defines (nothing else of the cells runs), in one
    namespace that imports what they use."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    nb = read(SOLUTIONS / LAB.notebook)
    found: dict = {"__name__": "__lab14_solution__"}  # no importable module: cloudpickle pickles by value
    exec("import math, torch, triton\nimport triton.language as tl\n", found)
    for index, (cell, task) in enumerate(zip(nb.cells, cell_tasks(nb))):
        if cell.cell_type != "code" or task is None:
            continue
        source = remove_markers(cell.source, f"{LAB.notebook} cell {index}")
        tree = ast.parse(source)
        tree.body = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
        if tree.body:  # the cell's definitions only: what it runs besides is the notebook's business
            filename = f"<lab14 solution cell {index}>"
            linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
            exec(compile(tree, filename, "exec"), found)
    return found


def kernel(kind: str):
    """The solution's ``matmul_kernel``, ``softmax_kernel`` or ``flash_kernel``."""
    return namespace()[KERNELS[kind]]


def source(kind: str) -> str:
    """The source of a solution kernel, as a hidden case saves it."""
    from util.labs.lab14.rules import kernel_source

    return kernel_source(kernel(kind))
