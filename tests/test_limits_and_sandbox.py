"""Limits parsing, the sandbox's shape and its fallback, feedback and statistics from small results."""
from __future__ import annotations

import time

import psutil
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from grader import REPO
from grader.core.limits import Deadlines, Limits, format_size, parse_size
from grader.core.results import CheckResult, SubmissionResult, TaskResult
from grader.execute import confinement, sandbox
from grader.execute.kernel import execute
from grader.execute.scratch import kernel_env
from grader.report import feedback, stats


@pytest.mark.parametrize("text, size", [("4G", 4 << 30), ("512M", 512 << 20), ("100k", 100 << 10),
                                        ("1.5GiB", 3 << 29), ("2048", 2048), (77, 77)])
def test_sizes_parse_in_binary_units(text, size):
    assert parse_size(text) == size


def test_a_bad_size_says_how_to_write_one():
    with pytest.raises(ValueError, match="e.g. 512M, 4G"):
        parse_size("four gigs")


def test_sizes_print_for_people():
    assert (format_size(4 << 30), format_size(768 << 20), format_size(1536), format_size(12)) == (
        "4 GiB", "768 MiB", "1.5 KiB", "12 bytes")


def test_the_sandbox_shows_util_but_not_the_grader_and_writes_only_scratch(tmp_path):
    from util import labs

    args = sandbox.bwrap_args(tmp_path)
    binds = {(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == "--ro-bind"}
    util = (REPO / "util").resolve()
    assert (str(util / "contract.py"), str(util / "contract.py")) in binds  # util/ is shown file by file
    assert not any(source in (str(REPO), str(REPO / "grader"), str(util), "/") for source, _ in binds)
    writable = [(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == "--bind"]
    scratch = tmp_path.resolve()
    assert writable == [(str(scratch / ".tmp"), "/tmp"), (str(scratch), str(scratch)),
                        (str(scratch / ".shm"), "/dev/shm")]  # /tmp and /dev/shm count as the scratch folder
    for flag in ("--unshare-net", "--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session"):
        assert flag in args
    # the only memory-backed folders are the course's shown roots, each made read-only once its files are bound
    roots = [str(root.resolve()) for root in labs.shown_roots()]
    assert [args[i + 1] for i, a in enumerate(args) if a == "--tmpfs"] == roots
    remounted = [args[i + 1] for i, a in enumerate(args) if a == "--remount-ro"]
    assert remounted == [*roots, "/dev", "/"]  # each root; /dev (not its /dev/shm); /


def test_without_bubblewrap_it_warns_what_is_not_enforced(monkeypatch, capsys):
    monkeypatch.setenv(sandbox.SANDBOX_ENV, "off")
    confinement.unavailable_reason.cache_clear()
    confinement._warn_once.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="WITHOUT a sandbox"):
            assert confinement.available() is False
        err = capsys.readouterr().err
        assert "can use the network, read any file" in err and "apt-get install bubblewrap" in err
    finally:
        confinement.unavailable_reason.cache_clear()
        confinement._warn_once.cache_clear()


def test_without_the_sandbox_limits_still_hold_and_nothing_outlives_the_run(tmp_path):
    nb = new_notebook(cells=[
        new_code_cell("import subprocess\nsubprocess.Popen(['sleep', '4343'], start_new_session=True)"),
        new_code_cell("x = []\nwhile True:\n    x.append(b'x' * 10**7)"),
    ])
    execution = execute(nb, tmp_path, kernel_env(tmp_path / "answers"), deadlines=Deadlines(cell=20, notebook=40, hidden=300, judge=120),
                        limits=Limits(memory=512 << 20), sandbox=False)
    assert not execution.sandboxed
    assert [(e.cell, e.ename) for e in execution.errors] == [(1, "MemoryError")]
    time.sleep(0.3)
    assert not [p for p in psutil.process_iter(["cmdline"]) if "4343" in (p.info["cmdline"] or [])]


def _result(*checks, status="completed", notes=()):
    return SubmissionResult("amy.ipynb", "lab900", (TaskResult("900.1", "First", tuple(checks)),), 1.0, status, notes)


def test_feedback_lists_each_check_with_a_hint_per_problem():
    text = feedback.render("amy", _result(CheckResult("answer", "passed", 5, 5, ""),
                                          CheckResult("big@1x3", "failed", 0, 3, "result['total'] differs", True),
                                          status="timeout", notes=("cell 4 was\nstill running",)))
    assert "**Score: 5 / 8**" in text
    assert "| answer | 5/5 | passed | correct |" in text
    assert "| big@1x3 (hidden input) | 0/3 | failed | result\\['total'\\] differs |" in text  # Markdown-escaped
    assert f"*Hint (failed):* {feedback.HINTS['failed']}" in text
    assert "- cell 4 was still running" in text and "did not run to the end (timeout)" in text


def test_statistics_group_failures_that_differ_only_in_numbers():
    results = [(n, _result(CheckResult("answer", status, score, 5, message)))
               for n, status, score, message in [("a", "passed", 5, ""), ("b", "error", 0, "cell 3 raised KeyError"),
                                                 ("c", "error", 0, "cell 7 raised KeyError"),
                                                 ("d", "failed", 0, "expected 4 found 5")]]
    [task] = stats.compute(results)
    assert (task.submissions, task.mean, task.pass_rate) == (4, 1.25, 0.25)
    assert (task.common_failure, task.common_failure_count) == ("error: answer: cell 3 raised KeyError", 2)


ORPHAN = """
import sys, tempfile
from pathlib import Path
from nbformat.v4 import new_code_cell, new_notebook
from grader.execute.kernel import execute
from grader.core.limits import Deadlines
from grader.execute.scratch import kernel_env
folder = Path(tempfile.mkdtemp())
nb = new_notebook(cells=[new_code_cell(
    "import subprocess, time\\nsubprocess.Popen(['sleep', '5252'], start_new_session=True)\\ntime.sleep(120)")])
execute(nb, folder, kernel_env(folder / "answers"), deadlines=Deadlines(cell=120, notebook=120, hidden=300, judge=120), sandbox=True)
"""


def _sleepers():
    return [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "5252"]]


@pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")
def test_a_grader_killed_mid_run_takes_the_sandboxed_submission_with_it():
    import subprocess
    import sys

    grader = subprocess.Popen([sys.executable, "-c", ORPHAN], cwd=REPO, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not _sleepers() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _sleepers(), "the notebook never started its background process"
    finally:
        grader.kill()
        grader.wait()
    time.sleep(1.5)
    left = _sleepers()
    for process in left:  # never leave it behind, even when the test fails
        process.kill()
    assert left == []


def test_grader_only_lab_files_cannot_be_read_in_the_sandbox(tmp_path):
    """Each lab's judges and mistakes (which hold or quote solutions) are hidden from graded kernels."""
    import subprocess
    import sys

    from util import labs

    hidden = labs.grader_only_paths()
    assert any(p.name == "mistakes.py" for p in hidden) and any(p.name == "judge.py" for p in hidden)
    assert all(labs.grader_only(p.relative_to(labs.folder(lab)))
               for lab in labs.LABS.values() for p in hidden if p.is_relative_to(labs.folder(lab)))
    if not confinement.available():
        pytest.skip("bubblewrap is not usable here; .ci/run installs it")
    shown = [p for p in hidden if p.is_file()] + [REPO / "util" / "contract.py"]
    code = ("import sys\nfor p in sys.argv[1:]:\n    try:\n        print(len(open(p).read()))\n"
            "    except OSError:\n        print(0)")
    for name in (".tmp", ".shm"):
        (tmp_path / name).mkdir()
    lab = next(lab for lab in labs.LABS.values() if labs.judge_paths(lab))
    own = [p.resolve() for p in labs.judge_paths(lab)]
    for reveal in ((), tuple(own)):  # a kernel: none; a judge process: its own lab's judges, never the mistakes
        done = subprocess.run(sandbox.bwrap_args(tmp_path, reveal=reveal) + [sys.executable, "-c", code,
                                                                            *map(str, shown)],
                              capture_output=True, text=True, timeout=60)
        sizes = [int(line) for line in done.stdout.split()]
        assert sizes[-1] > 1000, done.stderr
        for path, size in zip(shown[:-1], sizes[:-1]):
            visible = path.resolve() in reveal or any(parent in reveal for parent in path.resolve().parents)
            assert (size == path.stat().st_size) if visible else (size == 0), (reveal, path)


@pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")
def test_a_root_grader_can_build_the_sandbox_in_a_user_namespace_too(monkeypatch, request):
    """Where bwrap cannot run as root (a container without CAP_SYS_ADMIN), a root grader drops to its
    unprivileged user first and bwrap builds the sandbox in a user namespace: the same walls."""
    import os

    if os.geteuid() != 0:
        pytest.skip("a non-root grader always builds it so (tests/test_unprivileged.py)")
    monkeypatch.setenv(sandbox.SANDBOX_ENV, "userns")
    problem = confinement._probe(sandboxed=True)
    if problem is not None:  # e.g. Python lies under /root, where the unprivileged user may not go
        pytest.skip(f"bwrap run by an unprivileged user cannot build the sandbox here:{problem}")
    import shutil
    import tempfile
    from pathlib import Path

    work = Path(tempfile.mkdtemp(prefix="userns-"))  # a scratch folder the unprivileged user can reach
    request.addfinalizer(lambda: shutil.rmtree(work, ignore_errors=True))
    code = ("import os, subprocess\nstatus = open('/proc/self/status').read()\n"
            "assert 'CapEff:\\t0000000000000000' in status and 'NoNewPrivs:\\t1' in status, status\n"
            f"assert subprocess.run(['mount', '-o', 'remount,rw,bind', {str(REPO / 'util')!r}]).returncode != 0\n"
            "assert subprocess.run(['unshare', '-U', 'true']).returncode != 0\n"
            "assert os.getuid() == 65534\n"
            "from util.answers import write_answer, output_dir\nwrite_answer(output_dir('lab900'), '900.1', 41)")
    execution = execute(new_notebook(cells=[new_code_cell(code)]), work, kernel_env(work / "answers"),
                        deadlines=Deadlines(cell=60, notebook=120, hidden=300, judge=120), sandbox=True)
    assert execution.status == "completed" and execution.errors == (), execution.errors
    assert (work / "answers" / "900.1.json").exists()


def test_scratch_folders_go_where_a_user_namespace_sandbox_can_reach_them(tmp_path, monkeypatch):
    """A root grader whose bwrap runs as student code's user needs the scratch folder reachable by that
    user: on a machine whose /tmp has mode 1700 (these machines) it goes to /var/tmp instead."""
    import os
    import tempfile
    from pathlib import Path

    if os.geteuid() != 0:
        pytest.skip("only a root grader drops before bwrap")
    monkeypatch.setattr(sandbox, "_root_userns", False)
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    monkeypatch.setenv(sandbox.SANDBOX_ENV, "on")
    assert sandbox.scratch_base() == private  # bwrap runs as root: it reaches any folder
    monkeypatch.setenv(sandbox.SANDBOX_ENV, "userns")
    assert sandbox.scratch_base() == Path("/var/tmp")
    private.chmod(0o755)
    if all(os.stat(p).st_mode & 0o001 for p in private.parents):
        assert sandbox.scratch_base() == private


def test_files_derived_from_grader_only_ones_are_not_shown_either(tmp_path):
    """Hidden by where a file lives and what it holds, not by a list of names: the bytecode Python writes beside
    a judge or the hidden cases (as after the test suite ran in this checkout), a copy under another name, an
    editor's backup; while every source students hold is shown."""
    import os
    import py_compile
    import subprocess
    import sys
    from pathlib import Path

    from util import labs

    if not confinement.available():
        pytest.skip("bubblewrap is not usable here; .ci/run installs it")
    folder = labs.folder(labs.get_lab("lab12"))
    derived = [Path(py_compile.compile(str(folder / name), doraise=True)) for name in ("judge.py", "cases.py")]
    copies = [folder / "notes_from_the_judge.txt", folder / "#cases.py#", folder / ".cases.py.swp"]
    try:
        for copy, source in zip(copies, ("judge.py", "cases.py", "cases.py")):
            copy.write_bytes((folder / source).read_bytes())
        shown = labs.shown_files((REPO / "util").resolve())
        assert not set(derived + copies) & set(shown)
        assert folder / "tasks.py" in shown and folder / "executor.py" in shown
        for name in (".tmp", ".shm"):
            (tmp_path / name).mkdir()
        probe = ("import os, sys\nfor p in sys.argv[1:]:\n    print(int(os.path.exists(p)))\n"
                 "import util.labs as l\nprint(sum(len(t.cases) for t in l.get_lab('lab12').tasks))")
        paths = [*derived, *copies, folder / "tasks.py"]
        done = subprocess.run(sandbox.bwrap_args(tmp_path) + [sys.executable, "-c", probe, *map(str, paths)],
                              capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert done.stdout.split() == ["0"] * (len(derived) + len(copies)) + ["1", "0"], done.stderr[-2000:]
    finally:
        for copy in copies:
            copy.unlink(missing_ok=True)


def test_a_withheld_data_set_reads_as_empty_in_the_sandbox(tmp_path):
    """What a judge evaluates on (the digits) can be kept from a student process it re-runs code in: unreadable."""
    import subprocess
    import sys

    from util.data import WITHHELD

    if not confinement.available():
        pytest.skip("bubblewrap is not usable here; .ci/run installs it")
    for name in (".tmp", ".shm"):
        (tmp_path / name).mkdir()
    files = WITHHELD["digits"]()
    assert files and all(f.stat().st_size > 1000 for f in files)
    code = ("import sys\ndef size(p):\n    try:\n        return len(open(p, 'rb').read())\n    except OSError:\n"
            "        return -1\nprint(*[size(p) for p in sys.argv[1:]])")
    for withhold, expect in (((), [f.stat().st_size for f in files]), (files, [-1] * len(files))):
        done = subprocess.run(sandbox.bwrap_args(tmp_path, withhold=withhold) + [sys.executable, "-c", code,
                                                                                *map(str, files)],
                              capture_output=True, text=True, timeout=60)
        assert [int(n) for n in done.stdout.split()] == expect, done.stderr


@pytest.mark.parametrize("withholding", [False, True])
def test_a_model_exported_while_a_withholding_sandbox_runs_is_not_there(tmp_path, monkeypatch, withholding):
    """Where a judge withholds data, the export caches are shown as they stood when the sandbox was made: a model
    trained on the digits that another grader exports into a cold cache mid-run is not readable there (it was,
    and the judge then refused to grade), and what was there stays readable. The control, withholding nothing,
    sees the cache live."""
    import subprocess
    import sys

    from util import export_cache
    from util.data import WITHHELD

    if not confinement.available():
        pytest.skip("bubblewrap is not usable here; .ci/run installs it")
    box = tmp_path / "box"  # the sandbox's scratch folder; the caches lie beside it, as they do beside a grading's
    for name in (".tmp", ".shm"):
        (box / name).mkdir(parents=True)
    for kind, variable in export_cache.KINDS.items():
        (tmp_path / "cache" / kind).mkdir(parents=True)
        monkeypatch.setenv(variable, str(tmp_path / "cache" / kind))
    folder = tmp_path / "cache" / "torchscript"
    (folder / "lab9_model.pt").write_bytes(b"x" * 100)
    late = folder / "lab12_digits_cnn.pt"
    code = ("import os, sys\nprint(int(os.path.exists(sys.argv[1])), flush=True)\nsys.stdin.readline()\n"
            "print(int(os.path.exists(sys.argv[2])), flush=True)")
    withhold = tuple(WITHHELD["digits"]()) if withholding else ()
    with subprocess.Popen(sandbox.bwrap_args(box, withhold=withhold)
                          + [sys.executable, "-c", code, str(folder / "lab9_model.pt"), str(late)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as process:
        assert process.stdout.readline().strip() == "1"  # what the cache held at the start
        late.write_bytes(b"y" * 100)  # exported while the process runs
        process.stdin.write("\n")
        process.stdin.flush()
        assert process.stdout.readline().strip() == ("0" if withholding else "1")
        assert process.wait(timeout=60) == 0
