"""Attacks on the grader's own files, graded as one class by ``python -m grader grade`` whose standard
output and error go to one log file (``> grader.log 2>&1``, as a grading server runs it): as root
(as CI and the grader image run it) and as an unprivileged user (uid 4242, see
``tests/test_unprivileged.py``).

* the grader's log: a kernel that writes 200 MiB straight to its file descriptors 1 and 2, and one
  that reopens every descriptor it holds (``/proc/self/fd/N``) looking for the grader's log lines;
* the scratch folder: folders nested past PATH_MAX, 3,000 deep, or made unreadable, hiding files
  from the disk limit (with the watchdog's walk: ``COURSE_SCRATCH_FS=off``, as in a container);
* the results folder: a submission that leaves 60 MiB of ``case-*`` files no case declares and one
  case file over ``--max-saved-file``;
* the class files: notebooks named ``gradebook.csv.ipynb``, ``report.html.ipynb``,
  ``class.json.ipynb``... beside clean ones.

Each class has its honest control in the same batch (``z_clean``, ``z_clean_files``), graded right.
The test labs: ``lab900`` (``tests/tinylab.py``) and ``lab901`` (``tests/savedlab_labs/``, a task
whose cases save a file that a grader-side check judges).
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from test_unprivileged import USER, _as_user
from tinylab import FOLDER, GOOD_1, GOOD_2, notebook, standard, write

from grader import REPO
from grader.core.namespace import is_reserved
from grader.core.records import RECORD
from grader.execute import confinement
from grader.execute.drain import HEAD, TAIL
from util.artifacts import case_file

SAVED_LABS = Path(__file__).resolve().parent / "savedlab_labs"
MARKER = "grader: limits:"
"""A line the grader writes to its log before any kernel starts: no kernel may ever read it."""
FLOOD_MIB = 200

FLOOD = f"""\
import os
chunk = b'x' * (1 << 20)
for _ in range({FLOOD_MIB}):  # below print(): straight to the descriptors
    os.write(1, chunk)
    os.write(2, b'e' * 1024)
os.write(2, b'the end of the flood\\n')"""

READ_LOG = f"""\
import os
marker = {MARKER[::-1]!r}[::-1]  # (reversed here: this source lands in executed.ipynb)
seen, leaked = {{}}, {{}}
for fd in sorted(os.listdir('/proc/self/fd'), key=int):
    path = f'/proc/self/fd/{{fd}}'
    try:
        seen[fd] = os.readlink(path)
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # reopened for reading, whatever it was opened for
    except OSError:
        continue
    try:
        data = os.read(handle, 1 << 22)
    except OSError:
        data = b''
    os.close(handle)
    if marker.encode() in data:
        leaked[fd] = data[data.index(marker.encode()):][:300].decode(errors='replace')
own = (os.getcwd(), os.environ['HOME'], '/tmp', '/dev/null')
files = {{fd: target for fd, target in seen.items() if target.startswith('/') and not target.startswith(own)}}
print('descriptors:', seen)
print('the grader log says:', leaked)
assert not leaked and not files and seen['0'] == '/dev/null', (leaked, files)"""

JUNK = """\
import os
from util.artifacts import files_dir
folder = files_dir('lab901')
folder.mkdir(parents=True, exist_ok=True)
junk = os.urandom(1 << 20)
for i in range(60):  # 60 MiB that no case declares, named like case files
    (folder / f'case-{i:016x}.onnx').write_bytes(junk)
def make_bytes(n):
    return b'x' * (8 << 20) if n == 64 else b'x' * n  # the large case's file: over --max-saved-file"""

DEEP_FOLDERS = """\
import os, time
here = os.getcwd()
for _ in range(20):  # 5,000 bytes of path: past PATH_MAX, where a walk by path names sees nothing
    os.mkdir('d' * 250)
    os.chdir('d' * 250)
for i in range(3):  # 180 MiB, over --disk 128M
    with open(f'hidden{i}', 'wb') as handle:
        for _ in range(60):
            handle.write(b'x' * (1 << 20))
os.chdir(here)
time.sleep(6)"""

