"""Lab 16's solution graded at two threads (the generic tests grade it at one, the student copy and the examples).
Its accuracies are measured on one thread and its training runs in float64 on one thread whatever the notebook sets
(``util.labs.lab16.digits.one_thread``), so two threads move no graded value; every hidden case but 16.1's is
decided by a judge on what it saved (test_lab16_lab.py feeds those judges wrong and forged files,
test_lab16_distillation.py hostile losses)."""
import nbformat
import pytest

from grader.author.build import SOLUTIONS
from util.labs import get_lab

pytestmark = pytest.mark.notebook
LAB = get_lab("lab16")


@pytest.mark.slow  # the same path as lab 5's (float-heavy training and folds), on every run
def test_the_solution_gets_full_marks_at_two_threads(graded, tmp_path):
    nb = nbformat.read(str(SOLUTIONS / LAB.notebook), as_version=4)
    two = "import util\nutil.setup.__defaults__ = (util.SEED, 2)   # the notebook and the hidden cases at 2 threads"
    nb.cells.insert(0, nbformat.v4.new_code_cell(two))
    path = tmp_path / "lab16_two_threads.ipynb"
    nbformat.write(nb, str(path))
    result = graded(path, "lab16")
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == [] and result.score == LAB.auto_points  # the written questions are marked apart
