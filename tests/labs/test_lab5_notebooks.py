"""Lab 5 graded end to end in two hostile or unusual ways (the generic tests grade the solution, the
student copy and the examples): a kernel that forges every verdict it could, and the solution at two threads."""
import json

import nbformat
import pytest

from grader.author.build import SOLUTIONS
from grader.judge import references
from util.labs import get_lab

pytestmark = pytest.mark.notebook
LAB = get_lab("lab5")
JUDGED = {t.id for t in LAB.tasks if t.grader_check}

FORGER = """
# Wrong functions: nothing folded, zero records, a convolution for every pool and every pair.
_real_record = record
def fold_conv_bn(conv, bn):
    return copy.deepcopy(conv)
def fold_model(model):
    return fx.symbolic_trace(copy.deepcopy(model))
def record(gm, x, names=None):
    return {name: torch.zeros_like(value) for name, value in _real_record(gm, x, names).items()}
def avg_add_to_conv(pool, channels):
    return nn.Conv2d(channels, channels, 3, padding=1, groups=channels, bias=False)
def merge_conv_add(conv1, conv2):
    return nn.Conv2d(conv1.in_channels + conv2.in_channels, conv1.out_channels, 3, padding=1)

# Everything in this kernel that could decide a verdict says "equal", and every case returns the
# value the grader expects (as if the reference file had leaked).
import json as _json
import numpy as _np
import util.labs.lab5.saved as _saved
from util.labs import get_lab as _get_lab
torch.allclose = _np.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
_saved.max_rel = lambda *a, **k: 0.0
try:
    import util.labs.lab5.judge as _judge       # (a graded kernel cannot even import the judge)
except ImportError:
    pass
else:
    _judge.max_rel = lambda *a, **k: 0.0
    for _name in dir(_judge):
        if _name.startswith("check_"):
            setattr(_judge, _name, lambda *a, **k: [])
_EXPECTED = _json.loads(%r)
for _task in _get_lab("lab5").tasks:
    def _forged(fn, spec, _task=_task, _run=_task.run_case):
        try:
            _run(fn, spec)              # saves what the wrong function built, through the real path
        except Exception:               # (zero records make log10 fail in 5.5: the forged value is returned anyway)
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
    result = graded(_variant(tmp_path, "lab5_forger.ipynb", last_cells=[FORGER % json.dumps(expected)]), "lab5")
    cases = {(t.task_id, c.name): c for t in result.tasks for c in t.checks if c.name != "answer"}
    judged = {key: c.status for key, c in cases.items() if key[0] in JUDGED}
    assert len(judged) == 16 and set(judged.values()) == {"failed"}
    # tasks without a judge return numbers only a computation produces; forged, they pass: that is why
    # every task whose expected value is a constant has a judge
    assert {c.status for key, c in cases.items() if key[0] not in JUDGED} == {"passed"}
    assert cases[("5.6", "k5 s1 p2, count_include_pad=False")].message.startswith(
        "returned a convolution, but the substitution is not valid for every input size")


def test_the_solution_gets_full_marks_at_two_threads(graded, tmp_path):
    two = "import util\nutil.setup.__defaults__ = (util.SEED, 2)   # the notebook and the hidden cases at 2 threads"
    result = graded(_variant(tmp_path, "lab5_two_threads.ipynb", first_cells=[two]), "lab5")
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == [] and result.score == LAB.auto_points  # the written questions are marked apart
