"""Lab 5, graph substitutions and the floating-point differences they cause: the one declaration of its tasks.

Students fold BatchNorm into convolutions (one pair, then a whole model with ``torch.fx``), record
the activations at *breakpoints* (``relu(add(a, b))``), compare records in float64, measure how far
a substituted model drifts in float32, float16 and bfloat16, and meet substitutions that are valid
only under conditions (AvgAdd, ConvAdd).

How each kind of value is graded:

* counts, names, shapes and booleans exactly;
* rounding errors (task 5.5, the 5.2 answer's output difference) as **log10** within half a decade
  (``Tolerance(atol=0.5)``): they depend on the CPU's kernels (measured spread between two CPUs:
  at most 0.1);
* cases whose expected verdict is a constant (a fold matches a float64 fold, records are the graph's
  values, a substitution is exact) are decided by :mod:`util.labs.lab5.judge` in the grader's
  process, on what the kernel saved (``grader_check``); the kernel returns only what the student's
  function computed (counts, names, shapes, geometry).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from util.contract import Case, Lab, Release, Task, Tolerance, Written
from util.labs.lab5.public_checks import CHECKS as PUBLIC

LAB_NAME = "lab5"
JUDGE = "util.labs.lab5.judge"
LOG10 = Tolerance(atol=0.5)
"""Rounding errors as log10: half a decade either way."""
SUMS = Tolerance(rtol=1e-4)
"""Sums of absolute parameter values (``weight_l1``, ``bias_l1``): float32 parameters summed in float64."""
TABLE = Tolerance(rtol=1e-9)
"""Task 5.4's statistics, computed in float64 from float32 or float16 records."""


def _conv(**kwargs: Any) -> dict[str, Any]:
    return {"in_channels": 8, "out_channels": 8, "kernel_size": 3, "padding": 1, "bias": False, **kwargs}


