"""Lab 8's grader-side checks (``Task.grader_check``): verdicts decided on what a case saved.

Each is ``check(spec, data, tolerance) -> [problems]`` (empty: the case passes), a pure function of
the case's spec and the bytes its ``run_case`` saved in the student's kernel. Everything that is
known in advance to be true of a correct answer (a valid plan, a run inside the plan, outputs
close to onnxruntime, a kernel that is correct and fast) is decided here, never in the kernel,
where a notebook could replace ``np.allclose`` or the course's helpers. The graphs, inputs,
reference outputs (onnxruntime) and timings are all the grader's own.
"""
from __future__ import annotations

import json
import math
from typing import Any, Mapping

import numpy as np

from util.artifacts import read_saved_arrays
from util.contract import Tolerance
from util.labs.lab8.verify import PEAK_BYTES, matmul_sizes, output_problems, reference_values, run_problems


def _setting(spec: Mapping[str, Any]):
    from util.labs.lab8.graphs import graph, random_feeds
    from util.labs.lab8.plans import shapes_and_sizes

    model = graph(spec["graph"])
    sizes = shapes_and_sizes(model, spec["inputs"])
    return model, sizes, random_feeds(model, spec["inputs"], spec.get("seed", 0))


def check_plan(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 8.2: the saved plan (JSON) is valid for the graph, by the course's lifetime check."""
    from util.labs.lab8.plans import plan_problems

    model, sizes, _ = _setting(spec)
    try:
        plan = json.loads(data)
    except ValueError:
        return ["the saved plan is not JSON"]
    nbytes = {name: math.prod(dims) * item for name, (dims, item) in sizes.items()}
    return plan_problems(model, nbytes, plan)


def check_execution(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 8.3: :func:`run_problems` on the arrays the case saved, then the grader's own measurement of
    what the student's ``execute`` allocates (:func:`remeasured_growth`), which code in the student's
    kernel cannot switch off as it could ``tracemalloc`` there."""

    model, sizes, feeds = _setting(spec)
    saved, problems = read_saved_arrays(data)
    if problems:
        return problems
    problems = run_problems(model, sizes, feeds, {k: v for k, v in saved.items() if k != "execute"}, tolerance)
    if problems or "execute" not in saved:
        return problems or ["the case saved no execute function for the grader to run again"]
    growth = remeasured_growth(spec, saved["execute"].tobytes())
    if isinstance(growth, str):
        return [growth]
    if growth is not None and growth > PEAK_BYTES:
        return [f"run again by the grader, execute made the process's memory grow by {growth:,} bytes besides the "
                f"pool (at most {PEAK_BYTES:,}): write every result into its view with out="]
    return []


def remeasured_growth(spec: Mapping[str, Any], pickled: bytes) -> int | str | None:
    """Bytes the student's ``execute`` (``pickled``) adds to its process's peak resident memory when the
    grader runs it again in a student process (:mod:`util.labs.lab8.execute_harness`), measured by the
    grader from outside; a message when it could not run; ``None`` where the peak cannot be restarted
    (only a root grader may: the process is not dumpable), so nothing is re-measured there."""
    from util.student_process import ChannelError, StudentProcess

    try:
        with StudentProcess.start("util.labs.lab8.execute_harness:serve", seconds=100) as student:
            student.send({"setting": dict(spec)}, data=pickled)
            reply, _ = student.receive(timeout=90)
            if reply.get("ready") is not True:
                return f"run again by the grader, execute raised {str(reply.get('raised'))[:250]}"
            try:
                student.reset_peak()
            except ChannelError:
                return None
            before = student.stats()["rss"]
            student.send({"go": True})
            reply, _ = student.receive(timeout=90)
            if reply.get("done") is not True:
                return f"run again by the grader, execute raised {str(reply.get('raised'))[:250]}"
            return max(0, int(student.stats()["peak_rss"]) - int(before))
    except ChannelError as exc:
        return f"the grader could not run execute again ({exc})"


def check_kernel(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 8.4: the saved library's ``mm_fast`` is correct on ``spec["check"]`` sizes and, with
    ``spec["timed"]``, at least ``spec["min_speedup"]`` times the naive kernel (timed by the grader)."""
    from util.labs.lab8.judge_timing import judge_library

    saved, problems = read_saved_arrays(data)
    if problems:
        return problems
    library = saved.get("library")
    if library is None or library.dtype != np.uint8:
        return ["the case saved no library"]
    problems, _ = judge_library(library.tobytes(), check=spec.get("check", ()), timed=spec.get("timed", ()),
                                pairs=spec.get("pairs", 5), min_speedup=spec.get("min_speedup", 3.0),
                                seed=spec.get("seed", 0), rtol=tolerance.rtol, atol=tolerance.atol)
    return problems


def check_end_to_end(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 8.5: outputs close to onnxruntime's, and the saved library at least ``spec["min_speedup"]``
    times the naive kernel on the graph's own matrix products (timed by the grader)."""
    from util.labs.lab8.judge_timing import judge_library

    model, sizes, feeds = _setting(spec)
    saved, problems = read_saved_arrays(data)
    if problems:
        return problems
    reference = reference_values(model, feeds)
    problems = output_problems(model, saved, reference, tolerance)
    library = saved.get("library")
    if library is None or library.dtype != np.uint8:
        return problems + ["the case saved no library"]
    if problems:
        return problems
    timed = matmul_sizes(model, {name: dims for name, (dims, _) in sizes.items()})
    found, _ = judge_library(library.tobytes(), timed=timed, pairs=spec.get("pairs", 5),
                             min_speedup=spec.get("min_speedup", 3.0), seed=spec.get("seed", 0),
                             rtol=1e-4, atol=1e-4)
    return found
