"""Lab 16's public checks (``check("16.2")``): hand-countable cases the notebook works out, stated counts and
rules, never a hidden case's input. ``CHECKS[task id]`` is attached to each task in ``tasks.py``.

The hand examples: for 16.1 two small Linear layers with the weights below, for 16.2 a seeded two-block
``ConvNet`` (widths 6 and 8) against the same model with the dropped channels masked by PyTorch's own
``prune.ln_structured``, for 16.3 one row of 8 weights with ties, for 16.4 a Linear(6, 4), for 16.5 two classes
whose softmaxes are worked out by hand, for 16.6 a two-layer ``nn.Sequential``, for 16.7 a one-block
``ResidualNet`` (stem 4, an identity block of 2) whose stem is added to the block's output, for 16.8 the cubic schedule to 80 % in 4 steps worked out by hand, for 16.9 a one-block TinyGPT with\none key/value head.
"""
from __future__ import annotations

import math
from typing import Any

from util.checks import equal, first, has_keys, is_int
from util.contract import Check

PRUNABLE = 19_088
"""DigitsCNN's weights in its convolutions and fc (of 19,258 parameters)."""
DIGITS_PARAMS = 19_258
CONV2_HALF_PARAMS = DIGITS_PARAMS - 16 * 16 * 9 - 2 * 16 - 32 * 16 * 9
"""DigitsCNN with 16 of conv2's 32 filters cut: conv2's filters, bn2's scale and shift, conv3's inputs: 12,314."""
CONV2_HALF_MACS = 64 * 16 * 9 + 64 * 16 * 16 * 9 + 16 * 32 * 16 * 9 + 10 * 512
"""Its MACs (conv1 + conv2 at 8 x 8, conv3 at 4 x 4 + fc): 235,520, of 456,704."""
FC_FP16 = {"dense": 10_240, "indices": 5_760, "bitmask": 5_760, "csr": 25_688}
FC_FP32 = {"dense": 20_480, "indices": 10_880, "bitmask": 10_880, "csr": 30_808}
RANKS = [1, 2, 4, 8, 16, 24, 32]
LORA_FC = 4 * (512 + 10)
"""Trainable parameters of LoRA with r = 4 on DigitsCNN's fc: 2,088."""
LORA_GPT = 2 * 2 * 4 * (64 + 64)
"""Trainable parameters of LoRA with r = 4 on the q and v (64 -> 64) of TinyGPT's two blocks: 2,048."""
GPT_PARAMS = 141_056
"""Lab 10's TinyGPT's parameters (the tied head once)."""


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fractions(values: Any, count: int, what: str) -> str | None:
    if not isinstance(values, list) or len(values) != count or not all(_number(v) and 0 <= v <= 1 for v in values):
        return f"{what} is {str(values)[:80]}; expected {count} accuracies between 0 and 1"
    return None


# ---------------------------------------------------------------- 16.1

def _two_linears():
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 2, bias=False), nn.Linear(2, 2, bias=False))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[0.1, -0.5, 2.0, 0.3], [-1.0, 0.05, 0.6, -4.0]]))
        model[1].weight.copy_(torch.tensor([[10.0, -20.0], [30.0, 0.01]]))
    return model


def _global_hand(fn) -> str | None:
    found = fn(_two_linears(), 0.5, "global")
    return first(has_keys(found, ["0.weight", "1.weight"], "the masks"),
                 equal(found, {"0.weight": [[False, False, True, False], [True, False, False, True]],
                               "1.weight": [[True, True], [True, False]]}, "the global masks at 50 %"))


def _layer_hand(fn) -> str | None:
    found = fn(_two_linears(), 0.5, "layer")
    return first(has_keys(found, ["0.weight", "1.weight"], "the masks"),
                 equal(found, {"0.weight": [[False, False, True, False], [True, False, True, True]],
                               "1.weight": [[False, True], [True, False]]}, "the per-layer masks at 50 %"))


def _ties_and_rounding(fn) -> str | None:
    import torch
    from torch import nn

    tied = nn.Linear(4, 1, bias=False)
    with torch.no_grad():
        tied.weight.copy_(torch.tensor([[1.0, -1.0, 1.0, 2.0]]))
    square = nn.Linear(10, 10, bias=False)
    torch.nn.init.normal_(square.weight, generator=torch.Generator().manual_seed(0))
    pruned = sum(not kept for row in fn(square, 0.29, "layer")["weight"] for kept in row)
    return first(equal(fn(tied, 0.5, "layer"), {"weight": [[False, False, True, True]]},
                       "the mask of [1, -1, 1, 2] at 50 %"),
                 equal(pruned, 29, "weights pruned of 100 at 29 %"))


