"""Lab 9 graded end to end in two hostile or unusual ways (the generic tests grade the solution, the
student copy and the examples): a kernel that forges every verdict it could, and the solution at two threads."""
import json

import nbformat
import pytest

from grader.author.build import SOLUTIONS
from grader.judge import references
from util.labs import get_lab

pytestmark = pytest.mark.notebook
LAB = get_lab("lab9")
JUDGED = {t.id for t in LAB.tasks if t.grader_check}

FORGER = """
# Wrong functions: floor in the shift, no padding, a float model instead of a quantised one, no layer kept.
def run_integer(qmodel, xq):
    return np.zeros((len(xq), 10), np.int8)
def quantize_onnx(float_path, calib, per_channel=True, exclude=()):
    return str(float_path)
def keep_in_float(float_path, calib, images, labels, max_drop=0.01, per_channel=True):
    return []

# Everything in this kernel that could decide a verdict says "equal", and every case returns the value
# the grader expects (as if the reference file had leaked).
import json as _json
import numpy as _np
from util.labs import get_lab as _get_lab
_np.array_equal = _np.allclose = lambda *a, **k: True
try:
    import util.labs.lab9.judge as _judge      # (a graded kernel cannot even import the judge)
except ImportError:
    pass
else:
    for _name in dir(_judge):
        if _name.startswith("check_"):
            setattr(_judge, _name, lambda *a, **k: [])
_EXPECTED = _json.loads(%r)
for _task in _get_lab("lab9").tasks:
    def _forged(fn, spec, _task=_task, _run=_task.run_case):
        try:
            _run(fn, spec)              # saves what the wrong function made, through the real path
        except Exception:
            pass
        return _EXPECTED[_task.id][_json.dumps(spec, sort_keys=True)]
    object.__setattr__(_task, "run_case", _forged)
"""


def _variant(tmp_path, name, first_cells=(), last_cells=()):
    nb = nbformat.read(str(SOLUTIONS / LAB.notebook), as_version=4)
    nb.cells = [nbformat.v4.new_code_cell(c) for c in first_cells] + nb.cells + \
        [nbformat.v4.new_code_cell(c) for c in last_cells]
    path = tmp_path / name
    nbformat.write(nb, str(path))
    return path


def test_a_kernel_that_forges_every_verdict_gets_no_judged_case(graded, tmp_path):
    refs = references.load(LAB)["cases"]
    expected = {t.id: {json.dumps(c.spec, sort_keys=True): refs[t.id][c.id] for c in t.cases} for t in LAB.tasks
                if t.cases}
    result = graded(_variant(tmp_path, "lab9_forger.ipynb", last_cells=[FORGER % json.dumps(expected)]), "lab9")
    cases = {(t.task_id, c.name): c for t in result.tasks for c in t.checks if c.name != "answer"}
    judged = {key: c.status for key, c in cases.items() if key[0] in JUDGED}
    assert len(judged) == 10 and set(judged.values()) == {"failed"}
    assert {c.status for key, c in cases.items() if key[0] not in JUDGED} == {"passed"}
    assert cases[("9.6", "an outlier channel after conv1 (K = 500)")].message.startswith(
        "this case returned {'nodes': 2}, but the list it saved has 0 node(s)")   # the forged value, bound to the file
    assert "returned shape [16, 10]; expected [16, 13]" in cases[("9.3", "DigitsCNN's layers end to end")].message


@pytest.mark.slow  # the same path as labs 5, 12 and 16's (float-heavy training and folds), on every run
def test_the_solution_gets_full_marks_at_two_threads(graded, tmp_path):
    two = "import util\nutil.setup.__defaults__ = (util.SEED, 2)   # the notebook and the hidden cases at 2 threads"
    result = graded(_variant(tmp_path, "lab9_two_threads.ipynb", first_cells=[two]), "lab9")
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == [] and result.score == LAB.auto_points  # the written questions are marked apart
