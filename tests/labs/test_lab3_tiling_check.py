"""The grader's structural and numerical checks of tiled models, on small hand-built graphs."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from util.contract import Tolerance
from util.labs.lab3 import judge
from util.labs.lab3 import tiling as tc

F32 = TensorProto.FLOAT
TOL = Tolerance(rtol=1e-4, atol=1e-4)


def model(nodes, inputs, outputs, inits=(), ir_version=8):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F32, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, F32, s) for n, s in outputs], list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = ir_version
    return m


def split_k(k_sizes, m=4, n=6):
    """Y = A @ B + C with K split in pieces: the smallest honest tiled Gemm."""
    k = sum(k_sizes)
    parts = len(k_sizes)
    nodes = [helper.make_node("Split", ["A", "ks"], [f"a{i}" for i in range(parts)], axis=1),
             helper.make_node("Split", ["B", "ks"], [f"b{i}" for i in range(parts)], axis=0)]
    nodes += [helper.make_node("MatMul", [f"a{i}", f"b{i}"], [f"p{i}"], name=f"mm{i}") for i in range(parts)]
    nodes += [helper.make_node("Sum", [f"p{i}" for i in range(parts)], ["s"]),
              helper.make_node("Add", ["s", "C"], ["Y"])]
    ks = numpy_helper.from_array(np.array(k_sizes, np.int64), "ks")
    return model(nodes, [("A", [m, k]), ("B", [k, n]), ("C", [n])], [("Y", [m, n])], [ks])


SPEC = {"M": 4, "K": 10, "N": 6, "bounds": [4, 5, 6]}


def test_an_honest_tiling_passes_structure_and_numbers():
    good = split_k([5, 5])
    assert tc.structure_problems(good, allowed_ops=tc.TILING_OPS, bounds=(4, 5, 6)) == []
    assert judge.check_tiled(SPEC, good.SerializeToString(), TOL) == []
    shapes, unknown = tc.matmul_shapes(onnx.shape_inference.infer_shapes(good))
    assert [(s.m, s.k, s.n) for s in shapes] == [(4, 5, 6), (4, 5, 6)] and unknown == []


def test_a_matmul_over_the_bound_is_named_with_its_sizes():
    problems = tc.structure_problems(split_k([6, 4]), allowed_ops=tc.TILING_OPS, bounds=(4, 5, 6))
    assert problems == ["1 MatMul(s) exceed the bounds 4x5x6 (m x k x n); e.g. 'mm0' multiplies 4x6 by 6x6"]


def test_a_left_gemm_and_a_foreign_op_are_reported():
    gemm = model([helper.make_node("Gemm", ["A", "B", "C"], ["Y"])], [("A", [4, 10]), ("B", [10, 6]), ("C", [6])],
                 [("Y", [4, 6])])
    problems = tc.structure_problems(gemm, allowed_ops=tc.TILING_OPS, bounds=(4, 5, 6))
    assert problems[0] == "1 Gemm node is left; every Gemm must be replaced"
    einsum = model([helper.make_node("Einsum", ["A", "B"], ["Y"], equation="mk,kn->mn")],
                   [("A", [4, 10]), ("B", [10, 6])], [("Y", [4, 6])])
    assert "operator Einsum not allowed here" in tc.structure_problems(einsum, allowed_ops=tc.TILING_OPS,
                                                                       bounds=(4, 5, 6))[0]


def test_batched_matmul_is_judged_per_batch_slice():
    ok = model([helper.make_node("MatMul", ["A", "B"], ["Y"], name="bmm")], [("A", [7, 3, 4, 5]), ("B", [7, 1, 5, 6])],
               [("Y", [7, 3, 4, 6])])
    assert tc.structure_problems(ok, allowed_ops=tc.TILING_OPS, bounds=(4, 5, 6)) == []
    shapes, _ = tc.matmul_shapes(onnx.shape_inference.infer_shapes(ok))
    assert shapes == [tc.MatMulShape("bmm", 4, 5, 6, (7, 3))]
    big = model([helper.make_node("MatMul", ["A", "B"], ["Y"], name="bmm")], [("A", [7, 8, 5]), ("B", [5, 6])],
                [("Y", [7, 8, 6])])
    assert tc.structure_problems(big, allowed_ops=tc.TILING_OPS, bounds=(4, 5, 6)) == [
        "1 MatMul(s) exceed the bounds 4x5x6 (m x k x n); e.g. 'bmm' multiplies 8x5 by 5x6 per batch slice"]


def test_unknown_shapes_cannot_be_shown_to_fit():
    dynamic = model([helper.make_node("MatMul", ["A", "B"], ["Y"], name="mm")], [("A", ["m", 5]), ("B", [5, 6])],
                    [("Y", ["m", 6])])
    assert "cannot tell the input shapes of 1 MatMul(s) (e.g. 'mm')" in tc.structure_problems(
        dynamic, allowed_ops=tc.TILING_OPS, bounds=(4, 5, 6))[0]


def test_elementwise_mul_cannot_replace_matmul():
    outer = model([helper.make_node("Mul", ["A", "B"], ["P"], name="outer"),
                   helper.make_node("ReduceSum", ["P", "axis"], ["Y"], keepdims=0)],
                  [("A", [4, 5, 1]), ("B", [1, 5, 6])], [("Y", [4, 6])],
                  [numpy_helper.from_array(np.array([1], np.int64), "axis")])
    problems = tc.structure_problems(outer, allowed_ops=tc.TILING_OPS, bounds=(4, 5, 6))
    assert any("Mul 'outer' multiplies two tensors elementwise" in p for p in problems)


def test_ir_version_too_new_for_onnxruntime():
    new = split_k([5, 5])
    new.ir_version = 14
    assert tc.structure_problems(new, allowed_ops=tc.TILING_OPS, bounds=(4, 5, 6))[0].startswith(
        "the model has IR version 14, but onnxruntime 1.31 loads at most 13")


def test_split_sizes_that_miss_the_partial_tile_fail_shape_inference():
    short = split_k([5, 5])
    short.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.array([5], np.int64), "ks"))  # drops 5 columns
    problems = judge.check_tiled(SPEC, short.SerializeToString(), TOL)
    assert problems and ("shape inference fails" in problems[-1] or "checker" in problems[-1])


def test_wrong_numbers_name_the_worst_element_but_not_the_expected_value():
    wrong = split_k([5, 5])
    wrong.graph.node[-2].input[:] = ["p0"]           # forgets the second K tile
    problems = judge.check_tiled(SPEC, wrong.SerializeToString(), TOL)
    assert len(problems) == 1 and problems[0].startswith("Y differs on the grader's random inputs: ")
    assert "within rtol=0.0001, atol=0.0001" in problems[0]


def test_wrong_interface_and_garbage_are_problems_not_crashes():
    assert judge.check_tiled({**SPEC, "trans_a": True}, split_k([5, 5]).SerializeToString(), TOL)[0] == \
        "graph input 'A' is float32 [4, 10], expected float32 [10, 4]"
    assert judge.check_tiled(SPEC, b"\x00garbage", TOL) == ["the saved file is not an ONNX model (DecodeError)"]


def test_gemm_check_wants_exactly_one_gemm():
    spec = {"M": 4, "K": 10, "N": 6, "trans_b": True, "alpha": 0.5, "beta": 2.0}
    gemm = model([helper.make_node("Gemm", ["A", "B", "C"], ["Y"], transB=1, alpha=0.5, beta=2.0)],
                 [("A", [4, 10]), ("B", [6, 10]), ("C", [6])], [("Y", [4, 6])])
    assert judge.check_gemm(spec, gemm.SerializeToString(), TOL) == []
    attrs = gemm.graph.node[0].attribute
    del attrs[[a.name for a in attrs].index("beta")]  # drops beta: the bias is no longer doubled
    assert judge.check_gemm(spec, gemm.SerializeToString(), TOL)[0].startswith("Y differs")


@pytest.mark.parametrize("bounds", [(64, 64, 64), (2, 3, 4)])
def test_model_check_accepts_nothing_that_keeps_a_gemm(bounds):
    from util.labs.lab3.graphs import gemm_chain_graph
    problems = judge.check_model({"model": "gemm_chain", "bounds": list(bounds)},
                                       gemm_chain_graph().SerializeToString(), TOL)
    assert problems[0] == "3 Gemm nodes are left; every Gemm must be replaced"


def test_a_model_that_would_allocate_gigabytes_is_refused_before_it_runs():
    shape = numpy_helper.from_array(np.array([1 << 15, 1 << 15], np.int64), "shape")
    huge = model([helper.make_node("Expand", ["A", "shape"], ["E"]),
                  helper.make_node("ReduceSum", ["E"], ["Y"], keepdims=0)],
                 [("A", [1, 1])], [("Y", [])], [shape])
    problems = tc.structure_problems(huge, allowed_ops=tc.TILING_OPS)
    assert problems == ["tensor 'E' would hold 1,073,741,824 elements (shape [32768, 32768]); the grader runs "
                        "models with at most 134,217,728 elements per tensor"]
