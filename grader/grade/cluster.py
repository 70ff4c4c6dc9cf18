"""Grading a class on a Dask cluster: ``python -m grader grade DIR --cluster ADDRESS``.

``ADDRESS`` is a running scheduler (``tcp://host:8786``), a scheduler file (``scheduler.json``, as
``dask scheduler --scheduler-file`` writes it), or ``local:N``: a ``LocalCluster`` of N worker
processes on this machine, one thread each. The README shows Slurm (dask-jobqueue) and Kubernetes
(dask-kubernetes) recipes.

Each worker grades with the function a local run uses (:func:`grader.grade.jobs.grade_one`), in
the same sandbox and under the same limits, one notebook per worker thread:

1. Every worker is checked before it is given anything (:mod:`grader.grade.worker_check`): the
   same Python, pinned versions, course code and references, and a usable bubblewrap. A worker
   that differs is refused, with what differs and what to do, and never gets a submission;
   workers that join later (a Slurm job starting, a pod scaled up) are checked as they appear.
2. The first submission of a lab on a worker runs the lab's ``prepare`` hook there
   (:func:`grader.grade.jobs.prepare`): export caches are built, or verified, once per worker.
3. Submissions travel as parcels and come back as their result folder's files
   (:mod:`grader.grade.parcel`); this process writes them, then the gradebook, as a local run does.
4. A submission whose worker dies (or that fails on the worker for any other reason) is retried
   once, elsewhere; a second loss gives it a ``crash`` row saying so (retried on the next run).
   The batch always finishes: with no worker left that may grade, the remaining submissions get
   such rows too (at once when every worker was refused, after :data:`NO_WORKER_WAIT` seconds
   when there are no workers at all).

At most one submission per worker thread is in flight, so a worker that dies takes only the
submission it was grading with it.
"""
from __future__ import annotations

import itertools
import json
import logging
import os
import queue
import sys
import threading
import time
import uuid
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Callable

from grader.core import records
from grader.core.results import SubmissionResult
from grader.grade import parcel, worker_check
from grader.grade.collect import Submission
from grader.grade.jobs import grader_fault, prepare
from util.answers import write_json
from util.labs import get_lab

LOCAL = "local:"
"""``--cluster local:N`` starts a LocalCluster of N workers."""
NO_WORKER_WAIT = 600.0
"""Seconds to wait for a worker when the cluster has none (a Slurm queue), before giving up."""
POLL = 2.0
"""Seconds between looks at the cluster's workers while grading."""
PRE_SPAWN = "distributed.nanny.pre-spawn-environ"
"""Variables Dask's nanny sets for its workers (``MALLOC_TRIM_THRESHOLD_``, BLAS thread counts)."""


LOCAL_CONFIG = {
    PRE_SPAWN: {},                                    # local workers keep this process's environment as it is
    "distributed.worker.profile.enabled": False,      # a sampling profiler waking every 10 ms in each worker
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.scheduler.work-stealing": False,     # the grader places each submission itself
}
"""Dask settings for ``local:N``: on a machine whose cores grade notebooks, Dask's own upkeep went
from 10% to 6.5% of a core (measured idle, 2 workers)."""


class WorkerLost(RuntimeError):
    """The worker grading a submission died (twice, by the time a row says so)."""


class NoWorker(RuntimeError):
    """No worker of the cluster may grade: all were refused, or none came."""


def connect(address: str):
    """A ``distributed.Client`` for ``address`` and the LocalCluster started for it (or ``None``)."""
    import dask
    from distributed import Client, LocalCluster

    if address.startswith(LOCAL):
        count = address[len(LOCAL):]
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"--cluster {address}: expected local:N with N a number of workers, e.g. local:2")
        with dask.config.set(LOCAL_CONFIG):
            cluster = LocalCluster(n_workers=int(count), threads_per_worker=1, processes=True,
                                   dashboard_address=":0", silence_logs=logging.CRITICAL)  # the grader says what failed
        return Client(cluster), cluster
    if address.endswith(".json") and Path(address).is_file():
        return Client(scheduler_file=address, timeout="60s"), None
    return Client(address, timeout="60s"), None


def _dashboard(client) -> str:
    try:
        return client.dashboard_link or "none"
    except (KeyError, AttributeError):
        return "none (install bokeh where the scheduler runs)"


def _allowed_failures(value: int, dask_scheduler=None) -> int:
    """Runs on the scheduler: make a worker's death fail its task at once (we retry it ourselves)."""
    old = dask_scheduler.allowed_failures
    dask_scheduler.allowed_failures = value
    return old


