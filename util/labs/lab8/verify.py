"""What makes a plan's run or a graph's outputs wrong: the course's checks of task 8.3 and 8.5 results.

The public checks call these on the notebook's own small graphs; the grader's judge calls them on
what the hidden cases saved. They compare with onnxruntime (the reference executor) and with the
course's plan; none of them runs a plan or an executor of its own.
"""
from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from util.contract import Tolerance

PEAK_BYTES = 128 * 1024
"""Task 8.3: what ``execute`` may allocate besides the pool (numpy's own small buffers fit easily;
a full-size temporary of any activation in the hidden cases does not)."""


def reference_values(model, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every node output of ``model`` on ``feeds``, by onnxruntime (one thread, no graph rewrites)."""
    from onnx import TensorProto, helper

    from util.onnx_models import make_model
    from util.onnx_session import run

    # the same nodes, weights and inputs, with every node output listed as a graph output: a declared
    # output keeps its type, any other is float32 (as every tensor the executors compute is)
    declared = {value.name: value for value in model.graph.output}
    results = [declared.get(tensor) or helper.make_tensor_value_info(tensor, TensorProto.FLOAT, None)
               for tensor in dict.fromkeys(t for n in model.graph.node for t in n.output if t)]
    every = make_model(helper.make_graph(model.graph.node, model.graph.name, model.graph.input, results,
                                         model.graph.initializer), like=model)
    return run(every, feeds)


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


def matmul_sizes(model, shapes: Mapping[str, list[int]]) -> list[tuple[int, int, int]]:
    """(M, K, N) of every Gemm and 2-D MatMul of ``model``, in node order."""
    sizes = []
    for node in model.graph.node:
        if node.op_type in ("Gemm", "MatMul"):
            (m, n), a = shapes[node.output[0]], shapes[node.input[0]]
            k = a[0] if any(attr.name == "transA" and attr.i for attr in node.attribute) else a[-1]
            sizes.append((m, k, n))
    return sizes