def _call_fold_conv(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.artifacts import save_arrays
    from util.labs.lab5.nets import conv_bn_pair
    from util.labs.lab5.saved import conv_arrays
    from util.labs.lab5.summaries import describe_conv

    fused = fn(*conv_bn_pair(spec))
    save_arrays(conv_arrays(fused, fn.__name__), spec, LAB_NAME)
    return describe_conv(fused)


def _call_fold_model(fn: Callable, spec: Mapping[str, Any]) -> Any:
    import numpy as np
    import torch
    import torch.fx as fx
    from torch import nn

    from util.artifacts import save_arrays
    from util.labs.lab5.nets import build, seeded_input
    from util.labs.lab5.saved import conv_arrays
    from util.labs.lab5.summaries import count_graph

    model = build(spec["model"])
    before = count_graph(fx.symbolic_trace(model))
    gm = fn(model)
    if not isinstance(gm, fx.GraphModule):
        raise TypeError(f"{fn.__name__}() must return a torch.fx.GraphModule, not {type(gm).__name__}")
    after = count_graph(gm)
    with torch.no_grad():
        output = gm(seeded_input(spec["input"], spec["seed"]))
    arrays = {"output": output.detach().float().numpy()}
    batchnorms, convs = [], []
    for node in gm.graph.nodes:
        module = gm.get_submodule(node.target) if node.op == "call_module" else None
        if isinstance(module, nn.BatchNorm2d):
            batchnorms.append(node.target)
        elif isinstance(module, nn.Conv2d) and node.target not in convs:
            convs.append(node.target)
            arrays.update(conv_arrays(module, fn.__name__, prefix=f"conv:{node.target}:"))
    arrays.update(bn_targets=np.array(batchnorms, dtype=str), conv_targets=np.array(convs, dtype=str))
    save_arrays(arrays, spec, LAB_NAME)
    return {"bn_before": before["bn"], "bn_after": after["bn"], "conv": after["conv"],
            "nodes_before": before["nodes"], "nodes_after": after["nodes"]}


def _call_record(fn: Callable, spec: Mapping[str, Any]) -> Any:
    import torch
    import torch.fx as fx

    from util.artifacts import save_arrays
    from util.labs.lab5.nets import build, seeded_input

    model = build(spec["model"])
    if spec.get("fold"):   # the course folds here (PyTorch's own fuser): this case tests record, not 5.2
        from torch.fx.experimental.optimization import fuse
        gm = fuse(model)
    else:
        gm = fx.symbolic_trace(model)
    records = fn(gm, seeded_input(spec["input"], spec["seed"]))
    if not isinstance(records, dict) or not all(isinstance(v, torch.Tensor) for v in records.values()):
        raise TypeError(f"{fn.__name__}(gm, x) must return a dict of node name -> tensor")
    save_arrays({str(k): v.detach().float().cpu().numpy() for k, v in records.items()}, spec, LAB_NAME)
    return {"names": list(records), "shapes": {k: list(v.shape) for k, v in records.items()}}


def _call_compare(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab5.nets import record_pair

    return fn(*record_pair(spec["seed"], spec["kind"]))


def _call_error_table(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab5.nets import build, seeded_input

    return fn(build(spec["model"]), seeded_input(spec["input"], spec["seed"]))


def _save_substitution(conv: Any, fn: Callable, spec: Mapping[str, Any]) -> dict[str, bool]:
    import numpy as np

    from util.artifacts import save_arrays
    from util.labs.lab5.saved import conv_arrays

    save_arrays({"none": np.array(1)} if conv is None else conv_arrays(conv, fn.__name__), spec, LAB_NAME)
    return {"substituted": conv is not None}


def _call_avg_add(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from torch import nn

    return _save_substitution(fn(nn.AvgPool2d(**spec["pool"]), spec["channels"]), fn, spec)


def _call_conv_add(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab5.nets import conv_pair

    return _save_substitution(fn(*conv_pair(spec)), fn, spec)


CONV_SUMMARY = ("weight_shape", "stride", "padding", "dilation", "groups", "padding_mode", "has_bias", "dtype",
                "weight_l1", "bias_l1")
ERROR_TABLE = ("fold32_vs_orig32", "orig32_vs_fp64", "fold16_vs_orig16", "orig16_vs_fp64", "origbf16_vs_fp64",
               "top1_flips_fold32")

WRITTEN = {
    "5.5": (Written("5.Q1", "Before reading on: your table puts the fold's difference next to the error each "
                     "dtype makes anyway against float64. Is folding BatchNorm a safe substitution in "
                     "float32, and in float16? Argue from your numbers, and say what tolerance a test "
                     "of the fold should use.",
                     6, words=(40, 250), since=2),),
}
"""The lab's questions answered in words, marked by hand against ``rubrics.py`` (release 2): their
points came out of their task's exported answer."""


LAB = Lab(
    name=LAB_NAME,
    title="Graph substitutions and their floating-point differences",
    notebook="lab5_graph_substitutions.ipynb",
    packages=("torch", "torchvision", "numpy"),
    releases=(
        Release(1, "2026-11-23", "The first release: BatchNorm folding with torch.fx, breakpoints and records, the error a "
                "substitution adds across dtypes, and AvgAdd and ConvAdd, valid only under conditions."),
        Release(2, "2026-11-26", "Task 5.5 asks a written question, Q1 (6 points, marked by hand): whether folding "
                "BatchNorm is safe in float32 and float16, argued from the error table; its points came "
                "from 5.5's exported table.",
                marker="(written, 6 points of task 5.5, marked by hand)"),
    ),
    tasks=(
        Task(
            id="5.1", title="Fold one Conv+BN", answer_points=3,
            answer="describe_conv(fold_conv_bn(resnet.conv1, resnet.bn1))", keys=CONV_SUMMARY, tolerance=SUMS,
            function="fold_conv_bn", run_case=_call_fold_conv, grader_check=f"{JUDGE}:check_fold_conv",
            checks=PUBLIC["5.1"],
            cases=(
                Case("conv with a bias", {"conv": _conv(in_channels=6, bias=True), "seed": 11}, 3),
                Case("grouped, stride 2, BN eps 1e-3",
                     {"conv": _conv(out_channels=12, stride=2, groups=4), "bn": {"eps": 1e-3}, "seed": 12}, 3),
                Case("depthwise, dilated, BN affine=False",
                     {"conv": _conv(padding=2, dilation=2, groups=8), "bn": {"affine": False}, "seed": 13}, 3),
                Case("reflect padding, 3x5 kernel, a bias",
                     {"conv": _conv(in_channels=4, out_channels=6, kernel_size=[3, 5], padding=[1, 2],
                                    padding_mode="reflect", bias=True), "seed": 14}, 3),
            ),
        ),
        Task(
            id="5.2", title="Fold a whole model", answer_points=4,
            answer="counts before and after fold_model(resnet), log10 of the output's max relative difference",
            keys=("bn_before", "bn_after", "conv", "nodes_before", "nodes_after", "output_log10_max_rel"),
            tolerance=LOG10, function="fold_model", run_case=_call_fold_model,
            grader_check=f"{JUDGE}:check_fold_model", checks=PUBLIC["5.2"],
            cases=(
                Case("mobilenet_v3_small (BN eps 1e-3)",
                     {"model": "mobilenet_v3_small", "input": [2, 3, 64, 64], "seed": 15}, 4),
                Case("densenet121 (pre-activation BNs)",
                     {"model": "densenet121", "input": [1, 3, 64, 64], "seed": 16}, 4),
                Case("course net: a shared conv output, a BN after a pool",
                     {"model": "tiny_shared", "input": [2, 3, 16, 16], "seed": 17}, 4),
            ),
        ),
        Task(
            id="5.3", title="Breakpoints and records", answer_points=3,
            answer="{'names': record(gm, x)'s keys in order, 'shapes': {name: shape}} for ResNet-18",
            keys=("names", "shapes"), function="record", run_case=_call_record,
            grader_check=f"{JUDGE}:check_records", checks=PUBLIC["5.3"],
            cases=(
                Case("resnet34", {"model": "resnet34", "input": [2, 3, 64, 64], "seed": 18}, 4),
                Case("course net: relu(add) written five ways",
                     {"model": "tiny_res", "input": [2, 4, 8, 8], "seed": 19}, 4),
                Case("ResNet-18 folded by PyTorch's fuser",
                     {"model": "resnet18_bnstats", "input": [2, 3, 32, 32], "seed": 20, "fold": True}, 4),
            ),
        ),
        Task(
            id="5.4", title="Compare records", answer_points=4,
            answer="compare_records(a, b) on the notebook's synthetic pair: a list of row dicts",
            tolerance=TABLE, function="compare_records", run_case=_call_compare, checks=PUBLIC["5.4"],
            cases=(
                Case("an all-zero reference", {"seed": 21, "kind": "zero_reference"}, 4),
                Case("float16 values near 65504", {"seed": 22, "kind": "float16_extremes"}, 4),
            ),
        ),
        Task(
            id="5.5", title="Error budget across dtypes", answer_points=4, written=WRITTEN["5.5"],
            answer="error_table(resnet, x): five log10 values and an int", keys=ERROR_TABLE, tolerance=LOG10,
            function="error_table", run_case=_call_error_table, checks=PUBLIC["5.5"],
            cases=(Case("course net with a shared conv output, 8x3x32x32",
                        {"model": "tiny_shared", "input": [8, 3, 32, 32], "seed": 5}, 10),),
        ),
        Task(
            id="5.6", title="AvgAdd: valid only sometimes", answer_points=2,
            answer="{'include_pad': describe_conv(...), 'exclude_pad_is_none': bool, 'forced_border_error': float}",
            keys=("include_pad", "exclude_pad_is_none", "forced_border_error"), tolerance=SUMS,
            function="avg_add_to_conv", run_case=_call_avg_add, grader_check=f"{JUDGE}:check_avg_add",
            checks=PUBLIC["5.6"],
            cases=(
                Case("k5 s1 p2, count_include_pad=False",
                     {"pool": {"kernel_size": 5, "stride": 1, "padding": 2, "count_include_pad": False},
                      "channels": 6}, 3),
                Case("k2 s2 p0, count_include_pad=False",
                     {"pool": {"kernel_size": 2, "stride": 2, "padding": 0, "count_include_pad": False},
                      "channels": 5}, 3),
                Case("k3 s2 p0, ceil_mode=True",
                     {"pool": {"kernel_size": 3, "stride": 2, "padding": 0, "ceil_mode": True}, "channels": 4}, 3),
                Case("k5 s1 p2, count_include_pad=False, divisor_override=25",
                     {"pool": {"kernel_size": 5, "stride": 1, "padding": 2, "count_include_pad": False,
                               "divisor_override": 25}, "channels": 3}, 3),
            ),
        ),
        Task(
            id="5.7", title="ConvAdd: merging two convolutions", answer_points=2,
            answer="describe_conv(merge_conv_add(first, second)) for the notebook's pair", keys=CONV_SUMMARY,
            tolerance=SUMS, function="merge_conv_add", run_case=_call_conv_add,
            grader_check=f"{JUDGE}:check_conv_add", checks=PUBLIC["5.7"],
            cases=(
                Case("one bias missing, stride 2",
                     {"first": _conv(in_channels=3, stride=2), "second": _conv(in_channels=5, stride=2, bias=True),
                      "seed": 23}, 3),
                Case("padding modes differ",
                     {"first": _conv(in_channels=4, bias=True),
                      "second": _conv(in_channels=4, bias=True, padding_mode="reflect"), "seed": 24}, 3),
            ),
        ),
    ),
)