DEEP_CHAIN = """\
import os, time
top = os.open('.', os.O_RDONLY)
fd = top
for _ in range(3000):  # deeper than Python's recursion: shutil.rmtree cannot delete it
    os.mkdir('d', dir_fd=fd)
    inner = os.open('d', os.O_RDONLY, dir_fd=fd)
    os.close(fd) if fd != top else None
    fd = inner
time.sleep(6)"""

LOCKED = """\
import os, time
os.mkdir('locked')
for i in range(3):  # 180 MiB, over --disk 128M, in a folder made unreadable
    with open(f'locked/hidden{i}', 'wb') as handle:
        for _ in range(60):
            handle.write(b'x' * (1 << 20))
os.chmod('locked', 0)
time.sleep(6)"""

CLEAN_FILES = "def make_bytes(n):\n    return b'x' * n"
EXPORT_901 = "from util.answers import write_answer, output_dir\nwrite_answer(output_dir('lab901'), '901.1', 901)"
NAMED_LIKE_CLASS_FILES = ("gradebook.csv", "gradebook_lab900.csv", "gradebook_lab901.csv", "statistics.csv",
                          "report.html", "class.json", "regrade_diff.csv", "export_csv.csv")
CLASS_FILES = set(NAMED_LIKE_CLASS_FILES)
"""Every class file this class gets (grade, then export --format csv): nothing else lies beside the folders."""


def _saved_lab(code: str) -> object:
    return notebook(("md", "## Task 901.1: Saved bytes (10 points)"), code + "\n" + EXPORT_901, lab="lab901")


def _class() -> dict[str, object]:
    """File name (without .ipynb) -> notebook."""
    good = notebook(("md", "## Task 900.1: First (5 points)"), GOOD_1, ("md", "## Task 900.2: Second (5 points)"),
                    GOOD_2)
    return {**{name: good for name in NAMED_LIKE_CLASS_FILES},
            "flood_log": standard(FLOOD), "read_log": standard(READ_LOG), "saved_junk": _saved_lab(JUNK),
            "deep_folders": standard(DEEP_FOLDERS), "deep_chain": standard(DEEP_CHAIN), "locked": standard(LOCKED),
            "z_clean": good, "z_clean_files": _saved_lab(CLEAN_FILES)}


FOLDERS = {name: name.replace(".", "_") for name in _class()}
"""Submission -> its results folder: a name like a class file's loses its suffix's dot."""
SCORES = {**{name: "10" for name in _class()}, "saved_junk": "6", "deep_folders": "5", "deep_chain": "5", "locked": "5"}


