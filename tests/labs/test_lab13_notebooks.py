"""Lab 13's solution graded at two threads (the generic tests grade it at one, the student copy and the
examples): the notebook's kernel computes on two OpenMP threads before it forks its ranks, which set one thread
each first (a fork of a process that used OpenMP threads hangs if it uses them again). Every parallel case is
decided by a judge on ranks of its own (test_lab13_judge_walls.py feeds it hostile functions)."""
import nbformat
import pytest

from grader.author.build import SOLUTIONS
from util.labs import get_lab

pytestmark = pytest.mark.notebook
LAB = get_lab("lab13")


@pytest.mark.slow  # the same path as labs 5, 12 and 16's (float-heavy training and folds), on every run
def test_the_solution_gets_full_marks_at_two_threads(graded, tmp_path):
    nb = nbformat.read(str(SOLUTIONS / LAB.notebook), as_version=4)
    two = "import util\nutil.setup.__defaults__ = (util.SEED, 2)   # the notebook and the hidden cases at 2 threads"
    nb.cells.insert(0, nbformat.v4.new_code_cell(two))
    nb.cells.insert(3, nbformat.v4.new_code_cell("import torch\nassert torch.get_num_threads() == 2\n"
                                                 "torch.ones(600, 600) @ torch.ones(600, 600)   # OpenMP's threads up"))
    path = tmp_path / "lab13_two_threads.ipynb"
    nbformat.write(nb, str(path))
    result = graded(path, "lab13")
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == [] and result.score == LAB.auto_points  # the written questions are marked apart
