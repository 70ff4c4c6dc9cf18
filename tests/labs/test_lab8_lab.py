"""Lab 8's declaration, graphs and grader-side checks of plans and runs, against the solution.

The notebooks themselves are graded in tests/test_labs.py (solution 100, lab 0, examples exact);
the kernel judge has its own file (test_lab8_kernel_judge.py)."""
from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from grader.author.solution import solution_namespace
from grader.judge import artifacts
from util.artifacts import case_file
from util.contract import Tolerance
from util.labs import get_lab
from util.labs.lab8 import cases, judge, tasks, verify
from util.labs.lab8.graphs import GRAPHS, chain4, graph, random_feeds
from util.labs.lab8.harness import run_arrays, run_in_plan
from util.labs.lab8.plans import (
    course_plan,
    course_shapes,
    lifetimes,
    plan_problems,
    shapes_and_sizes,
    summarize_plan,
    tensor_nbytes,
)

LAB = get_lab("lab8")
OUTPUTS = Tolerance(rtol=1e-4, atol=1e-5)


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab8", ("8.1", "8.2", "8.3"))


def specs(*task_ids: str) -> list[dict]:
    return [case.spec for task in LAB.tasks if task.id in task_ids for case in task.cases]


def test_declaration_adds_up_and_names_real_checks():
    assert LAB.max_points == 100
    assert [t.max_points for t in LAB.tasks] == [20, 25, 20, 25, 10]
    files = [case_file(c.spec) for t in LAB.tasks if t.grader_check for c in t.cases]
    assert len(files) == len(set(files)) == 12
    for task in LAB.tasks:
        if task.grader_check:
            assert callable(artifacts.check_function(task))


def test_graphs_are_reproducible_and_run_in_onnxruntime():
    for name in GRAPHS:
        if name != "resnet18":
            assert graph(name).SerializeToString() == graph(name).SerializeToString(), name
    zoo = graph("op_zoo")
    spec = cases.ZOO["inputs"]
    outputs = verify.reference_values(zoo, random_feeds(zoo, spec, seed=0))
    assert outputs["rows"].shape == (7, 12) and outputs["middle"].shape == (2, 14, 3)
    assert outputs["bmm_shape"].tolist() == [2, 4, 5, 7]


def test_the_solution_agrees_with_onnx_shape_inference_on_every_graph(solution):
    """The references of 8.1 come from the solution; it must say what onnx.shape_inference says."""
    seen = set()
    for spec in specs("8.1", "8.2", "8.3", "8.5"):
        model = graph(spec["graph"])
        assert solution["infer_shapes"](model, spec["inputs"]) == course_shapes(model, spec["inputs"]), spec
        seen.add(spec["graph"])
    assert seen == set(GRAPHS) - {"chain4"}


def test_the_op_zoo_has_the_awkward_cases(solution):
    shapes = solution["infer_shapes"](graph("op_zoo"), cases.ZOO["inputs"])
    assert (shapes["conv"], shapes["pool"], shapes["rows"], shapes["transposed"], shapes["bmm"], shapes["vm"],
            shapes["cat"], shapes["bmm_shape"]) == ([1, 4, 8, 10], [1, 4, 4, 5], [7, 12], [4, 3, 7], [2, 4, 5, 7],
                                                     [9], [6, 18], [4])


def test_infer_shapes_may_not_ask_onnx():
    def lazy(model, input_shapes):
        return onnx.shape_inference.infer_shapes(model)

    with pytest.raises(RuntimeError, match="onnx.shape_inference is not available"):
        tasks._infer(lazy, cases.ZOO)
    assert onnx.shape_inference.infer_shapes is not None and course_shapes(chain4(), {"x": [1, 2]})["y"] == [1, 4]


def test_the_plan_check_by_hand():
    model = chain4()
    nbytes = tensor_nbytes(model, course_shapes(model, {"x": [1, 2]}))
    assert lifetimes(model) == {"t1": (0, 1), "t2": (1, 2), "t3": (2, 3), "y": (3, 4)}
    good = {"buffer_bytes": [16, 32, 16], "assign": {"t1": 0, "t2": 1, "t3": 0, "y": 2}}
    assert plan_problems(model, nbytes, good) == []
    in_place = {"buffer_bytes": [32, 16], "assign": {"t1": 0, "t2": 0, "t3": 1, "y": 1}}
    assert plan_problems(model, nbytes, in_place) == [
        "'t1' (alive at nodes 0..1) and 't2' (alive at 1..2) share buffer 0",
        "'t3' (alive at nodes 2..3) and 'y' (alive at 3..4) share buffer 1"]
    small = {"buffer_bytes": [16, 16, 16], "assign": {"t1": 0, "t2": 1, "t3": 0, "y": 2}}
    assert plan_problems(model, nbytes, small) == ["'t2' needs 32 bytes; buffer 1 holds 16"]
    assert plan_problems(model, nbytes, {"buffer_bytes": [16], "assign": {"t1": 0, "t9": 0}})[:2] == [
        "'t2' has no buffer", "'t3' has no buffer"]
    assert plan_problems(model, nbytes, [1, 2]) == [
        "a plan is a dict {'buffer_bytes': [int, ...], 'assign': {tensor: buffer id}}"]


