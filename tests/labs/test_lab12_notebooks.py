"""Lab 12's solution graded at two threads (the generic tests grade it at one, the student copy and the
examples). Every task but 12.3 is decided by a judge on what its cases saved (test_lab12_lab.py feeds
those judges wrong and hostile files, test_lab12_training.py hostile train functions), so a kernel that
forges the values its cases return gains nothing there."""
import nbformat
import pytest

from grader.author.build import SOLUTIONS
from util.labs import get_lab

pytestmark = pytest.mark.notebook
LAB = get_lab("lab12")


def _variant(tmp_path, name, first_cells=(), last_cells=()):
    nb = nbformat.read(str(SOLUTIONS / LAB.notebook), as_version=4)
    nb.cells = [nbformat.v4.new_code_cell(c) for c in first_cells] + nb.cells + \
        [nbformat.v4.new_code_cell(c) for c in last_cells]
    path = tmp_path / name
    nbformat.write(nb, str(path))
    return path


@pytest.mark.slow  # the same path as lab 5's (float-heavy training and folds), on every run
def test_the_solution_gets_full_marks_at_two_threads(graded, tmp_path):
    two = "import util\nutil.setup.__defaults__ = (util.SEED, 2)   # the notebook and the hidden cases at 2 threads"
    result = graded(_variant(tmp_path, "lab12_two_threads.ipynb", first_cells=[two]), "lab12")
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == [] and result.score == LAB.auto_points  # the written questions are marked apart

