"""A lab 6 notebook that patches numpy, onnxruntime's helpers and the course's own judges in its kernel
still gets no credit on the judged cases: the grader decides them in its own process."""
from __future__ import annotations

import nbformat
import pytest

from grader.author.build import SOLUTIONS
from grader.grade.submission import grade_submission
from util.contract import ANSWER
from util.labs import get_lab

pytestmark = pytest.mark.notebook

PATCH = '''
import numpy
import util.labs.lab6.judge as _judge, util.labs.lab6.runtime as _runtime, util.labs.lab6.search as _search
numpy.array_equal = lambda *args, **kwargs: True                  # every comparison in this kernel says "equal"
_runtime.same_bits = lambda *args, **kwargs: True
_judge.check_isolation = _judge.check_search = lambda *args, **kwargs: []
_search.ErrorFunction.__call__ = lambda self, x: 1.0           # every input looks like a huge error
_search.baseline = lambda *args, **kwargs: 1e-12
'''
LAZY = (("    return ddmin(list(candidates), sufficient)", "    return []"),
        ("        x = ill_conditioned(rng, shape, low, high)", "        x = np.zeros(shape, np.float32)"))


def test_patching_the_kernel_earns_nothing_on_judged_cases(tmp_path):
    lab = get_lab("lab6")
    nb = nbformat.read(SOLUTIONS / lab.notebook, as_version=4)
    setup_cell = next(cell for cell in nb.cells if "DEVICE = setup()" in cell.source)
    setup_cell.source += "\n" + PATCH
    for cell in nb.cells:
        for old, new in LAZY:
            cell.source = cell.source.replace(old, new)
    path = tmp_path / lab.notebook
    nbformat.write(nb, str(path))
    result = grade_submission(path, lab, tmp_path / "out")
    failed = {(task.task_id, check.name) for task in result.tasks for check in task.checks if check.status != "passed"}
    assert failed == {("6.3", "ln_first in [0, 1]"), ("6.3", "ln_wide in [-100, 100]"), ("6.3", "ln_narrow in [-1, 1]"),
                      ("6.5", ANSWER), ("6.5", "conv_mul"), ("6.5", "ln_first"), ("6.5", "rms_norm")}
    assert result.score == 95 - 15 - 2 - 21  # of the autograder's 95: 5 are the written Q1's, marked apart
