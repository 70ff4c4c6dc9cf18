"""Attacks on the sandbox and the limits, graded as a class by whoever runs the tests
(root in CI, as the grader image and most grading servers run it): each attacker gets the right
status and score, and the student graded right after it in the same batch gets full marks.

The class is graded once (tiny lab ``lab900``, about a second per kernel). The resource attacks
(memory, disk) export task 900.1 first, so 5/10 is the right score for them; the attacks on the walls
export 900.2 only if every wall held, so 10/10 says they all did. Many answer files and submitted
symlinks are the exports' and the submissions' readers' business (tests/test_hostile.py); the absolute
deadline needs its own limits and is tested in tests/test_execute.py.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace

import pytest
from tinylab import GOOD_1, GOOD_2, notebook, registered, standard, write

from grader import REPO
from grader.core import records
from grader.core.limits import Limits
from grader.execute import caches, confinement
from grader.grade import batch
from util import export_cache

LIMITS = Limits(cell_timeout=8, notebook_timeout=60, memory=768 << 20, procs=32, fsize=64 << 20, disk=128 << 20,
                notebook_size=2 << 20)
SECRET = "hunter2-grader-token"
"""Set in the grader's environment while the class is graded: no student file may ever show it."""
needs_sandbox = pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")

REMOUNT = f"""\
import ctypes, os, subprocess
util = {str(REPO / 'util')!r}
held = {{}}
held['mount command'] = subprocess.run(['mount', '-o', 'remount,rw,bind', util], capture_output=True).returncode != 0
libc = ctypes.CDLL(None, use_errno=True)
held['mount syscall'] = libc.mount(b'none', util.encode(), None, 32 | 4096, None) != 0  # MS_REMOUNT | MS_BIND
nested = subprocess.run(['unshare', '-Urm', 'sh', '-c', f'mount -o remount,rw,bind {{util}} && touch {{util}}/_x.py'],
                        capture_output=True)
held['nested user namespace'] = nested.returncode != 0
try:
    open(os.path.join(util, '_planted.py'), 'w').write('print("planted")')
    held['write'] = False
except OSError:
    held['write'] = True
status = dict(line.split(':', 1) for line in open('/proc/self/status') if ':' in line)
held['no capability'] = int(status['CapEff'], 16) == 0 and int(status['CapBnd'], 16) == 0
held['no_new_privs'] = status['NoNewPrivs'].strip() == '1'
held['not root'] = os.getuid() != 0 and os.geteuid() != 0 and 0 not in os.getgroups()
assert all(held.values()), held"""

CACHE_WRITE = """\
import os, pathlib, subprocess
cache = pathlib.Path(os.environ['COURSE_ONNX_CACHE'])
target = cache / 'model.onnx'
tries = {}
for name, attempt in [
        ('write', lambda: target.write_bytes(b'tampered')),
        ('replace', lambda: (pathlib.Path('x.onnx').write_bytes(b'tampered'), os.replace('x.onnx', target))),
        ('unlink', lambda: target.unlink()),
        ('chmod', lambda: os.chmod(target, 0o666)),
        ('new file', lambda: (cache / 'other.onnx').write_bytes(b'planted'))]:
    try:
        attempt()
        tries[name] = 'done'
    except OSError as exc:
        tries[name] = exc.strerror
tries['remount'] = subprocess.run(['mount', '-o', 'remount,rw,bind', str(cache)], capture_output=True).returncode
assert target.read_bytes() == b'the real model' and all(v != 'done' for v in tries.values()) and tries['remount'], tries"""

DEV_SHM = """\
import time
try:
    open('/dev/planted', 'wb').write(b'x')
    raise AssertionError('/dev is writable')
except OSError:
    pass
handles = []
for i in range(16):  # 256 MiB in /dev/shm, under 768 MiB of memory
    handles.append(open(f'/dev/shm/fill{i}', 'wb'))
    handles[-1].write(b'x' * (16 << 20))
    handles[-1].flush()
time.sleep(30)"""

