"""Lab 5's judges against students who read them, each attack beside a control that plays a wrong
answer straight.

Class 5, a required method that leaves no trace in the output. Task 5.1 asks for the fold in float64 (stored in
float32), 5.2 for a torch.fx pass built on it; the judge compares the folded parameters with a float64 fold within
1e-5. Before release 2 a fold computed in float32 was within 1e-7 on every hidden case: PyTorch's own fuser on the
float32 modules (``torch.nn.utils.fusion.fuse_conv_bn_eval``) scored 12 of 12 on 5.1, and
``torch.fx.experimental.optimization.fuse(model)``, a one-line answer to 5.2, scored 12 of 12 on 5.2 (its judge
takes which BatchNorms fold from that very function). Now the hidden BatchNorms cancel their conv's bias
(``util.labs.lab5.nets.cancel_bias``): a float32 fold is off by about 1e-3 there, on three of 5.1's four pairs
(the fourth, ``affine=False``, has no shift to cancel with) and on every model of 5.2.

* honest: the solution's ``fold_conv_bn`` and ``fold_model``: pass;
* attack: PyTorch's fuser in float32 (5.1), ``fuse`` (5.2): passed everything before, fail now;
* control: the conv's own bias dropped (5.1), a conv folded whose output has another user (5.2): fail, before and now.

Judged in the grader's judge process, as whoever runs the tests (root in CI) and as an unprivileged grader.

Classes 1-4 and 6 do not occur in lab 5's judges: they run no student code (the saved parameters and outputs are
judged against the judge's own float64 computation from the public seeds), time nothing, and no figure is fitted
to the judge's data (a fold is exact or not on any input); grader-only files are the core's.
"""
from __future__ import annotations

import copy

import pytest
import torch
from judged_files import judge_files, save_case
from torch.fx.experimental.optimization import fuse
from torch.nn.utils.fusion import fuse_conv_bn_eval

from grader.author.solution import solution_namespace
from grader.execute import confinement
from util.labs import get_lab
from util.labs.lab5 import judge
from util.labs.lab5.nets import build, conv_bn_pair

LAB = get_lab("lab5")
FOLD_CASES = [c.id for c in LAB.task("5.1").cases]
COURSE_NET = "course net: a shared conv output, a BN after a pool"
walls = pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab5", ("5.1", "5.2"))


def fold_in_float32(conv, bn):
    """PyTorch's own fuser on the float32 modules: the fold computed in float32."""
    return fuse_conv_bn_eval(copy.deepcopy(conv).eval(), copy.deepcopy(bn).eval())


def fuse_model(model):
    """``torch.fx.experimental.optimization.fuse``: PyTorch's whole-model fold (float32)."""
    return fuse(copy.deepcopy(model))


def _controls(solution):
    fold = solution["fold_conv_bn"]

    def bias_dropped(conv, bn):
        plain = copy.deepcopy(conv)
        plain.bias = None
        return fold(plain, bn)

    def fold_every_pair(model):       # folds bn2 too, whose conv's output the skip connection reads
        import torch.fx as fx
        from torch import nn

        gm = fx.symbolic_trace(copy.deepcopy(model))
        modules = dict(gm.named_modules())
        for node in list(gm.graph.nodes):
            source = node.args[0] if node.op == "call_module" and node.args else None
            if isinstance(modules.get(node.target), nn.BatchNorm2d) and getattr(source, "op", "") == "call_module" \
                    and isinstance(modules.get(source.target), nn.Conv2d):
                parent, _, name = source.target.rpartition(".")
                setattr(gm.get_submodule(parent) if parent else gm, name,
                        fold(modules[source.target], modules[node.target]))
                node.replace_all_uses_with(source)
                gm.graph.erase_node(node)
        gm.graph.lint()
        gm.delete_all_unused_submodules()
        gm.recompile()
        return gm

    return bias_dropped, fold_every_pair