# ---------------------------------------------------------------- 16.2

def _masked_by_torch(net, plan):
    """``net`` with the dropped channels masked with PyTorch's own L1 filter pruning, their BatchNorm zeroed."""
    import copy

    import torch
    from torch.nn.utils import prune

    masked = copy.deepcopy(net)
    for i, name in enumerate(masked.convs(), start=1):
        if name in plan:
            conv = getattr(masked, name)
            prune.ln_structured(conv, "weight", amount=conv.out_channels - plan[name], n=1, dim=0)
            dropped = conv.weight.detach().flatten(1).abs().sum(1) == 0
            prune.remove(conv, "weight")
            with torch.no_grad():
                getattr(masked, f"bn{i}").weight[dropped] = 0
                getattr(masked, f"bn{i}").bias[dropped] = 0
    return masked.eval()


def _small_surgery(fn) -> str | None:
    import torch

    from util.labs.lab16.nets import ConvNet, build_convnet

    net = build_convnet({"widths": [6, 8], "pools": [1]}, seed=0)
    plan = {"conv1": 3, "conv2": 5}
    pruned = fn(net, dict(plan))
    if not isinstance(pruned, ConvNet):
        return f"prune_channels returned a {type(pruned).__name__}; it should return a ConvNet"
    params = sum(p.numel() for p in pruned.parameters())
    x = torch.randn(16, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        difference = float((pruned.eval()(x) - _masked_by_torch(net, plan)(x)).abs().max())
    return first(equal(list(pruned.widths), [3, 5], "the pruned widths"),
                 equal(params, 27 + 6 + 135 + 10 + 810, "its parameters (conv1 27, bn1 6, conv2 135, bn2 10, fc 810)"),
                 None if difference < 1e-5 else f"its outputs differ from the masked model's by {difference:.3g} "
                                                "(expected below 1e-5)")


# ---------------------------------------------------------------- 16.3

def _row_with_ties(fn) -> str | None:
    import torch

    mask, storage = fn(torch.tensor([[0.1, -3.0, 2.0, 0.5, 4.0, 4.0, -4.0, 1.0],
                                     [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]]), 2)
    return first(equal(mask, [[False, True, True, False, True, True, False, False],
                              [True, True, False, False, True, True, False, False]], "the 2:4 mask"),
                 equal(storage, {"dense": 32, "indices": 18, "bitmask": 18, "csr": 104},
                       "the storage of the 2 x 8 weight in float16"))


def _not_multiple_of_four(fn) -> str | None:
    import torch

    try:
        fn(torch.ones(2, 6), 2)
    except ValueError:
        return None
    return "two_four of a 2 x 6 weight returned; rows of 6 cannot be cut in groups of 4: raise ValueError"


# ---------------------------------------------------------------- 16.4

def _small_linear(fn) -> str | None:
    import torch
    from torch import nn

    torch.manual_seed(0)
    layer = nn.Linear(6, 4)
    found = fn(layer, 35)
    if not (isinstance(found, nn.Sequential) and len(found) == 2 and all(isinstance(m, nn.Linear) for m in found)):
        return f"low_rank(Linear(6, 4), 35) returned {type(found).__name__}; expected nn.Sequential of two Linears"
    first_layer, second = found
    W = layer.weight.detach().double()
    product = second.weight.detach().double() @ first_layer.weight.detach().double()
    singular = torch.linalg.svdvals(W)
    optimum = float(singular[3:].pow(2).sum().sqrt())
    error = float(torch.linalg.norm(W - product))
    return first(equal(first_layer.weight.shape[0], 3, "the rank (3 x (6 + 4) + 4 bias = 34 <= 35; rank 4 needs 44)"),
                 equal(second.bias is not None and bool(torch.equal(second.bias, layer.bias)), True,
                       "the second factor keeps the layer's bias"),
                 None if error <= optimum * 1.0001 + 1e-6 else
                 f"the product's error is {error:.4g}; the truncated SVD's is {optimum:.4g}")


def _too_small(fn) -> str | None:
    import torch
    from torch import nn

    torch.manual_seed(0)
    try:
        found = fn(nn.Linear(6, 4), 13)
    except ValueError:
        return None
    return f"low_rank(Linear(6, 4), 13) returned {type(found).__name__}: rank 1 needs 10 + 4 = 14 parameters; raise " \
           "ValueError"


# ---------------------------------------------------------------- 16.5

def _two_classes(fn) -> str | None:
    import torch

    student = torch.tensor([[math.log(3.0), 0.0]])
    teacher = torch.tensor([[0.0, 0.0]])
    unlabeled = torch.tensor([-100])
    return first(_close(fn(student, teacher, unlabeled, 1.0, 1.0), 0.5 * math.log(4 / 3), "T=1, alpha=1"),
                 _close(fn(student, teacher, unlabeled, 2.0, 1.0), 4 * 0.5 * math.log(0.25 * (1 + math.sqrt(3)) ** 2
                                                                                        / math.sqrt(3)), "T=2, alpha=1"),
                 _close(fn(student, teacher, torch.tensor([0]), 2.0, 0.0), math.log(4 / 3), "alpha=0 (label 0)"))


def _close(found: Any, expected: float, what: str) -> str | None:
    if not _number(found) or not math.isfinite(found) or abs(found - expected) > 1e-5 * max(1.0, abs(expected)):
        return f"the loss with {what} is {found!r}; expected {expected:.6f}"
    return None


def _no_label(fn) -> str | None:
    import torch

    found = fn(torch.zeros(3, 10), torch.zeros(3, 10), torch.full((3,), -100), 4.0, 0.5)
    return _close(found, 0.0, "equal logits and no labeled row (the hard term is 0, not NaN)")


# ---------------------------------------------------------------- 16.6

def _tiny_lora(fn) -> str | None:
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 2))
    x = torch.randn(4, 3)
    with torch.no_grad():
        before = model(x)
    adapted = fn(model, ["0"], 1, 2.0)
    if not isinstance(adapted, nn.Module):
        return f"add_lora returned a {type(adapted).__name__}; it should return the model"
    trainable = sorted(name for name, p in adapted.named_parameters() if p.requires_grad)
    with torch.no_grad():
        after = adapted(x)
    return first(equal(trainable, ["0.lora_A", "0.lora_B"], "the trainable parameters (r (in + out) = 1 x 5)"),
                 None if torch.allclose(before, after) else "a fresh adapter changed the outputs (lora_B starts at 0)")


