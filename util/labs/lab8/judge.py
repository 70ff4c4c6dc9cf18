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

from util.artifacts import load_arrays
from util.contract import Tolerance

PEAK_BYTES = 128 * 1024
"""Task 8.3: what ``execute`` may allocate besides the pool (numpy's own small buffers fit easily;
a full-size temporary of any activation in the hidden cases does not)."""


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


def reference_values(model, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every node output of ``model`` on ``feeds``, by onnxruntime (one thread, no graph rewrites)."""
    import onnx
    import onnxruntime as ort

    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    present = {value.name for value in exposed.graph.output}
    for node in exposed.graph.node:
        for name in node.output:
            if name not in present:
                exposed.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(exposed.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, dict(feeds))))


def _close(found: np.ndarray, expected: np.ndarray, tolerance: Tolerance) -> bool:
    return found.shape == expected.shape and bool(np.allclose(found, expected, rtol=tolerance.rtol,
                                                             atol=tolerance.atol))


def output_problems(model, saved: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray],
                    tolerance: Tolerance) -> list[str]:
    """Each graph output saved as ``output/<name>`` against onnxruntime's."""
    problems = []
    for value in model.graph.output:
        found = saved.get(f"output/{value.name}")
        if found is None:
            problems.append(f"the outputs have no {value.name!r}")
        elif found.shape != reference[value.name].shape:
            problems.append(f"output {value.name!r} has shape {list(found.shape)}; onnxruntime's has "
                            f"{list(reference[value.name].shape)}")
        elif not np.isfinite(found).all():
            problems.append(f"output {value.name!r} holds NaN or infinity (onnxruntime's does not)")
        elif not _close(found, reference[value.name], tolerance):
            worst = float(np.abs(found - reference[value.name]).max())
            problems.append(f"output {value.name!r} differs from onnxruntime's by up to {worst:.2g}")
    return problems


def run_problems(model, sizes: Mapping[str, tuple[list[int], int]], feeds: Mapping[str, np.ndarray],
                 saved: Mapping[str, np.ndarray], tolerance: Tolerance, offsets: bool = True) -> list[str]:
    """What is wrong with a run inside the course's plan, from the arrays ``harness.run_arrays`` made:
    outputs against onnxruntime, (with ``offsets``) every tensor at the start of its buffer, each
    buffer holding the last tensor the plan puts there, and at most :data:`PEAK_BYTES` allocated."""
    from util.labs.lab8.plans import course_plan

    reference = reference_values(model, feeds)
    problems = output_problems(model, saved, reference, tolerance)
    plan = course_plan(model, {name: dims for name, (dims, _) in sizes.items()})
    order = [name for node in model.graph.node for name in node.output]
    found = saved.get("offsets", np.array([]))
    if offsets and len(found) != len(order):
        return problems + ["the case saved no tensor offsets"]
    for name, offset in zip(order, found.tolist() if offsets else ()):
        if offset != 0:
            problems.append(f"env[{name!r}] is not a view of the start of its buffer {plan['assign'][name]}")
            break
    last = {plan["assign"][name]: name for name in order}
    for buffer, name in sorted(last.items()):
        dims, item = sizes[name]
        raw = saved.get(f"pool/{buffer}")
        if raw is None or raw.dtype != np.uint8 or raw.size < math.prod(dims) * item:
            problems.append(f"the case saved no buffer {buffer}")
            break
        held = raw[:math.prod(dims) * item].view(np.float32).reshape(dims)
        if not _close(held, reference[name], tolerance):
            problems.append(f"after execute, buffer {buffer} does not hold {name!r}, the last tensor the plan puts "
                            "there: compute every tensor into its own view of the pool")
            break
    peak = int(saved.get("peak", np.array(-1)))
    if not 0 <= peak <= PEAK_BYTES:
        problems.append(f"execute allocated {peak:,} bytes besides the pool (at most {PEAK_BYTES:,}): "
                        "write every result into its view with out=")
    return problems


def check_execution(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 8.3: :func:`run_problems` on the arrays the case saved."""
    model, sizes, feeds = _setting(spec)
    try:
        saved = load_arrays(data)
    except ValueError as exc:
        return [str(exc)]
    return run_problems(model, sizes, feeds, saved, tolerance)


def check_kernel(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 8.4: the saved library's ``mm_fast`` is correct on ``spec["check"]`` sizes and, with
    ``spec["timed"]``, at least ``spec["min_speedup"]`` times the naive kernel (timed by the grader)."""
    from util.labs.lab8.timing import judge_library

    try:
        library = load_arrays(data).get("library")
    except ValueError as exc:
        return [str(exc)]
    if library is None or library.dtype != np.uint8:
        return ["the case saved no library"]
    problems, _ = judge_library(library.tobytes(), check=spec.get("check", ()), timed=spec.get("timed", ()),
                                pairs=spec.get("pairs", 5), min_speedup=spec.get("min_speedup", 3.0),
                                seed=spec.get("seed", 0), rtol=tolerance.rtol, atol=tolerance.atol)
    return problems


def matmul_sizes(model, shapes: Mapping[str, list[int]]) -> list[tuple[int, int, int]]:
    """(M, K, N) of every Gemm and 2-D MatMul of ``model``, in node order."""
    sizes = []
    for node in model.graph.node:
        if node.op_type in ("Gemm", "MatMul"):
            (m, n), a = shapes[node.output[0]], shapes[node.input[0]]
            k = a[0] if any(attr.name == "transA" and attr.i for attr in node.attribute) else a[-1]
            sizes.append((m, k, n))
    return sizes


def check_end_to_end(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 8.5: outputs close to onnxruntime's, and the saved library at least ``spec["min_speedup"]``
    times the naive kernel on the graph's own matrix products (timed by the grader)."""
    from util.labs.lab8.timing import judge_library

    model, sizes, feeds = _setting(spec)
    try:
        saved = load_arrays(data)
    except ValueError as exc:
        return [str(exc)]
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
