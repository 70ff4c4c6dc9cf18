"""Lab 16's declaration, models, counts and grader-side checks, against the solution and against deliberately
wrong and hostile saved files (no notebook is run here: test_labs.py grades the notebooks; the distillation
judge, which starts student processes, has its own file, test_lab16_distillation.py).

Each judge is fed the file the solution's function makes (it must pass: the honest control) and files a wrong or
forging kernel could save (each must fail, saying why).
"""
from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from grader.author.solution import solution_namespace
from grader.judge import artifacts
from util.answers import OUTPUT_DIR_ENV
from util.artifacts import READ_FAILED, case_file, files_dir
from util.contract import Tolerance
from util.labs import get_lab
from util.labs.lab16 import judge, judge_distill
from util.labs.lab16.costs import count_macs, count_params
from util.labs.lab16.nets import ConvNet, build_convnet, build_layer, build_matrix
from util.labs.lab16.prune import prunable
from util.models import build_model

LAB = get_lab("lab16")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class _Solution(dict):
    """The solution's functions, each task's cells run the first time one of its functions is asked for."""

    TASKS = {"magnitude_masks": "16.1", "prune_channels": "16.2", "two_four": "16.3", "low_rank": "16.4",
             "distillation_loss": "16.5", "add_lora": "16.6"}

    def __missing__(self, name):
        self.update(solution_namespace("lab16", (self.TASKS[name],)))
        return self[name]


@pytest.fixture(scope="module")
def solution():
    return _Solution()


@pytest.fixture()
def saved(tmp_path, monkeypatch):
    """``saved(task_id, case, function) -> (value, bytes)``: a hidden case run as the kernel runs it, and the file it
    left for the judge."""
    monkeypatch.setenv(OUTPUT_DIR_ENV, str(tmp_path))

    def run(task_id, case, function):
        task = LAB.task(task_id)
        value = task.run_case(function, case.spec)
        folder = files_dir(LAB.name)
        found = [f for f in folder.iterdir() if f.name.startswith(case_file(case.spec, ""))] if folder.is_dir() else []
        return value, (found[0].read_bytes() if found else b"")

    return run


def verdict(task_id: str, case, data: bytes) -> list[str]:
    return artifacts.check_function(LAB.task(task_id))(case.spec, data, Tolerance())


def npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def unpacked(data: bytes) -> dict:
    with np.load(io.BytesIO(data), allow_pickle=False) as found:
        return {key: found[key] for key in found.files}


# ---------------------------------------------------------------- declaration and course code

def test_declaration_adds_up_and_names_real_checks():
    assert LAB.max_points == 100
    assert [t.max_points for t in LAB.tasks] == [9, 14, 10, 10, 16, 9, 12, 10, 10]
    files = [case_file(c.spec) for t in LAB.tasks if t.grader_check for c in t.cases]
    assert len(files) == len(set(files)) == 27
    for task in LAB.tasks:
        if task.grader_check:
            assert callable(artifacts.check_function(task))
    assert all(case.seeds == ("seed",) for task in LAB.tasks if task.id not in ("16.7", "16.8", "16.9") for case in task.cases)
    assert all(not case.seeds and "seed" not in case.spec for case in LAB.task("16.7").cases)  # the secret draws them
    assert all(not case.seeds and "seed" not in case.spec for case in LAB.task("16.8").cases)  # a formula; an order
    assert all(not case.seeds and "seed" not in case.spec for case in LAB.task("16.9").cases)  # the secret draws them


def test_convnet_is_digits_cnn_with_its_names_and_forward():
    digits = build_model("digits_cnn", seed=3).eval()
    net = ConvNet()
    net.load_state_dict(digits.state_dict())
    x = torch.rand(5, 1, 8, 8)
    assert torch.equal(net.eval()(x), digits(x))
    assert (count_params(net), count_macs(net)) == (19_258, 456_704)  # conv + fc, lab 1's convention (FACTS)
    assert list(prunable(net)) == ["conv1.weight", "conv2.weight", "conv3.weight", "fc.weight"]
    assert sum(w.numel() for w in prunable(net).values()) == 19_088


def test_counts_by_hand_on_a_convnet_with_a_hidden_layer():
    net = build_convnet({"widths": [6, 10, 14, 20], "pools": [1, 3], "hidden": [7]}, seed=0)
    conv = 6 * 1 * 9 + 10 * 6 * 9 + 14 * 10 * 9 + 20 * 14 * 9
    bn = 2 * (6 + 10 + 14 + 20)
    linear = 80 * 7 + 7 + 7 * 10 + 10  # 20 channels x 2 x 2 after two pools
    assert count_params(net) == conv + bn + linear
    assert count_macs(net) == 64 * 6 * 9 + 16 * 10 * 6 * 9 + 16 * 14 * 10 * 9 + 4 * 20 * 14 * 9 + 80 * 7 + 7 * 10
    assert torch.equal(build_convnet(net.config(), seed=0).conv3.weight, net.conv3.weight)