# ---------------------------------------------------------------- 16.9

def _tiny_gpt(fn) -> str | None:
    import torch

    from util.labs.lab10.gpt import GPTConfig, seeded_gpt

    cfg = GPTConfig(vocab=16, n_positions=8, d_model=8, n_layer=1, n_head=2, n_kv_head=1)
    model = seeded_gpt(cfg, 0).double()
    ids = torch.arange(6).reshape(1, 6)
    with torch.no_grad():
        before = model(ids)
    found = fn(model, 2, 4.0, 1, 6)
    if not isinstance(found, dict) or "model" not in found or "trainable" not in found:
        return f"lora_gpt returned {type(found).__name__}; it should return {{'model', 'trainable', 'memory'}}"
    adapted = found["model"]
    trainable = sorted(name for name, p in adapted.named_parameters() if p.requires_grad)
    with torch.no_grad():
        after = adapted.eval()(ids)
    return first(equal(trainable, [f"blocks.0.attn.{p}.lora_{m}" for p in "qv" for m in "AB"], "the trainable parameters"),
                 equal(found["trainable"], 56, "trainable"),
                 None if torch.allclose(before, after, rtol=0, atol=1e-12)
                 else "a fresh adapter changed the logits (lora_B starts at 0, in the base's dtype)")


# ---------------------------------------------------------------- 16.7

RESIDUAL_GROUPS = [["block1.conv1"], ["block1.conv2", "stem"], ["block2.conv1"], ["block2.conv2", "block2.short"],
                   ["block3.left"], ["block3.right"]]
"""The notebook's network's groups: the stem is added to block 1's output, block 2's shortcut to its conv2."""
RESIDUAL_PARAMS = {"dense": 21_418, "pruned": 15_082}
"""The notebook's network, and with block 2's group (conv2 and short) cut from 32 channels to 16: conv2 and short
lose 16 filters (16 x 24 x 9 + 16 x 16), their BatchNorms 2 x 16 x 2, and block 3's left and right 16 input
channels (16 x 16 x 9 + 16 x 16): 6,336 fewer."""
RESIDUAL_MACS = {"dense": 560_448, "pruned": 460_096}
"""Their MACs on one 8 x 8 image (block 2 onwards at 4 x 4: 16 positions x (16 x 24 x 9 + 16 x 16 + 16 x 16 x 9 +
16 x 16) = 100,352 fewer)."""


