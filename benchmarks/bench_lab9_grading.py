"""Lab 9 wall time, measured in one run: its costly steps one by one (training DigitsCNN, the exports
its prepare hook caches, quantize_static, the integer model), the CPU seconds of the graded work (which
do not depend on the machine's load), a plain run of the solution, and ``grader grade`` of the solution
(hidden cases and the grader's judges included).

Target (issue 29): the graded solution <= 30 s on 2 cores.

    python benchmarks/bench_lab9_grading.py [--repeats 1]

Timings depend on what else runs: the load average is printed first.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from timing import graded_run, plain_run, print_rows  # noqa: E402

from util.labs import get_lab  # noqa: E402

WALL_TARGET = 30.0


def _seconds(step) -> float:
    start = time.perf_counter()
    step()
    return time.perf_counter() - start


def steps() -> dict[str, float]:
    """The lab's costly steps, each timed once in this process (imports first, then warm)."""
    rows = {"import torch, onnxruntime.quantization, sklearn.datasets": _seconds(
        lambda: (__import__("torch"), __import__("onnxruntime.quantization"), __import__("sklearn.datasets")))}
    from util import setup
    from util.labs.lab9 import digits, judge, onnxq
    from util.labs.lab9.judge_intref import run_integer
    from util.labs.lab9.qmodel import case_model
    from util.labs.lab9.tasks import prepare

    setup()
    onnxq.quiet_onnxruntime()
    rows["digits_split (scikit-learn's bundled data)"] = _seconds(onnxq.digits_arrays)
    rows["train DigitsCNN (float64, one thread)"] = _seconds(digits.train_digits_cnn)
    rows["prepare (training, exports; cached after the first run)"] = _seconds(prepare)
    arrays = onnxq.digits_arrays()
    with tempfile.TemporaryDirectory() as folder:
        for name, spec, calib in (("DigitsCNN", {"model": {}}, arrays["x_train"][:256]),
                                  ("ResNet-18", {"model": "resnet18", "calib": 8}, None)):
            path = onnxq.write_float_model(spec, folder)
            images = calib if calib is not None else onnxq.calibration_images(spec)
            rows[f"quantize_static, {name}, {len(images)} calibration images"] = _seconds(
                lambda path=path, images=images: judge.course_quantize(path, images, True))
    model, xq = case_model({"model": "digits_cnn", "seed": 0, "batch": 360})
    rows["integer-only DigitsCNN's layers on 360 images (course reference)"] = _seconds(lambda: run_integer(model, xq))
    return rows


def _cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def graded_work_cpu() -> dict[str, float]:
    """CPU seconds of what a graded run computes, done here in one process: the solution's cells, the
    hidden cases and the grader's judges of the files they saved. Unlike wall time it hardly depends on
    what else runs, so it says what a quiet machine's graded run approaches (plus about 2 s to start the
    kernel and the judge)."""
    import importlib
    import os

    from grader.author.solution import solution_namespace
    from util import setup
    from util.artifacts import case_file, files_dir

    lab = get_lab("lab9")
    rows = {}
    with tempfile.TemporaryDirectory() as answers:
        os.environ["COURSE_OUTPUT_DIR"] = answers
        start = _cpu()
        namespace = solution_namespace("lab9", [task.id for task in lab.tasks])
        rows["CPU: the solution's cells (imports done above)"] = _cpu() - start
        start = _cpu()
        for task in lab.tasks:
            for case in task.cases:
                setup()
                task.run_case(namespace[task.function], case.spec)
        rows["CPU: the hidden cases"] = _cpu() - start
        start = _cpu()
        for task in lab.tasks:
            if task.grader_check:
                module, _, name = task.grader_check.partition(":")
                check = getattr(importlib.import_module(module), name)
                for case in task.cases:
                    [path] = files_dir("lab9").glob(case_file(case.spec, "") + "*")
                    assert check(case.spec, path.read_bytes(), task.tolerance) == [], case.id
        rows["CPU: the grader's judges"] = _cpu() - start
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    lab = get_lab("lab9")
    rows = steps()
    rows.update(graded_work_cpu())
    solution = REPO / "solutions" / lab.notebook
    rows["plain run of the solution (nbclient)"] = plain_run(solution)
    rows["grader grade of the solution"] = statistics.median(graded_run(solution, "lab9") for _ in range(args.repeats))
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    print_rows(rows, "grader grade of the solution", WALL_TARGET)


if __name__ == "__main__":
    main()
