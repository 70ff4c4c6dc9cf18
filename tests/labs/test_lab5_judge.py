"""Lab 5's kernel-side cases and grader-side judges, with PyTorch's own fusers run in float64 standing in for a
correct student and small deliberate mistakes for a wrong one (no notebook runs here; the same fusers in float32
are the attacks of ``test_lab5_attacks.py``)."""
import copy
import io

import numpy as np
import pytest
import torch
import torch.fx as fx
from torch import nn
from torch.fx.experimental.optimization import fuse
from torch.nn.utils.fusion import fuse_conv_bn_eval

from util.answers import OUTPUT_DIR_ENV
from util.artifacts import case_file
from util.labs import get_lab
from util.labs.lab5 import judge

LAB = get_lab("lab5")   # with its hidden cases (tasks.LAB states only their points)
TASKS = {task.id: task for task in LAB.tasks}


@pytest.fixture(autouse=True)
def answers_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(OUTPUT_DIR_ENV, str(tmp_path))
    return tmp_path


def saved(spec) -> bytes:
    from util.answers import output_dir

    return (output_dir("lab5") / "files" / case_file(spec, ".npz")).read_bytes()


def verdict(task_id: str, case_id: str, function):
    """Run one declared case with ``function`` in this process, then judge what it saved: (value, problems)."""
    task = TASKS[task_id]
    case = next(c for c in task.cases if c.id == case_id)
    value = task.run_case(function, case.spec)
    check = getattr(judge, task.grader_check.split(":")[1])
    return value, check(case.spec, saved(case.spec), task.tolerance)


def fold64(conv, bn):
    """PyTorch's fold computed in float64 (on float64 copies), stored in the conv's dtype: as the lab asks."""
    return fuse_conv_bn_eval(copy.deepcopy(conv).double(), copy.deepcopy(bn).double()).to(conv.weight.dtype)


def fuse64(model):
    """``torch.fx.experimental.optimization.fuse`` on a float64 copy, stored in float32."""
    return fuse(copy.deepcopy(model).double()).float()


def fold_eps_1e5(conv, bn):
    bn = copy.deepcopy(bn)
    bn.eps = 1e-5
    return fold64(conv, bn)


@pytest.mark.parametrize("case", [c.id for c in TASKS["5.1"].cases])
def test_pytorchs_fold_passes_every_fold_case(case):
    value, problems = verdict("5.1", case, fold64)
    assert problems == [] and value["has_bias"] is True and value["dtype"] == "float32"


def test_a_fold_with_the_default_eps_fails_only_where_eps_differs():
    _, problems = verdict("5.1", "grouped, stride 2, BN eps 1e-3", fold_eps_1e5)
    assert problems[0].startswith("the folded convolution: the weight differs from a float64 fold by ")
    assert verdict("5.1", "conv with a bias", fold_eps_1e5)[1] == []


def test_a_lost_padding_mode_is_named():
    def zeros_padded(conv, bn):
        fused = fold64(conv, bn)
        fused.padding_mode = "zeros"
        return fused

    _, problems = verdict("5.1", "reflect padding, 3x5 kernel, a bias", zeros_padded)
    assert problems == ["padding_mode is 'zeros'; the convolution's is 'reflect'"]


def test_a_notebook_cannot_return_something_else():
    with pytest.raises(TypeError, match=r"must return an nn.Conv2d, not Sequential"):
        verdict("5.1", "conv with a bias", lambda conv, bn: nn.Sequential(conv, bn))


COURSE_NET = "course net: a shared conv output, a BN after a pool"


def test_pytorchs_fuser_passes_the_course_net_and_its_counts_are_the_reference_rule():
    value, problems = verdict("5.2", COURSE_NET, fuse64)
    assert problems == []
    assert value == {"bn_before": 3, "bn_after": 2, "conv": 2, "nodes_before": 13, "nodes_after": 12}


def fold_everything(model):
    """Folds every Conv2d -> BatchNorm2d pair, shared conv outputs included (the classic mistake)."""
    gm = fx.symbolic_trace(copy.deepcopy(model))
    for node in list(gm.graph.nodes):
        source = node.args[0] if node.args else None
        if (node.op == "call_module" and isinstance(gm.get_submodule(node.target), nn.BatchNorm2d)
                and getattr(source, "op", None) == "call_module"
                and isinstance(gm.get_submodule(source.target), nn.Conv2d)):
            parent, _, name = source.target.rpartition(".")
            setattr(gm.get_submodule(parent) if parent else gm, name,
                    fold64(gm.get_submodule(source.target), gm.get_submodule(node.target)))
            node.replace_all_uses_with(source)
            gm.graph.erase_node(node)
    gm.recompile()
    return gm


def test_folding_a_shared_conv_output_is_caught_by_name_and_by_the_output():
    _, problems = verdict("5.2", COURSE_NET, fold_everything)
    assert problems[0] == "bn2 was folded, but must stay: the output of conv2 has 2 users"
    assert any(p.startswith("the folded model's output differs from the original's by ") for p in problems)


def test_not_folding_at_all_is_caught():
    _, problems = verdict("5.2", COURSE_NET, fx.symbolic_trace)
    assert problems == ["bn1 still runs, but it should fold into conv1"]