def _tiny_residual(fn) -> str | None:
    import torch

    from util.labs.lab16.residual import ResidualNet, masked_residual

    torch.manual_seed(0)
    net = ResidualNet(stem=4, blocks=[["basic", 2]]).eval()
    found = fn(net, "block1.conv2", 2)
    if not (isinstance(found, (tuple, list)) and len(found) == 2):
        return f"prune_residual returned a {type(found).__name__}; it should return (group, network)"
    group, pruned = found
    if sorted(group) != ["block1.conv2", "stem"]:
        return f"the group of block1.conv2 is {group!r}; expected ['block1.conv2', 'stem'] (the stem is the identity)"
    params = sum(p.numel() for p in pruned.parameters())
    if params != 132:
        return (f"the cut network has {params} parameters; expected 132 (stem 2 x 9 + 4, conv1 2 x 2 x 9 + 4, conv2 "
                "2 x 2 x 9 + 4, fc 10 x 2 + 10)")
    x = torch.randn(3, 1, 8, 8)
    with torch.no_grad():
        out, wanted = pruned(x), masked_residual(net, group, 2)(x)
    return None if torch.allclose(out, wanted, rtol=1e-4, atol=1e-5) else \
        "the cut network computes something else than the network with the same channels masked"


SCHEDULE_80_4 = [0.4625, 0.7, 0.7875, 0.8]
"""The cubic schedule from 0 to 80 % in 4 steps: 0.8 (1 - (1 - k / 4)^3) for k = 1 ... 4 (0.8 x 37/64, 0.8 x 7/8,
0.8 x 63/64, 0.8)."""


def _cubic_hand(fn) -> str | None:
    found = fn(0.8, 4)
    if not (isinstance(found, list) and len(found) == 4 and all(_number(s) for s in found)):
        return f"cubic_schedule(0.8, 4) returned {str(found)[:80]}; expected a list of 4 sparsities"
    if not all(abs(s - e) <= 1e-9 for s, e in zip(found, SCHEDULE_80_4)):
        return f"cubic_schedule(0.8, 4) is {[round(s, 4) for s in found]}; expected {SCHEDULE_80_4}"
    return None


def _cubic_from(fn) -> str | None:
    found = fn(0.9, 2, 0.5)
    expected = [0.9 - 0.4 / 8, 0.9]
    if not (isinstance(found, list) and len(found) == 2 and all(_number(s) and abs(s - e) <= 1e-9
                                                                 for s, e in zip(found, expected))):
        return f"cubic_schedule(0.9, 2, 0.5) is {str(found)[:80]}; expected {expected}"
    return None


