"""Grading a class on a Dask cluster (``grade --cluster``), on the tiny lab and a LocalCluster of 2
workers: the same files as a local run, every row when workers die mid-batch, refused workers.

The cluster tests start real worker processes (about 10 s each on 2 busy cores); the classes are
4 notebooks."""
from __future__ import annotations

import csv
import hashlib
import json
import logging
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest
from tinylab import GOOD_1, GOOD_2, REFERENCES, export, notebook, registered, write

from grader.core.limits import Limits
from grader.execute import confinement
from grader.grade import batch
from grader.judge.references import REFERENCE_ENV

LIMITS = Limits(cell_timeout=30, notebook_timeout=60)
SANDBOX = None if confinement.unavailable_reason() is None else False
"""Workers must have bubblewrap unless told otherwise: where it does not work, grade without it."""
HEADING_1, HEADING_2 = ("md", "## Task 900.1: First (5 points)"), ("md", "## Task 900.2: Second (5 points)")


ENVIRONMENT = ("import os\nprint({name: os.environ.get(name) for name in ('MALLOC_TRIM_THRESHOLD_', 'OMP_NUM_THREADS', "
               "'MKL_NUM_THREADS', 'OPENBLAS_NUM_THREADS')})")
"""A cell printing what Dask's nanny sets for its workers: a kernel on a worker must not see it."""


def _class(root: Path, *, extra: tuple[str, ...] = ()) -> Path:
    """amy (10/10), bob (5/10; prints part of its environment), cat (a .py, no notebook: graded in the grader's process) and dan
    (not JSON: the message says so), plus ``extra`` good notebooks."""
    write(notebook(HEADING_1, GOOD_1, HEADING_2, GOOD_2), root / "amy" / "lab900.ipynb")
    write(notebook(HEADING_1, export("900.1", "40"), HEADING_2, GOOD_2, ENVIRONMENT), root / "bob" / "lab900.ipynb")
    (root / "cat").mkdir(parents=True)
    (root / "cat" / "lab900.py").write_text("print(41)\n")
    (root / "dan").mkdir(parents=True)
    (root / "dan" / "lab900.ipynb").write_text("{not json")
    for name in extra:
        write(notebook(HEADING_1, GOOD_1, HEADING_2, GOOD_2), root / name / "lab900.ipynb")
    return root


def _rows(out: Path) -> dict[str, dict[str, str]]:
    with (out / "gradebook.csv").open() as handle:
        return {row["submission"]: row for row in csv.DictReader(handle)}


def _grade(paths, out, capsys, **options):
    code = batch.main(paths=paths, out=out, progress=False, limits=LIMITS, sandbox=SANDBOX, **options)
    return code, capsys.readouterr()


TIMING = re.compile(rb'"execution_time": [0-9.e+-]+')
SCRATCH = re.compile(rb"grade-lab900-(?:\d+-)?[a-z0-9_]+")
GRADED = re.compile(rb'"graded": "[^"]*"')
MADE = re.compile(rb"made \d{4}-\d\d-\d\d \d\d:\d\d UTC")


def _normalised(path: Path, out: Path) -> bytes:
    """A result file without what differs between any two runs: the seconds a notebook took, when
    it was graded and when the class report was made, the name of its scratch folder (printed by the notebook) and of the gradebook
    folder (the class report names it)."""
    text = TIMING.sub(b'"execution_time": T', path.read_bytes()).replace(str(out).encode(), b"OUT")
    return MADE.sub(b"made T", GRADED.sub(b'"graded": G', SCRATCH.sub(b"SCRATCH", text)))