# ---------------------------------------------------------------- 16.1

@SETTINGS
@given(st.lists(st.integers(1, 12), min_size=1, max_size=3), st.floats(0, 1), st.sampled_from(["global", "layer"]),
       st.integers(0, 10_000), st.booleans())
def test_magnitude_masks_prune_round_k_of_the_smallest(solution, sizes, sparsity, scope, seed, ties):
    generator = torch.Generator().manual_seed(seed)
    model = nn.Sequential(*[nn.Linear(n, 3, bias=False) for n in sizes])
    with torch.no_grad():
        for layer in model:
            layer.weight.copy_(torch.randint(-2, 3, layer.weight.shape, generator=generator).float() if ties
                               else torch.randn(layer.weight.shape, generator=generator))
    masks = solution["magnitude_masks"](model, sparsity, scope)
    groups = [list(prunable(model))] if scope == "global" else [[name] for name in prunable(model)]
    for names in groups:
        values = torch.cat([prunable(model)[n].detach().flatten() for n in names]).abs()
        keep = torch.cat([masks[n].flatten() for n in names])
        assert int((~keep).sum()) == round(sparsity * values.numel())
        if keep.any() and (~keep).any():
            assert values[~keep].max() <= values[keep].min()
            tied = values[~keep].max() == values[keep].min()  # the earlier of equal magnitudes goes first
            if tied:
                level = values[~keep].max()
                positions = (values == level).nonzero().flatten()
                pruned = (~keep)[positions]
                assert torch.equal(pruned, pruned.sort(descending=True, stable=True).values)


def test_the_hidden_cases_of_16_1_distinguish_round_from_int(solution):
    case = next(c for c in LAB.task("16.1").cases if c.spec["sparsity"] == 0.33)
    net = build_convnet(case.spec["model"], case.spec["seed"])
    sizes = [w.numel() for w in prunable(net).values()]
    assert any(round(0.33 * n) != int(0.33 * n) for n in sizes)


# ---------------------------------------------------------------- 16.2

def test_channel_surgery_passes_the_judge_and_equals_the_masked_model(solution, saved):
    for case in LAB.task("16.2").cases:
        value, data = saved("16.2", case, solution["prune_channels"])
        assert verdict("16.2", case, data) == [], case.id
        widths = [case.spec["plan"].get(n, w) for n, w in zip(ConvNet(**case.spec["model"]).convs(),
                                                               ConvNet(**case.spec["model"]).widths)]
        assert value["widths"] == widths


def _forged(data: bytes, **changes) -> bytes:
    arrays = unpacked(data)
    arrays.update(changes)
    return npz(**arrays)


def test_a_pruned_model_that_keeps_the_wrong_channels_or_lies_about_its_widths_fails(solution, saved):
    case = next(c for c in LAB.task("16.2").cases if c.spec["plan"] == {"conv2": 5})
    _, data = saved("16.2", case, solution["prune_channels"])
    arrays = unpacked(data)
    # the right shapes, the smallest filters kept instead of the largest: the counts agree, the outputs do not
    net = build_convnet(case.spec["model"], case.spec["seed"])
    norms = net.conv2.weight.detach().abs().sum(dim=(1, 2, 3))
    wrong = norms.argsort()[:5].sort().values
    state = net.state_dict()
    columns = torch.arange(256).reshape(16, 16)[wrong].flatten()
    forged = {"state/conv2.weight": state["conv2.weight"][wrong].numpy(),
              "state/fc.weight": state["fc.weight"][:, columns].numpy(),
              **{f"state/bn2.{p}": state[f"bn2.{p}"][wrong].numpy() for p in ("weight", "bias", "running_mean",
                                                                                 "running_var")}}
    [problem] = verdict("16.2", case, _forged(data, **forged))
    assert "outputs differ from those of the model with the same channels masked" in problem
    # a kernel that reports the plan's widths over a model it did not cut: refused before anything is built
    huge = _forged(data, **{"config/widths": np.asarray([8, 10 ** 9])})
    assert verdict("16.2", case, huge) == ["conv2 has 1000000000 channels; the plan keeps 5"]
    assert verdict("16.2", case, _forged(data, **{"config/hidden": np.asarray([5])})) == [
        "prune_channels changed the network's pools or hidden layers; it may only cut convolution channels"]
    assert "fc.weight has shape" in verdict("16.2", case, _forged(data, **{"state/fc.weight": arrays["state/fc.weight"][:, :10]}))[0]
    assert verdict("16.2", case, b"not a zip")[0] == READ_FAILED.format(why="it is not an .npz (zip) archive")


