"""Student code a judge needs runs in a student process: walls between it, the judge and the grader.

A judge (grader code, in its own confined process) asks the grader for a student process
(``util.student_process``); these tests play both with the tiny test lab's judge ``check_probe``,
whose "student code" is the source the case saved. They show, through the grader's real entry points
(``grader.judge.isolated.judge``, a kernel run by ``grader.execute.kernel.execute``):

* one list of grader-only files, one mechanism: a graded kernel and a student process read none of
  them; a judge reads its own lab's judges and nothing else of them;
* a student process that kills every process it sees, writes forged records into every descriptor it
  finds and scans /proc cannot reach the judge, which gives its own verdict afterwards;
* what the grader measures of a student process is its own measurement: a spinning thread shows as
  CPU time, and none accrues while the grader holds it paused.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from tinylab import FOLDER, registered

from grader import REPO
from grader.core.limits import Deadlines
from grader.execute import confinement
from grader.execute.kernel import execute
from grader.execute.scratch import kernel_env
from grader.judge.isolated import judge
from util import labs

pytestmark = pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")

PROBE = """
import json, os, signal
PATHS = {paths!r}
def f(n):
    readable = []
    for index, path in enumerate(PATHS):
        try:
            if open(path, 'rb').read(1):
                readable.append(index)
        except OSError:
            pass
    seen, written = [], set()
    for name in os.listdir('/proc'):
        if name.isdigit() and int(name) != os.getpid():
            seen.append(int(name))
            for fd in range(16):
                try:
                    with open(f'/proc/{{name}}/fd/{{fd}}', 'w') as out:
                        out.write(json.dumps({{"done": 0, "problems": []}}) + "\\n")
                        written.add(open(f'/proc/{{name}}/comm').read().strip())
                except OSError:
                    pass
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass
    return {{"readable": readable, "seen": len(seen), "written": sorted(written), "uid": os.getuid()}}
"""
SPIN = """
import threading
def spin():
    while True:
        pass
threading.Thread(target=spin, daemon=True).start()
def f(n):
    return "spinning"
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    with registered(tmp_path_factory.mktemp("references")) as lab:
        yield lab


def _grader_only() -> list[str]:
    return [str(p) for p in labs.grader_only_paths() if p.is_file()]


def _judge(folder: Path, code: str, **spec) -> dict:
    files = folder / "files"
    files.mkdir(parents=True, exist_ok=True)
    (files / "case-probe.py").write_text(code)
    for path in [folder, files, files / "case-probe.py"]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    job = {"check": "lab900.judge:check_probe", "spec": {"paths": _grader_only(), **spec},
           "file": str(files / "case-probe.py"), "tolerance": {"rtol": 0, "atol": 0}}
    [lines] = judge([job], files, timeout=120, reveal=tuple(labs.judge_paths(labs.get_lab("lab900"))))
    found = {}
    for line in lines:
        found.update(json.loads(line))
    return found


def test_each_sandbox_shows_only_what_it_needs_of_the_grader_only_files(tiny, tmp_path):
    paths = _grader_only()
    own = {i for i, p in enumerate(paths) if Path(p).is_relative_to(FOLDER / "lab900") and "judge" in Path(p).name}
    mistakes = {i for i, p in enumerate(paths) if Path(p).name == "mistakes.py"}
    assert own and mistakes and len(paths) > len(own) + len(mistakes)  # other labs' judges are in the list
    found = _judge(tmp_path, PROBE.format(paths=paths))
    assert set(found["judge"]) == own  # its own lab's judges, not another lab's, never a mistakes file
    assert found["student"]["value"]["readable"] == []
    scratch = tmp_path / "kernel"
    scratch.mkdir()
    code = PROBE.format(paths=paths) + "\nimport json\nprint('READABLE', json.dumps(f(0)['readable']))"
    nb = new_notebook(cells=[new_markdown_cell("## Task 900.1: First (5 points)"), new_code_cell(code)])
    execute(nb, scratch, kernel_env(scratch / "answers"), deadlines=Deadlines(cell=60, notebook=90, hidden=30, judge=30))
    printed = "".join(o.get("text", "") for o in nb.cells[1].get("outputs", []))
    assert "READABLE []" in printed, printed


def test_a_student_process_cannot_reach_the_judge(tiny, tmp_path):
    found = _judge(tmp_path, PROBE.format(paths=[]))
    student = found["student"]["value"]
    assert student["seen"] <= 3  # its own pid namespace: the sandbox's init (and a launcher), no judge, no grader
    assert set(student["written"]) <= {"bwrap"}  # at most its own sandbox's init (a non-root grader's): no judge
    assert found["judge_alive"] is True
    if os.geteuid() == 0:  # a root grader's judge runs as a user of its own, not the student's
        assert student["uid"] != confinement.judge_ids(True)[0]


def test_the_graders_cpu_measurement_counts_every_thread_and_stops_when_paused(tiny, tmp_path):
    found = _judge(tmp_path, SPIN, spin=True)
    first, paused, running = found["cpu"]
    assert paused - first <= 0.02, found  # a second held by the grader: nothing ran
    assert running - paused > 0.1, found  # a second running (on a shared machine): the spinning thread is seen


SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[2])
import tinylab
from pathlib import Path
from tinylab import registered
import test_judge_walls as walls
with registered(Path(sys.argv[1]) / "references"):
    print(json.dumps(walls._judge(Path(sys.argv[1]) / "work", walls.PROBE.format(paths=walls._grader_only()))))
"""


def test_the_walls_hold_for_an_unprivileged_grader(tmp_path):
    from test_unprivileged import USER, _as_user

    os.chmod(tmp_path, 0o755)
    for name in ("references", "work"):
        (tmp_path / name).mkdir()
        os.chown(tmp_path / name, USER, USER)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    done = _as_user([sys.executable, "-c", SCRIPT, str(tmp_path), str(REPO / "tests")],
                    [Path(sys.executable).resolve().parent.parent, Path(sys.prefix), REPO, tmp_path], env)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["student"]["value"]["readable"] == [] and set(found["student"]["value"]["written"]) <= {"bwrap"}
    assert found["judge_alive"] is True
