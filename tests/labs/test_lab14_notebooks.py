"""Lab 14's solution graded at two threads (the generic tests grade it at one, the student copy and the examples).
Every Triton task and the tiled attention are decided by judges in student processes of their own
(test_lab14_judge.py feeds them hostile code), so whatever the notebook's kernel does to its own counter gains it
nothing there; what this adds is that nothing the grader decides depends on the kernel's thread count."""
import nbformat
import pytest

from grader.author.build import SOLUTIONS
from util.labs import get_lab

pytestmark = pytest.mark.notebook
LAB = get_lab("lab14")


@pytest.mark.slow  # the same path as labs 5, 12 and 16's (float-heavy training and folds), on every run
def test_the_solution_gets_full_marks_at_two_threads(graded, tmp_path):
    nb = nbformat.read(str(SOLUTIONS / LAB.notebook), as_version=4)
    two = "import util\nutil.setup.__defaults__ = (util.SEED, 2)   # the notebook and the hidden cases at 2 threads"
    nb.cells.insert(0, nbformat.v4.new_code_cell(two))
    path = tmp_path / "lab14_two_threads.ipynb"
    nbformat.write(nb, str(path))
    result = graded(path, "lab14")
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == [] and result.score == LAB.auto_points  # the written questions are marked apart
