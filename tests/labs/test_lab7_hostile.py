"""Lab 7, hostile: a notebook that patches the course's emulator, its judges and numpy in its own kernel
gets no credit on the cases the grader judges itself (7.4 and 7.5)."""
import json

import pytest

from grader.grade.submission import grade_submission
from tests.conftest import REPO
from util.labs import get_lab

PATCH = """
import numpy as _np
_np.allclose = lambda *a, **k: True
try:  # the judges are grader-only: unreadable in the sandbox, patched in vain where they are readable
    import util.labs.lab7.judge_emulator as _emulator
    import util.labs.lab7.judge as _judge
    _emulator.close = lambda *a, **k: True
    _emulator.emulate = lambda model, feeds: run(model, feeds)
    _judge.check_emulated = _judge.check_fp32_list = lambda *a, **k: []
except Exception:
    pass

def emulate_fp16(model, feeds):
    return run(model, feeds)                  # onnxruntime's view: no overflow anywhere

def auto_fp32(model, feeds, lists, rtol=1e-2, atol=1e-3):
    return []
"""


@pytest.mark.notebook
def test_patching_the_course_in_the_kernel_earns_nothing_judged(tmp_path):
    nb = json.loads((REPO / "solutions" / get_lab("lab7").notebook).read_text())
    at = next(i for i, c in enumerate(nb["cells"]) if "".join(c["source"]).startswith("progress("))
    nb["cells"].insert(at, {"cell_type": "code", "id": "hostile1", "metadata": {}, "execution_count": None,
                            "outputs": [], "source": PATCH.splitlines(keepends=True)})
    path = tmp_path / "hostile_lab7.ipynb"
    path.write_text(json.dumps(nb))
    result = grade_submission(path, get_lab("lab7"), tmp_path / "out")
    judged = {(t.task_id, c.name): c.status for t in result.tasks if t.task_id in ("7.4", "7.5") for c in t.checks}
    assert judged[("7.4", "RMS chain, all float16")] == "failed"
    assert judged[("7.4", "toy in mixed precision")] == "failed"
    assert judged[("7.4", "ResNet-18, all float16")] == "failed"
    assert judged[("7.5", "RMS chain")] == "failed"
    assert judged[("7.5", "gate")] == "failed"
