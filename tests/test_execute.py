"""The executor on tiny notebooks: errors do not stop the run, timeouts and dead kernels are named."""
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader.execute.kernel import execute
from grader.execute.scratch import kernel_env
from util.answers import read_answers


def _run(tmp_path, cells, **limits):
    nb = new_notebook(cells=[new_markdown_cell("## Task 9.1: Thing (1 points)")] + cells)
    limits.setdefault("cell_timeout", 60)
    limits.setdefault("notebook_timeout", 120)
    return execute(nb, tmp_path, kernel_env(tmp_path / "answers"), **limits), nb


EXPORT = "from util.answers import write_answer, output_dir\nwrite_answer(output_dir('lab9'), '9.1', 41)"


def test_cells_after_an_error_still_run_and_stderr_is_ignored(tmp_path):
    execution, nb = _run(tmp_path, [
        new_code_cell("raise ValueError('boom')"),
        new_code_cell("import sys, warnings; print('noise', file=sys.stderr); warnings.warn('w')\n" + EXPORT),
    ])
    assert execution.status == "completed"
    [error] = execution.errors
    assert (error.cell, error.task, error.ename, error.evalue) == (1, "9.1", "ValueError", "boom")
    assert read_answers(tmp_path / "answers") == {"9.1": 41}


def test_a_cell_past_its_limit_stops_the_run_but_keeps_earlier_exports(tmp_path):
    execution, _ = _run(tmp_path, [new_code_cell(EXPORT), new_code_cell("import time; time.sleep(30)"),
                                   new_code_cell("print('never')")], cell_timeout=2)
    assert execution.status == "timeout" and "cell 2" in execution.message
    assert read_answers(tmp_path / "answers") == {"9.1": 41}


def test_the_notebook_limit_applies_across_cells(tmp_path):
    cells = [new_code_cell("import time; time.sleep(1.5)") for _ in range(4)]
    execution, _ = _run(tmp_path, cells, cell_timeout=60, notebook_timeout=3)
    assert execution.status == "timeout" and execution.seconds < 10


def test_a_kernel_that_dies_is_a_crash_not_a_hang(tmp_path):
    execution, _ = _run(tmp_path, [new_code_cell(EXPORT), new_code_cell("import os; os._exit(3)"),
                                   new_code_cell("print('never')")])
    assert execution.status == "crash" and "kernel died in cell 2" in execution.message
    assert read_answers(tmp_path / "answers") == {"9.1": 41}


def test_a_kernel_killed_like_the_oom_killer_is_reported_as_memory(tmp_path):
    execution, _ = _run(tmp_path, [new_code_cell("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")])
    assert execution.status == "memory" and "out of memory" in execution.message