MEMFD = """\
import os, time
held = []
for i in range(18):  # 18 x 60 MiB (each under --fsize) of memory no process maps and no folder shows
    held.append(os.memfd_create(f'hoard{i}'))
    for _ in range(6):
        os.write(held[-1], b'x' * (10 << 20))
time.sleep(30)"""

SYSV = """\
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
refused = {}
for name in ('shmget', 'msgget'):  # SysV memory outlives every process that attached to it: refused
    result = getattr(libc, name)(0, 1 << 30, 0o1000 | 0o600) if name == 'shmget' else libc.msgget(0, 0o1000 | 0o600)
    refused[name] = (result, ctypes.get_errno())
assert refused == {'shmget': (-1, 1), 'msgget': (-1, 1)}, refused"""

UNLINKED = """\
import os, time
held = []
for i in range(5):  # 5 x 60 MiB (each file under --fsize), deleted at once but held open
    handle = open(f'hidden{i}', 'wb')
    os.unlink(f'hidden{i}')
    for _ in range(6):
        handle.write(b'x' * (10 << 20))
    handle.flush()
    held.append(handle)
time.sleep(30)"""

SEND = """\
k = get_ipython().kernel
parent = k.get_parent()
def send(kind, content, **kw):
    k.session.send(k.iopub_socket, kind, content, parent=parent, **kw)
"""

DISPLAY_UPDATES = """\
from IPython.display import display, update_display
for _ in range(200):
    display({'text/plain': 'small'}, raw=True, display_id='same')
update_display({'text/plain': 'y' * (900 << 10)}, raw=True, display_id='same')  # 200 x 900 KiB if applied
display({'text/plain': 'z' * (900 << 10)}, raw=True, display_id='same')  # a display with that id updates them too"""

COMMS = SEND + """\
for i in range(120):  # widget state the grader has no use for: 120 x 900 KiB
    send('comm_open', {'comm_id': f'c{i}', 'target_name': 'jupyter.widget',
                       'data': {'state': {'_model_name': 'x' * (900 << 10)}, 'buffer_paths': []}})"""

MALFORMED = SEND + """\
import json
send('comm_msg', {'comm_id': 'c0'})                                   # no data
send('comm_open', {'comm_id': 'c1', 'target_name': 'jupyter.widget', 'data': {'state': {}}})  # no _model_module
send('display_data', {'metadata': {}})                                # no data
send('display_data', {'data': 'text', 'metadata': []})
send('display_data', {'data': {'text/plain': 5}, 'metadata': {}})
send('stream', {'text': 'no name'})
send('stream', {'name': 'stdout', 'text': 42})
send('update_display_data', {'data': {}, 'metadata': {}, 'transient': [1]})
send('execute_result', {'data': {'text/plain': 'x'}, 'metadata': {}, 'execution_count': 'many'})
send('error', {'ename': None, 'evalue': ['x'], 'traceback': 'not a list'})
send('clear_output', {'wait': 'perhaps'})
send('status', {'execution_state': ['idle']})
frames = [json.dumps(x).encode() for x in ({'msg_type': 'stream', 'msg_id': 'm'}, ['not', 'a', 'header'], {},
                                           {'name': 'stdout', 'text': 'x'})]
def sign(parts):
    signature = k.session.sign(parts)
    return signature if isinstance(signature, bytes) else signature.encode()
k.iopub_socket.send_multipart([b'stream', b'<IDS|MSG>', sign(frames)] + frames)  # a parent header that is a list
k.iopub_socket.send_multipart([b'stream', b'<IDS|MSG>', b'bad signature'] + frames)
k.iopub_socket.send_multipart([b'<IDS|MSG>', sign([b'{'] * 4)] + [b'{'] * 4)       # signed, not JSON
listed = frames[:1] + [k.session.pack(parent), b'{}', b'[1, 2, 3]']                # content not an object
k.iopub_socket.send_multipart([b'comm', b'<IDS|MSG>', sign(listed)] + listed)
buffer = b'x' * (1 << 20)
send('display_data', {'data': {'text/plain': 'amplified'}, 'metadata': {}}, buffers=[buffer] * 300)"""