def _undo_nanny_environ() -> None:
    """Runs on a worker: drop what Dask's nanny added to the environment, which graded kernels
    would inherit (glibc trimming memory at every 64 KiB slows torch code down; one BLAS thread):
    a kernel on a worker starts from the environment the worker was given, as a local one does."""
    import dask

    for name, value in (dask.config.get(PRE_SPAWN, default=None) or {}).items():
        if os.environ.get(name) == str(value):
            del os.environ[name]


_prepared: set[str] = set()
_prepare_lock = threading.Lock()


def grade_remote(grade: Callable, sub: Submission, packed: bytes,
                 key: dict) -> tuple[SubmissionResult, dict[str, tuple[int, bytes]]]:
    """Runs on a worker: grade the parcel ``packed`` as ``sub`` with ``grade``; its result (with the
    instructor's paths) and its result folder's files."""
    with _prepare_lock:  # once per lab and worker process: the export caches
        _undo_nanny_environ()
        if sub.lab not in _prepared:
            prepare({sub.lab})
            _prepared.add(sub.lab)
    root = parcel.Root.make(sub.path)
    try:
        local = root.unpack(packed)
        out = root.base / "results"
        result = grade(replace(sub, path=local), out, key=key)
        files = root.collect(out / sub.name)
        result = SubmissionResult.from_dict(json.loads(root.unroot(json.dumps(result.to_dict()).encode())))
    finally:
        root.remove()
    return result, files


def _lost(sub: Submission, out: Path, key: dict, exc: BaseException) -> SubmissionResult:
    """The row of a submission no worker could grade (as a local worker's death gives): recorded to be
    graded again on the next run."""
    result = grader_fault(sub, exc)
    write_json(out / sub.name / "results.json", result.to_gradescope_dict())
    records.save(out / sub.name, key, result, source=sub.path, retry=True)
    return result


def _say(text: str) -> None:
    print(f"grader: {text}", file=sys.stderr)