def _grade(who: str, root: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """Grade the class as ``who`` (``root`` or ``user``), its output appended to ``root/grader.log``;
    then export it (``--format csv``) the same way."""
    for name, nb in _class().items():
        write(nb, root / "class" / f"{name}.ipynb")
    (root / "references").mkdir()
    (root / "references" / "lab900.json").write_text(json.dumps(
        {"lab": "lab900", "answers": {"900.1": 41, "900.2": 42}, "cases": {}, "provenance": {}}))
    (root / "references" / "lab901.json").write_text(json.dumps(
        {"lab": "lab901", "answers": {"901.1": 901}, "provenance": {}, "cases": {"901.1": {
            "small": {"saved": case_file({"n": 4}, ".bin")}, "large": {"saved": case_file({"n": 64}, ".bin")}}}}))
    (root / "home").mkdir()
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(root / "home"), "USER": "grader",
           "LANG": "C.UTF-8", "COURSE_LAB_DIRS": os.pathsep.join([str(FOLDER), str(SAVED_LABS)]),
           "COURSE_REFERENCE_DIR": str(root / "references"),
           "COURSE_SCRATCH_FS": "off"}  # the watchdog's walk, as in a container without loop devices
    grade = [sys.executable, "-m", "grader", "grade", str(root / "class"), "--out", str(root / "out"),
             "--no-progress", "--timeout", "90", "--cell-timeout", "60", "--disk", "128M", "--max-saved-file", "4M",
             "--keep-saved", "1M"]
    export = [sys.executable, "-m", "grader", "export", "--format", "csv", "--out", str(root / "out")]
    log = root / "grader.log"
    if who == "user":
        if os.geteuid() == 0:
            for path in [root, *root.rglob("*")]:
                os.chown(path, USER, USER)
        needed = [Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), REPO, root]
        with log.open("ab") as handle:
            done = _as_user(grade, needed, env, stdout=handle, stderr=subprocess.STDOUT)
            if done.returncode == 0:
                done = _as_user(export, needed, env, stdout=handle, stderr=subprocess.STDOUT)
        return done, log
    with log.open("ab") as handle:
        done = subprocess.run(grade, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=REPO, timeout=600)
        if done.returncode == 0:
            done = subprocess.run(export, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=REPO, timeout=600)
    return done, log


@pytest.fixture(scope="module", params=["root", "user"])
def graded(request):
    if request.param == "root" and os.geteuid() != 0:
        pytest.skip("grading as root needs root (CI runs the tests as root)")
    if not confinement.available():
        pytest.skip("bubblewrap is not usable here; .ci/run installs it")
    root = Path(tempfile.mkdtemp(prefix=f"grader-files-{request.param}-"))
    try:
        done, log = _grade(request.param, root)
        yield done, log, root / "out"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _rows(out: Path) -> dict[str, dict[str, str]]:
    with (out / "gradebook.csv").open(encoding="utf-8") as handle:
        return {row["submission"]: row for row in csv.DictReader(handle)}


def _result(out: Path, name: str) -> dict:
    return json.loads((out / FOLDERS[name] / RECORD).read_text())["result"]


def _check(out: Path, name: str, task: str, check: str) -> tuple[str, float, str]:
    found = next(c for t in _result(out, name)["tasks"] if t["task_id"] == task for c in t["checks"]
                 if c["name"] == check)
    return found["status"], found["score"], found["message"]


def test_every_submission_gets_its_row_and_the_honest_ones_full_marks(graded):
    done, log, out = graded
    assert done.returncode == 0, log.read_text(errors="replace")[-3000:]
    assert {name: (row["total"], row["max"]) for name, row in _rows(out).items()} == {
        FOLDERS[name]: (score, "10") for name, score in SCORES.items()}


def test_no_submission_takes_a_class_files_name_and_every_class_file_is_written(graded):
    """``gradebook.csv.ipynb`` and its kind are graded into ``gradebook_csv/``...; the class files lie
    beside them, plain files, and nothing else does."""
    _, _, out = graded
    entries = {entry.name: entry for entry in os.scandir(out)}
    assert {name for name, e in entries.items() if e.is_file(follow_symlinks=False)} == CLASS_FILES
    folders = {name for name, e in entries.items() if e.is_dir(follow_symlinks=False)}
    assert folders == set(FOLDERS.values()) and not any(is_reserved(name) for name in folders)
    assert all((out / name / RECORD).is_file() for name in folders)
    with (out / "export_csv.csv").open(encoding="utf-8") as handle:
        assert len(list(csv.DictReader(handle))) == len(FOLDERS)