def test_channel_surgery_of_the_last_block_cuts_the_first_linears_columns(solution):
    net = build_convnet({"widths": [4, 6], "pools": [1], "hidden": [5]}, seed=7)
    pruned = solution["prune_channels"](net, {"conv2": 2})
    keep = judge.kept_channels(net.conv2.weight, 2)
    columns = torch.cat([torch.arange(16 * int(c), 16 * int(c) + 16) for c in keep])
    assert torch.equal(pruned.hidden1.weight, net.hidden1.weight[:, columns])
    assert torch.equal(pruned.fc.weight, net.fc.weight)


# ---------------------------------------------------------------- 16.3

MATRICES = st.tuples(st.integers(1, 6), st.integers(1, 8), st.integers(0, 10_000), st.sampled_from(["normal", "ties"]))


@SETTINGS
@given(MATRICES)
def test_two_four_keeps_the_two_largest_of_every_four_the_earlier_on_a_tie(solution, shape):
    rows, groups, seed, kind = shape
    weight = build_matrix([rows, 4 * groups], seed, kind)
    mask, storage = solution["two_four"](weight, 2)
    assert torch.equal(mask, judge.two_four_mask(weight))
    magnitudes = weight.abs().reshape(rows, groups, 4)
    kept = mask.reshape(rows, groups, 4)
    assert (kept.sum(2) == 2).all()
    for r in range(rows):
        for g in range(groups):
            values, keep = magnitudes[r, g], kept[r, g]
            assert values[keep].min() >= values[~keep].max()
            for i in range(4):  # a dropped weight equal to a kept one comes after it
                for j in range(i):
                    if values[i] == values[j] and keep[i]:
                        assert keep[j]
    assert storage == judge.two_four_storage(rows, 4 * groups, 2)


@SETTINGS
@given(MATRICES, st.sampled_from([2, 4]))
def test_the_csr_count_is_what_torch_stores(shape, value_bytes):
    rows, groups, seed, kind = shape
    weight = build_matrix([rows, 4 * groups], seed, "normal")
    dtype = {2: torch.float16, 4: torch.float32}[value_bytes]
    csr = (weight * judge.two_four_mask(weight)).to(dtype).to_sparse_csr()
    stored = sum(t.numel() * t.element_size() for t in (csr.values(), csr.col_indices(), csr.crow_indices()))
    assert judge.two_four_storage(rows, 4 * groups, value_bytes)["csr"] == stored


def test_two_four_cases_pass_and_wrong_masks_or_counts_fail(solution, saved):
    for case in LAB.task("16.3").cases:
        value, data = saved("16.3", case, solution["two_four"])
        assert verdict("16.3", case, data) == [], case.id
    case = LAB.task("16.3").cases[0]
    _, data = saved("16.3", case, solution["two_four"])
    weight = build_matrix(case.spec["shape"], case.spec["seed"], case.spec["kind"])
    per_row = weight.abs() >= weight.abs().median(dim=1, keepdim=True).values  # half of each row, not 2 of 4
    [problem] = verdict("16.3", case, _forged(data, mask=np.packbits(per_row.numpy().reshape(-1))))
    assert "2:4 keeps exactly 2 of every 4 consecutive weights of a row" in problem
    smallest = ~judge.two_four_mask(weight)  # a valid pattern, the wrong two
    [problem] = verdict("16.3", case, _forged(data, mask=np.packbits(smallest.numpy().reshape(-1))))
    assert "are not the 2 of largest magnitude" in problem
    storage = unpacked(data)["storage"].copy()
    storage[0] += 1
    assert verdict("16.3", case, _forged(data, storage=storage)) == [
        "storage['dense'] is 193 bytes, which differs from the grader's count for this weight (yours is larger)"]
    assert "not what the course saves" in verdict("16.3", case, _forged(data, mask=np.zeros(3, np.uint8)))[0]


# ---------------------------------------------------------------- 16.4

@SETTINGS
@given(st.sampled_from(["linear", "conv"]), st.integers(1, 9), st.integers(1, 9), st.booleans(), st.integers(0, 800))
def test_the_best_rank_is_the_largest_that_fits(kind, fan, out, bias, budget):
    spec = {"kind": kind, "in": fan, "out": out, "bias": bias, "kernel": 3}
    layer = build_layer(spec, 0)
    fan_in = fan * (9 if kind == "conv" else 1)
    fits = [r for r in range(1, min(fan_in, out) + 1) if r * (fan_in + out) + out * bias <= budget]
    assert judge.best_rank(layer, budget) == (max(fits) if fits else 0)