def test_the_course_plan_is_valid_and_the_solution_plans_match_the_design(solution):
    for spec in specs("8.2", "8.3", "8.5"):
        model = graph(spec["graph"])
        shapes = course_shapes(model, spec["inputs"])
        assert plan_problems(model, tensor_nbytes(model, shapes), course_plan(model, shapes)) == [], spec
        plan = solution["plan_memory"](model, shapes)
        data = json.dumps(plan).encode()
        assert judge.check_plan(spec, data, Tolerance()) == [], spec
    mlp = graph("mlp")
    for batch, planned in ((1000, 2_088_000), (64, 133_632)):
        shapes = course_shapes(mlp, {"x": [batch, 784]})
        summary = summarize_plan(mlp, shapes, solution["plan_memory"](mlp, shapes))
        assert (summary["naive_bytes"], summary["planned_bytes"], summary["buffers"]) == (
            2_928_000 * batch // 1000, planned, 3)


def _sloppy(model, weights, feeds, shapes, plan, pool, matmul):
    """Right numbers, each result built as a temporary and then copied into its view."""
    from onnx import helper
    values, env = {**weights, **feeds}, {}
    for node in model.graph.node:
        ins = [values[i] for i in node.input]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Gemm":
            result = ins[0] @ (ins[1].T if attrs.get("transB") else ins[1]) + (ins[2] if len(ins) > 2 else 0)
        elif node.op_type == "Relu":
            result = np.maximum(ins[0], 0)
        elif node.op_type == "Add":
            result = ins[0] + ins[1]
        else:
            exp = np.exp(ins[0] - ins[0].max(-1, keepdims=True))
            result = exp / exp.sum(-1, keepdims=True)
        name = node.output[0]
        view = pool[plan["assign"][name]][:result.nbytes].view(np.float32).reshape(result.shape)
        view[...] = result
        env[name] = values[name] = view
    return {o.name: values[o.name] for o in model.graph.output}, env


def _outside(model, weights, feeds, shapes, plan, pool, matmul):
    """Right numbers, never written to the pool."""
    outputs, env = _sloppy(model, weights, feeds, shapes, plan, [np.zeros_like(b) for b in pool], matmul)
    return {k: v.copy() for k, v in outputs.items()}, {k: v.copy() for k, v in env.items()}


def test_the_run_check_tells_inside_from_outside_the_plan(solution):
    spec = LAB.task("8.3").cases[1].spec          # the MLP at batch 500
    model, feeds = graph(spec["graph"]), random_feeds(graph(spec["graph"]), spec["inputs"], spec["seed"])
    sizes = shapes_and_sizes(model, spec["inputs"])
    found = {}
    for name, execute in (("solution", solution["execute"]), ("sloppy", _sloppy), ("outside", _outside)):
        run = run_in_plan(execute, model, feeds)
        found[name] = verify.run_problems(model, sizes, feeds, run_arrays(run), OUTPUTS)
    assert found["solution"] == []
    assert len(found["sloppy"]) == 1 and found["sloppy"][0].startswith("execute allocated ")
    assert found["outside"][0] == "env['h1'] is not a view of the start of its buffer 0"
    assert found["outside"][1].startswith("after execute, buffer 0 does not hold 'logits'")


def test_a_run_with_wrong_numbers_or_garbage_is_refused(solution):
    spec = LAB.task("8.3").cases[2].spec          # the graph whose output h is also read
    model, feeds = graph(spec["graph"]), random_feeds(graph(spec["graph"]), spec["inputs"], spec["seed"])
    arrays = run_arrays(run_in_plan(solution["execute"], model, feeds))
    arrays["output/y"] = arrays["output/y"] + 1e-3
    sizes = shapes_and_sizes(model, spec["inputs"])
    assert verify.run_problems(model, sizes, feeds, arrays, OUTPUTS) == [
        "output 'y' differs from onnxruntime's by up to 0.001"]
    assert judge.check_execution(spec, b"garbage", OUTPUTS)[0].startswith("the file saved for this case is not")
    assert judge.check_plan(LAB.task("8.2").cases[3].spec, b"{", Tolerance()) == ["the saved plan is not JSON"]
