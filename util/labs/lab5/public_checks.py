"""Lab 5's public checks (``util.check("5.2")``): hand counts, facts the notebook states, and consistency.

``CHECKS[task id]`` is attached to each task's ``checks=`` in :mod:`util.labs.lab5.tasks`. The
function checks call the student's function on small nets built here, whose answers can be worked
out by hand; none is a hidden case's input, and none needs a reference file.
"""
from __future__ import annotations

import math
from typing import Any

from util.checks import at_least, each, equal, first, is_int
from util.contract import Check


def _pair(conv_bias: float | None = None, affine: bool = True):
    """A 1x1 conv with weight 2 (and ``conv_bias``) and a BN with mean 1, var 3, eps 1, gamma 4, beta 5."""
    import torch
    from torch import nn

    conv = nn.Conv2d(1, 1, 1, bias=conv_bias is not None)
    bn = nn.BatchNorm2d(1, eps=1.0, affine=affine).eval()
    with torch.no_grad():
        conv.weight.fill_(2.0)
        if conv_bias is not None:
            conv.bias.fill_(conv_bias)
        bn.running_mean.fill_(1.0)
        bn.running_var.fill_(3.0)
        if affine:
            bn.weight.fill_(4.0)
            bn.bias.fill_(5.0)
    return conv.eval(), bn


def _folded_numbers(fn, conv_bias: float | None = None, affine: bool = True) -> str | None:
    conv, bn = _pair(conv_bias, affine)
    fused = fn(conv, bn)
    weight = float(fused.weight.detach().reshape(-1)[0])
    bias = float(fused.bias.detach().reshape(-1)[0]) if fused.bias is not None else 0.0
    scale = (4.0 if affine else 1.0) / 2.0          # gamma / sqrt(var + eps) = gamma / sqrt(3 + 1)
    beta = 5.0 if affine else 0.0
    expected = (2.0 * scale, beta + ((conv_bias or 0.0) - 1.0) * scale)
    if math.isclose(weight, expected[0], abs_tol=1e-6) and math.isclose(bias, expected[1], abs_tol=1e-6):
        return None
    return f"the folded weight is {weight:g} and the bias {bias:g}; expected {expected[0]:g} and {expected[1]:g}"


def _geometry_kept(fn) -> str | None:
    import torch
    from torch import nn

    torch.manual_seed(0)
    conv = nn.Conv2d(4, 6, (3, 1), stride=(2, 1), padding=(1, 0), dilation=(2, 1), groups=2,
                     padding_mode="replicate", bias=False).eval()
    fused = fn(conv, nn.BatchNorm2d(6).eval())
    kept = ("stride", "padding", "dilation", "groups", "padding_mode", "kernel_size")
    return equal({k: getattr(fused, k) for k in kept}, {k: getattr(conv, k) for k in kept}, "the folded conv's")


def _small_model(shared: bool):
    """conv -> bn -> relu -> linear; with ``shared`` the conv's output is also added after the bn."""
    import torch
    from torch import nn

    class Small(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(2, 3, 3, padding=1)
            self.bn = nn.BatchNorm2d(3)
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            y = self.conv(x)
            z = self.bn(y) + y if shared else self.bn(y)
            return self.fc(torch.relu(z).mean((2, 3)))

    torch.manual_seed(0)
    model = Small().eval()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.5, 0.5)
        model.bn.running_var.uniform_(0.5, 2.0)
    return model