def test_a_local_cluster_writes_exactly_what_a_local_run_writes(tmp_path, capsys):
    with registered(tmp_path / "references"):
        root = _class(tmp_path / "class")
        code_local, _ = _grade([root], tmp_path / "local", capsys)
        code_cluster, printed = _grade([root], tmp_path / "cluster", capsys, cluster="local:2")
    assert code_local == code_cluster == 0
    assert re.search(r"cluster local:2: 2 workers; dashboard http://\S+/status", printed.err)
    local, cluster = tmp_path / "local", tmp_path / "cluster"
    for name in ("gradebook.csv", "statistics.csv", "regrade_diff.csv"):
        assert (cluster / name).read_bytes() == (local / name).read_bytes(), name
    assert {n: r["total"] for n, r in _rows(cluster).items()} == {
        "amy__lab900": "10", "bob__lab900": "5", "dan__lab900": "0", "cat": "0"}
    files = sorted(p.relative_to(local) for p in local.rglob("*") if p.is_file())
    assert sorted(p.relative_to(cluster) for p in cluster.rglob("*") if p.is_file()) == files
    assert len(files) == 6 + 2 * 7 + 2 * 4  # class files; amy, bob: 7 files; cat, dan: results, feedback (2), record
    for name in files:
        assert _normalised(cluster / name, cluster) == _normalised(local / name, local), name
        assert (cluster / name).stat().st_mode == (local / name).stat().st_mode, name
    record = json.loads((cluster / "dan__lab900" / "grading.json").read_text())
    assert record["result"]["submission"] == str(root / "dan" / "lab900.ipynb")  # the instructor's path
    assert record["result"]["notes"][0].startswith("lab900.ipynb is not a valid Jupyter notebook: it is not valid JSON")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A LocalCluster of 2 workers (they see the tiny lab), with a client of the test's own."""
    from distributed import Client, LocalCluster

    with registered(tmp_path_factory.mktemp("references")) as lab:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                          silence_logs=logging.ERROR) as local, Client(local, set_as_default=False) as client:
            yield local.scheduler_address, client, lab


def _steady_workers(client, count: int = 2, timeout: float = 120.0) -> list[str]:
    """The addresses of ``count`` workers that answer, once the nanny has brought back those an earlier test killed:
    the scheduler may still list a worker whose process died, and a call to it fails (``CommClosedError``)."""
    deadline, last = time.monotonic() + timeout, None
    while True:
        try:
            client.wait_for_workers(count, timeout=max(1.0, deadline - time.monotonic()))
            workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
            answered = client.run(os.getpid, workers=workers)
            if len(workers) == count and sorted(answered) == workers:
                return workers
        except OSError as error:  # a worker gone between the listing and the call; its nanny restarts it
            last = error
        if time.monotonic() > deadline:
            raise TimeoutError(f"the cluster did not settle on {count} answering workers ({last})")
        time.sleep(0.5)


def _kill_on_sight(client, wanted: dict[str, int], stop: threading.Event, killed: list[str]) -> None:
    """SIGKILL the worker process grading a submission whose name is in ``wanted``, once per attempt,
    as many times as ``wanted`` says."""
    seen: set[str] = set()
    while not stop.is_set() and any(wanted.values()):
        for address, keys in client.processing().items():
            for key in keys:
                name = next((n for n in wanted if key.endswith("-" + n + "__lab900")), None)
                if name and wanted[name] and key not in seen:
                    pid = client.run(os.getpid, workers=[address])[address]
                    os.kill(pid, signal.SIGKILL)
                    seen.add(key)
                    wanted[name] -= 1
                    killed.append(key)
        time.sleep(0.05)


def test_workers_killed_mid_batch_still_leave_every_row(cluster, tmp_path, capsys):
    address, client, _ = cluster
    root = _class(tmp_path / "class", extra=("eve",))
    wanted, killed, stop = {"amy": 1, "eve": 2}, [], threading.Event()
    killer = threading.Thread(target=_kill_on_sight, args=(client, wanted, stop, killed))
    killer.start()
    try:
        code, printed = _grade([root], tmp_path / "out", capsys, cluster=address)
    finally:
        stop.set()
        killer.join()
    assert sorted(re.sub(r"^grade-\w+-\d+-", "", k) for k in killed) == ["1-amy__lab900", "1-eve__lab900", "2-eve__lab900"]
    rows = _rows(tmp_path / "out")
    assert {n: (r["total"], r["status"]) for n, r in rows.items()} == {
        "amy__lab900": ("10", "full marks"),  # its worker died once: graded again, elsewhere
        "bob__lab900": ("5", "partial"), "cat": ("0", "ungraded"), "dan__lab900": ("0", "ungraded"),
        "eve__lab900": ("0", "ungraded")}        # its worker died twice: a row saying so (results.json)
    eve = json.loads((tmp_path / "out" / "eve__lab900" / "results.json").read_text())
    assert re.search(r"the grader could not grade this notebook \(WorkerLost: the cluster worker grading it "
                     r"\(tcp://[\d.:]+\) died, twice\); it is not your fault", eve["output"])
    assert json.loads((tmp_path / "out" / "eve__lab900" / "grading.json").read_text())["retry"]  # graded again next run
    assert code == 1 and "grader fault on eve__lab900" in printed.err