def test_a_kernel_flooding_its_descriptors_costs_the_grader_a_few_kib_and_scores_full(graded):
    """200 MiB written below print(): the grader's log stays small; the instructor gets the first and
    last bytes in kernel.log, with the count of what was dropped."""
    _, log, out = graded
    assert log.stat().st_size < 256 << 10, log.stat().st_size
    kept = (out / "flood_log" / "kernel.log").read_text(encoding="utf-8")
    assert len(kept.encode()) <= HEAD + TAIL + 200 and kept.startswith("x" * 1000)
    dropped = int(re.search(r"\[\.\.\. ([\d,]+) bytes dropped: the grader keeps the first 8,192 and the last 8,192",
                            kept).group(1).replace(",", ""))
    assert dropped > FLOOD_MIB << 19  # (ipykernel passes its captured output on until the kernel is stopped)
    assert _rows(out)["flood_log"]["total"] == "10"


def test_a_kernel_holds_no_descriptor_of_the_graders_and_never_reads_its_log(graded):
    """Every descriptor the kernel holds is its own (a pipe, a socket, /dev/null, a file of its own
    folder); reopened for reading, none gives it a line of the grader's log."""
    _, log, out = graded
    assert MARKER in log.read_text(errors="replace")  # the line was there to be read
    assert _check(out, "read_log", "900.2", "answer")[:2] == ("passed", 5)
    leaked = [p for p in out.rglob("*") if p.is_file() and MARKER.encode() in p.read_bytes()]
    assert leaked == []


def test_saved_files_no_case_declares_are_neither_judged_nor_kept_and_a_file_over_the_bound_fails_its_case(graded):
    _, _, out = graded
    assert _check(out, "saved_junk", "901.1", "small")[:2] == ("passed", 4)
    status, score, message = _check(out, "saved_junk", "901.1", "large")
    assert (status, score) == ("failed", 0)
    assert message == ("the file this case saved is 8 MiB, over the 4 MiB the grader reads per file: it was not "
                       "judged; return only what the task asks for, as the lab's helpers save it")
    assert any(note.startswith("60 files (60 MiB) among the files saved for the grader's checks belong to no hidden "
                               "case: neither judged nor kept") for note in _result(out, "saved_junk")["notes"])
    kept = sorted(p.name for p in (out / "saved_junk" / "files").iterdir())
    assert kept == sorted([case_file({"n": 4}, ".bin"), "manifest.json"])
    manifest = json.loads((out / "saved_junk" / "files" / "manifest.json").read_text())
    assert manifest["undeclared"]["files"] == 60 and manifest[case_file({"n": 64}, ".bin")]["read"] is False
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert total < 4 << 20, total  # the whole class's results (60 MiB saved, 8 MiB over the bound, 200 MiB flood)


def test_the_honest_saved_files_are_judged_and_kept(graded):
    _, _, out = graded
    files = out / "z_clean_files" / "files"
    assert (files / case_file({"n": 64}, ".bin")).read_bytes() == b"x" * 64
    manifest = json.loads((files / "manifest.json").read_text())
    assert [entry["kept"] for entry in manifest.values()] == [True, True] and "undeclared" not in manifest


@pytest.mark.parametrize("name, words", [
    ("deep_folders", "kept more than 128 MiB of files"),
    ("deep_chain", "nested folders more than 128 levels deep, so its files could not be measured"),
    ("locked", ("kept more than 128 MiB of files", "made a folder the grader may not read")),
])
def test_folders_nested_past_path_max_or_deeper_than_recursion_or_unreadable_hide_nothing(graded, name, words):
    """Without a filesystem per submission the watchdog walks the scratch folder: what lies past
    PATH_MAX is measured, a chain deeper than the walk goes or a folder it may not read stops the
    submission (as root the locked folder is simply measured), and the grader deletes every one of
    them (a grader fault, retried for ever, otherwise)."""
    _, _, out = graded
    assert _check(out, name, "900.1", "answer")[:2] == ("passed", 5)
    status, score, message = _check(out, name, "900.2", "answer")
    assert (status, score) == ("crash", 0) and any(w in message for w in ([words] if isinstance(words, str) else words))
    assert _result(out, name)["execution_status"] == "crash"
    assert not json.loads((out / name / RECORD).read_text()).get("retry")