ENVIRONMENT = """\
import os
raise RuntimeError('my environment: ' + repr(dict(os.environ)))"""
# what the kernel may see: the allowlist, what the grader sets, and what ipykernel sets for itself
ENV_CHECK = f"""\
import os
secret = {SECRET[::-1]!r}[::-1]  # reversed here: this source lands in executed.ipynb
assert not any(secret in value for value in os.environ.values()) and 'AWS_SECRET_ACCESS_KEY' not in os.environ
assert sorted(os.environ) == sorted(set(os.environ) & set({sorted(
    ['PATH', 'LANG', 'LC_ALL', 'LC_CTYPE', 'TZ', 'LD_LIBRARY_PATH', 'CUDA_VISIBLE_DEVICES', 'NVIDIA_VISIBLE_DEVICES',
     'NVIDIA_DRIVER_CAPABILITIES', 'COURSE_LAB_DIRS', 'COURSE_ONNX_CACHE', 'COURSE_TORCHSCRIPT_CACHE',
     'COURSE_OUTPUT_DIR', 'PYTHONHASHSEED', 'OMP_NUM_THREADS', 'USER', 'LOGNAME', 'NETRON_PORT', 'PYTHONPATH',
     'HOME', 'TMPDIR', 'PWD', 'JPY_PARENT_PID', 'JPY_SESSION_NAME',
     'PYDEVD_USE_FRAME_EVAL', 'MPLBACKEND', 'CLICOLOR', 'CLICOLOR_FORCE', 'FORCE_COLOR', 'PAGER', 'GIT_PAGER', 'TERM'])!r}))"""


def _class() -> dict[str, object]:
    """Folder name -> notebook (or raw bytes); sorted by name, each attack is followed by a student."""
    good = notebook(("md", "## Task 900.1: First (5 points)"), GOOD_1, ("md", "## Task 900.2: Second (5 points)"), GOOD_2)
    huge = notebook(("md", "## Task 900.1: First (5 points)"), "# " + "x" * (3 << 20) + "\n" + GOOD_1)
    return {
        "a1_remount_util": standard(REMOUNT), "a1_z_next": good,
        "a2_cache_write": standard(CACHE_WRITE), "a2_z_next": good,
        "a3_dev_shm": standard(DEV_SHM), "a3_memfd": standard(MEMFD), "a3_sysv": standard(SYSV), "a3_z_next": good,
        "a4_unlinked": standard(UNLINKED), "a4_z_next": good,
        "a6_huge_notebook": huge, "a6_z_next": good,
        "a7_display_updates": standard(DISPLAY_UPDATES), "a8_comms": standard(COMMS),
        "a8_malformed": standard(MALFORMED), "a8_z_next": good,
        "a10_environment": notebook(("md", "## Task 900.1: First (5 points)"), GOOD_1,
                                    ("md", "## Task 900.2: Second (5 points)"), ENVIRONMENT, ENV_CHECK + "\n" + GOOD_2),
        "z_last": good,
    }


def _tree_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(folder)).encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade the class once, with a secret in the grader's environment and a cache of its own."""
    root = tmp_path_factory.mktemp("walls")
    subs = root / "class"
    for name, content in _class().items():
        write(content, subs / name / "lab900.ipynb")
    util_before = _tree_hash(REPO / "util")
    with pytest.MonkeyPatch.context() as patch, registered(root / "references"):
        patch.setenv("COURSE_TEST_SECRET", SECRET)
        patch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        patch.setenv(export_cache.KINDS["onnx"], str(root / "cache"))
        caches.store("onnx", "model.onnx", lambda path: path.write_bytes(b"the real model"))
        code = batch.main(paths=[subs], out=root / "out", lab="lab900", progress=False, limits=LIMITS)
        cache_problems = caches.verify_kind("onnx")
    return SimpleNamespace(root=root, out=root / "out", code=code, util_before=util_before,
                           util_after=_tree_hash(REPO / "util"), cache_problems=cache_problems)