CHECKS: dict[str, tuple[Check, ...]] = {
    "16.1": (
        Check("80 % of DigitsCNN's 19,088 prunable weights is round(15,270.4) = 15,270; accuracies are fractions, "
              "one per sparsity, for the four layers",
              lambda a: first(equal(a["pruned_global_80"], 15_270, "pruned_global_80"),
                              _fractions(a["global"], len(a["sparsities"]), "global"),
                              _fractions(a["per_layer"], len(a["sparsities"]), "per_layer"),
                              equal(sorted(a["sensitivity"]), ["conv1", "conv2", "conv3", "fc"], "sensitivity's keys"),
                              *(_fractions(v, len(a["sparsities"]), f"sensitivity[{k!r}]")
                                for k, v in a["sensitivity"].items())),
              "k = round(sparsity x n) weights are pruned, as torch.nn.utils.prune does"),
        Check("two Linears by hand at 50 %: globally the 6 smallest of all 12 go", _global_hand,
              "global: one ranking of |w| over every prunable weight of the model", calls_function=True),
        Check("two Linears by hand at 50 %: per layer the 4 smallest of the first and the 2 smallest of the second go",
              _layer_hand, "per layer: each weight ranked on its own", calls_function=True),
        Check("[1, -1, 1, 2] at 50 % prunes the first two (ties: the earlier first); 29 % of 100 prunes 29",
              _ties_and_rounding, "a stable sort of |w| (argsort(stable=True)) and round(), not int(): 0.29 x 100 is "
                                  "28.999999999999996 in floating point", calls_function=True),
    ),
    "16.2": (
        Check("DigitsCNN with conv2 cut to 16: 12,314 parameters and 235,520 MACs; masked, 19,258 and 456,704",
              lambda a: first(equal(a["params"], {"dense": DIGITS_PARAMS, "masked": DIGITS_PARAMS,
                                                  "pruned": CONV2_HALF_PARAMS}, "params"),
                              equal(a["macs"], {"dense": 456_704, "masked": 456_704, "pruned": CONV2_HALF_MACS}, "macs"),
                              equal(a["equal_outputs"], True, "equal_outputs")),
              "cutting conv2's filters also cuts bn2 and conv3's inputs; masking them cuts nothing"),
        Check("a two-block ConvNet cut to widths 3 and 5 (988 parameters) computes what the masked model computes",
              _small_surgery, "keep the filters with the largest L1 norms in their order, cut bn<i> the same way, "
                              "and the next layer's inputs from the very same channels (after the last convolution: "
                              "the columns of the first Linear that read them)", calls_function=True),
    ),
    "16.3": (
        Check("2:4 keeps 9,472 of the 18,944 weights of conv2, conv3 and fc; fc's storage in float16 and float32",
              lambda a: first(equal(a["kept"], 9_472, "kept"), equal(a["fc_fp16"], FC_FP16, "fc_fp16"),
                              equal(a["fc_fp32"], FC_FP32, "fc_fp32")),
              "half the weights are kept, 2 bits of index per kept value; CSR stores int64 column indices and rows + 1 "
              "int64 row pointers"),
        Check("[0.1, -3, 2, 0.5, 4, 4, -4, 1] keeps -3, 2 and the first two 4s; a 2 x 8 weight in float16 takes 32, "
              "18, 18 and 104 bytes", _row_with_ties, "in each group of 4, keep the two largest |w| (on a tie, the "
              "earlier one)", calls_function=True),
        Check("rows whose length is not a multiple of 4 raise ValueError", _not_multiple_of_four,
              "a convolution's rows are its weight.reshape(out_channels, -1)", calls_function=True),
    ),
    "16.4": (
        Check("conv3's ranks 1 to 32 cost r x (288 + 32) parameters; within 4,096 the rank is 12",
              lambda a: first(equal(a["ranks"], RANKS, "ranks"), equal(a["params"], [r * 320 for r in RANKS], "params"),
                              equal(a["budget_rank"], 12, "budget_rank"),
                              _fractions(a["accuracy"], len(RANKS), "accuracy")),
              "a rank-r factor pair of a k x k convolution holds r x in x k x k + out x r weights"),
        Check("Linear(6, 4) within 35 parameters: rank 3 (34 with the bias), as close as a truncated SVD", _small_linear,
              "r (in + out) + out <= budget; the best rank-r product is U_r S_r V_r^T", calls_function=True),
        Check("a budget below rank 1 raises ValueError", _too_small, "rank 1 of Linear(6, 4) needs 6 + 4 + 4 = 14",
              calls_function=True),
    ),
    "16.5": (
        Check("with 100 labels, distillation reaches at least 94.5 % and beats the labels alone",
              lambda a: first(None if _number(a["kd_accuracy"]) and a["kd_accuracy"] >= 0.945
                              else f"kd_accuracy is {a['kd_accuracy']!r}; at least 0.945 is expected",
                              None if _number(a["labels_only_accuracy"]) and a["labels_only_accuracy"] < a["kd_accuracy"]
                              else "labels_only_accuracy should be below kd_accuracy"),
              "train_student(loss_gradient(distillation_loss, 4.0, 0.9), ...) as the notebook does"),
        Check("two classes by hand: 0.5 ln(4/3) at T=1, about 0.148967 at T=2, ln(4/3) from the label alone",
              _two_classes, "both logits are divided by T, and the soft term is multiplied by T^2",
              calls_function=True),
        Check("no labeled row: the hard term is 0, not NaN", _no_label,
              "F.cross_entropy over no row is NaN (0 / 0): skip it when no label is kept", calls_function=True),
    ),
    "16.6": (
        Check("LoRA (r=4) on fc trains 2,088 parameters; Adam's memory by part adds up; merged equals adapted",
              lambda a: first(equal(a["trainable_full"], DIGITS_PARAMS, "trainable_full"),
                              equal(a["trainable_lora"], LORA_FC, "trainable_lora"),
                              *(first(has_keys(a[k], ["weights", "grads", "optimizer_state", "total"], k),
                                      *(is_int(v, f"{k}[{p!r}]") for p, v in a[k].items()),
                                      equal(a[k]["total"], a[k]["weights"] + a[k]["grads"] + a[k]["optimizer_state"],
                                            f"{k}['total']")) for k in ("memory_full", "memory_lora")),
                              equal(a["merged_equal"], True, "merged_equal")),
              "grads and Adam's two moments are kept for the trainable parameters only"),
        Check("a two-layer Sequential with LoRA (r=1) on '0': 5 trainable parameters, the outputs unchanged",
              _tiny_lora, "freeze the whole model first, then add lora_A (random) and lora_B (zeros)",
              calls_function=True),
    ),
    "16.7": (
        Check("the notebook's network: six groups, 21,418 -> 15,082 parameters and 560,448 -> 460,096 MACs with block "
              "2's group cut to 16; its outputs those of the masked network",
              lambda a: first(equal(a["groups"], RESIDUAL_GROUPS, "groups"),
                              equal(a["params"], RESIDUAL_PARAMS, "params"), equal(a["macs"], RESIDUAL_MACS, "macs"),
                              equal(a["equal_outputs"], True, "equal_outputs")),
              "an addition couples the channels of both its inputs; a concatenation couples nothing, but the layer "
              "after it reads each side at its offset"),
        Check("a one-block network by hand: block1.conv2's group is itself and the stem; cut to 2, 132 parameters",
              _tiny_residual, "the identity adds the stem's output to conv2's: both are cut, and every layer reading "
                              "the sum (fc here) loses the same inputs", calls_function=True),
    ),
    "16.8": (
        Check("the schedule to 95 % in 8 steps ends at 95 %; accuracies are fractions: 8 for the schedule, 4 for "
              "one cut to its sparsities at steps 2, 4, 6 and 8; at 95 % the schedule is above one cut",
              lambda a: first(None if isinstance(a["schedule"], list) and len(a["schedule"]) == 8
                              and all(_number(s) for s in a["schedule"]) and abs(a["schedule"][-1] - 0.95) <= 1e-9
                              else f"schedule is {str(a['schedule'])[:80]}; expected 8 sparsities ending at 0.95",
                              _fractions(a["gradual"], 8, "gradual"), _fractions(a["one_shot"], 4, "one_shot"),
                              None if a["gradual"][-1] > a["one_shot"][-1]
                              else "the schedule's last accuracy should be above one cut's at 95 %"),
              "prune_gradually(model, cubic_schedule(0.95, 8), masks, ...) as the notebook does"),
        Check("the cubic schedule to 80 % in 4 steps by hand: 46.25 %, 70 %, 78.75 %, 80 %", _cubic_hand,
              "s_k = final + (initial - final) (1 - k / steps)^3, k = 1 ... steps: most is pruned early, when the "
              "network has the most weights to spare", calls_function=True),
        Check("from 50 % to 90 % in 2 steps: 85 %, 90 %", _cubic_from,
              "the schedule starts from initial (the sparsity before step 1), not from 0", calls_function=True),
    ),
    "16.9": (
        Check("TinyGPT with LoRA (r=4) on q and v trains 2,048 parameters; every memory part is an int and the total "
              "their sum; the activations are most of full fine-tuning's; merged equals adapted",
              lambda a: first(equal(a["trainable"], LORA_GPT, "trainable"),
                              *(first(has_keys(a[k], ["weights", "grads", "optimizer_state", "activations", "total"], k),
                                      *(is_int(v, f"{k}[{p!r}]") for p, v in a[k].items()),
                                      equal(a[k]["total"], a[k]["weights"] + a[k]["grads"] + a[k]["optimizer_state"]
                                            + a[k]["activations"], f"{k}['total']")) for k in ("memory", "memory_full")),
                              equal(a["memory"]["grads"], 8 * LORA_GPT, "memory['grads'] (float64)"),
                              equal(a["memory_full"]["grads"], 8 * GPT_PARAMS, "memory_full['grads'] (float64)"),
                              None if a["memory"]["activations"] >= a["memory_full"]["activations"] // 2
                              else "memory['activations'] is less than half full fine-tuning's: the frozen blocks "
                                   "keep their activations for the adapters before them",
                              equal(a["merged_equal"], True, "merged_equal")),
              "r (d_model + out) per adapted projection; weights 8 bytes per parameter in float64, the tied head once"),
        Check("a one-block TinyGPT (d_model 8, 2 heads, 1 key/value head) with r=2: 2 x (8 + 8) + 2 x (8 + 4) = 56 "
              "trainable parameters, the logits unchanged", _tiny_gpt,
              "adapt blocks.0.attn.q and blocks.0.attn.v only; with one key/value head v is 8 -> 4",
              calls_function=True),
    ),
}
