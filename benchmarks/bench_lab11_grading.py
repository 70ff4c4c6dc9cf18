"""Lab 11 in one run: the graded solution's wall time against the 30 s target, its costly steps, the noise
study the judge's bands come from, and the measured cases' margins when the solution is graded again and
again beside another grading.

* noise study (``--noise N``): N pairs of fresh processes, run at the same time (one unpinned, as a graded
  kernel is; one pinned to a CPU with one thread, as the judge is), each measuring what the measured cases
  measure with the grader's own code (``util.labs.lab11.judge_measure``), plus the same copy on the wall
  clock; printed: the spread of each quantity across processes and the worst verdict margin over all
  (unpinned, pinned) pairs, for the bands ``util.labs.lab11.judge`` uses;
* re-run on drawn models (``--drawn N``): the solution's ``profile_layers`` and ``achieved_gflops`` run again as
  the judge runs them (a student process) on N drawn CNNs and convolutions against the judge's own measurement,
  beside a cost model fitted to the shipped ResNet-18 trace and GFLOP/s measured once on another layer: how many
  pass and their worst margins;
* grading: ``prepare`` (the ONNX exports), a plain run of the solution, one graded run alone;
* under load (``--gradings N``, default 20): the solution graded N times, two gradings at a time, so each
  has another beside it on the 2 cores (and whatever else the machine runs). Each grading must get every machine-graded point;
  after each, its saved measurements are judged once more by a fresh judge process (``judge.assess``,
  measuring afresh while the other grading still runs), and the margins are printed: for a ratio, how far
  inside its band it is as a factor (1.00 is the edge); for a profile, the worst of its three criteria.

    python benchmarks/bench_lab11_grading.py [--gradings 20] [--noise 10] [--drawn 16] [--no-load]

Timings depend on what else runs: the load average is printed first, and with every figure.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from timing import plain_run, print_rows  # noqa: E402

from util.labs import get_lab  # noqa: E402

TARGET_SECONDS = 30.0
LAB = get_lab("lab11")
SOLUTION = REPO / "solutions" / LAB.notebook
MEASURED = [(task.id, case) for task in LAB.tasks for case in task.cases if "measure" in case.spec]

NOISE_CHILD = r'''
import json, os, sys, time
from util import setup
setup()
from util.labs.lab11 import judge_measure
from util.labs.lab11.machine import cpu_timer
if sys.argv[1] == "pinned":
    judge_measure.pin()
import torch
source, target = torch.ones(48 * 2 ** 18), torch.zeros(48 * 2 ** 18)
def wall(fn, runs=10):
    fn()
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter(); fn(); best = min(best, time.perf_counter() - start)
    return best
out = {"load": os.getloadavg()[0], "peak": judge_measure.peak(448, 10), "bandwidth": judge_measure.bandwidth(48, 10),
       "bandwidth_wall": 2 * 48 * 2 ** 20 / wall(lambda: target.copy_(source)) / 1e9,
       "achieved": judge_measure.achieved("resnet18_bnstats", "layer4.1.conv1", (512, 2, 2), (1, 8, 32), 10)}
for model in ("resnet18_bnstats", "mobilenet_v2"):
    out[model] = judge_measure.profile(model, (1, 3, 64, 64), 10)
print(json.dumps(out))
'''

REJUDGE_CHILD = r'''
import json, sys, time
from pathlib import Path
from util.artifacts import case_stem
from util.labs import get_lab
from util.labs.lab11 import judge
from grader.judge.isolated import serving
files, out = Path(sys.argv[1]), {}
with serving():  # the judge runs profile_layers and achieved_gflops again in a student process
    for task in get_lab("lab11").tasks:
        for case in task.cases:
            if "measure" in case.spec:
                found = sorted(files.glob(case_stem(case.spec) + ".*"))
                start = time.perf_counter()
                problems, figures = judge.assess(case.spec, found[0].read_bytes()) if found else (["no file"], {})
                out[case.id] = {"problems": problems, "figures": figures, "seconds": time.perf_counter() - start}
print(json.dumps(out))
'''


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def _python(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=_env(), cwd=REPO)


def noise_study(pairs: int) -> None:
    """Spreads across processes and the worst verdict margins between unpinned and pinned processes."""
    from util.labs.lab11.judge import BAND, CONV_BAND, PROFILE_TOTAL_BAND, _band_margin, _profile_problems

    free, pinned = [], []
    for _ in range(pairs):
        a, b = _python(NOISE_CHILD, "free"), _python(NOISE_CHILD, "pinned")
        free.append(json.loads(a.communicate()[0]))
        pinned.append(json.loads(b.communicate()[0]))
    rows = free + pinned
    loads = [r["load"] for r in rows]
    print(f"\nnoise study: {pairs} pairs of processes at load averages {min(loads):.1f}-{max(loads):.1f} on "
          f"{os.cpu_count()} cores")
    for key, unit in (("peak", "GFLOP/s"), ("bandwidth", "GB/s"), ("bandwidth_wall", "GB/s")):
        values = [r[key] for r in rows]
        print(f"  {key:15s} best of 10: {min(values):7.1f} .. {max(values):7.1f} {unit}, max/min "
              f"{max(values) / min(values):.2f}")
    pairs_ = list(itertools.product(free, pinned))
    for key in ("peak", "bandwidth"):
        worst = min(_band_margin(a[key] / b[key], BAND) for a, b in pairs_)
        print(f"  {key:15s} worst margin in the band {BAND}: {worst:.2f}")
    worst = min(_band_margin(a["achieved"][k] / b["achieved"][k], CONV_BAND) for a, b in pairs_ for k in a["achieved"])
    print(f"  {'achieved':15s} worst margin in the band (1/3, 3) over batches 1, 8, 32: {worst:.2f}")
    for model in ("resnet18_bnstats", "mobilenet_v2"):
        margins, rhos = [], []
        for a, b in pairs_:
            # the judge's own verdict on the kernel's profile (a) against the grader's (b)
            _, figures = _profile_problems(list(a[model]), list(a[model].values()), b[model], "",
                                           total_band=PROFILE_TOTAL_BAND, either_scale=True)
            rhos.append(figures["spearman"])
            margins.append(figures["margin"])
        print(f"  profile {model:16s} Spearman >= {min(rhos):.3f}; worst margin {min(margins):.2f}")


def graded_once(out: Path) -> tuple[float, int]:
    from grader.grade.submission import grade_submission

    start = time.perf_counter()
    result = grade_submission(SOLUTION, LAB, out)
    return time.perf_counter() - start, result.score


def drawn_study(count: int) -> None:
    """The re-run on drawn models (``util.labs.lab11.judge``): the solution's ``profile_layers`` and
    ``achieved_gflops`` in a student process against the judge's own measurement of ``count`` drawn CNNs and
    convolutions, and what the judge makes of a cost model fitted to the shipped ResNet-18 trace and of GFLOP/s
    measured once on ResNet-18's layer4.1.conv1 (the margins of the criteria the judge uses on drawn models)."""
    import math
    import types

    import cloudpickle
    import numpy as np
    import torch

    from grader.author.solution import solution_namespace
    from grader.judge.isolated import serving
    from util.labs.lab11 import judge, judge_measure
    from util.labs.lab11.machine import build, course_input
    from util.labs.lab11.traces import LAYER_PREFIX, layer_modules, load_trace

    solution = solution_namespace("lab11", tuple(task.id for task in LAB.tasks))
    honest = {"profile": cloudpickle.dumps(solution["profile_layers"]),
              "achieved": cloudpickle.dumps(solution["achieved_gflops"])}
    costs = {}
    for name, module in layer_modules(resnet := build("resnet18_bnstats")):
        module.register_forward_hook(lambda m, i, o, n=name: costs.__setitem__(n, (
            o.numel() * (m.in_features if isinstance(m, torch.nn.Linear) else m.in_channels // m.groups
                         * math.prod(m.kernel_size)),
            4 * (i[0].numel() + sum(p.numel() for p in m.parameters()) + o.numel()))))
    with torch.no_grad():
        resnet(course_input((1, 3, 64, 64)))
    best: dict[str, float] = {}
    for event in load_trace("resnet18_torch")["traceEvents"]:
        if event.get("cat") == "user_annotation" and event["name"].startswith(LAYER_PREFIX):
            name = event["name"][len(LAYER_PREFIX):]
            best[name] = min(best.get(name, math.inf), event["dur"] / 1e6)
    fit = np.linalg.lstsq(np.array([[1, math.log(costs[n][0] + 1), math.log(costs[n][1])] for n in best]),
                          np.log([best[n] for n in best]), rcond=None)[0].tolist()
    attacker = types.ModuleType("bench_attacker")
    attacker.FIT, attacker.TYPED = fit, judge_measure.achieved("resnet18_bnstats", "layer4.1.conv1", (512, 2, 2),
                                                               (1, 8, 32), 10)
    exec('''
def profile_layers(model, x, runs=10):
    import math, torch
    from util.labs.lab11.traces import layer_modules
    rows = {}
    def record(m, i, o, name):
        macs = o.numel() * (m.in_features if isinstance(m, torch.nn.Linear) else m.in_channels // m.groups
                            * math.prod(m.kernel_size))
        nbytes = 4 * (i[0].numel() + sum(p.numel() for p in m.parameters()) + o.numel())
        rows[name] = math.exp(FIT[0] + FIT[1] * math.log(macs + 1) + FIT[2] * math.log(nbytes))
    hooks = [m.register_forward_hook(lambda m, i, o, n=n: record(m, i, o, n)) for n, m in layer_modules(model)]
    with torch.no_grad():
        model(x)
    for hook in hooks:
        hook.remove()
    return rows

def achieved_gflops(layer, sample_shape, batches=(1, 8, 32), runs=10, timer=None):
    return {b: TYPED[b] for b in batches}
''', attacker.__dict__)
    attack = {"profile": cloudpickle.dumps(attacker.profile_layers), "achieved": cloudpickle.dumps(attacker.achieved_gflops)}
    results: dict[tuple[str, str], list[float]] = {}
    with serving():
        for seed in range(count):
            for who, functions in (("solution", honest), ("attack", attack)):
                reply, _ = judge._rerun("profile", {"seed": seed, "runs": 10}, functions["profile"], "profile_layers")
                with judge._quiet_student():
                    grader = judge_measure.drawn_profile(seed, 10, fresh=True)
                _, figures = judge._profile_problems(reply["names"], reply["seconds"], grader, "",
                                                     judge.MIN_DRAWN_IN_BAND, judge.MIN_DRAWN_SHAPE)
                results.setdefault((who, "profile"), []).append(figures["margin"])
                reply, _ = judge._rerun("achieved", {"seed": seed, "batches": [1, 8, 32], "runs": 10},
                                        functions["achieved"], "achieved_gflops")
                grader = judge._reference_achieved(seed, [1, 8, 32], 10)  # as the judge measures it
                _, figures = judge._achieved_problems([1, 8, 32], reply["gflops"], grader, "", "",
                                                      judge.DRAWN_CONV_BAND)
                results.setdefault((who, "achieved"), []).append(figures["margin"])
    print(f"\nre-run on {count} drawn models (load average now {os.getloadavg()[0]:.1f}): margin >= 1 passes")
    for (who, kind), margins in results.items():
        print(f"  {who:8s} {kind:8s} passed {sum(m >= 1 for m in margins):2d} of {len(margins)}; worst margin "
              f"{min(margins):.2f}, median {sorted(margins)[len(margins) // 2]:.2f}")


