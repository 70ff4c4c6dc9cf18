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

from util.contract import Lab, Release, Task, Tolerance, Written
from util.labs.lab5.public_checks import CHECKS as PUBLIC

LAB_NAME = "lab5"
JUDGE = "util.labs.lab5.judge"
LOG10 = Tolerance(atol=0.5)
"""Rounding errors as log10: half a decade either way."""
SUMS = Tolerance(rtol=1e-4)
"""Sums of absolute parameter values (``weight_l1``, ``bias_l1``): float32 parameters summed in float64."""
TABLE = Tolerance(rtol=1e-9)
"""Task 5.4's statistics, computed in float64 from float32 or float16 records."""



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

    model = build(spec["model"], cancel=bool(spec.get("cancel")))
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


RELEASES = (
    Release(1, "2026-11-23", "The first release: BatchNorm folding (one pair, then a whole model with torch.fx), "
            "breakpoints and records, an error budget across dtypes, and the substitutions AvgAdd and ConvAdd."),
    Release(2, "2026-11-26",
            "The rule of 5.1 is unchanged (fold in float64, store in float32), and the hidden cases of 5.1 and 5.2 "
            "now check it: their BatchNorms cancel the conv's bias, leaving a folded bias near 1e-5, which a fold "
            "computed in float32 (PyTorch's own fuser on float32 modules included) gets wrong by about 1e-3. A "
            "float64 fold that passed before passes these too.",
            marker="In three of the hidden pairs the BatchNorm's shift cancels the conv's bias"),
    Release(3, "2026-11-26", "Task 5.5 asks a written question, Q1 (6 points, marked by hand): whether folding "
            "BatchNorm is safe in float32 and float16, argued from the error table; its points came "
            "from 5.5's exported table.",
            marker="(written, 6 points of task 5.5, marked by hand)"),
)
"""The lab's changelog (``Lab.releases``); release 2 made the hidden folds cancel their conv's bias."""


CONV_SUMMARY = ("weight_shape", "stride", "padding", "dilation", "groups", "padding_mode", "has_bias", "dtype",
                "weight_l1", "bias_l1")
ERROR_TABLE = ("fold32_vs_orig32", "orig32_vs_fp64", "fold16_vs_orig16", "orig16_vs_fp64", "origbf16_vs_fp64",
               "top1_flips_fold32")

WRITTEN = {
    "5.5": (Written("5.Q1", "Before reading on: your table puts the fold's difference next to the error each "
                     "dtype makes anyway against float64. Is folding BatchNorm a safe substitution in "
                     "float32, and in float16? Argue from your numbers, and say what tolerance a test "
                     "of the fold should use.",
                     6, words=(40, 250), since=3),),
}
"""The lab's questions answered in words, marked by hand against ``rubrics.py`` (release 3): their
points came out of their task's exported answer."""


LAB = Lab(
    name=LAB_NAME,
    title="Graph substitutions and their floating-point differences",
    notebook="lab5_graph_substitutions.ipynb",
    packages=("torch", "torchvision", "numpy"),
    releases=RELEASES,
    tasks=(
        Task(
            id="5.1", title="Fold one Conv+BN", answer_points=3,
            answer="describe_conv(fold_conv_bn(resnet.conv1, resnet.bn1))", keys=CONV_SUMMARY, tolerance=SUMS,
            function="fold_conv_bn", run_case=_call_fold_conv, grader_check=f"{JUDGE}:check_fold_conv",
            checks=PUBLIC["5.1"],
            hidden_points=12,
        ),
        Task(
            id="5.2", title="Fold a whole model", answer_points=4,
            answer="counts before and after fold_model(resnet), log10 of the output's max relative difference",
            keys=("bn_before", "bn_after", "conv", "nodes_before", "nodes_after", "output_log10_max_rel"),
            tolerance=LOG10, function="fold_model", run_case=_call_fold_model,
            grader_check=f"{JUDGE}:check_fold_model", checks=PUBLIC["5.2"],
            hidden_points=12,
        ),
        Task(
            id="5.3", title="Breakpoints and records", answer_points=3,
            answer="{'names': record(gm, x)'s keys in order, 'shapes': {name: shape}} for ResNet-18",
            keys=("names", "shapes"), function="record", run_case=_call_record,
            grader_check=f"{JUDGE}:check_records", checks=PUBLIC["5.3"],
            hidden_points=12,
        ),
        Task(
            id="5.4", title="Compare records", answer_points=4,
            answer="compare_records(a, b) on the notebook's synthetic pair: a list of row dicts",
            tolerance=TABLE, function="compare_records", run_case=_call_compare, checks=PUBLIC["5.4"],
            hidden_points=8,
        ),
        Task(
            id="5.5", title="Error budget across dtypes", answer_points=4, written=WRITTEN["5.5"],
            answer="error_table(resnet, x): five log10 values and an int", keys=ERROR_TABLE, tolerance=LOG10,
            function="error_table", run_case=_call_error_table, checks=PUBLIC["5.5"],
            hidden_points=10,
        ),
        Task(
            id="5.6", title="AvgAdd: valid only sometimes", answer_points=2,
            answer="{'include_pad': describe_conv(...), 'exclude_pad_is_none': bool, 'forced_border_error': float}",
            keys=("include_pad", "exclude_pad_is_none", "forced_border_error"), tolerance=SUMS,
            function="avg_add_to_conv", run_case=_call_avg_add, grader_check=f"{JUDGE}:check_avg_add",
            checks=PUBLIC["5.6"],
            hidden_points=12,
        ),
        Task(
            id="5.7", title="ConvAdd: merging two convolutions", answer_points=2,
            answer="describe_conv(merge_conv_add(first, second)) for the notebook's pair", keys=CONV_SUMMARY,
            tolerance=SUMS, function="merge_conv_add", run_case=_call_conv_add,
            grader_check=f"{JUDGE}:check_conv_add", checks=PUBLIC["5.7"],
            hidden_points=6,
        ),
    ),
)
