"""The test run's xdist groups hold (``tests/conftest.py``): every test of one lab runs on one worker, and every
other test on its module's, so a lab's solution is graded once per run and a module-scoped fixture (a hostile class
graded once) is set up once. Nothing fails when they do not: pytest 9.2 with pytest-xdist 3.8 silently dropped the
groups (xdist wrote the group into a node id field pytest 9.2 no longer reads; reported upstream), and every worker
graded the same notebooks and classes again. ``requirements.txt`` pins a pytest whose ids xdist can still extend; this
test runs the course's grouping hook in a small session of its own and fails the day the groups stop holding."""
from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CONFTEST = f'''
import importlib.util, sys
sys.path.insert(0, {str(REPO)!r})
spec = importlib.util.spec_from_file_location("course_conftest", {str(REPO / "tests" / "conftest.py")!r})
course = importlib.util.module_from_spec(spec)
spec.loader.exec_module(course)
pytest_collection_modifyitems = course.pytest_collection_modifyitems
'''

RECORD = '''
import json, os, pytest
def record(request):
    with open(os.environ["GROUPS_LOG"], "a") as log:
        log.write(json.dumps([request.node.nodeid.split("@")[0], request.node.nodeid.rpartition("@")[2],
                              os.environ["PYTEST_XDIST_WORKER"]]) + "\\n")
'''


def test_each_labs_tests_and_each_other_module_run_on_one_worker(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not the course's options (its -m, its -n)
    (tmp_path / "test_by_lab.py").write_text(RECORD + '''
@pytest.mark.parametrize("lab_name", ["lab1", "lab2"])
@pytest.mark.parametrize("i", range(6))
def test_a_lab(request, lab_name, i):
    record(request)
''')
    (tmp_path / "test_lab3_module.py").write_text(RECORD + '''
@pytest.mark.parametrize("i", range(6))
def test_in_a_lab_module(request, i):
    record(request)
''')
    (tmp_path / "test_plain.py").write_text(RECORD + '''
@pytest.mark.parametrize("i", range(6))
def test_plain(request, i):
    record(request)

@pytest.mark.parametrize("folder", ["lab900", "lab7x"])  # a test's own lab, not one of the course's
def test_hostile_folder(request, folder):
    record(request)

@pytest.mark.xdist_group("own")
@pytest.mark.parametrize("i", range(6))
def test_named(request, i):
    record(request)
''')
    log = tmp_path / "groups.jsonl"
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "3", "--dist", "loadgroup", "-p", "no:cacheprovider",
                           "-q", "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**_env(), "GROUPS_LOG": str(log)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(rows) == 32
    workers: dict[str, set[str]] = defaultdict(set)
    for _, group, worker in rows:
        workers[group].add(worker)
    assert sorted(workers) == ["lab1", "lab2", "lab3", "own", "test_plain"], rows
    assert all(len(found) == 1 for found in workers.values()), dict(workers)
    assert {g for n, g, _ in rows if "test_named" in n} == {"own"}  # a group a test names itself is kept
    assert {g for n, g, _ in rows if "test_hostile_folder" in n} == {"test_plain"}  # lab900 is no lab of the course


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COURSE_TESTS"))}
