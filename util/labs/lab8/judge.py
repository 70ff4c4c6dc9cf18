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

RERUN_BYTES = PEAK_BYTES + 64 * 1024
"""What ``execute``'s one call in the grader's re-run may add to the process's peak resident memory: the kernel's
bound (:data:`util.labs.lab8.verify.PEAK_BYTES`, bytes allocated) plus a first call's own working set, counted in
pages (the solution's first call, after the harness's warm-up, grew it by 8 to 57 KB on the hidden cases). A
full-size temporary of any hidden case's activations but its logits (200 KB and more) does not fit."""


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
    """Task 8.3: :func:`run_problems` on the arrays the case saved, then the grader's own run of the student's
    ``execute`` (:func:`rerun_problems`): what it allocates, measured from outside (code in the student's kernel
    could switch ``tracemalloc`` off there), and what that same run left in the pool."""

    model, sizes, feeds = _setting(spec)
    saved, problems = read_saved_arrays(data)
    if problems:
        return problems
    problems = run_problems(model, sizes, feeds, {k: v for k, v in saved.items() if k != "execute"}, tolerance)
    if problems or "execute" not in saved:
        return problems or ["the case saved no execute function for the grader to run again"]
    return rerun_problems(spec, saved["execute"].tobytes(), tolerance)


def rerun_problems(spec: Mapping[str, Any], pickled: bytes, tolerance: Tolerance) -> list[str]:
    """The student's ``execute`` (``pickled``) run again by the grader in a student process
    (:mod:`util.labs.lab8.execute_harness`): everything of the student's (unpickling included) runs after the
    grader restarted the process's peak memory, in a process that may start no other; the peak is read once the
    run and its report are over, so what was allocated at any moment counts; and the pool that run left must
    hold the plan's tensors (onnxruntime's values) with every tensor ``execute`` returned at the start of its
    buffer, so a run that recognised the grader and did nothing, or less, fails. A root grader restarts the
    process's peak before the run; another cannot (the process is not dumpable) and measures from the peak the
    set-up left, which keeps what it allocated so that its peak is what it holds."""
    import math

    from util.judging import secret
    from util.labs.lab8.plans import course_plan
    from util.student_process import ChannelError, StudentProcess

    # inputs of the grader's own draw, and only what the run needs: the case's spec never reaches student code
    setting = {"graph": spec["graph"], "inputs": spec["inputs"],
               "seed": secret.seed("lab8", "8.3 rerun", json.dumps(dict(spec), sort_keys=True), bits=31)}
    model, sizes, feeds = _setting(setting)
    plan = course_plan(model, {name: dims for name, (dims, _) in sizes.items()})
    try:
        with StudentProcess.start("util.labs.lab8.execute_harness:serve", seconds=100, max_data=256 << 20) as student:
            student.send({"setting": setting})
            reply, _ = student.receive(timeout=90)
            if reply.get("ready") is not True:
                return [f"the grader could not set the run of execute up: {str(reply.get('raised'))[:250]}"]
            try:
                student.reset_peak()
            except ChannelError:
                pass  # a grader that is not root: the peak stands where the set-up left it, at what it holds
            ready = student.stats()
            before = max(int(ready["rss"]), int(ready["peak_rss"]))
            student.send({"go": True}, data=pickled)
            reply, _ = student.receive(timeout=90)
            if reply.get("done") is not True:
                return [f"run again by the grader, execute raised {str(reply.get('raised'))[:250]}"]
            student.send({"report": True})
            parts = []
            for index in range(len(plan["buffer_bytes"])):
                reply, part = student.receive(timeout=90)
                if reply.get("buffer") != index:
                    return ["run again by the grader, execute's run could not be read back"]
                parts.append(part)
            reply, _ = student.receive(timeout=90)
            growth = max(0, int(student.stats()["peak_rss"]) - before)
    except ChannelError as exc:
        return [f"the grader could not run execute again ({exc})"]
    offsets = reply.get("offsets")
    order = [name for node in model.graph.node for name in node.output]
    if not isinstance(offsets, list) or len(offsets) != len(order) or not all(isinstance(o, int) for o in offsets) \
            or [len(part) for part in parts] != [int(b) for b in plan["buffer_bytes"]]:
        return ["run again by the grader, execute's run could not be read back"]
    arrays = {f"pool/{index}": np.frombuffer(part, dtype=np.uint8) for index, part in enumerate(parts)}
    for value in model.graph.output:  # the outputs as that run left them in their buffers
        dims, item = sizes[value.name]
        raw = arrays[f"pool/{plan['assign'][value.name]}"][:math.prod(dims) * item]
        arrays[f"output/{value.name}"] = raw.view(np.float32).reshape(dims).astype(np.float64)
    arrays["offsets"], arrays["peak"] = np.array(offsets, dtype=np.int64), np.array(0, dtype=np.int64)
    problems = [f"run again by the grader, {p[0].lower()}{p[1:]}"
                for p in run_problems(model, sizes, feeds, arrays, tolerance)]
    if growth > RERUN_BYTES:
        problems.append(f"run again by the grader, execute made the process's memory grow by {growth:,} bytes besides "
                        f"the pool (at most {RERUN_BYTES:,}, its first call's own working set included): write every "
                        "result into its view with out=")
    return problems


def _facts(measured: Mapping[str, Any]) -> dict[str, float]:
    """What the timing measured, for the instructor's records, disputes and the leaderboard (never a verdict)."""
    return {key: round(float(value), 4) for key, value in measured.items()
            if key in ("naive_s", "fast_s", "speedup", "cpu_speedup")}


def check_kernel(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> tuple[list[str], dict]:
    """Task 8.4: the saved library's ``mm_fast`` is correct on ``spec["check"]`` sizes and, with
    ``spec["timed"]``, at least ``spec["min_speedup"]`` times the naive kernel (timed by the grader); with the
    grader's measurements (the speed-up, wall and CPU) as facts."""
    from util.labs.lab8.judge_timing import judge_library

    saved, problems = read_saved_arrays(data)
    if problems:
        return problems, {}
    library = saved.get("library")
    if library is None or library.dtype != np.uint8:
        return ["the case saved no library"], {}
    problems, measured = judge_library(library.tobytes(), check=spec.get("check", ()), timed=spec.get("timed", ()),
                                       pairs=spec.get("pairs", 5), min_speedup=spec.get("min_speedup", 3.0),
                                       seed=spec.get("seed", 0), rtol=tolerance.rtol, atol=tolerance.atol)
    return problems, _facts(measured or {})


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
