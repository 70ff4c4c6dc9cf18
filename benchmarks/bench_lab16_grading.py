"""Lab 16 wall time, measured in one run: the grader's preparation (the trained DigitsCNN cached), a plain run of the
solution, ``grader grade`` of the solution (hidden cases and the grader's judges included), and the costly step on its
own: the judge's re-run of task 16.5 (a student process started, PyTorch imported and warmed up, then the timed
window: the pickled loss loaded and 120 gradients asked for while the judge trains the small student), with the
student process's CPU seconds the grader measured; and task 16.7's judge case by case (a student process each, its
networks cut by the solution's prune_residual), the timed case apart (every group of a larger network cut, then the
cut network timed in the student process against the dense one and its unstructured twin in the judge's), with the
speed-ups it measured; then task 16.9's judge case by case, in the student process 16.7's cases left.

With ``--schedule-seeds N`` it measures only the margins of 16.8's re-run (the grader's loop over N fine-tuning
orders: the course's schedule against schedules that prune all at once, and one cut).

With ``--seeds N`` it also measures the margins of 16.5's re-run case: the small student trained with the course's
loss and with the labels alone, from N seeds (a term secret draws the case's seed anew, so the threshold must hold
for any): the lowest and highest test accuracy of each, against the 95 % threshold.

Target: the graded solution <= 30 s on 2 cores.

    python benchmarks/bench_lab16_grading.py [--repeats 1] [--seeds 0] [--schedule-seeds 0]

Timings depend on what else runs: the load average is printed first.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from timing import graded_run, plain_run, print_rows  # noqa: E402

from util.labs import get_lab  # noqa: E402

WALL_TARGET = 30.0


def _cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def graded_work_cpu() -> dict[str, float]:
    """CPU seconds of what a graded run computes, done here in one process: the imports one process of it makes
    (the kernel, the judge and the student process each make them), the solution's cells, the hidden cases and the
    grader's judges (16.5's re-run with its student process, whose CPU in the window the grader measures). Unlike wall
    time it hardly depends on what else runs, so it says what a quiet 2-core machine's graded run approaches."""
    import importlib
    import tempfile

    start = _cpu()
    import matplotlib.pyplot  # noqa: F401
    import sklearn.datasets  # noqa: F401
    import torch  # noqa: F401

    rows = {"CPU: the imports of one process (the kernel, the judge and the student process make them)": _cpu() - start}
    from grader.author.solution import solution_namespace
    from grader.judge.isolated import serving
    from util import setup
    from util.artifacts import case_file, files_dir

    lab = get_lab("lab16")
    with tempfile.TemporaryDirectory() as answers:
        os.environ["COURSE_OUTPUT_DIR"] = answers
        start = _cpu()
        namespace = solution_namespace("lab16", [task.id for task in lab.tasks])
        rows["CPU: the solution's cells"] = _cpu() - start  # 16.7's latency cell included
        start = _cpu()
        for task in lab.tasks:
            for case in task.cases:
                setup()
                task.run_case(namespace[task.function], case.spec)
        rows["CPU: the hidden cases"] = _cpu() - start
        start = _cpu()
        with serving():
            for task in lab.tasks:
                if task.grader_check:
                    module, _, name = task.grader_check.partition(":")
                    check = getattr(importlib.import_module(module), name)
                    for case in task.cases:
                        [path] = files_dir("lab16").glob(case_file(case.spec, "") + "*")
                        assert check(case.spec, path.read_bytes(), task.tolerance) == [], case.id
        rows["CPU: the grader's judges (16.5's and 16.7's student processes not included)"] = _cpu() - start
    return rows


def retrain_seconds() -> tuple[float, float, float]:
    """(whole judge call, the timed window, the student process's CPU seconds) of 16.5's re-run on the solution."""
    import cloudpickle

    from grader.author.solution import solution_namespace
    from grader.judge.isolated import serving
    from util.labs.lab16 import judge_distill

    loss = solution_namespace("lab16", ("16.5",))["distillation_loss"]
    spec = get_lab("lab16").task("16.5").cases[-1].spec
    with serving():
        start = time.perf_counter()
        found, measures, problem = judge_distill.retrain(spec, cloudpickle.dumps(loss))
        whole = time.perf_counter() - start
    if found is None or found < spec["min_accuracy"]:
        sys.exit(f"the 16.5 judge failed on the solution: {problem or found}")
    return whole, measures["wall_seconds"], measures["cpu_seconds"]


