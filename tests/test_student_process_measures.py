"""Two measurements of a student process that judges rely on (``util.student_process``, ``grader.execute.student_process``).

* ``util.student_process.no_processes()``: after it, a process may start threads but no process, whatever it
  tries (``os.fork``, ``subprocess``, ``multiprocessing``), so what the grader measures of it (its peak memory,
  its CPU time) is all its code did;
* ``StudentProcess.stats()["executables"]``: the paths of the files a process maps executable, as it sees them,
  so a judge can tell a library copied to a folder of the student's from one the system installed (a name
  proves nothing: a copy of a BLAS can be called anything).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from grader import REPO

PROBE = """
import os, subprocess, sys, threading
sys.path.insert(0, {repo!r})
from util.student_process import no_processes
no_processes()
found = []
thread = threading.Thread(target=lambda: found.append("thread"))
thread.start()
thread.join()
for name, start in (("fork", os.fork), ("subprocess", lambda: subprocess.run(["true"]))):
    try:
        if start() == 0:
            os._exit(0)
        found.append(name)
    except OSError as error:
        found.append(f"{{name}} refused ({{error.errno}})")
import multiprocessing
try:
    process = multiprocessing.Process(target=print)
    process.start()
    process.join()
    found.append("multiprocessing")
except OSError as error:
    found.append(f"multiprocessing refused ({{error.errno}})")
print(found)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a seccomp filter: Linux only")
def test_no_processes_keeps_threads_and_refuses_every_way_to_a_process():
    done = subprocess.run([sys.executable, "-c", PROBE.format(repo=str(REPO))], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str(["thread", "fork refused (1)", "subprocess refused (1)",
                                       "multiprocessing refused (1)"])


def test_the_graders_stats_show_where_an_executable_mapping_lies(tmp_path):
    """A process copies a library of the system's under another name into a folder of its own and loads it: the
    grader's stats list the copy by its path, beside the system's own libraries."""
    import _ctypes

    from grader.execute.student_process import StudentProcess

    original = Path(_ctypes.__file__).resolve()
    copy = tmp_path / "my_kernel_helper.so"
    shutil.copy(original, copy)
    code = (f"import ctypes, sys, time\nctypes.CDLL({str(copy)!r})\nprint('loaded', flush=True)\n"
            "sys.stdin.read()")
    process = psutil.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "loaded"
        stats = StudentProcess(1, process, None, None).stats()
        assert str(copy) in stats["executables"] and "my_kernel_helper.so" in stats["libraries"]
        assert any(path.startswith(("/usr/", "/lib")) and "libc" in Path(path).name for path in stats["executables"])
        assert stats["processes"] == 1 and stats["cpu_seconds"] >= 0
    finally:
        process.kill()
        process.wait(10)