def result(graded, name: str):
    stored = records.load(graded.out / f"{name}__lab900" if (graded.out / f"{name}__lab900").exists() else graded.out / name)
    assert stored is not None, f"{name} has no stored result"
    return stored.result


def answer(graded, name: str, task: str) -> tuple[str, float, str]:
    check = next(c for t in result(graded, name).tasks if t.task_id == task for c in t.checks)
    return check.status, check.score, check.message


def test_every_student_after_an_attack_gets_full_marks(graded):
    assert graded.code == 0
    for name in _class():
        if name.endswith("_next") or name == "z_last":
            assert result(graded, name).score == 10, name


@needs_sandbox
@pytest.mark.parametrize("name", ["a1_remount_util", "a2_cache_write"])
def test_student_code_has_no_privilege_and_cannot_remount_or_write_the_shared_code(graded, name):
    """Privileges: no capability, not root, no new privileges; util/ and the caches stay as they were."""
    assert answer(graded, name, "900.2") == ("passed", 5, ""), answer(graded, name, "900.2")
    assert graded.util_after == graded.util_before
    assert graded.cache_problems == []  # the cache file still matches what was recorded when it was written


@pytest.mark.parametrize("name, status, words", [
    ("a3_dev_shm", "crash", "kept more than 128 MiB of files (its folder, /tmp and /dev/shm"),
    ("a3_memfd", "memory", "used more than 768 MiB of memory"),
    ("a4_unlinked", "crash", "kept more than 128 MiB of files"),
])
def test_memory_and_disk_outside_the_usual_places_still_count(graded, name, status, words):
    """Hidden bytes: /dev/shm, memfd and deleted-but-open files count against --memory and --disk."""
    if name == "a3_dev_shm" and not confinement.available():
        pytest.skip("without the sandbox /dev/shm is the machine's")
    assert answer(graded, name, "900.1") == ("passed", 5, "")
    found = answer(graded, name, "900.2")
    assert found[:2] == (status, 0) and words in found[2], found
    assert result(graded, name).execution_status == status


def test_sysv_shared_memory_is_refused(graded):
    """A SysV segment keeps its memory after every process detached: the seccomp filter refuses it."""
    assert answer(graded, "a3_sysv", "900.2") == ("passed", 5, ""), answer(graded, "a3_sysv", "900.2")


def test_a_notebook_over_the_size_limit_is_refused_before_anything_runs(graded):
    """A notebook over --max-notebook: a clear status, no kernel, no copy of it written."""
    refused = result(graded, "a6_huge_notebook")
    assert refused.execution_status == "too large" and refused.score == 0
    assert all("is 3 MiB, over the 2 MiB a notebook may be" in c.message for t in refused.tasks for c in t.checks)
    assert not (graded.out / "a6_huge_notebook__lab900" / "executed.ipynb").exists()


@pytest.mark.parametrize("name", ["a7_display_updates", "a8_comms", "a8_malformed"])
def test_display_updates_comms_and_malformed_messages_cost_the_grader_nothing(graded, name):
    """Floods of messages (and a widget message without the expected fields): full marks, a small
    executed notebook, and no grader fault."""
    graded_result = result(graded, name)
    assert graded_result.score == 10 and graded_result.execution_status == "completed", graded_result.notes
    assert (graded.out / f"{name}__lab900" / "executed.ipynb").stat().st_size < 3 << 20


def test_the_graders_environment_never_reaches_student_code(graded):
    """Secrets: the kernel's environment is an allowlist; the secret is in no file the grader wrote."""
    assert answer(graded, "a10_environment", "900.2") == ("passed", 5, "")
    assert any("my environment:" in note for note in result(graded, "a10_environment").notes)
    written = [p for p in graded.out.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert written == []
