"""Hostile and broken submissions: each gets the right status, score and message, the batch
finishes, every submission has a row, and nothing a submission started outlives it.

The class below is graded once (one batch, tiny lab ``lab900`` from ``tinylab``, about a second per
kernel); each test then checks one submission. Task 900.1 is always exported before the hostile code,
so its credit must survive whatever happens after.
"""
from __future__ import annotations

import csv
import json
import socket
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import psutil
import pytest
from tinylab import GOOD_1, GOOD_2, export, notebook, registered, standard, write

from grader import REPO
from grader.core import records
from grader.core.limits import Limits
from grader.core.results import ANSWER, SubmissionResult
from grader.execute import confinement
from grader.grade import batch

LIMITS = Limits(cell_timeout=6, notebook_timeout=60, memory=768 << 20, procs=32, fsize=64 << 20, disk=128 << 20)
SANDBOXED = confinement.available()
needs_sandbox = pytest.mark.skipif(not SANDBOXED, reason="bubblewrap is not usable here; .ci/run installs it")
MARK = "4242"  # background processes sleep 4242 s: easy to find if one survives


def _class(root: Path, port: int) -> dict[str, object]:
    """Submission folder name -> notebook (or raw bytes, or a file name -> bytes dict)."""
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text(json.dumps({"task": "900.2", "value": 42}))
    return {
        "infinite_loop": standard("while True:\n    pass"),
        "memory_bomb": standard("x = []\nwhile True:\n    x.append(b'x' * 10**7)"),
        "memory_bomb_processes": standard(
            "import os, time\nfor _ in range(4):\n    if os.fork() == 0:\n        x = b'x' * (300 << 20)\n"
            "        time.sleep(30)\n        os._exit(0)\ntime.sleep(30)"),
        "os_exit": standard("import os\nos._exit(3)"),
        "segfault": standard("import ctypes\nctypes.string_at(0)"),
        "fork_bomb": standard("import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
                              "        pass\n    time.sleep(0.05)"),
        "background": standard(
            f"import os, subprocess, time\nsubprocess.Popen(['sleep', '{MARK}'], start_new_session=True)\n"
            f"if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.execvp('sleep', ['sleep', '{MARK}'])\n"
            "    os._exit(0)\ntime.sleep(0.5)"),
        "disk_filler": standard("import time\nfor i in range(12):\n    open(f'fill{i}.bin', 'wb').write(b'x' * (20 << 20))\n"
                                "time.sleep(30)"),
        "output_200mb": standard("for _ in range(200):\n    print('x' * 2**20)"),
        "read_references": standard(
            "leaked = []\n"
            f"for p in [{str(REPO / 'grader/references/lab1.json')!r}, {str(REPO / 'solutions')!r}, "
            f"{str(outside / 'secret.json')!r}]:\n"
            "    try:\n        open(p).read(1) if not p.endswith('solutions') else __import__('os').listdir(p)\n"
            "        leaked.append(p)\n    except OSError:\n        pass\nassert not leaked, leaked"),
        "link_to_outside": notebook(("md", "## Task 900.1: First (5 points)"), GOOD_1,
                                    ("md", "## Task 900.2: Second (5 points)"),
                                    "import os\nfrom util.answers import output_dir\n"
                                    f"os.symlink({str(outside / 'secret.json')!r}, output_dir('lab900') / '900.2.json')"),
        "network": standard(f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3).close()\n"
                            "    reached = True\nexcept OSError:\n    reached = False\nassert not reached"),
        "write_outside": standard(
            "written = []\n"
            f"for p in [{str(REPO / 'util' / '_hostile.txt')!r}, {str(outside / '_hostile.txt')!r}, "
            f"{str(root / 'out' / '_hostile.txt')!r}]:\n"
            "    try:\n        open(p, 'w').write('x')\n        written.append(p)\n    except OSError:\n        pass\n"
            "assert not written, written"),
        "corrupt": b'{"cells": [ this is not json',
        "empty": b"",
        "py_instead": {"lab900.py": b"print('my answers')\n"},
        "wrong_lab": notebook(("md", "## Task 2.1: Operator counts (10 points)"), "x = 1", lab="lab2"),
        "deleted_cell": notebook(("md", "## Task 900.1: First (5 points)"),
                                 ("md", "## Task 900.2: Second (5 points)"), GOOD_2),
        "duplicated_cells": notebook(("md", "## Task 900.1: First (5 points)"), GOOD_1, GOOD_1,
                                     ("md", "## Task 900.2: Second (5 points)"), GOOD_2, GOOD_2),
        "split_cells": notebook(("md", "## Task 900.1: First (5 points)"), "value = 40", "value += 1",
                                export("900.1", "value"), ("md", "## Task 900.2: Second (5 points)"), GOOD_2),
        "reordered_cells": notebook(("md", "## Task 900.1: First (5 points)"), export("900.1", "value"), "value = 41",
                                    ("md", "## Task 900.2: Second (5 points)"), GOOD_2),
        "wrong_type": notebook(("md", "## Task 900.1: First (5 points)"), export("900.1", "'41'"),
                               ("md", "## Task 900.2: Second (5 points)"), GOOD_2),
        "huge_answer": notebook(("md", "## Task 900.1: First (5 points)"), export("900.1", "list(range(3_000_000))"),
                                ("md", "## Task 900.2: Second (5 points)"), GOOD_2),
    }


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade the hostile class once; expose its results, rows, exit code and leftover processes."""
    root = tmp_path_factory.mktemp("hostile")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    subs = root / "class"
    for name, content in _class(root, server.getsockname()[1]).items():
        (subs / name).mkdir(parents=True)
        if isinstance(content, nbformat.NotebookNode):
            write(content, subs / name / "lab900.ipynb")
        elif isinstance(content, bytes):
            (subs / name / "lab900.ipynb").write_bytes(content)
        else:
            for file, data in content.items():
                (subs / name / file).write_bytes(data)
    scratch = root / "scratch"  # this class's kernels run in folders here, so other tests' kernels (another
    scratch.mkdir()             # xdist worker grading its own class) are never counted as leftovers
    with registered(root / "references"), pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", str(scratch))
        start = time.monotonic()
        code = batch.main(paths=[subs], out=root / "out", lab="lab900", progress=False, limits=LIMITS)
        seconds = time.monotonic() - start
    try:
        server.accept()
        reached = True
    except BlockingIOError:
        reached = False
    server.close()
    time.sleep(0.5)
    leftovers = [p.info for p in psutil.process_iter(["pid", "cmdline"])
                 if p.info["cmdline"] and (MARK in p.info["cmdline"]
                                           or any(str(scratch) in a for a in p.info["cmdline"]))]
    with (root / "out" / "gradebook.csv").open() as handle:
        rows = {row["submission"]: row for row in csv.DictReader(handle)}
    return SimpleNamespace(root=root, out=root / "out", code=code, rows=rows, reached=reached,
                           leftovers=leftovers, seconds=seconds, names=sorted(p.name for p in subs.iterdir()))


def result(graded, name: str) -> SubmissionResult:
    folder = name if name == "py_instead" else f"{name}__lab900"
    stored = records.load(graded.out / folder)
    assert stored is not None, f"{folder} has no stored result"
    return stored.result


def checks(graded, name: str) -> dict[str, tuple[str, float, str]]:
    """(task, check) -> (status, score, message)."""
    return {f"{t.task_id}/{c.name}": (c.status, c.score, c.message) for t in result(graded, name).tasks
            for c in t.checks}


def test_the_batch_finishes_with_one_row_per_submission(graded):
    assert graded.code == 0
    expected = {n if n == "py_instead" else f"{n}__lab900" for n in graded.names}
    assert set(graded.rows) == expected
    assert all(row["max"] == "10" for row in graded.rows.values())
    assert graded.seconds < 180


def test_nothing_a_submission_started_keeps_running(graded):
    assert graded.leftovers == []


@pytest.mark.parametrize("name, status, words", [
    ("infinite_loop", "timeout", "still running after 6 s"),
    ("memory_bomb_processes", "memory", "used more than 768 MiB of memory"),
    ("os_exit", "crash", "exit code 3"),
    ("segfault", "crash", "segmentation fault"),
    ("fork_bomb", "crash", "more than 32 processes"),
    ("disk_filler", "crash", "kept more than 128 MiB of files"),
])
def test_a_run_that_stops_keeps_earlier_credit_and_says_why(graded, name, status, words):
    found = checks(graded, name)
    assert found["900.1/answer"] == ("passed", 5, "")
    assert found["900.2/answer"][:2] == (status, 0)
    assert words in found["900.2/answer"][2] and "Answers exported before it still count" in found["900.2/answer"][2]
    assert result(graded, name).execution_status == status
    assert (graded.rows[f"{name}__lab900"]["total"], graded.rows[f"{name}__lab900"]["status"]) == ("5", "errors")


def test_a_memory_bomb_in_one_process_is_a_memory_status_and_the_kernel_survives(graded):
    found = checks(graded, "memory_bomb")
    assert found["900.1/answer"][0] == "passed"
    assert found["900.2/answer"][:2] == ("memory", 0)
    assert "MemoryError" in found["900.2/answer"][2] and "ran out of memory" in found["900.2/answer"][2]


def test_background_processes_do_not_cost_the_answer(graded):
    assert checks(graded, "background")["900.2/answer"][0] == "passed"


def test_200_mb_of_output_is_bounded_and_still_graded(graded):
    assert checks(graded, "output_200mb")["900.2/answer"][0] == "passed"
    executed = graded.out / "output_200mb__lab900" / "executed.ipynb"
    assert executed.stat().st_size < 3 * 2**20
    assert "output over 1 MiB per cell was dropped" in executed.read_text()


def test_an_exported_link_is_not_followed(graded):
    status, score, message = checks(graded, "link_to_outside")["900.2/answer"]
    assert (status, score) == ("failed", 0) and "it is a link, which the grader does not follow" in message


@needs_sandbox
@pytest.mark.parametrize("name", ["read_references", "network", "write_outside"])
def test_the_sandbox_hides_files_network_and_the_rest_of_the_disk(graded, name):
    found = checks(graded, name)
    assert found["900.2/answer"] == ("passed", 5, ""), found["900.2/answer"]


@needs_sandbox
def test_nothing_was_reached_or_written_outside(graded):
    assert not graded.reached
    assert not (REPO / "util" / "_hostile.txt").exists()
    assert not (graded.root / "outside" / "_hostile.txt").exists()
    assert not (graded.out / "_hostile.txt").exists()


@pytest.mark.parametrize("name, words", [
    ("corrupt", "is not a valid Jupyter notebook: it is not valid JSON (Expecting value at line 1, column 13)"),
    ("empty", "is empty (0 bytes)"),
    ("py_instead", "no notebook (.ipynb) was found in py_instead/ (it holds: lab900.py)"),
])
def test_files_that_are_not_notebooks_get_zero_and_the_reason(graded, name, words):
    graded_result = result(graded, name)
    assert graded_result.score == 0 and graded_result.execution_status == "missing"
    assert all(c.status == "missing" and words in c.message for t in graded_result.tasks for c in t.checks)
    assert words in (graded.out / (name if name == "py_instead" else f"{name}__lab900") / "feedback.html").read_text()


def test_the_wrong_lab_is_graded_as_asked_and_says_so(graded):
    graded_result = result(graded, "wrong_lab")
    assert graded_result.score == 0
    assert any("this notebook is lab2" in note and "graded as lab900" in note for note in graded_result.notes)


@pytest.mark.parametrize("name, task_status, words", [
    ("deleted_cell", "missing", "no answer was exported"),
    ("reordered_cells", "error", "NameError"),
    ("wrong_type", "failed", "answer is a string; expected an integer"),
    ("huge_answer", "failed", "the exported answer was not read: it is 30.4 MiB; the grader reads at most 2 MiB"),
])
def test_broken_notebooks_lose_only_the_broken_task(graded, name, task_status, words):
    found = checks(graded, name)
    assert found["900.1/answer"][:2] == (task_status, 0) and words in found["900.1/answer"][2], found["900.1/answer"]
    assert found["900.2/answer"][0] == "passed"


@pytest.mark.parametrize("name", ["duplicated_cells", "split_cells"])
def test_harmless_edits_keep_full_marks(graded, name):
    assert result(graded, name).score == 10


@pytest.mark.notebook
def test_a_real_lab_keeps_credit_exported_before_a_crash(tmp_path):
    """Lab 1's solution, killed at the start of task 1.3: the answers of 1.1 and 1.2 still count."""
    from grader.core.notebook import headings
    from grader.grade.submission import grade_submission
    from util.labs import get_lab

    lab = get_lab("lab1")
    nb = nbformat.read(str(REPO / "solutions" / lab.notebook), as_version=4)
    at = next(i for i, (task_id, *_) in headings(nb).items() if task_id == "1.3")
    nb.cells.insert(at + 1, nbformat.v4.new_code_cell("import os\nos._exit(1)"))
    write(nb, tmp_path / "crashed.ipynb")
    graded_result = grade_submission(tmp_path / "crashed.ipynb", lab, tmp_path / "out")
    by_task = {t.task_id: t for t in graded_result.tasks}
    assert graded_result.execution_status == "crash"
    for task_id in ("1.1", "1.2"):
        answer = next(c for c in by_task[task_id].checks if c.name == ANSWER)
        assert answer.status == "passed", answer.message
    for task_id in ("1.3", "1.4", "1.5"):
        assert all(c.status == "crash" and "exit code 1" in c.message for c in by_task[task_id].checks)
    hidden = [c for t in ("1.1", "1.2") for c in by_task[t].checks if c.name != ANSWER]
    assert hidden and all(c.status == "crash" for c in hidden)  # the kernel died before the hidden cases
    assert graded_result.score == lab.task("1.1").answer_points + lab.task("1.2").answer_points


def _rss_growth(action) -> int:
    """Peak growth of this process's resident memory while ``action()`` runs, in bytes."""
    import threading

    process = psutil.Process()
    base = peak = process.memory_info().rss
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.wait(0.02):
            peak = max(peak, process.memory_info().rss)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        action()
    finally:
        stop.set()
        sampler.join()
    return peak - base


@pytest.mark.parametrize("code", [
    "for _ in range(200):\n    print('x' * 2**20)",                                   # the usual way
    "for _ in range(4):\n    get_ipython().display_pub.publish({'text/plain': 'y' * (50 << 20)})",  # around the cap
], ids=["print", "display_pub"])
def test_the_grader_holds_little_of_a_flood_of_output(tmp_path, code):
    from grader.grade.submission import grade_submission

    path = write(standard(code), tmp_path / "flood" / "lab900.ipynb")
    with registered(tmp_path / "references") as lab:
        graded_result = None

        def grade() -> None:
            nonlocal graded_result
            graded_result = grade_submission(path, lab, tmp_path / "out", limits=LIMITS)

        growth = _rss_growth(grade)
    assert graded_result.score == 10
    assert growth < 150 << 20, f"the grader grew by {growth >> 20} MiB"