def residual_seconds() -> dict[str, float]:
    """Wall seconds of each of 16.7's judge cases on the solution (a student process each), and the timed case's
    measured speed-ups (the cut network and the unstructured twin, against the dense one)."""
    import io

    import cloudpickle
    import numpy as np

    from grader.author.solution import solution_namespace
    from grader.judge.isolated import serving
    from util.labs.lab16 import judge_lora_gpt, judge_residual

    task = get_lab("lab16").task("16.7")
    function = solution_namespace("lab16", ("16.7",))["prune_residual"]
    buffer = io.BytesIO()
    np.savez(buffer, function=np.frombuffer(cloudpickle.dumps(function), dtype=np.uint8))
    measured: list[dict] = []
    timer = judge_residual.time_networks

    def spy(*args, **kwargs):
        found = timer(*args, **kwargs)
        measured.append(found[1])
        return found

    judge_residual.time_networks = spy
    rows = {}
    try:
        with serving():
            for case in task.cases:
                start = time.perf_counter()
                problems = judge_residual.check_residual(case.spec, buffer.getvalue(), task.tolerance)
                rows[f"16.7 judge: {case.id[:70]}"] = time.perf_counter() - start
                if problems:
                    sys.exit(f"the 16.7 judge failed on the solution: {problems}")
            lora = get_lab("lab16").task("16.9")      # in the student process 16.7's cases left (judge_kept)
            buffer = io.BytesIO()
            np.savez(buffer, function=np.frombuffer(cloudpickle.dumps(
                solution_namespace("lab16", ("16.6", "16.9"))["lora_gpt"]), dtype=np.uint8))
            for case in lora.cases:
                start = time.perf_counter()
                problems = judge_lora_gpt.check_lora_gpt(case.spec, buffer.getvalue(), lora.tolerance)
                rows[f"16.9 judge: {case.id[:70]}"] = time.perf_counter() - start
                if problems:
                    sys.exit(f"the 16.9 judge failed on the solution: {problems}")
    finally:
        judge_residual.time_networks = timer
    for figures in measured:
        rows["16.7 timed: the cut network's speed-up over the dense one (x; at least 1.5 needed)"] = figures["speedup"]
        rows["16.7 timed: the unstructured twin's speed-up over the dense one (x)"] = figures["unstructured_speedup"]
    return rows


def margins(seeds: int) -> dict[str, tuple[int, int]]:
    """``{"distillation" | "labels alone": (fewest, most) test images right}`` over ``seeds`` seeds."""
    import torch.nn.functional as F

    from util.data import digits_split
    from util.labs.lab16.digits import accuracy, teacher_logits, trained_digits
    from util.labs.lab16.distill import UNLABELED, distillation_data, loss_gradient, train_student

    def hard(s, y):
        labeled = y != UNLABELED
        return F.cross_entropy(s[labeled], y[labeled]) if labeled.any() else s.sum() * 0

    def distill(s, t, y, T, alpha):
        soft = F.kl_div(F.log_softmax(s / T, 1), F.softmax(t / T, 1), reduction="batchmean")
        return alpha * T * T * soft + (1 - alpha) * hard(s, y)

    split = digits_split()
    teacher = teacher_logits(trained_digits(), split.x_train)
    found: dict[str, list[int]] = {"distillation": [], "labels alone": []}
    for seed in range(seeds):
        x, t, y = distillation_data(split.x_train, split.y_train, teacher, 100, seed)
        for name, loss in (("distillation", distill), ("labels alone", lambda s, t, y, T, a: hard(s, y))):
            model = train_student(loss_gradient(loss, 4.0, 0.9), x, t, y, seed)
            found[name].append(round(360 * accuracy(model, split.x_test, split.y_test)))
    return {name: (min(values), max(values)) for name, values in found.items()}


