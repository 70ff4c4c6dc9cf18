"""Lab 6's public checks (``check("6.3")``): what the notebook states, on its own models (ResNet-18,
``conv_bn``, ``layer_norm``, ``ln_linear``), never a hidden case's. ``CHECKS[task id]`` is attached to
each task's ``checks=`` in ``tasks.py``.

They run in the student's kernel, so they are advice, not grades: the grader decides with the
references and its own judges.
"""
from __future__ import annotations

import math
from typing import Any

from util.checks import equal, first, has_keys
from util.contract import Check

LEVEL_KEYS = ("nodes", "ops", "bitwise", "relmax_log10")
TRACE_KEYS = ("tensors_unopt", "matched", "first_divergent", "producer_op")


def _model(name: str):
    from util.labs.lab6 import zoo

    return zoo.load(name), zoo.feeds(name, 0)


# ---------------------------------------------------------------- 6.1

def _levels_consistent(answer: Any) -> str | None:
    for level, row in answer.items():
        found = first(has_keys(row, LEVEL_KEYS, f"answer[{level!r}]"),
                      equal(sum(row["ops"].values()), row["nodes"], f"the sum of answer[{level!r}]['ops']"))
        if found:
            return found
    return None


def _resnet_levels(answer: Any) -> str | None:
    plain, basic = answer["DISABLE_ALL"], answer["BASIC"]
    without_bn = {op: n for op, n in plain["ops"].items() if op != "BatchNormalization"}
    return first(equal(plain["nodes"], 69, "answer['DISABLE_ALL']['nodes']"),
                 equal([plain["bitwise"], plain["relmax_log10"]], [True, -12.0],
                       "DISABLE_ALL's [bitwise, relmax_log10]"),
                 equal(plain["ops"].get("BatchNormalization"), 20, "DISABLE_ALL's BatchNormalization count"),
                 equal(basic["ops"], without_bn, "answer['BASIC']['ops']"))


def _conv_bn_levels(fn) -> str | None:
    report = fn(*_model("conv_bn"))
    return first(has_keys(report, ("DISABLE_ALL", "BASIC", "EXTENDED"), "level_report(conv_bn)"),
                 equal(report["DISABLE_ALL"]["ops"], {"BatchNormalization": 1, "Conv": 1}, "DISABLE_ALL's ops"),
                 equal([report["BASIC"]["nodes"], report["BASIC"]["ops"], report["BASIC"]["bitwise"]],
                       [1, {"Conv": 1}, False], "BASIC's [nodes, ops, bitwise]"),
                 None if -8 <= report["BASIC"]["relmax_log10"] <= -5 else
                 f"BASIC's relmax_log10 is {report['BASIC']['relmax_log10']}; float32 rounding is about -7 to -6")


# ---------------------------------------------------------------- 6.2

def _metrics_hand_pair(fn) -> str | None:
    import numpy as np

    found = fn(np.array([1.0, 1e-3, -2.5, 4.0], np.float32), np.array([1.0, 0.0, -2.0, 4.0], np.float32))
    same = fn(np.array([1.0, -0.5], np.float32), np.array([1.0, -0.5], np.float32))
    mre = (float(np.float32(1e-3)) + 0.5 / (2.0 + 1e-8)) / 4
    return first(has_keys(found, ("bitwise", "max_abs", "relmax", "mre"), "error_metrics(...)"),
                 equal(found["bitwise"], False, "bitwise"),
                 None if math.isclose(found["max_abs"], 0.5, rel_tol=1e-9) else
                 f"max_abs is {found['max_abs']!r}; expected 0.5",
                 None if math.isclose(found["relmax"], 0.125, rel_tol=1e-9) else
                 f"relmax is {found['relmax']!r}; expected 0.5 / 4 = 0.125",
                 None if math.isclose(found["mre"], mre, rel_tol=1e-9) else
                 f"mre is {found['mre']!r}; expected (1e-3 + 0.5 / (2 + 1e-8)) / 4 = {mre:.10g}",
                 equal(same, {"bitwise": True, "max_abs": 0.0, "relmax": 0.0, "mre": 0.0}, "two equal arrays"))


# ---------------------------------------------------------------- 6.3

def _who_is_wrong_shape(answer: Any) -> str | None:
    random, bad = answer["random"], answer["bad"]
    found = first(has_keys(random, ("opt_vs_unopt", "unopt_vs_fp64", "opt_vs_fp64"), "answer['random']"),
                  has_keys(bad, ("unopt_wrong", "opt_wrong", "optimisation_to_blame"), "answer['bad']"))
    if found:
        return found
    outside = [k for k, v in random.items() if not (isinstance(v, float) and -9 <= v <= -5)]
    if outside:
        return (f"answer['random'][{outside[0]!r}] is {random[outside[0]]!r}; on a random input every error is "
                "float32 rounding, about 1e-7 (log10 between -9 and -5)")
    return next((f"answer['bad'][{k!r}] is {v!r}; expected a bool" for k, v in bad.items()
                 if not isinstance(v, bool)), None)


def _search_ln_linear(fn) -> str | None:
    from util.labs.lab6 import zoo
    from util.labs.lab6.search import RATIO, ErrorFunction, baseline

    model, shape = zoo.load("ln_linear"), zoo.SHAPES["ln_linear"]
    error_fn = ErrorFunction(model, shape, -8.0, 8.0, 50)
    x = error_fn.validate(fn(error_fn, shape, -8.0, 8.0, 50, 0))
    calls = error_fn.calls
    judge = ErrorFunction(model, shape, -8.0, 8.0, 21)
    error, median = judge(x), baseline(judge, 1)
    return None if error >= RATIO * median else (
        f"the input's error is {error / median:,.1f}x the median of 20 random inputs; the grader asks for "
        f"at least {RATIO}x (your search used {calls} of its 50 calls)")


