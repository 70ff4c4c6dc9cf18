"""Lab 15's solution graded at two threads (the generic tests grade it at one, the student copy and the
examples). Tasks 15.3-15.6 are decided by judges on what their cases saved (test_lab15_lab.py feeds those
judges forged records beside honest ones, test_lab15_speculative.py re-runs speculative decoding against the
grader's own target), so a kernel that forges what its cases return gains nothing there."""
import nbformat
import pytest

from grader.author.build import SOLUTIONS
from util.labs import get_lab

pytestmark = pytest.mark.notebook
LAB = get_lab("lab15")


@pytest.mark.slow  # the same path as labs 5, 12 and 16's (float-heavy training and folds), on every run
def test_the_solution_gets_full_marks_at_two_threads(graded, tmp_path):
    nb = nbformat.read(str(SOLUTIONS / LAB.notebook), as_version=4)
    two = "import util\nutil.setup.__defaults__ = (util.SEED, 2)   # the notebook and the hidden cases at 2 threads"
    nb.cells = [nbformat.v4.new_code_cell(two)] + nb.cells
    path = tmp_path / "lab15_two_threads.ipynb"
    nbformat.write(nb, str(path))
    result = graded(path, "lab15")
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == [] and result.score == LAB.auto_points  # the written questions are marked apart