class _Dispatch:
    """The grading loop: the workers that may grade, the queue, what is in flight."""

    def __init__(self, client, grade: Callable, out: Path, done: Callable, labs: list[str], sandbox: bool):
        self.client, self.grade, self.out, self.done = client, grade, out, done
        self.labs, self.sandbox = labs, sandbox
        self.expected = worker_check.facts(labs, worker_check.pinned_packages(), sandbox=False)  # workers probe theirs
        self.judged: dict[str, list[str]] = {}  # worker -> its problems (empty: it may grade)
        self.threads: dict[str, int] = {}       # workers that may grade -> their threads
        self.token = uuid.uuid4().hex[:8]
        self.queue: deque = deque()             # (sub, key, attempt, avoid)
        self.flight: dict = {}                  # future -> (sub, key, attempt, workers it may run on)
        self.sequence = itertools.count()       # task keys are never reused
        self.unreachable = ""                   # why the scheduler could not be asked, if it could not
        self.finished: queue.Queue = queue.Queue()  # futures as they finish, in that order
        self.last_look = 0.0

    def look(self) -> None:
        """Check the workers that joined since the last look; forget those that left; send again
        what waits for workers that are all gone."""
        self.last_look = time.monotonic()
        try:
            present = {a: w["nthreads"] for a, w in self.client.scheduler_info(n_workers=-1)["workers"].items()}
        except Exception as exc:  # the scheduler is gone (or unreachable for now)
            self.unreachable, self.threads = f" (the scheduler did not answer: {exc})", {}
            return
        self.unreachable = ""
        new = [a for a in present if a not in self.judged]
        if new:
            found = self.client.run(worker_check.check_here, self.expected, self.labs, self.sandbox,
                                    workers=new, on_error="return")
            for address, verdict in found.items():
                if isinstance(verdict, BaseException):
                    continue  # it left, or is still starting: looked at again next time
                self.judged[address] = verdict
                if verdict:
                    _say(f"worker {address} refused: " + "; ".join(verdict) + ". To use it: "
                         + worker_check.remedy(verdict))
        self.threads = {a: n for a, n in present.items() if self.judged.get(a) == []}
        for address in [a for a in self.judged if a not in present]:
            del self.judged[address]
        for future, (sub, key, attempt, workers) in list(self.flight.items()):
            if not set(workers) & set(present):  # it cannot run anywhere: send it again, same attempt
                del self.flight[future]
                future.cancel()
                self.queue.appendleft((sub, key, attempt, None))

    def submit(self) -> None:
        """Send queued submissions while a worker thread is free."""
        while self.queue and len(self.flight) < sum(self.threads.values()):
            sub, key, attempt, avoid = self.queue.popleft()
            elsewhere = [a for a in self.threads if a != avoid] or list(self.threads)
            try:  # packed as it leaves: only what is in flight is held in memory
                packed = parcel.pack(sub.path, get_lab(sub.lab))
                future = self.client.submit(
                    grade_remote, self.grade, sub, packed, key, workers=elsewhere, allow_other_workers=False,
                    key=f"grade-{self.token}-{next(self.sequence)}-{attempt}-{sub.name}", pure=False)
            except Exception as exc:  # unreadable or too large (parcel.TooLarge), or the scheduler is gone
                self.done(sub, _lost(sub, self.out, key, exc))
                continue
            self.flight[future] = (sub, key, attempt, elsewhere)
            future.add_done_callback(self.finished.put)

    def collect(self, future) -> None:
        if future not in self.flight:  # cancelled here: sent again, or given up
            return
        sub, key, attempt, _ = self.flight.pop(future)
        try:
            result, files = future.result()
        except Exception as exc:  # its worker died (KilledWorker), or grading failed there
            dead = getattr(getattr(exc, "last_worker", None), "address", None)
            if dead is not None:
                exc = WorkerLost(f"the cluster worker grading it ({dead}) died"
                                 + (", twice" if attempt > 1 else ""))
            if attempt < 2 and not isinstance(exc, parcel.TooLarge):
                self.queue.appendleft((sub, key, attempt + 1, dead))
                self.look()
                return
            self.done(sub, _lost(sub, self.out, key, exc))
            return
        parcel.write(self.out / sub.name, files)
        self.done(sub, result)

    def give_up(self, reason: str) -> None:
        """Every submission not yet graded gets a row saying why."""
        for future in list(self.flight):
            future.cancel()
        pending = [entry[:2] for entry in self.flight.values()] + [entry[:2] for entry in self.queue]
        self.flight.clear()
        self.queue.clear()
        for sub, key in pending:
            self.done(sub, _lost(sub, self.out, key, NoWorker(reason)))

    def run(self, todo: list[tuple[Submission, dict]]) -> None:
        for sub, key in todo:
            if not parcel.shippable(sub.path):  # no kernel runs for these: graded here
                self.done(sub, self.grade(sub, self.out, key=key))
            else:
                self.queue.append((sub, key, 1, None))
        waiting_since = time.monotonic()
        self.look()
        while self.queue or self.flight:
            if not self.threads and not self.flight:
                if self.judged and all(self.judged.values()):
                    self.give_up("every worker of the cluster was refused (the grader's log says why)")
                    break
                if time.monotonic() - waiting_since > NO_WORKER_WAIT:
                    self.give_up(f"no cluster worker came in {NO_WORKER_WAIT:.0f} s{self.unreachable}")
                    break
            else:
                waiting_since = time.monotonic()
            self.submit()
            try:  # results stream back as they finish (the futures' done callbacks queue them)
                self.collect(self.finished.get(timeout=POLL))
            except queue.Empty:
                pass
            if time.monotonic() - self.last_look >= POLL:
                self.look()


def run(address: str, todo: list[tuple[Submission, dict]], out: Path, grade: Callable,
        done: Callable[[Submission, SubmissionResult], None], *, sandbox: bool) -> None:
    """Grade ``todo`` on the cluster at ``address`` with ``grade(sub, out, key=key)``, calling
    ``done`` in this process as each finishes (see the module's docstring)."""
    client, cluster = connect(address)
    old_failures = None
    try:
        workers = client.scheduler_info(n_workers=-1)["workers"]
        _say(f"cluster {address}: {len(workers)} workers; dashboard {_dashboard(client)}")
        try:
            old_failures = client.run_on_scheduler(_allowed_failures, 0)
        except Exception as exc:  # a scheduler without the course (a stock Dask image)
            _say(f"warning: could not ask the scheduler to report a worker's death at once ({exc}); it may "
                 "retry a submission on its own before the grader does")
        _Dispatch(client, grade, out, done, sorted({sub.lab for sub, _ in todo}), sandbox).run(todo)
    finally:
        try:
            if old_failures is not None:
                client.run_on_scheduler(_allowed_failures, old_failures)
        except Exception:  # the scheduler is gone: nothing to restore
            pass
        client.close()
        if cluster is not None:
            cluster.close()