def _fold_small(fn, shared: bool) -> str | None:
    import torch
    from torch import nn

    model = _small_model(shared)
    x = torch.randn(2, 2, 5, 5, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(x)
        gm = fn(model)
        found = gm(x)
    bns = sum(isinstance(gm.get_submodule(n.target), nn.BatchNorm2d) for n in gm.graph.nodes if n.op == "call_module")
    worst = float((found - expected).abs().max())
    return first(equal(bns, 1 if shared else 0, "BatchNorm calls left in the graph"),
                 None if worst < 1e-5 else f"the output differs from the original by {worst:.1e}",
                 equal(sum(isinstance(m, nn.BatchNorm2d) for m in model.modules()), 1,
                       "BatchNorms of the model you passed in (it must not change)"))


def _tiny_blocks():
    """Two residual blocks: relu(conv(x) + x) as a module, then F.relu(torch.add(conv(x), x)); then a plain relu."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Blocks(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Conv2d(2, 2, 3, padding=1), nn.Conv2d(2, 2, 3, padding=1)
            self.relu = nn.ReLU()

        def forward(self, x):
            x = self.relu(self.a(x) + x)
            x = F.relu(torch.add(self.b(x), x))
            return torch.relu(x * 2)

    torch.manual_seed(0)
    return Blocks().eval()


def _record_small(fn) -> str | None:
    import torch
    import torch.fx as fx

    model = _tiny_blocks()
    x = torch.randn(1, 2, 4, 4, generator=torch.Generator().manual_seed(2))
    records = fn(fx.symbolic_trace(model), x)
    names = equal(list(records), ["relu", "relu_1", "output"], "the record's names")
    if names:
        return names
    with torch.no_grad():
        first_block = torch.relu(model.a(x) + x)
        expected = {"relu": first_block, "relu_1": torch.relu(model.b(first_block) + first_block), "output": model(x)}
    worst = max(float((torch.as_tensor(records[k]) - v).abs().max()) for k, v in expected.items())
    return None if worst < 1e-6 else f"a record differs from the node's value by {worst:.1e}"


def _compare_hand(fn) -> str | None:
    import torch

    a = {"x": torch.tensor([1.0, 2.0, 3.0, 4.0]), "zero": torch.tensor([0.5, -1.0])}
    b = {"x": torch.tensor([1.0, 2.5, 3.0, 3.0]), "zero": torch.zeros(2)}
    rows = fn(a, b)
    keys = ("name", "elements", "max_abs", "mean_abs", "max_rel")
    found = [{k: (round(r[k], 9) if isinstance(r[k], float) else r[k]) for k in keys} for r in rows]
    return equal(found, [{"name": "x", "elements": 4, "max_abs": 1.0, "mean_abs": 0.375, "max_rel": round(1 / 3, 9)},
                         {"name": "zero", "elements": 2, "max_abs": 1.0, "mean_abs": 0.75, "max_rel": 1.0}],
                 "the rows")


def _row(row: Any) -> str | None:
    return first(is_int(row["elements"], "elements"),
                 None if 0 <= row["mean_abs"] <= row["max_abs"] else "mean_abs must lie between 0 and max_abs")


def _avg_none(fn) -> str | None:
    from torch import nn

    conv = fn(nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False), 4)
    return None if conv is None else f"returned a {type(conv).__name__}; expected None"


def _avg_include_pad(fn) -> str | None:
    import torch
    from torch import nn

    pool = nn.AvgPool2d(3, stride=1, padding=1)
    conv = fn(pool, 4)
    if not isinstance(conv, nn.Conv2d):
        return f"returned {type(conv).__name__}; expected an nn.Conv2d"
    x = torch.randn(1, 4, 8, 8, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        worst = float((conv(x) - (pool(x) + pool(x))).abs().max())
    return first(equal([conv.groups, list(conv.weight.shape)], [4, [4, 1, 3, 3]], "[groups, weight shape]"),
                 None if worst < 1e-5 else f"conv(x) differs from pool(x) + pool(x) by {worst:.1e} on an 8x8 input")


def _merge_hand(fn) -> str | None:
    import torch
    from torch import nn

    first_conv, second_conv = nn.Conv2d(1, 1, 1, bias=True), nn.Conv2d(1, 1, 1, bias=False)
    with torch.no_grad():
        first_conv.weight.fill_(2.0)
        first_conv.bias.fill_(1.0)
        second_conv.weight.fill_(3.0)
    merged = fn(first_conv, second_conv)
    if not isinstance(merged, nn.Conv2d):
        return f"returned {type(merged).__name__}; expected an nn.Conv2d"
    bias = merged.bias.detach().reshape(-1).tolist() if merged.bias is not None else [0.0]
    return equal([merged.weight.detach().reshape(-1).tolist(), bias], [[2.0, 3.0], [1.0]], "[weight, bias]")


def _merge_strides(fn) -> str | None:
    from torch import nn

    merged = fn(nn.Conv2d(2, 4, 3, stride=1, padding=1), nn.Conv2d(2, 4, 3, stride=2, padding=1))
    return None if merged is None else f"returned a {type(merged).__name__}; expected None"


RESNET18_CONV1 = {"weight_shape": [64, 3, 7, 7], "stride": [2, 2], "padding": [3, 3], "dilation": [1, 1],
                  "groups": 1, "padding_mode": "zeros", "has_bias": True, "dtype": "float32"}

CHECKS: dict[str, tuple[Check, ...]] = {
    "5.1": (
        Check("hand count: weight 2, BN mean 1, var 3, eps 1, gamma 4, beta 5 -> weight 4, bias 3",
              lambda fn: _folded_numbers(fn), "scale = gamma / sqrt(var + eps) with the BN's own eps; "
              "weight * scale; bias = beta + (conv bias - mean) * scale", calls_function=True),
        Check("hand count: the same with a conv bias of 1 -> bias 5", lambda fn: _folded_numbers(fn, conv_bias=1.0),
              "the conv's own bias goes through the BN too: (b - mean) * scale + beta", calls_function=True),
        Check("hand count: the same with BN(affine=False) -> weight 1, bias -0.5",
              lambda fn: _folded_numbers(fn, affine=False),
              "affine=False means gamma = 1 and beta = 0 (bn.weight and bn.bias are None)", calls_function=True),
        Check("stride, padding, dilation, groups, padding mode and kernel size kept", _geometry_kept,
              "build the new Conv2d with every argument of the old one, and bias=True", calls_function=True),
        Check("ResNet-18's conv1: 64x3x7x7, stride 2, padding 3, now with a bias, float32",
              lambda a: equal({k: a[k] for k in RESNET18_CONV1}, RESNET18_CONV1, "the summary"),
              "describe_conv of the folded conv1; the fold adds a bias"),
    ),
    "5.2": (
        Check("ResNet-18: 20 BatchNorms and 20 convolutions before, no BatchNorm after",
              lambda a: equal([a["bn_before"], a["conv"], a["bn_after"]], [20, 20, 0], "[bn_before, conv, bn_after]"),
              "every BatchNorm of ResNet-18 follows a conv whose only user it is"),
        Check("each fold removes exactly one node",
              lambda a: equal(a["nodes_before"] - a["nodes_after"], a["bn_before"] - a["bn_after"],
                              "nodes removed"), "erase the BN's node after redirecting its users to the conv"),
        Check("the folded model computes the same as the original (about 1e-6 relative)",
              lambda a: None if a["output_log10_max_rel"] < -4 else
              f"log10 of the max relative difference is {a['output_log10_max_rel']:.2f}; expected below -4",
              "compare gm(x) with resnet(x), both float32, with the measure of task 5.4"),
        Check("conv -> bn -> relu: the BatchNorm folds, the output is unchanged, the input model is untouched",
              lambda fn: _fold_small(fn, shared=False), "fold into a copy: copy.deepcopy(model) first",
              calls_function=True),
        Check("conv whose output feeds the BatchNorm and an add: the BatchNorm stays",
              lambda fn: _fold_small(fn, shared=True),
              "fold only when the conv's node has exactly one user (len(node.users) == 1)", calls_function=True),
    ),
    "5.3": (
        Check("ResNet-18: 8 breakpoints (layer1_0_relu_1 first), then 'output' of shape 8x10",
              lambda a: first(equal(len(a["names"]), 9, "the number of records"),
                              equal([a["names"][0], a["names"][-1]], ["layer1_0_relu_1", "output"],
                                    "[first name, last name]"),
                              equal(a["shapes"]["output"], [8, 10], "the output's shape")),
              "each BasicBlock ends with relu(out + identity); the model's output comes last"),
        Check("record on relu(conv(x) + x) then F.relu(torch.add(conv(x), x)) then relu(2x): "
              "records relu, relu_1 and output", _record_small,
              "match ReLU modules and F.relu / torch.relu whose input is an add of two nodes; "
              "keep a clone of each tensor", calls_function=True),
    ),
    "5.4": (
        Check("hand pair: x = [1, 2, 3, 4] vs [1, 2.5, 3, 3]; [0.5, -1] vs an all-zero reference",
              _compare_hand, "max_abs 1, mean_abs 0.375, max_rel 1 / 3; with an all-zero reference "
              "max_rel = max_abs", calls_function=True),
        Check("one row per record: block1 (200 elements), block2 (144), output (20)",
              lambda a: equal([[r["name"], r["elements"]] for r in a],
                              [["block1", 200], ["block2", 144], ["output", 20]], "[name, elements]"),
              "the synthetic records are 2x4x5x5, 2x8x3x3 and 2x10"),
        Check("elements are ints; 0 <= mean_abs <= max_abs", lambda a: each(a, _row, "rows"),
              "elements = numel(); the mean of |d| cannot exceed its max"),
    ),
    "5.5": (
        Check("every value is a finite log10 below 0; top1_flips_fold32 is an int from 0 to 8",
              lambda a: first(*(None if isinstance(a[k], float) and -20 < a[k] < 0 else f"{k} is {a[k]!r}"
                                for k in a if k != "top1_flips_fold32"),
                              is_int(a["top1_flips_fold32"], "top1_flips_fold32"),
                              at_least(8 - a["top1_flips_fold32"], 0, "8 - top1_flips_fold32")),
              "log10 of the worst max_rel over the records; flips count images of the batch of 8"),
        Check("float16 loses at least two more decades than float32; bfloat16 loses more than float16",
              lambda a: first(at_least(a["orig16_vs_fp64"] - a["orig32_vs_fp64"], 2.0,
                                       "orig16_vs_fp64 - orig32_vs_fp64"),
                              at_least(a["origbf16_vs_fp64"] - a["orig16_vs_fp64"], 0.0,
                                       "origbf16_vs_fp64 - orig16_vs_fp64")),
              "float32 keeps 24 significant bits, float16 11, bfloat16 8: cast the model and the input"),
    ),
    "5.6": (
        Check("AvgPool2d(3, 1, 1, count_include_pad=False) -> None", _avg_none,
              "with padding and count_include_pad=False the border windows divide by fewer than 9", calls_function=True),
        Check("AvgPool2d(3, 1, 1) -> a depthwise conv equal to pool(x) + pool(x)", _avg_include_pad,
              "groups = channels, weight 2 / 9, the pool's stride and padding, no bias", calls_function=True),
        Check("the forced substitution is visibly wrong at the borders (error above 0.1)",
              lambda a: at_least(a["forced_border_error"], 0.1, "forced_border_error"),
              "compare the count_include_pad=True conv with pool(x) + pool(x) for count_include_pad=False"),
    ),
    "5.7": (
        Check("hand pair: 1x1 weights 2 (bias 1) and 3 (no bias) -> weight [2, 3], bias [1]", _merge_hand,
              "concatenate the weights along the input channels (dim 1); add the biases, a missing one is 0",
              calls_function=True),
        Check("strides 1 and 2 -> None", _merge_strides,
              "merge only convolutions with the same geometry (out channels, kernel, stride, padding, dilation, "
              "padding mode) and groups = 1", calls_function=True),
    ),
}