def schedule_margins(seeds: int) -> dict[str, tuple[int, int]]:
    """16.8's re-run over ``seeds`` fine-tuning orders (the judge draws one from its secret at every grading): the
    fewest and most test images right after the grader's loop (its own global magnitude masks, 8 batches after each
    step) with the course's cubic schedule to 95 % in 8 steps, with 95 % at the last step (a schedule that prunes all
    at once at the end), at the first step (all at once at the start, then every batch), and one cut of the trained
    model followed by one step's 8 batches (the notebook's one-shot)."""
    from util.data import digits_split
    from util.labs.lab16.digits import accuracy, trained_digits
    from util.labs.lab16.judge_schedule import global_masks, reference_schedule
    from util.labs.lab16.schedule import prune_gradually

    split, model = digits_split(), trained_digits()
    schedules = {"the cubic schedule": reference_schedule(0.95, 8), "all at the last step": [0.0] * 7 + [0.95],
                 "all at the first step": [0.95] * 8, "one cut, then one step's batches": [0.95]}
    found: dict[str, list[int]] = {name: [] for name in schedules}
    for seed in range(seeds):
        for name, schedule in schedules.items():
            pruned = prune_gradually(model, schedule, global_masks, split.x_train, split.y_train, 8, seed=seed)[-1]
            found[name].append(round(360 * accuracy(pruned, split.x_test, split.y_test)))
    return {name: (min(values), max(values)) for name, values in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=0, help="also measure 16.5's margins over this many seeds")
    parser.add_argument("--schedule-seeds", type=int, default=0,
                        help="only measure 16.8's re-run over this many fine-tuning orders")
    args = parser.parse_args()
    if args.schedule_seeds:
        threshold = get_lab("lab16").task("16.8").cases[-1].spec["min_accuracy"]
        for name, (low, high) in schedule_margins(args.schedule_seeds).items():
            print(f"16.8 over {args.schedule_seeds} orders, {name}: {low} to {high} of 360 test images right "
                  f"(the floor: {threshold:.0%}, {360 * threshold:.0f} images)")
        return
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    lab = get_lab("lab16")
    solution = REPO / "solutions" / lab.notebook
    from grader.execute import caches

    start = time.perf_counter()
    caches.ensure(lab)  # the grader's own cache of the trained DigitsCNN, as grading keeps it (warm after a first run)
    failure = caches.prepare(lab)
    if failure:
        sys.exit(f"lab 16's prepare hook failed: {failure}")
    rows = {"prepare: DigitsCNN trained and cached (once per machine, then verified)": time.perf_counter() - start}
    cpu = graded_work_cpu()
    rows.update(cpu)
    rows["plain run of the solution (nbclient)"] = plain_run(solution)
    rows["grader grade of the solution"] = statistics.median(graded_run(solution, "lab16") for _ in range(args.repeats))
    whole, window, student = retrain_seconds()
    rows["16.5 judge: student process, imports, warm-up, the window"] = whole
    rows["16.5 judge: the timed window (loading and 120 gradients; 40 s allowed)"] = window
    rows["16.5 judge: the student process's CPU in the window (10 s allowed)"] = student
    rows.update(residual_seconds())
    imports, *work = cpu.values()
    rows["CPU of a graded run, about: 3 processes' imports + cells + cases + judges + the student's window"] = \
        3 * imports + sum(work) + student
    print(f"load average: {os.getloadavg()[0]:.2f} after the runs")
    print_rows(rows, "grader grade of the solution", WALL_TARGET)
    if args.seeds:
        threshold = get_lab("lab16").task("16.5").cases[-1].spec["min_accuracy"]
        for name, (low, high) in margins(args.seeds).items():
            print(f"16.5 over {args.seeds} seeds, {name}: {low} to {high} of 360 test images right "
                  f"(the threshold: {threshold:.1%}, {360 * threshold:.1f} images)")


if __name__ == "__main__":
    main()