WORKER = r'''
import json, sys, time, subprocess
from pathlib import Path
sys.path.insert(0, sys.argv[3] + "/benchmarks")
import bench_lab11_grading as bench
count, folder = int(sys.argv[1]), Path(sys.argv[2])
for i in range(count):
    out = folder / f"grading{i}"
    seconds, score = bench.graded_once(out)
    results = json.loads((out / "results.json").read_text())
    checks = {line.split("] ", 1)[1].split(" (hidden)")[0]: line.startswith("[passed]")
              for test in results["tests"] for line in test["output"].splitlines() if line.startswith("[")}
    rejudged = json.loads(bench._python(bench.REJUDGE_CHILD, str(out / "files")).communicate()[0])
    import os
    print(json.dumps({"seconds": seconds, "score": score, "load": os.getloadavg()[0], "checks": checks,
                      "rejudged": rejudged}), flush=True)
'''


def under_load(gradings: int) -> None:
    """``gradings`` gradings of the solution, two at a time; each one's verdicts and re-judged margins."""
    with tempfile.TemporaryDirectory(prefix="bench-lab11-") as tmp:
        halves = [gradings - gradings // 2, gradings // 2]
        workers = [_python(WORKER, str(count), str(Path(tmp) / f"stream{k}"), str(REPO))
                   for k, count in enumerate(halves) if count]
        records = [json.loads(line) for worker in workers for line in worker.communicate()[0].splitlines()
                   if line.startswith("{")]
    loads = [r["load"] for r in records]
    print(f"\nunder load: {len(records)} gradings of the solution, two at a time, load averages "
          f"{min(loads):.1f}-{max(loads):.1f}; scores {sorted({r['score'] for r in records})}; graded wall "
          f"{min(r['seconds'] for r in records):.0f}-{max(r['seconds'] for r in records):.0f} s")
    print(f"  {'measured case':55s} {'failed':>6s} {'worst margin':>12s} {'median':>7s} {'judge s':>7s}")
    for _, case in MEASURED:
        failed = sum(not r["checks"].get(case.id, False) for r in records)
        margins = sorted(r["rejudged"][case.id]["figures"].get("margin", 0.0) for r in records)
        seconds = max(r["rejudged"][case.id]["seconds"] for r in records)
        print(f"  {case.id[:55]:55s} {failed:6d} {margins[0]:12.2f} {margins[len(margins) // 2]:7.2f} {seconds:7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gradings", type=int, default=20, help="gradings under load (0: none)")
    parser.add_argument("--noise", type=int, default=10, help="pairs of processes in the noise study (0: none)")
    parser.add_argument("--drawn", type=int, default=16, help="drawn models in the re-run study (0: none)")
    parser.add_argument("--no-load", action="store_true", help="only the timings of one grading")
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    from util.labs.lab11.tasks import prepare

    start = time.perf_counter()
    prepare()
    rows = {"prepare (ONNX exports, cached after the first run)": time.perf_counter() - start}
    rows["plain run of the solution (nbclient)"] = plain_run(SOLUTION)
    with tempfile.TemporaryDirectory() as out:
        seconds, score = graded_once(Path(out))
        rejudged = json.loads(_python(REJUDGE_CHILD, str(Path(out) / "files")).communicate()[0])
    if score != LAB.auto_points:
        sys.exit(f"the solution scored {score}/{LAB.auto_points} machine-graded points; fix that before benchmarking")
    rows["grader grade of the solution"] = seconds
    for case_id, record in rejudged.items():
        rows[f"  the judge's own measurement: {case_id[:40]}"] = record["seconds"]
    print_rows(rows, "grader grade of the solution", TARGET_SECONDS)
    print(f"(load average now {os.getloadavg()[0]:.2f})")
    if args.noise and not args.no_load:
        noise_study(args.noise)
    if args.drawn and not args.no_load:
        drawn_study(args.drawn)
    if args.gradings and not args.no_load:
        under_load(args.gradings)


if __name__ == "__main__":
    main()