def test_the_hidden_folds_cancel_their_conv_bias():
    for case in LAB.task("5.1").cases:
        conv, bn = conv_bn_pair(case.spec)
        w, b = judge.reference_fold(conv, bn)
        parts = (conv.bias.detach().double() if conv.bias is not None else 0) - bn.running_mean.double()
        if case.spec.get("cancel"):
            assert abs(b).max() < 1e-5 < 1e-2 < float((parts * bn.weight.detach().double()).abs().max()), case.id
    assert [bool(c.spec.get("cancel")) for c in LAB.task("5.1").cases] == [True, True, False, True]
    assert all(c.spec.get("cancel") for c in LAB.task("5.2").cases)


@pytest.mark.parametrize("case", LAB.task("5.2").cases, ids=lambda c: c.id)
def test_pytorchs_fuse_fails_every_hidden_model_and_the_solution_passes(solution, case, tmp_path):
    spec, data, _ = save_case("lab5", "5.2", case.id, fuse_model, tmp_path)
    problems = judge.check_fold_model(spec, data, None)
    assert problems and all("differs" in p or p.startswith("...") for p in problems), problems
    assert any("the bias differs from a float64 fold by" in p for p in problems)
    spec, data, _ = save_case("lab5", "5.2", case.id, solution["fold_model"], tmp_path)
    assert judge.check_fold_model(spec, data, None) == []


def test_without_the_cancellation_a_float32_fold_would_pass():
    """Why the cases cancel: on the same pair with PyTorch's default shift, a float32 fold is within 1e-7."""
    spec = {**LAB.task("5.1").cases[0].spec, "cancel": False}
    conv, bn = conv_bn_pair(spec)
    found = fold_in_float32(conv, bn)
    _, b = judge.reference_fold(conv, bn)
    assert judge.max_rel(found.bias.detach().double().numpy(), b) < 1e-6
    model = build("tiny_shared")
    gm = fuse_model(model)
    assert judge.max_rel(gm.conv1.bias.detach().double().numpy(),
                         judge.reference_fold(model.conv1, model.bn1)[1]) < 1e-6


def _saved(solution, tmp_path):
    bias_dropped, fold_every_pair = _controls(solution)
    saved = {}
    for name, function in {"honest": solution["fold_conv_bn"], "attack": fold_in_float32,
                           "control": bias_dropped}.items():
        for case_id in FOLD_CASES:
            spec, data, _ = save_case("lab5", "5.1", case_id, function, tmp_path)
            saved[f"{name}/{case_id}"] = ("5.1", spec, data)
    for name, function in {"honest": solution["fold_model"], "attack": fuse_model,
                           "control": fold_every_pair}.items():
        spec, data, _ = save_case("lab5", "5.2", COURSE_NET, function, tmp_path)
        saved[f"{name}/{COURSE_NET}"] = ("5.2", spec, data)
    return saved


def _assert_verdicts(verdicts):
    for case in LAB.task("5.1").cases:
        assert verdicts[f"honest/{case.id}"] == [], case.id
        attack = verdicts[f"attack/{case.id}"]
        if case.spec.get("cancel"):
            [problem] = attack
            assert problem.startswith("the folded convolution: the bias differs from a float64 fold by"), problem
        else:
            assert attack == [], case.id               # affine=False: no shift, nothing to cancel
        if case.spec["conv"].get("bias"):
            assert any("the bias differs" in p for p in verdicts[f"control/{case.id}"]), case.id
    assert verdicts[f"honest/{COURSE_NET}"] == []
    assert verdicts[f"attack/{COURSE_NET}"] == ["conv1: the bias differs from a float64 fold by 3.0e-03 relative "
                                                "(allowed 1e-05)"]
    assert verdicts[f"control/{COURSE_NET}"][0].startswith("bn2 was folded, but must stay")


@walls
def test_a_float32_fold_earns_nothing_in_the_graders_judge(solution, tmp_path):
    _assert_verdicts(judge_files("lab5", _saved(solution, tmp_path), tmp_path))


@walls
def test_the_same_as_an_unprivileged_grader(solution, tmp_path):
    _assert_verdicts(judge_files("lab5", _saved(solution, tmp_path), tmp_path, as_user=True))


def test_the_tensors_stay_float32(solution):
    conv, bn = conv_bn_pair(LAB.task("5.1").cases[0].spec)
    assert conv.weight.dtype == bn.bias.dtype == torch.float32
    assert solution["fold_conv_bn"](conv, bn).bias.dtype == torch.float32
