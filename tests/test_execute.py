"""The executor on tiny notebooks: errors do not stop the run, timeouts and dead kernels are named."""
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader.core.limits import Deadlines
from grader.execute.kernel import execute
from grader.execute.scratch import kernel_env
from util.answers import read_answers


def _run(tmp_path, cells, *, cell_timeout=60, notebook_timeout=120, **others):
    nb = new_notebook(cells=[new_markdown_cell("## Task 900.1: Thing (1 points)")] + cells)
    deadlines = Deadlines(cell=cell_timeout, notebook=notebook_timeout, hidden=300, judge=120)
    return execute(nb, tmp_path, kernel_env(tmp_path / "answers"), deadlines=deadlines, **others), nb


EXPORT = "from util.answers import write_answer, output_dir\nwrite_answer(output_dir('lab900'), '900.1', 41)"


def test_cells_after_an_error_still_run_and_stderr_is_ignored(tmp_path):
    execution, nb = _run(tmp_path, [
        new_code_cell("raise ValueError('boom')"),
        new_code_cell("import sys, warnings; print('noise', file=sys.stderr); warnings.warn('w')\n" + EXPORT),
    ])
    assert execution.status == "completed"
    [error] = execution.errors
    assert (error.cell, error.task, error.ename, error.evalue) == (1, "900.1", "ValueError", "boom")
    assert read_answers(tmp_path / "answers") == {"900.1": 41}


def test_a_cell_past_its_limit_stops_the_run_but_keeps_earlier_exports(tmp_path):
    execution, _ = _run(tmp_path, [new_code_cell(EXPORT), new_code_cell("import time; time.sleep(30)"),
                                   new_code_cell("print('never')")], cell_timeout=2)
    assert execution.status == "timeout" and "cell 2" in execution.message
    assert read_answers(tmp_path / "answers") == {"900.1": 41}


def test_the_notebook_limit_applies_across_cells(tmp_path):
    cells = [new_code_cell("import time; time.sleep(1.5)") for _ in range(4)]
    execution, _ = _run(tmp_path, cells, cell_timeout=60, notebook_timeout=3)
    assert execution.status == "timeout" and execution.seconds < 10


def test_a_kernel_that_dies_is_a_crash_not_a_hang(tmp_path):
    execution, _ = _run(tmp_path, [new_code_cell(EXPORT), new_code_cell("import os; os._exit(3)"),
                                   new_code_cell("print('never')")])
    assert execution.status == "crash" and "kernel died in cell 2" in execution.message
    assert read_answers(tmp_path / "answers") == {"900.1": 41}


def test_a_kernel_killed_like_the_oom_killer_is_reported_as_memory(tmp_path):
    execution, _ = _run(tmp_path, [new_code_cell("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")])
    assert execution.status == "memory" and "out of memory" in execution.message


def test_the_notebook_deadline_is_absolute_however_the_time_is_spread(tmp_path):
    """40 cells of 0.95 s under a 6 s limit stop at the limit (no cell after the
    deadline gets a second of its own), and so do thousands of trivial cells."""
    import time

    for cells in ([new_code_cell("import time; time.sleep(0.95)") for _ in range(40)],
                  [new_code_cell("pass") for _ in range(20_000)]):
        start = time.monotonic()
        execution, _ = _run(tmp_path, cells, cell_timeout=60, notebook_timeout=6)
        spent = time.monotonic() - start
        assert execution.status == "timeout" and "6 s per notebook" in execution.message, execution.message
        assert spent < 6 + 15, f"the grader spent {spent:.0f} s on a 6 s notebook"  # kernel start and shutdown


def test_at_the_deadline_the_kernel_dies_whatever_the_cell_does(tmp_path):
    """A cell blocked in C (no Python signal handler runs) and ignoring SIGINT is killed at the deadline."""
    import time

    code = ("import signal, time, ctypes\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            "ctypes.CDLL(None).sleep(120)")
    start = time.monotonic()
    execution, _ = _run(tmp_path, [new_code_cell(EXPORT), new_code_cell(code)], cell_timeout=120, notebook_timeout=5)
    assert execution.status == "timeout" and "time limit (5 s per notebook)" in execution.message, execution.message
    assert time.monotonic() - start < 5 + 15
    assert read_answers(tmp_path / "answers") == {"900.1": 41}


def test_a_plain_scratch_folder_still_counts_deleted_files_held_open(tmp_path):
    """Where the scratch folder is no filesystem of its own (not root, no loop devices), the watchdog
    adds the files the kernel deleted but keeps open to its walk of the folder."""
    from grader.core.limits import Limits

    code = ("import os, time\nheld = []\nfor i in range(4):\n    f = open(f'h{i}', 'wb')\n    os.unlink(f'h{i}')\n"
            "    f.write(b'x' * (30 << 20))\n    f.flush()\n    held.append(f)\ntime.sleep(30)")
    execution, _ = _run(tmp_path, [new_code_cell(EXPORT), new_code_cell(code)],
                        limits=Limits(disk=64 << 20, fsize=40 << 20))
    assert execution.status == "crash" and "kept more than 64 MiB of files" in execution.message, execution.message
    assert read_answers(tmp_path / "answers") == {"900.1": 41}


@pytest.mark.parametrize("cell, hidden, left, says", [
    (120, False, 3.2, "cell 1 (900.1) was still running at its time limit (5 s per notebook)"),
    (120, True, 2.5, "cell 1 (900.1) was still running the hidden cases at their time limit (7 s)"),
    (4, False, 4.5, "cell 1 (900.1) was still running after 4 s and was stopped (limits: 4 s per cell"),
])
def test_a_cell_stopped_by_its_phases_deadline_says_so_whichever_timer_fired_first(cell, hidden, left, says):
    """When a cell's own limit was cut to what its phase had left, the client's timer can fire before the
    watchdog's poll sees the deadline: the message names the deadline that stopped it, not a cell limit of
    a few seconds the student never set; a cell stopped by its own limit says that limit."""
    from types import SimpleNamespace

    from nbclient.exceptions import CellTimeoutError

    from grader.execute.kernel import _CellRun

    class Client:
        timeout = None

        def execute_cell(self, cell, index):
            raise CellTimeoutError("timed out")

    deadlines = Deadlines(cell=cell, notebook=5, hidden=7, judge=60)
    run = _CellRun(Client(), new_notebook(cells=[new_code_cell("x = 1"), new_code_cell("while True: pass")]),
                   [None, "900.1"], 2 if not hidden else 1, deadlines)
    watchdog = SimpleNamespace(breach=None)
    assert run.one(1, run.nb.cells[1], hidden, left, watchdog) is False
    assert run.status == "timeout" and run.stopped == "900.1"
    assert run.message.startswith(says), run.message


def test_a_killed_group_whose_leader_is_an_unreaped_zombie_has_no_live_members():
    """kill_all waits for a group's members to die, not for its zombie leader to be reaped (killpg
    succeeds on a zombie, which cost every student process half a second twice)."""
    import os
    import signal
    import subprocess
    import time

    from grader.execute.watchdog import live_members

    leader = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while len(live_members(leader.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        members = live_members(leader.pid)
        assert leader.pid in members and len(members) >= 2  # sh and its sleeps
        os.killpg(leader.pid, signal.SIGKILL)
        while live_members(leader.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert live_members(leader.pid) == []
        os.killpg(leader.pid, 0)  # the zombie leader still holds the group: killpg does not fail
    finally:
        leader.kill()
        leader.wait()