# ---------------------------------------------------------------- 6.4

def _trace_answer(answer: Any) -> str | None:
    return first(equal(answer["tensors_unopt"], 69, "tensors_unopt"),
                 None if 0 <= answer["matched"] <= 69 else
                 f"matched is {answer['matched']}; at most 69 tensors can match",
                 None if isinstance(answer["first_divergent"], str) else
                 f"first_divergent is {answer['first_divergent']!r}; BASIC folds BatchNorms, so some tensor differs")


def _trace_conv_bn(fn) -> str | None:
    model, feeds = _model("conv_bn")
    return first(equal(fn(model, feeds, "BASIC"), {"tensors_unopt": 2, "matched": 1, "first_divergent": "y",
                                                   "producer_op": "Conv"}, "trace(conv_bn, feeds, 'BASIC')"),
                 equal(fn(model, feeds, "BASIC", disabled=("ConvBNFusion",)),
                       {"tensors_unopt": 2, "matched": 2, "first_divergent": None, "producer_op": None},
                       "trace(conv_bn, feeds, 'BASIC', disabled=('ConvBNFusion',))"))


# ---------------------------------------------------------------- 6.5

def _names_are_candidates(answer: Any) -> str | None:
    from util.labs.lab6.passes import CANDIDATES

    if not isinstance(answer, list):
        return f"the answer is a {type(answer).__name__}; expected a list of pass names"
    unknown = [name for name in answer if name not in CANDIDATES]
    return f"{unknown[0]!r} is not a candidate name (onnxruntime would silently ignore it)" if unknown else None


def _sufficient_and_minimal(model, feeds, names) -> str | None:
    from util.labs.lab6 import runtime

    reference = runtime.outputs(model, feeds)
    if not runtime.same_bits(runtime.outputs(model, feeds, "EXTENDED", names), reference):
        return f"{names} is not sufficient: EXTENDED with them disabled still differs from DISABLE_ALL"
    for name in names:
        if runtime.same_bits(runtime.outputs(model, feeds, "EXTENDED", [n for n in names if n != name]), reference):
            return f"{names} is not 1-minimal: it is still sufficient without {name!r}"
    return None


def _isolate_toys(fn) -> str | None:
    from util.labs.lab6.passes import CANDIDATES

    model, feeds = _model("conv_bn")
    found = first(equal(fn(model, feeds, list(CANDIDATES)), ["ConvBNFusion"], "isolate_passes(conv_bn, ...)"))
    if found:
        return found
    model, feeds = _model("layer_norm")
    names = fn(model, feeds, list(CANDIDATES))
    return _sufficient_and_minimal(model, feeds, list(names)) if names else (
        "isolate_passes(layer_norm, ...) returned []; but EXTENDED differs from DISABLE_ALL there: "
        "passes that back each other up need sets, not single passes (delta debugging)")


CHECKS: dict[str, tuple[Check, ...]] = {
    "6.1": (
        Check("each level: nodes = the sum of ops", _levels_consistent,
              "count the nodes of the graph onnxruntime saved at that level (optimized_model_filepath)"),
        Check("ResNet-18: DISABLE_ALL keeps all 69 nodes and is the reference; BASIC removes exactly the 20 "
              "BatchNormalizations", _resnet_levels,
              "compare each level's output with the DISABLE_ALL session's; ops is {op_type: count}"),
        Check("level_report(conv_bn): BASIC folds the BatchNorm into the Conv (2 nodes -> 1), not bitwise",
              _conv_bn_levels, "bitwise means identical bytes; relmax_log10 is log10 of max|d| / max|ref|",
              calls_function=True),
    ),
    "6.2": (
        Check("error_metrics on the hand pair out = [1, 1e-3, -2.5, 4], ref = [1, 0, -2, 4], and on two equal arrays",
              _metrics_hand_pair, "in float64; where ref is 0 the MRE term is |d| itself", calls_function=True),
    ),
    "6.3": (
        Check("who_is_wrong: three log10 errors on the random input, three bools on the bad one",
              _who_is_wrong_shape,
              "relmax_log10 of each pair; the bools compare those values with the stated thresholds"),
        Check("search_input on ln_linear in [-8, 8] (budget 50) beats 100x the median of 20 random inputs",
              _search_ln_linear, "uniform random inputs are all well conditioned: make rows whose values sit "
              "close together far from 0", calls_function=True),
    ),
    "6.4": (
        Check("ResNet-18 BASIC: 69 tensors in the unoptimised graph, a divergent tensor found", _trace_answer,
              "every output of every node of the model you were given, in node order"),
        Check("trace(conv_bn, 'BASIC'): 2 tensors, only y matches, y diverges (produced by Conv); with "
              "ConvBNFusion disabled both match and none diverges", _trace_conv_bn,
              "match tensors by name; compare bytes; producer_op comes from the optimised graph", calls_function=True),
    ),
    "6.5": (
        Check("the answer is a list of candidate names", _names_are_candidates, "names from CANDIDATES only"),
        Check("isolate_passes: ['ConvBNFusion'] on conv_bn; a sufficient, 1-minimal set on layer_norm",
              _isolate_toys, "disabling passes one at a time finds nothing when two passes back each other up",
              calls_function=True),
    ),
}
