"""Project a term of grading on a cluster: how long N workers take for a class, from measured costs.

A course of 600 students and 8 labs grades 4,800 notebooks a term, most of them in the hours after
each deadline. This simulates what ``grade --cluster`` does (each free worker takes the next
submission; one notebook per worker, each worker one core) for

* one deadline: every student's notebook of one lab, all submitted at once (the slowest lab shown);
* the whole term: the 8 deadlines one after the other.

Per-notebook costs (seconds of a graded run: kernel start, imports, the notebook, hidden cases,
scoring) come from a gradebook folder (``--from build/gradebook``: every ``results.json``'s
``execution_time``, by lab) or, by default, from the measurements this repository records: the
README's course map ("runs in": graded runs of the solutions on a quiet 2-core machine), and for the
labs it does not list yet, ``shared/design/labs5_8.md`` (their scripts' run times plus 3 s of
kernel start and imports).
Each notebook's cost is drawn around its lab's (log-normal, ``--spread``, fixed seed), times
``--contention`` (two kernels on one 2-core machine each run 2 / 1.73 = 1.16x slower: measured
with ``-j 2``), plus the scheduler's per-submission overhead (``--overhead-ms``, from
``benchmarks/bench_cluster.py``) and, once per worker, its start (``--worker-start``: connecting,
the check, the labs' export caches).

    python benchmarks/project_class.py [--students 600] [--from build/gradebook] [--workers 1 2 8 32 128]
"""
from __future__ import annotations

import argparse
import heapq
import json
import random
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DESIGNED = {"lab5": 11.0, "lab6": 15.0, "lab7": 17.4, "lab8": 10.1}
"""Seconds per graded notebook of the labs not yet in the course map: their scripts' run times in
``shared/design/labs5_8.md`` plus 3 s of kernel start and imports."""


def course_map_costs(readme: Path = REPO / "README.md") -> dict[str, float]:
    """Seconds per graded notebook from the README's course map ("runs in: about N s"), and
    :data:`DESIGNED` for the 8-lab course's labs it does not list yet."""
    costs = dict(DESIGNED)
    for line in readme.read_text(encoding="utf-8").splitlines():
        match = re.match(r"\| (\d+) \|.*\| about (\d+(?:\.\d+)?) s[^|]*\|\s*$", line)
        if match:
            costs[f"lab{match.group(1)}"] = float(match.group(2))
    return dict(sorted(costs.items(), key=lambda item: int(item[0][3:])))


def measured_costs(gradebook: Path) -> dict[str, float]:
    """Mean ``execution_time`` per lab over the result folders of ``gradebook``."""
    by_lab: dict[str, list[float]] = {}
    for path in gradebook.glob("*/grading.json"):
        result = json.loads(path.read_text())["result"]
        if result["execution_status"] == "completed":
            by_lab.setdefault(result["lab"], []).append(result["execution_time"])
    if not by_lab:
        raise SystemExit(f"{gradebook}: no graded submission found (no */grading.json)")
    return {lab: sum(times) / len(times) for lab, times in sorted(by_lab.items())}


def makespan(costs: list[float], workers: int, worker_start: float) -> float:
    """Seconds until the last of ``costs`` is graded by ``workers`` taking them in order."""
    free = [worker_start] * min(workers, len(costs))
    heapq.heapify(free)
    end = 0.0
    for cost in costs:
        start = heapq.heappop(free)
        end = max(end, start + cost)
        heapq.heappush(free, start + cost)
    return end


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=600)
    parser.add_argument("--from", dest="gradebook", type=Path, help="a graded class's output folder")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 8, 16, 32, 64, 128])
    parser.add_argument("--spread", type=float, default=0.3, help="log-normal sigma of a notebook's cost")
    parser.add_argument("--contention", type=float, default=2 / 1.73)
    parser.add_argument("--overhead-ms", type=float, default=50.0)
    parser.add_argument("--worker-start", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    costs = measured_costs(args.gradebook) if args.gradebook else course_map_costs()
    rng = random.Random(args.seed)
    labs = {lab: [mean * rng.lognormvariate(-args.spread ** 2 / 2, args.spread) * args.contention
                  + args.overhead_ms / 1000 for _ in range(args.students)] for lab, mean in costs.items()}
    total = sum(len(c) for c in labs.values())
    slowest = max(labs, key=lambda lab: sum(labs[lab]))
    print(f"{args.students} students x {len(labs)} labs = {total:,} notebooks; seconds per notebook: "
          + ", ".join(f"{lab} {mean:g}" for lab, mean in costs.items())
          + f"\n(x{args.contention:.2f} contention, +{args.overhead_ms:g} ms per submission, "
            f"{args.worker_start:g} s per worker start, spread {args.spread}, seed {args.seed})\n")
    print(f"{'workers':>7}  {'one deadline (' + slowest + ')':>22}  {'whole term':>11}  {'CPU hours':>9}")
    for n in args.workers:
        deadline = makespan(labs[slowest], n, args.worker_start)
        term = sum(makespan(c, n, args.worker_start) for c in labs.values())
        print(f"{n:>7}  {_hours(deadline):>22}  {_hours(term):>11}  {sum(map(sum, labs.values())) / 3600:>9.1f}")


if __name__ == "__main__":
    main()
