"""The cluster path against the local pool, on one machine, measured in one run.

1. Throughput: the same 16 submissions of a lab (its example submissions, topped up with copies
   of the solution) graded end to end, as an instructor types it, with ``grade -j 2`` (the local
   pool) and with ``grade --cluster local:2`` (a LocalCluster of 2 workers: cluster start, worker
   checks, parcels, results written back all counted); prints both and their throughput ratio
   (target: the cluster within 10% of the local pool, ratio >= 0.90).
2. Scheduler overhead per submission: the same class on a LocalCluster this script starts
   (``grade --cluster tcp://...``), whose workers stamp when each grading task starts and ends:
   the gap between one submission ending on a worker and the next one starting there is what the
   cluster path costs per submission (the result's trip back, this process writing it, the next
   submission's trip out); also the time inside a task that is not the notebook (unpack, judge,
   collect).

    python benchmarks/bench_cluster.py [--lab lab1] [--repeats 1]

Timings depend on the machine's load (printed before and after): compare ratios from one run.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from timing import make_class  # noqa: E402

SUBMISSIONS, TARGET = 16, 0.90


def grade(folder: Path, *options: str) -> tuple[float, Path]:
    """Wall seconds of ``python -m grader grade folder *options`` and its output folder."""
    out = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    command = [sys.executable, "-m", "grader", "grade", str(folder), "--out", str(out), "--no-progress",
               "--force", *options]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"grade {' '.join(options)} failed:\n{done.stderr[-3000:]}")
    return seconds, out


def kernel_seconds(out: Path) -> float:
    """The notebooks' own execution time, summed over the class (from each results.json)."""
    return sum(json.loads(p.read_text())["execution_time"] for p in out.glob("*/results.json"))


def overhead(folder: Path) -> tuple[list[float], list[float], float]:
    """Grade ``folder`` on a LocalCluster started here; per-submission gaps between tasks on a
    worker (s), each task's duration (s), and the class's kernel seconds. Each worker stamps its
    own tasks with its own clock (a worker plugin), so no clock correction enters the gaps."""
    from distributed import Client, LocalCluster, WorkerPlugin

    class Stamps(WorkerPlugin):
        name = "bench-stamps"

        def setup(self, worker):
            self.log = []

        def transition(self, key, start, finish, **kwargs):
            if str(key).startswith("grade-") and finish in ("executing", "memory", "error"):
                self.log.append((finish, time.time()))

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        client.register_plugin(Stamps())
        _, out = grade(folder, "--cluster", cluster.scheduler_address)
        logs = client.run(lambda dask_worker: dask_worker.plugins["bench-stamps"].log)
    gaps, durations = [], []
    for log in logs.values():
        starts = [t for what, t in log if what == "executing"]
        ends = [t for what, t in log if what != "executing"]
        durations += [end - begin for begin, end in zip(starts, ends)]
        gaps += [begin - end for end, begin in zip(ends, starts[1:])]
    kernels = kernel_seconds(out)
    shutil.rmtree(out, ignore_errors=True)
    return gaps, durations, kernels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lab", default="lab1")
    parser.add_argument("--repeats", type=int, default=1,
                        help="pairs of runs, in ABBA order (local, cluster, cluster, local, ...) against drift")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}, lab: {args.lab}, {SUBMISSIONS} submissions, "
          f"load average before: {os.getloadavg()[0]:.2f}")
    modes = {"local pool -j 2": ("-j", "2"), "LocalCluster of 2": ("--cluster", "local:2")}
    times: dict[str, list[float]] = {name: [] for name in modes}
    busy: dict[str, list[float]] = {name: [] for name in modes}  # notebook seconds / (wall x 2 workers)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "class"
        make_class(args.lab, folder, SUBMISSIONS)
        for repeat in range(args.repeats):
            for name in (list(modes) if repeat % 2 == 0 else list(modes)[::-1]):
                seconds, out = grade(folder, *modes[name])
                times[name].append(seconds)
                busy[name].append(kernel_seconds(out) / (2 * seconds))
                shutil.rmtree(out, ignore_errors=True)
                print(f"  {name}: {seconds:.1f} s, load average {os.getloadavg()[0]:.2f}", flush=True)
        gaps, durations, kernels = overhead(folder)
    print(f"load average after: {os.getloadavg()[0]:.2f}\n")
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, values in times.items():
        print(f"{name:18s} {medians[name]:6.1f} s  ({SUBMISSIONS / medians[name] * 60:.1f} notebooks a minute; "
              f"runs: {', '.join(f'{v:.1f}' for v in values)}; workers busy with notebooks "
              f"{statistics.median(busy[name]):.0%} of the time)")
    ratio = medians["local pool -j 2"] / medians["LocalCluster of 2"]
    print(f"throughput cluster / local pool: {ratio:.3f}  (target >= {TARGET}) -> "
          f"{'OK' if ratio >= TARGET else 'UNDER'}")
    shares = statistics.median(busy["LocalCluster of 2"]) / statistics.median(busy["local pool -j 2"])
    print(f"the same from the workers' busy shares (less moved by other work on the machine, which slows the "
          f"notebooks of both alike): {shares:.3f} -> {'OK' if shares >= TARGET else 'UNDER'}")
    print(f"\nscheduler overhead per submission (gap between two submissions on a worker, {len(gaps)} gaps): "
          f"median {statistics.median(gaps) * 1000:.0f} ms, mean {statistics.mean(gaps) * 1000:.0f} ms, "
          f"max {max(gaps) * 1000:.0f} ms")
    inside = (sum(durations) - kernels) / len(durations)
    print(f"inside a task but outside the notebook (unpack, prepare once, judge, result files, collect): "
          f"{inside * 1000:.0f} ms per submission (tasks {statistics.mean(durations):.2f} s on average, "
          f"notebooks {kernels / len(durations):.2f} s)")


if __name__ == "__main__":
    main()
