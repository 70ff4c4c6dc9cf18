"""A lab 8 notebook that patches what it can reach in its kernel gets no credit for what it did not do.

The notebook replaces ``np.allclose``, ``np.shares_memory``, ``tracemalloc`` and ``time.perf_counter``,
the course's checks and naive kernel source (which the grader never takes from the kernel) and, if it
could import it, the judge (the sandbox hides it), then submits an
executor that computes outside the pool, a plan that reuses a node's input buffer, and the naive
kernel as its "fast" one. Every verdict of those is decided by the grader on what the cases saved,
so those cases fail; its correct shape inference and its (slow but correct) kernel's correctness
still count.
"""
from __future__ import annotations

import shutil

import nbformat
import pytest

from grader.author.build import SOLUTIONS
from grader.grade.submission import grade_submission
from util.labs import get_lab
from util.labs.lab8.kernel import NAIVE_SOURCE

pytestmark = [pytest.mark.notebook, pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")]
LAB = get_lab("lab8")
PATCHES = '''
import time, tracemalloc
import numpy as np
import util.labs.lab8.verify as course_verify
import util.labs.lab8.kernel as course_kernel
np.allclose = lambda *args, **kwargs: True
np.shares_memory = lambda *args, **kwargs: True
tracemalloc.get_traced_memory = lambda: (0, 0)
_clock = [0.0]
def _fast_clock():
    _clock[0] += 1e-6
    return _clock[0]
time.perf_counter = _fast_clock
course_verify.run_problems = course_verify.output_problems = lambda *args, **kwargs: []
course_kernel.NAIVE_SOURCE = course_kernel.NAIVE_SOURCE.replace("sum +=", "sum += 0 *")
try:
    import util.labs.lab8.judge as course_judge      # grader-only: the sandbox hides it from kernels
    course_judge.check_execution = course_judge.check_kernel = lambda *args, **kwargs: []
except ImportError:
    pass
'''
EXECUTE = '''
def execute(model, weights, feeds, shapes, plan, pool, matmul=np.matmul):
    values = {**weights, **feeds}
    for node in model.graph.node:
        ins, a = [values[i] for i in node.input], attributes(node)
        if node.op_type == "Gemm":
            out = ins[0] @ (ins[1].T if a.get("transB", 0) else ins[1]) + (ins[2] if len(ins) > 2 else 0)
        elif node.op_type == "Relu":
            out = np.maximum(ins[0], 0)
        elif node.op_type == "Add":
            out = ins[0] + ins[1]
        else:
            out = np.exp(ins[0] - ins[0].max(-1, keepdims=True))
            out = out / out.sum(-1, keepdims=True)
        values[node.output[0]] = out.astype(np.float32)
    env = {name: values[name] for node in model.graph.node for name in node.output}
    return {o.name: values[o.name] for o in model.graph.output}, env
'''
PLAN = '''
def plan_memory(model, shapes):
    nbytes = tensor_nbytes(model, shapes)
    size = max(nbytes[name] for node in model.graph.node for name in node.output)
    return {"buffer_bytes": [size], "assign": {name: 0 for node in model.graph.node for name in node.output}}
'''


def test_patching_the_kernel_earns_nothing_on_judged_cases(tmp_path):
    folder = tmp_path / "lab8_graph_executor"
    shutil.copytree(SOLUTIONS / "lab8_graph_executor", folder, ignore=shutil.ignore_patterns("build", "outputs"))
    (folder / "kernel" / "mm_fast.cpp").write_text(NAIVE_SOURCE.replace("mm_naive", "mm_fast"))
    path = folder / "lab8_graph_executor.ipynb"
    nb = nbformat.read(path, as_version=4)
    for index, cell in enumerate(nb.cells):
        if "def execute(" in cell.source:
            nb.cells.insert(index + 1, nbformat.v4.new_code_cell(EXECUTE))
            break
    for index, cell in enumerate(nb.cells):
        if "def plan_memory(" in cell.source:
            nb.cells.insert(index + 1, nbformat.v4.new_code_cell(PLAN))
            break
    nb.cells.insert(2, nbformat.v4.new_code_cell(PATCHES))
    nbformat.write(nb, path)

    result = grade_submission(path, LAB, tmp_path / "out")
    status = {(t.task_id, c.name): c.status for t in result.tasks for c in t.checks}
    judged = {(t.id, c.id) for t in LAB.tasks if t.grader_check for c in t.cases}
    correct_anyway = {("8.4", c.id) for c in LAB.task("8.4").cases if not c.spec["timed"]}
    assert {key for key in judged if status[key] == "passed"} == correct_anyway
    assert all(status[("8.1", c.id)] == "passed" for c in LAB.task("8.1").cases)
    checks = {(t.task_id, c.name): c.message for t in result.tasks for c in t.checks}
    assert "at least 3x" in checks[("8.4", "3x faster than naive at 500x700x1000, one thread")]
    assert "share buffer 0" in checks[("8.2", "cnn@16")]
    assert "is not a view of the start of its buffer" in checks[("8.3", "mlp@500")]
