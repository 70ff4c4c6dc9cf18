"""Lab 3's declaration, given helpers and the solution's tilings against the grader's own checks.

The notebooks themselves are graded in tests/test_labs.py (solution 100, lab 0, examples exact)."""
import itertools

import numpy as np
import onnx
import pytest

from grader.author.solution import solution_namespace
from grader.judge import artifacts
from util.artifacts import case_file
from util.labs import get_lab
from util.labs.lab3 import judge
from util.labs.lab3.graphs import gemm_chain_graph, perturbed
from util.labs.lab3.tasks import NUMBERS

LAB = get_lab("lab3")


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab3", ("3.1", "3.2"))


def test_declaration_adds_up_and_names_real_checks():
    assert LAB.max_points == 100
    files = [case_file(c.spec) for t in LAB.tasks if t.grader_check for c in t.cases]
    assert len(files) == len(set(files)) == 15
    for task in LAB.tasks:
        if task.grader_check:
            assert callable(artifacts.check_function(task))


@pytest.mark.parametrize("M, K, N, bounds, trans_a, trans_b", [
    (1, 1, 1, (1, 1, 1), False, False),
    (17, 9, 31, (4, 2, 8), True, False),
    (64, 65, 63, (64, 64, 64), False, True),
    (12, 40, 7, (5, 7, 3), True, True),
])
def test_the_solution_passes_the_grader_checks_on_other_shapes(solution, M, K, N, bounds, trans_a, trans_b):
    spec = {"M": M, "K": K, "N": N, "bounds": list(bounds), "trans_a": trans_a, "trans_b": trans_b,
            "alpha": 0.5, "beta": -2.0}
    tiled = solution["tiled_gemm_model"](M, K, N, bounds, trans_a=trans_a, trans_b=trans_b, alpha=0.5, beta=-2.0)
    gemm = solution["gemm_model"](M, K, N, trans_a=trans_a, trans_b=trans_b, alpha=0.5, beta=-2.0)
    assert judge.check_tiled(spec, tiled.SerializeToString(), NUMBERS) == []
    assert judge.check_gemm(spec, gemm.SerializeToString(), NUMBERS) == []
    expected = -(-M // bounds[0]) * -(-K // bounds[1]) * -(-N // bounds[2])
    assert sum(n.op_type == "MatMul" for n in tiled.graph.node) == expected


def test_the_netron_sized_example_is_small(solution):
    tiled = solution["tiled_gemm_model"](32, 64, 128, (16, 32, 32))
    ops = [n.op_type for n in tiled.graph.node]
    assert ops.count("MatMul") == 16 and ops.count("Sum") == 8 and len(ops) < 40


def test_the_gemm_check_refuses_a_tiled_model_and_vice_versa(solution):
    spec = {"M": 8, "K": 8, "N": 8, "bounds": [4, 4, 4]}
    tiled = solution["tiled_gemm_model"](8, 8, 8, (4, 4, 4)).SerializeToString()
    gemm = solution["gemm_model"](8, 8, 8).SerializeToString()
    assert judge.check_gemm(spec, tiled, NUMBERS)[0].startswith("the model must be one Gemm node")
    assert judge.check_tiled(spec, gemm, NUMBERS)[0] == "1 Gemm node is left; every Gemm must be replaced"


def test_gemm_chain_has_three_awkward_gemms_and_is_reproducible():
    chain = gemm_chain_graph()
    assert [n.op_type for n in chain.graph.node].count("Gemm") == 3
    assert chain.SerializeToString() == gemm_chain_graph().SerializeToString()
    onnx.checker.check_model(chain, full_check=True)
    attrs = [{a.name: onnx.helper.get_attribute_value(a) for a in n.attribute} for n in chain.graph.node
             if n.op_type == "Gemm"]
    assert attrs[2] == {"alpha": 1.5, "beta": 0.25, "transA": 1, "transB": 1}


def test_perturbed_changes_exactly_what_it_says():
    chain = gemm_chain_graph()
    before = {i.name: onnx.numpy_helper.to_array(i) for i in chain.graph.initializer}
    after = {i.name: onnx.numpy_helper.to_array(i) for i in perturbed(chain, "b3", 0.5, index=4).graph.initializer}
    changed = [(name, idx) for name in before for idx in zip(*np.nonzero(before[name] != after[name]))]
    assert changed == [("b3", (4,))]
    assert after["b3"][4] == np.float32(before["b3"][4] + np.float32(0.5))
    with pytest.raises(KeyError, match="no initializer 'nope'"):
        perturbed(chain, "nope", 1.0)


def test_every_hidden_gemm_case_has_a_partial_tile_or_a_transpose_somewhere():
    cases = [c.spec for c in LAB.task("3.2").cases]
    partial = [s for s in cases if any(d % b for d, b in zip((s["M"], s["K"], s["N"]), s["bounds"]))]
    assert len(partial) == 5                          # all but "128x64x192 divisible"
    assert {(s["trans_a"], s["trans_b"]) for s in cases} == set(itertools.product((False, True), repeat=2))