def test_a_worker_with_stale_references_is_refused(cluster, tmp_path, capsys):
    address, client, _ = cluster
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / "lab900.json").write_text(json.dumps({**REFERENCES, "answers": {"900.1": 41, "900.2": 43}}))
    digests = [hashlib.sha256(p.read_bytes()).hexdigest()[:12]
               for p in (stale / "lab900.json", Path(os.environ[REFERENCE_ENV]) / "lab900.json")]
    first, second = _steady_workers(client)  # the workers killed by the test before are back, and answer
    before = client.run(lambda dask_worker: dask_worker.state.executed_count)
    client.run(lambda: os.environ.__setitem__(REFERENCE_ENV, str(stale)), workers=[first])
    # what Dask's nanny sets for its workers (an earlier grading on a worker of this module's cluster undid it)
    client.run(lambda: os.environ.__setitem__("MALLOC_TRIM_THRESHOLD_", "65536"))
    root = _class(tmp_path / "class")

    code, printed = _grade([root], tmp_path / "out", capsys, cluster=address)
    assert (f"grader: worker {first} refused: different references for lab900 (sha256 {digests[0]}, the grader's "
            f"{digests[1]}: stale or edited). To use it: install the course there") in printed.err
    assert printed.err.count("refused") == 1
    assert code == 0 and {n: r["total"] for n, r in _rows(tmp_path / "out").items()} == {
        "amy__lab900": "10", "bob__lab900": "5", "dan__lab900": "0", "cat": "0"}
    after = client.run(lambda dask_worker: dask_worker.state.executed_count)
    assert client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))[first] == "65536"  # the nanny's
    printed_env = (tmp_path / "out" / "bob__lab900" / "executed.ipynb").read_text()
    assert "'MALLOC_TRIM_THRESHOLD_': None" in printed_env and "'MKL_NUM_THREADS': None" in printed_env
    assert after[first] == before[first] and after[second] == before[second] + 3  # amy, bob, dan

    client.run(lambda: os.environ.__setitem__(REFERENCE_ENV, str(stale)), workers=[second])
    code, printed = _grade([root], tmp_path / "out2", capsys, cluster=address)
    assert printed.err.count("refused: different references for lab900") == 2
    rows = _rows(tmp_path / "out2")
    assert {n: r["status"] for n, r in rows.items() if n != "cat"} == dict.fromkeys(
        ["amy__lab900", "bob__lab900", "dan__lab900"], "ungraded")
    amy = json.loads((tmp_path / "out2" / "amy__lab900" / "results.json").read_text())
    assert "(NoWorker: every worker of the cluster was refused (the grader's log says why))" in amy["output"]
    assert code == 1


def test_the_instructors_guide_shows_the_cluster_commands_for_local_slurm_and_kubernetes():
    guide = (Path(__file__).resolve().parent.parent / "docs" / "instructors.md").read_text(encoding="utf-8")
    section = guide.split("## Grading on a cluster", 1)[1].split("\n## ", 1)[0]
    assert "python -m grader grade submissions/ --cluster local:2" in section
    for recipe in ("SLURMCluster(", "cluster.scale(jobs=", "KubeCluster(custom_cluster_spec=spec",
                   '"--cluster", cluster.scheduler_address'):
        assert recipe in section, recipe
    assert "benchmarks/project_class.py" in section


def test_the_projection_takes_submissions_as_free_workers_do():
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "project_class.py"
    spec = importlib.util.spec_from_file_location("project_class", path)
    project = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(project)
    assert project.makespan([10, 10, 10, 10], 2, 0) == 20
    assert project.makespan([30, 10, 10, 10], 2, 5) == 35  # one long notebook, three short ones beside it
    assert project.makespan([10] * 3, 8, 1) == 11           # more workers than notebooks
    costs = project.course_map_costs()
    from util.labs import PACKAGES
    course = [name for name, package in PACKAGES.items() if package.startswith("util.labs.")]  # not a test's lab
    assert list(costs) == course and len(course) >= 12 and costs["lab1"] == 10.0 and costs["lab3"] == 30.0  # every lab of the map
