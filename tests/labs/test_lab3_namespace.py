"""grader.author.solution.solution_namespace: the solution's functions, without side effects."""
import os

import pytest

from grader.author.solution import solution_namespace
from util.answers import OUTPUT_DIR_ENV


def test_runs_setup_cells_and_the_named_tasks_only(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ns = solution_namespace("lab2", ("2.1",))
    assert ns["operator_counts"](ns["toy"]) == {"Concat": 1, "MatMul": 1, "Relu": 1}
    assert "inspect_node" not in ns                       # task 2.2's cells were not run
    assert not (tmp_path / "outputs").exists()            # submit() wrote to a throw-away folder
    assert OUTPUT_DIR_ENV not in os.environ


def test_unknown_task_is_a_clear_error():
    with pytest.raises(KeyError, match="no task 900.9"):
        solution_namespace("lab2", ("900.9",))