def test_low_rank_cases_pass_and_worse_factors_fail(solution, saved):
    for case in LAB.task("16.4").cases:
        value, data = saved("16.4", case, solution["low_rank"])
        assert verdict("16.4", case, data) == [], case.id
    case = next(c for c in LAB.task("16.4").cases if c.spec["layer"]["kind"] == "conv" and not c.spec["layer"]["bias"])
    _, data = saved("16.4", case, solution["low_rank"])
    arrays = unpacked(data)
    rotated = arrays["first"].copy()
    rotated[[0, 1]] = rotated[[1, 0]]  # the same rank and parameters, a worse product
    assert "the best rank-8 approximation" in verdict("16.4", case, _forged(data, first=rotated))[0]
    assert "kernel size, stride, padding" in verdict("16.4", case, _forged(
        data, first_geometry=np.asarray([3, 3, 1, 1, 1, 1, 1, 1, 1])))[0]
    assert "larger than the largest rank" in verdict("16.4", case, _forged(
        data, first=np.concatenate([arrays["first"], arrays["first"][:1]]),
        second=np.concatenate([arrays["second"], arrays["second"][:, :1]], axis=1)))[0]
    raised = json.dumps({"raised": "ValueError"}).encode()
    assert verdict("16.4", case, raised) == ["low_rank raised ValueError, but a rank of at least 1 fits the budget"]
    small = next(c for c in LAB.task("16.4").cases if c.spec["budget"] == 80)
    assert verdict("16.4", small, data) == ["not even rank 1 fits the budget: low_rank should raise ValueError"]
    biased = next(c for c in LAB.task("16.4").cases if c.spec["budget"] == 489)
    _, data = saved("16.4", biased, solution["low_rank"])
    assert verdict("16.4", biased, _forged(data, bias=unpacked(data)["bias"] + 1)) == [
        "the second factor's bias differs from the layer's: copy it unchanged"]


# ---------------------------------------------------------------- 16.5 (values) and 16.6

def test_loss_values_against_the_graders_formula(solution, saved):
    for case in LAB.task("16.5").cases[:3]:
        value, data = saved("16.5", case, solution["distillation_loss"])
        assert verdict("16.5", case, data) == [], case.id
        assert math.isclose(value["loss"], judge_distill.reference_loss(
            *judge_distill.value_inputs(case.spec), case.spec["T"], case.spec["alpha"]), rel_tol=1e-5)
        forged = json.dumps({"loss": value["loss"] * (1 + 1e-3)}).encode()
        assert "differs from the grader's float64 formula" in verdict("16.5", case, forged)[0]


def test_lora_cases_pass_and_an_unfrozen_base_or_a_wrong_scaling_fails(solution, saved):
    for case in LAB.task("16.6").cases:
        value, data = saved("16.6", case, solution["add_lora"])
        assert verdict("16.6", case, data) == [], case.id
    case = LAB.task("16.6").cases[0]
    _, data = saved("16.6", case, solution["add_lora"])
    arrays = unpacked(data)
    everything = _forged(data, **{key: np.asarray(True) for key in arrays if key.startswith("trainable/")})
    assert "more than the adapters' r (in + out)" in verdict("16.6", case, everything)[0]
    base = next(key for key in arrays if key.startswith("parameter/") and not arrays[key.replace("parameter/",
                                                                                                  "trainable/")])
    changed = _forged(data, **{base: arrays[base] + 1})  # the counts right, a base weight not the model's
    assert verdict("16.6", case, changed) == [
        f"the adapted model no longer holds the base model's {base.removeprefix('parameter/')} as a frozen parameter, "
        "unchanged"]
    net = build_convnet(case.spec["model"], case.spec["seed"])
    x = torch.randn(case.spec["batch"], 1, 8, 8, generator=torch.Generator().manual_seed(case.spec["seed"]))
    with torch.no_grad():
        base_out = net(x).numpy()
    unscaled = _forged(data, adapted=base_out)  # the adapters' change left out of the forward
    assert verdict("16.6", case, unscaled) == ["with the course's values in lora_A and lora_B the outputs are not base(x) "
                                               "+ (alpha / r) * (x @ A.T @ B.T): check the scaling alpha / r and the "
                                               "order of the products"]
    assert verdict("16.6", case, _forged(data, fresh=arrays["adapted"]))[0].startswith("right after add_lora")
    merged = arrays["merged/fc/weight"] * 1.01
    assert verdict("16.6", case, _forged(data, **{"merged/fc/weight": merged})) == [
        "fc.merged() does not hold W + (alpha / r) B A"]
