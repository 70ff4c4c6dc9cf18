"""Lab 8's public checks (``check("8.2")``): hand-countable graphs and stated rules, never a hidden
case's input. ``CHECKS[task id]`` is attached to each task in ``tasks.py``.

The function checks build one-node graphs by hand (their shapes can be worked out on paper), plan
the notebook's ``chain4`` (drawn in the notebook), and run the student's executor and kernel on
tiny inputs against onnxruntime and float64 numpy.
"""
from __future__ import annotations

from typing import Any

from util.checks import equal, first, has_keys, is_int
from util.contract import Check

MLP_SHAPES = {"x": [1000, 784], "h1": [1000, 256], "a1": [1000, 256], "h2": [1000, 100], "a2": [1000, 100],
              "logits": [1000, 10], "y": [1000, 10]}
"""The MLP's shapes at batch 1000, as the notebook states them."""


def _one_node(op: str, inputs: dict[str, list[int]], weights: dict[str, Any], **attributes):
    """A graph with one ``op`` node reading ``inputs`` (graph inputs) then ``weights`` (initializers)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from util.onnx_models import make_model

    inits = [numpy_helper.from_array(np.asarray(value), name) for name, value in weights.items()]
    graph = helper.make_graph(
        [helper.make_node(op, [*inputs, *weights], ["out"], name="node", **attributes)], f"one_{op.lower()}",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in inputs.items()],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    return make_model(graph)


def _shape_of(fn, model, inputs) -> Any:
    found = fn(model, inputs)
    return list(found["out"]) if isinstance(found, dict) and "out" in found else found


def _hand_shapes(fn) -> str | None:
    import numpy as np

    gemm = _one_node("Gemm", {"A": [3, 4], "B": [6, 3]}, {}, transA=1, transB=1)
    conv = _one_node("Conv", {"x": [1, 1, 5, 5]}, {"W": np.zeros((2, 1, 3, 3), np.float32)}, kernel_shape=[3, 3],
                     pads=[1, 1, 1, 1], strides=[2, 2])
    batched = _one_node("MatMul", {"a": [3, 1, 2, 4], "b": [5, 4, 6]}, {})
    vector = _one_node("MatMul", {"v": [4], "m": [4, 6]}, {})
    reshape = _one_node("Reshape", {"t": [2, 3, 4]}, {"s": np.array([0, -1], np.int64)})
    return first(equal(_shape_of(fn, gemm, {"A": [3, 4], "B": [6, 3]}), [4, 6], "Gemm A 3x4 (transA), B 6x3 (transB)"),
                 equal(_shape_of(fn, conv, {"x": [1, 1, 5, 5]}), [1, 2, 3, 3], "Conv 2@3x3, pad 1, stride 2 on 1x1x5x5"),
                 equal(_shape_of(fn, batched, {"a": [3, 1, 2, 4], "b": [5, 4, 6]}), [3, 5, 2, 6],
                       "MatMul 3x1x2x4 @ 5x4x6"),
                 equal(_shape_of(fn, vector, {"v": [4], "m": [4, 6]}), [6], "MatMul of a vector [4] by 4x6"),
                 equal(_shape_of(fn, reshape, {"t": [2, 3, 4]}), [2, 12], "Reshape 2x3x4 by [0, -1]"))


def _chain_plan(fn) -> str | None:
    from util.labs.lab8.graphs import chain4
    from util.labs.lab8.plans import course_shapes

    model = chain4()
    plan = fn(model, course_shapes(model, {"x": [1, 2]}))
    return first(has_keys(plan, ("buffer_bytes", "assign"), "the plan"),
                 equal(plan["buffer_bytes"], [16, 32, 16], "buffer_bytes"),
                 equal(dict(plan["assign"]), {"t1": 0, "t2": 1, "t3": 0, "y": 2}, "assign"))


def _mlp_plan_valid(fn) -> str | None:
    from util.labs.lab8.graphs import mlp
    from util.labs.lab8.plans import course_shapes, plan_problems, tensor_nbytes

    model = mlp()
    shapes = course_shapes(model, {"x": [64, 784]})
    problems = plan_problems(model, tensor_nbytes(model, shapes), fn(model, shapes))
    return "; ".join(problems) or None


def _chain_run(fn) -> str | None:
    import numpy as np

    from util.contract import Tolerance
    from util.labs.lab8.graphs import chain4
    from util.labs.lab8.harness import run_arrays, run_in_plan
    from util.labs.lab8.plans import shapes_and_sizes
    from util.labs.lab8.verify import run_problems

    model = chain4()
    feeds = {"x": np.array([[0.5, -2.0]], np.float32)}
    run = run_in_plan(fn, model, feeds)   # fn returns JSON here (check's convention): the pool tells the rest
    problems = run_problems(model, shapes_and_sizes(model, {"x": [1, 2]}), feeds, run_arrays(run),
                            Tolerance(rtol=1e-4, atol=1e-5), offsets=False)
    return "; ".join(problems) or None


def _kernel_hand(fn) -> str | None:
    import numpy as np

    from util.labs.lab8.kernel import kernel_report, load_matmul

    matmul = load_matmul(fn())
    c = np.full((2, 2), np.nan, np.float32)
    matmul(np.array([[1, 2], [3, 4]], np.float32), np.array([[5, 6], [7, 8]], np.float32), c)
    report = kernel_report(matmul)
    wrong = [size for size, right in report["odd_sizes_correct"].items() if not right]
    return first(equal(c.tolist(), [[19.0, 22.0], [43.0, 50.0]], "mm_fast of [[1, 2], [3, 4]] by [[5, 6], [7, 8]]"),
                 f"mm_fast is wrong on {', '.join(wrong)} (C filled with NaN first)" if wrong else None)


def _chain_with_kernel(fn) -> str | None:
    import numpy as np

    from util.labs.lab8.graphs import chain4
    from util.labs.lab8.kernel import build_library
    from util.labs.lab8.verify import reference_values

    model = chain4()
    feeds = {"x": np.array([[0.5, -2.0]], np.float32)}
    found = np.asarray(dict(fn(model, feeds, str(build_library("kernel/mm_fast.cpp")))).get("y"))
    expected = reference_values(model, feeds)["y"]
    return None if found.shape == expected.shape and np.allclose(found, expected, rtol=1e-4, atol=1e-5) else \
        f"y is {found.tolist()}; onnxruntime says {expected.tolist()}"


def _sums_to_one(row: Any, what: str) -> str | None:
    return None if isinstance(row, list) and len(row) == 10 and abs(sum(row) - 1) < 1e-5 else \
        f"{what} should be 10 probabilities that sum to 1; found {row!r}"


CHECKS: dict[str, tuple[Check, ...]] = {
    "8.1": (
        Check("the MLP's shapes at batch 1000 (stated in the notebook)",
              lambda a: equal({k: list(v) for k, v in a.items()}, MLP_SHAPES, "shapes"),
              "one entry per graph input and node output, no initializers; Gemm with transB=1 reads N from B's "
              "first dimension"),
        Check("hand counts: Gemm transA/transB, Conv with padding and stride, batched and 1-D MatMul, Reshape 0/-1",
              _hand_shapes, "out = floor((in + pad_begin + pad_end - dilation*(k-1) - 1) / stride) + 1; MatMul "
              "broadcasts the batch dimensions; a 1-D operand gains and then loses a dimension; Reshape's 0 copies "
              "the input's dimension", calls_function=True),
    ),
    "8.2": (
        Check("planned_bytes = sum(buffer_bytes), buffers = len(buffer_bytes), naive 2,928,000 bytes",
              lambda a: first(is_int(a["planned_bytes"], "planned_bytes"),
                              equal(a["planned_bytes"], sum(a["buffer_bytes"]), "planned_bytes"),
                              equal(a["buffers"], len(a["buffer_bytes"]), "buffers"),
                              equal(a["naive_bytes"], 2_928_000, "naive_bytes")),
              "summarize_plan adds the tensors' bytes for naive_bytes; the graph input x is not planned"),
        Check("chain4 plans to buffers [16, 32, 16]: t3 reuses t1's buffer, y gets its own", _chain_plan,
              "t1 is freed after g2 ran; g3 needs 16 bytes: best fit is t1's old buffer; a graph output always "
              "gets a new buffer", calls_function=True),
        Check("the MLP's plan at batch 64 is valid: no two tensors alive at the same node share a buffer",
              _mlp_plan_valid, "free a tensor's buffer only after its LAST reader ran, and never give a node's "
              "output a buffer that node reads", calls_function=True),
    ),
    "8.3": (
        Check("y's first row is 10 probabilities; 6 tensors in place; the peak within the bound",
              lambda a: first(_sums_to_one(a["y_first_row"], "y_first_row"),
                              equal(a["tensors_in_place"], 6, "tensors_in_place"),
                              equal(a["peak_within_bound"], True, "peak_within_bound")),
              "compute every node's result into tensor_view(pool[assign[t]], shapes[t]) with out="),
        Check("execute runs chain4 inside the course's plan: onnxruntime's y, every tensor a view, few allocations",
              _chain_run, "look up each tensor's buffer in plan['assign'], view its first bytes as float32 of the "
              "tensor's shape, and pass that view as out=", calls_function=True),
    ),
    "8.4": (
        Check("the hand example is [[58, 64], [139, 154]] and every odd size is right",
              lambda a: first(equal(a["hand_example"], [[58.0, 64.0], [139.0, 154.0]], "hand_example"),
                              equal(sorted(k for k, v in a["odd_sizes_correct"].items() if not v), [],
                                    "the wrong sizes")),
              "C is overwritten, not added to: start each sum at zero; handle the sizes that are not a "
              "multiple of your block"),
        Check("mm_fast of [[1, 2], [3, 4]] by [[5, 6], [7, 8]] is [[19, 22], [43, 50]]; odd sizes right",
              _kernel_hand, "C[i][j] = sum over k of A[i*K + k] * B[k*N + j] (row-major)", calls_function=True),
    ),
    "8.5": (
        Check("the MLP's 3 Gemms are transposed, none keeps transB=1; y's first row is 10 probabilities",
              lambda a: first(equal(a["gemms_transposed"], 3, "gemms_transposed"),
                              equal(a["transB_left"], 0, "transB_left"),
                              _sums_to_one(a["y_first_row"], "y_first_row")),
              "store W.T (contiguous) as the initializer and set transB to 0"),
        Check("run_with_kernel on chain4 gives onnxruntime's y", _chain_with_kernel,
              "transpose the weights, then execute inside the course's plan with load_matmul(library)",
              calls_function=True),
    ),
}