def interpreter_record(gm, x, names=None):
    """A correct record, written independently of the solution: every relu(add) by hand for the course net."""
    names = names or ["act", "relu", "relu_1", "relu_2", "act_1"]
    values = {}

    class Keep(fx.Interpreter):
        def run_node(self, node):
            out = super().run_node(node)
            if node.name in names:
                values[node.name] = out.clone()
            return out

    with torch.no_grad():
        output = Keep(gm).run(x)
    return {**{n: values[n] for n in names}, "output": output}


def test_records_are_checked_against_the_nodes_values():
    value, problems = verdict("5.3", "course net: relu(add) written five ways", interpreter_record)
    assert problems == [] and value["names"] == ["act", "relu", "relu_1", "relu_2", "act_1", "output"]

    def shifted(gm, x):
        records = interpreter_record(gm, x)
        records["relu_1"] = records["relu_1"] + 1.0
        records["elsewhere"] = records["act"]
        del records["output"]
        return records

    _, problems = verdict("5.3", "course net: relu(add) written five ways", shifted)
    assert problems[0] == "no record is named 'output' (the model's output)"
    assert problems[1].startswith("record 'relu_1' differs from the node's value by ")
    assert problems[2] == "record 'elsewhere' names no node of the graph"


def depthwise(pool, channels, weight=None):
    kernel = pool.kernel_size if isinstance(pool.kernel_size, tuple) else (pool.kernel_size,) * 2
    conv = nn.Conv2d(channels, channels, kernel, pool.stride, pool.padding, groups=channels, bias=False)
    with torch.no_grad():
        conv.weight.fill_(weight if weight is not None else 2.0 / (pool.divisor_override or kernel[0] * kernel[1]))
    return conv


@pytest.mark.parametrize("case, substitutes", [("k5 s1 p2, count_include_pad=False", False),
                                               ("k2 s2 p0, count_include_pad=False", True),
                                               ("k3 s2 p0, ceil_mode=True", False),
                                               ("k5 s1 p2, count_include_pad=False, divisor_override=25", True)])
def test_avg_add_the_judge_decides_validity_itself(case, substitutes):
    right = (lambda pool, c: depthwise(pool, c)) if substitutes else (lambda pool, c: None)
    wrong = (lambda pool, c: None) if substitutes else (lambda pool, c: depthwise(pool, c))
    value, problems = verdict("5.6", case, right)
    assert problems == [] and value == {"substituted": substitutes}
    _, problems = verdict("5.6", case, wrong)
    assert len(problems) == 1
    assert problems[0].startswith("returned None" if substitutes else "returned a convolution, but the substitution "
                                  "is not valid for every input size: on a ")


def test_avg_add_a_wrong_weight_is_not_exact():
    _, problems = verdict("5.6", "k2 s2 p0, count_include_pad=False", lambda pool, c: depthwise(pool, c, 1 / 4))
    assert problems[0].startswith("the convolution is not exact: on a 5x5 input it differs from the pattern by ")


def merge(first, second):
    merged = nn.Conv2d(first.in_channels + second.in_channels, first.out_channels, first.kernel_size, first.stride,
                       first.padding, padding_mode=first.padding_mode)
    with torch.no_grad():
        merged.weight.copy_(torch.cat([first.weight, second.weight], 1))
        merged.bias.copy_(sum(c.bias for c in (first, second) if c.bias is not None))
    return merged


def test_conv_add_merges_when_exact_and_refuses_otherwise():
    assert verdict("5.7", "one bias missing, stride 2", merge) == ({"substituted": True}, [])
    assert verdict("5.7", "padding modes differ", lambda a, b: None) == ({"substituted": False}, [])
    problems = verdict("5.7", "padding modes differ", merge)[1]
    assert problems[0].startswith("returned a convolution, but the substitution is not valid for every input size")
    assert verdict("5.7", "one bias missing, stride 2", lambda a, b: None)[1] == [
        "returned None, but the substitution is exact for every input size here"]


def test_the_judge_never_unpickles_and_rejects_malformed_files(tmp_path):
    witness = tmp_path / "unpickled"

    class Payload:
        def __reduce__(self):
            return (open, (str(witness), "w"))

    buffer = io.BytesIO()
    np.savez(buffer, weight=np.array([Payload()], dtype=object))
    spec = TASKS["5.1"].cases[0].spec
    for data, why in ((buffer.getvalue(), "an array in it holds Python objects"),
                      (b"not a zip file", "it is not an .npz (zip) archive")):
        (problem,) = judge.check_fold_conv(spec, data, None)
        assert problem.startswith("the file saved for this case is not the .npz of arrays") and why in problem
    assert not witness.exists()
    buffer = io.BytesIO()
    np.savez(buffer, weight=np.zeros((8, 6, 3, 3)), geometry=np.array([1, 1, 1, 1, 1, 1, 0]),
             padding_mode=np.array("zeros"))
    assert judge.check_fold_conv(spec, buffer.getvalue(), None) == [
        "the saved convolution is malformed (shapes or geometry out of range)"]
