"""Lab 7: the declaration, the design's figures from the solution, the course emulator, and the judges.

The notebooks themselves are graded in tests/test_labs.py (solution 100, lab 0, examples exact)."""
import io
import itertools
import json

import numpy as np
import onnx
import pytest

from grader.author.solution import solution_namespace
from grader.judge import artifacts
from util.artifacts import case_file
from util.labs import get_lab
from util.labs.lab7 import graphs, judge
from util.labs.lab7.judge_emulator import close, emulate, emulate_assignment
from util.labs.lab7.lists import DEFAULT_LISTS, all_fp16_lists
from util.labs.lab7.summary import row_counts, run, summarize

LAB = get_lab("lab7")
SEARCH = (("frag", ["/ReduceSum", "/Sqrt"]), ("rms_chain", ["/Pow", "/ReduceMean", "/Sqrt"]),
          ("gate", ["/Mul", "/ReduceMean", "/Sqrt"]))


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab7", ("7.1", "7.2", "7.3", "7.4"))


def test_declaration_adds_up_and_names_real_checks():
    assert LAB.max_points == 100
    files = [case_file(c.spec) for t in LAB.tasks if t.grader_check for c in t.cases]
    assert len(files) == len(set(files)) == 12
    for task in LAB.tasks:
        if task.grader_check:
            assert callable(artifacts.check_function(task))


def test_resnet18_figures_of_the_design(solution):
    convert, resnet, folded = solution["convert"], graphs.resnet18(), graphs.resnet18(folded=True)
    dtypes = solution["node_dtypes"](resnet, DEFAULT_LISTS)
    assert (len(dtypes), list(dtypes.values()).count("float16")) == (69, 21)
    mixed = summarize(convert(resnet, DEFAULT_LISTS))
    assert (mixed["nodes"], mixed["casts"], mixed["casts_to_fp16"], mixed["param_bytes"]) == (130, 61, 40, 44_764_968)
    params = summarize(solution["convert_fp16_params"](resnet, DEFAULT_LISTS))
    assert (params["casts"], params["param_bytes"]) == (39, 22_420_884)
    excluded = summarize(convert(resnet, DEFAULT_LISTS, excluded_names=("/conv1/Conv", "/fc/Gemm")))
    assert (excluded["casts"], excluded["fp16_nodes"]) == (54, 19)
    assert len(folded.graph.node) == 49
    assert summarize(convert(folded, DEFAULT_LISTS))["casts"] == 44
    assert summarize(solution["convert_fp16_params"](folded, DEFAULT_LISTS))["casts"] == 2


def test_onnxruntime_hides_the_overflow_that_the_emulator_shows():
    model, feeds = graphs.all_fp16(graphs.frag()), graphs.frag_feeds()
    for level in ("disable_all", "basic", "all"):
        assert row_counts(run(model, feeds, level)["y"]) == {"zero_rows": 0, "nonfinite_rows": 0}
    assert row_counts(emulate(model, feeds)["y"]) == {"zero_rows": 14, "nonfinite_rows": 0}
    toy = graphs.toy_mixed()
    assert row_counts(emulate(toy, graphs.toy_mixed_feeds())["y"])["nonfinite_rows"] == 2
    assert row_counts(run(toy, graphs.toy_mixed_feeds())["y"])["nonfinite_rows"] == 0


@pytest.mark.parametrize("name", ["frag", "rms_chain", "gate"])
def test_emulating_an_assignment_equals_emulating_the_converted_model(solution, name):
    model, feeds = graphs.build({"model": name}), graphs.feeds_for({"model": name})
    lists, names = all_fp16_lists(model), [node.name for node in model.graph.node]
    for keep in ([], names[1:3], names[::2], names):
        converted = solution["convert"](model, lists, excluded_names=keep)
        by_model, by_assignment = emulate(converted, feeds), emulate_assignment(model, keep, feeds)
        assert all(np.array_equal(by_model[k], by_assignment[k], equal_nan=True) for k in by_model)
        student = solution["emulate_fp16"](converted, feeds)
        assert all(np.array_equal(student[k], by_model[k], equal_nan=True) for k in by_model)


@pytest.mark.parametrize("name, expected", SEARCH)
def test_each_search_graph_has_exactly_one_1_minimal_fp32_list(name, expected):
    """Every subset of nodes tried: the answer of 7.5 is unique, so its exact comparison is fair."""
    model, feeds = graphs.build({"model": name}), graphs.feeds_for({"model": name})
    reference, names = run(model, feeds), [node.name for node in model.graph.node]
    ok = {subset: close(emulate_assignment(model, subset, feeds), reference, 1e-2, 1e-3)
          for size in range(len(names) + 1) for subset in itertools.combinations(names, size)}
    minimal = [list(s) for s, good in ok.items() if good and not any(ok[tuple(x for x in s if x != y)] for y in s)]
    assert minimal == [expected]


def _spec(task_id, case_id):
    return next(c.spec for c in LAB.task(task_id).cases if c.id == case_id)


def test_converted_model_judge(solution):
    spec = _spec("7.2", "mixer")
    model = solution["convert"](graphs.mixer(), DEFAULT_LISTS)
    assert judge.check_converted(spec, model.SerializeToString()) == []
    assert "not an ONNX model" in judge.check_converted(spec, b"\x00garbage")[0]
    broken = onnx.ModelProto()
    broken.CopyFrom(model)
    broken.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.FLOAT16
    assert judge.check_converted(spec, broken.SerializeToString())      # float16 graph output: refused
    wrong = solution["convert"](graphs.toy(), DEFAULT_LISTS)               # another graph's interface
    assert judge.check_converted(spec, wrong.SerializeToString())


def _npz(arrays):
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def test_emulated_outputs_judge():
    spec = _spec("7.4", "RMS chain, all float16")
    model = graphs.all_fp16(graphs.build(spec))
    right = emulate(model, graphs.feeds_for(spec))
    assert judge.check_emulated(spec, _npz(right)) == []
    assert judge.check_emulated(spec, _npz(run(model, graphs.feeds_for(spec))))   # onnxruntime's view
    assert judge.check_emulated(spec, _npz({"z": right["y"]}))
    pickled = io.BytesIO()
    np.save(pickled, np.array([object()], dtype=object), allow_pickle=True)
    assert judge.check_emulated(spec, pickled.getvalue())


def test_fp32_list_judge():
    spec = _spec("7.5", "gate")
    assert judge.check_fp32_list(spec, json.dumps(["/Mul", "/ReduceMean", "/Sqrt"]).encode()) == []
    assert "not sufficient" in judge.check_fp32_list(spec, b"[]")[0]
    assert "not 1-minimal" in judge.check_fp32_list(spec, json.dumps(["/MatMul", "/Mul", "/ReduceMean", "/Sqrt"]).encode())[0]
    assert judge.check_fp32_list(spec, b'["/Nope"]')
    assert judge.check_fp32_list(spec, b"{not json")
