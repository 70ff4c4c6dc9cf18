"""Lab 15 wall time, measured in one run: a plain run of the solution, ``grader grade`` of the solution (hidden
cases and the grader's judges included), and the costly steps on their own: training the tokenizer on the
course's text, the engine with the stated policy on the longest hidden request stream, the judge's re-run of
task 15.6 (a student process: start, PyTorch's import, the screen of models drawn from the grading secret, two
speculative decodings against the judge's target) and task 15.8's two cases (a student process each: the exact runs
on the judge's draws, 400 sampled runs), and task 15.9's three cases (a student process each, the streams the judge
draws replayed with the scheduler there).

Target (issue 40): the graded solution <= 30 s on 2 cores.

    python benchmarks/bench_lab15_grading.py [--repeats 1]

Timings depend on what else runs: the load average is printed first.
"""
from __future__ import annotations

import argparse
import io
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


def tokenizer_seconds(solution: dict) -> float:
    """The solution's trainer: 256 merges on the course's text (106 KB)."""
    from util.labs.lab15.tokenizer import course_text

    start = time.perf_counter()
    solution["BPETokenizer"].train(course_text(), 256)
    return time.perf_counter() - start


def engine_seconds() -> float:
    """The engine with the grader's policy on the hidden stream with the most iterations."""
    from util.labs.lab15.judge_reference import reference_schedule
    from util.labs.lab15.serving import config_from, requests_from, simulate

    seconds = []
    for case in get_lab("lab15").task("15.5").cases:
        start = time.perf_counter()
        simulate(reference_schedule, requests_from(case.spec), config_from(case.spec))
        seconds.append(time.perf_counter() - start)
    return max(seconds)


def rerun_seconds(solution: dict) -> float:
    """The 15.6 judge on the solution's function: one student process, both runs, every target call served."""
    import cloudpickle
    import numpy as np

    from grader.judge.isolated import serving
    from util.contract import Tolerance
    from util.labs.lab15.judge import check_speculative

    spec = get_lab("lab15").task("15.6").cases[0].spec
    buffer = io.BytesIO()
    np.savez(buffer, function=np.frombuffer(cloudpickle.dumps(solution["speculative_generate"]), dtype=np.uint8))
    with serving():
        start = time.perf_counter()
        problems = check_speculative(spec, buffer.getvalue(), Tolerance())
        seconds = time.perf_counter() - start
    if problems:
        sys.exit(f"the 15.6 judge failed the solution: {problems}")
    return seconds


def sampling_seconds(solution: dict) -> float:
    """The 15.8 judge on the solution's function: both cases (the exact runs on the judge's draws, then 400 runs
    for the chi-square test), one student process each."""
    import cloudpickle
    import numpy as np

    from grader.judge.isolated import serving
    from util.contract import Tolerance
    from util.labs.lab15.judge import check_sampling

    buffer = io.BytesIO()
    np.savez(buffer, function=np.frombuffer(cloudpickle.dumps(solution["speculative_sample"]), dtype=np.uint8))
    seconds = 0.0
    with serving():
        for case in get_lab("lab15").task("15.8").cases:
            start = time.perf_counter()
            problems = check_sampling(case.spec, buffer.getvalue(), Tolerance())
            seconds += time.perf_counter() - start
            if problems:
                sys.exit(f"the 15.8 judge failed the solution on {case.id}: {problems}")
    return seconds


def chunked_seconds(solution: dict) -> float:
    """The 15.9 judge on the solution's scheduler: its three cases, one student process each (7 streams)."""
    import cloudpickle
    import numpy as np

    from grader.judge.isolated import serving
    from util.contract import Tolerance
    from util.labs.lab15.judge import check_chunked

    buffer = io.BytesIO()
    np.savez(buffer, function=np.frombuffer(cloudpickle.dumps(solution["schedule_chunked"]), dtype=np.uint8))
    seconds = 0.0
    with serving():
        for case in get_lab("lab15").task("15.9").cases:
            start = time.perf_counter()
            problems = check_chunked(case.spec, buffer.getvalue(), Tolerance())
            seconds += time.perf_counter() - start
            if problems:
                sys.exit(f"the 15.9 judge failed the solution on {case.id}: {problems}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    import torch

    from grader.author.solution import solution_namespace

    torch.set_num_threads(1)
    lab = get_lab("lab15")
    path = REPO / "solutions" / lab.notebook
    rows = {"plain run of the solution (nbclient)": plain_run(path)}
    rows["grader grade of the solution"] = statistics.median(graded_run(path, "lab15") for _ in range(args.repeats))
    solution = solution_namespace("lab15", ("15.1", "15.6", "15.7", "15.8", "15.9"))
    rows["15.1: training 256 merges on the course's text"] = tokenizer_seconds(solution)
    rows["15.5: the engine on the longest hidden stream"] = engine_seconds()
    rows["15.6 judge: student process, imports and two runs"] = rerun_seconds(solution)
    rows["15.8 judge: two student processes, the exact runs and 400 sampled runs"] = sampling_seconds(solution)
    rows["15.9 judge: three student processes, 7 streams replayed"] = chunked_seconds(solution)
    print_rows(rows, "grader grade of the solution", WALL_TARGET)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
