"""Lab 5's grader-side verdicts: the cases whose expected value is a known constant, decided on saved files.

"The folded conv matches a float64 fold", "the records are the graph's values", "the substitution
is exact for every input size": each hidden case of tasks 5.1, 5.2, 5.3, 5.6 and 5.7 saves what the
student's function built (:mod:`util.labs.lab5.saved`) and each function here judges those bytes in
the grader's process, against references it computes itself from the case's seeds:

* folds against PyTorch's own ``torch.nn.utils.fusion.fuse_conv_bn_weights`` run in float64, and
  which BatchNorms may fold against ``torch.fx.experimental.optimization.fuse``. The lab asks for the fold
  in float64, and a fold's bytes cannot show how it was computed: so the hidden Conv+BN pairs and models
  have BatchNorms that cancel the conv's bias (``nets.cancel_bias``), where a fold computed in float32
  (PyTorch's own fuser on float32 modules included) is off by about 1e-3 relative;
* outputs and records against the original model run in float64;
* substitutions against ``pool(x) + pool(x)`` or ``conv1(x1) + conv2(x2)`` on several input sizes.

``check(spec, data, tolerance) -> [problems]``: empty when the case passes. The bytes are untrusted:
they are read with ``allow_pickle=False`` and every shape and string is checked before use.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from util.artifacts import read_saved_arrays
from util.labs.lab5.saved import conv_from_arrays, max_rel

PARAMS_RTOL = 1e-5
"""Folded weights and biases against a float64 fold: ``max |diff| / max |reference|`` at most this."""
OUTPUT_RTOL = 1e-4
"""Outputs and records against the float64 original, same measure (float32 rounding is about 1e-6)."""
EXACT_RTOL = 1e-6
"""A substitution (5.6, 5.7) against the pattern it replaces, both evaluated in float64."""
SIZES = ((5, 5), (6, 9), (8, 8), (11, 14), (16, 13))
"""Input sizes a substitution must be exact on: odd and even, square and not."""


def _first(problems: list[str], limit: int = 3) -> list[str]:
    """At most ``limit`` problems, then how many more there were."""
    return problems if len(problems) <= limit else problems[:limit] + [f"... and {len(problems) - limit} more"]


def reference_fold(conv, bn) -> tuple[np.ndarray, np.ndarray]:
    """Weight and bias of ``conv`` followed by ``bn``, folded by PyTorch's fuser in float64."""
    from torch.nn.utils.fusion import fuse_conv_bn_weights

    d = lambda t: None if t is None else t.detach().double()  # noqa: E731
    w, b = fuse_conv_bn_weights(d(conv.weight), d(conv.bias), d(bn.running_mean), d(bn.running_var), bn.eps,
                                d(bn.weight), d(bn.bias))
    return w.detach().numpy(), b.detach().numpy()


def _param_problems(conv, weight: np.ndarray, bias: np.ndarray | None, what: str) -> list[str]:
    """``conv`` (float64, rebuilt) against the expected weight and bias (``None``: no bias, or zero)."""
    found = conv.weight.detach().numpy()
    if found.shape != weight.shape:
        return [f"{what}: the weight has shape {list(found.shape)}; expected {list(weight.shape)}"]
    problems = []
    allowed = f"(allowed {PARAMS_RTOL:g})"
    if (err := max_rel(found, weight)) > PARAMS_RTOL:
        problems.append(f"{what}: the weight differs from a float64 fold by {err:.1e} relative {allowed}")
    found_bias = conv.bias.detach().numpy() if conv.bias is not None else np.zeros(weight.shape[0])
    expected_bias = bias if bias is not None else np.zeros(weight.shape[0])
    if (err := max_rel(found_bias, expected_bias)) > PARAMS_RTOL:
        problems.append(f"{what}: the bias differs from a float64 fold by {err:.1e} relative {allowed}")
    return problems


def check_fold_conv(spec: Mapping[str, Any], data: bytes, tolerance: Any) -> list[str]:
    """Task 5.1: geometry kept, parameters within 1e-5 of a float64 fold, output within 1e-4 of bn(conv(x))."""
    import torch

    from util.labs.lab5.nets import conv_bn_pair, seeded_input

    arrays, problems = read_saved_arrays(data)
    if problems:
        return problems
    conv, bn = conv_bn_pair(spec)
    fused, problem = conv_from_arrays(arrays)
    if problem:
        return [problem]
    problems = [f"{name} is {getattr(fused, name)!r}; the convolution's is {getattr(conv, name)!r}"
                for name in ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation",
                             "groups", "padding_mode") if getattr(fused, name) != getattr(conv, name)]
    if problems:
        return problems
    problems = _param_problems(fused, *reference_fold(conv, bn), "the folded convolution")
    x = seeded_input((2, conv.in_channels, 11, 9), spec["seed"], torch.float64)
    with torch.no_grad():
        expected = bn.double()(conv.double()(x)).numpy()
        found = fused(x).numpy()
    if (err := max_rel(found, expected)) > OUTPUT_RTOL:
        problems.append(f"its output differs from bn(conv(x)) by {err:.1e} relative (allowed {OUTPUT_RTOL:g})")
    return problems


def _original(name: str, cancel: bool = False):
    """A case's original model and its fx graph, built afresh from the course's seeds (never cached: the
    judge holds one model at a time); ``cancel`` as the case's spec says (``nets.cancel_folds``)."""
    import torch.fx as fx

    from util.labs.lab5.nets import build

    model = build(name, cancel=cancel)
    return model, fx.symbolic_trace(model)


def _batchnorms(gm) -> list[str]:
    from torch import nn

    return [n.target for n in gm.graph.nodes
            if n.op == "call_module" and isinstance(gm.get_submodule(n.target), nn.BatchNorm2d)]


def check_fold_model(spec: Mapping[str, Any], data: bytes, tolerance: Any) -> list[str]:
    """Task 5.2: the right BatchNorms folded, each folded conv within 1e-5 of a float64 fold, output within 1e-4."""
    import torch
    from torch.fx.experimental.optimization import fuse

    from util.labs.lab5.nets import seeded_input

    arrays, problems = read_saved_arrays(data)
    if problems:
        return problems
    model, traced = _original(spec["model"], bool(spec.get("cancel")))
    must_stay = set(_batchnorms(fuse(model)))     # what PyTorch's own fuser leaves (it works on a copy)
    saved_bn = {str(t) for t in arrays.get("bn_targets", np.array([], str)).reshape(-1)}
    nodes = {n.target: n for n in traced.graph.nodes if n.op == "call_module"}
    folds = {}   # conv target -> bn target, for every BatchNorm that should fold
    problems, params = [], []
    for bn in _batchnorms(traced):
        source = nodes[bn].args[0]
        if bn in must_stay and bn not in saved_bn:
            why = (f"the output of {source.target} has {len(source.users)} users" if source.op == "call_module"
                   else f"its input is {source.name}, not a convolution")
            problems.append(f"{bn} was folded, but must stay: {why}")
        elif bn not in must_stay:
            folds[source.target] = bn
            if bn in saved_bn:
                problems.append(f"{bn} still runs, but it should fold into {source.target}")
    x = seeded_input(spec["input"], spec["seed"])
    with torch.no_grad():
        expected = model.double()(x.double()).numpy()   # in place: the checks below read float64 copies anyway
    found = arrays.get("output")
    if found is None or found.shape != expected.shape:
        problems.append(f"the folded model's output has shape {None if found is None else list(found.shape)}; "
                        f"expected {list(expected.shape)}")
    elif (err := max_rel(found, expected)) > OUTPUT_RTOL:
        problems.append(f"the folded model's output differs from the original's by {err:.1e} relative "
                        f"(allowed {OUTPUT_RTOL:g})")
    for target in (str(t) for t in arrays.get("conv_targets", np.array([], str)).reshape(-1)):
        if target not in nodes:
            params.append(f"the graph calls {target}, which is not a convolution of the original model "
                          "(keep each convolution's name)")
            continue
        conv = traced.get_submodule(target)
        saved, problem = conv_from_arrays(arrays, f"conv:{target}:")
        if problem:
            params.append(f"{target}: {problem}")
        elif target in folds and folds[target] not in saved_bn:   # (a BN left running was reported above)
            params += _param_problems(saved, *reference_fold(conv, traced.get_submodule(folds[target])), target)
        else:
            bias = None if conv.bias is None else conv.bias.detach().double().numpy()
            params += _param_problems(saved, conv.weight.detach().double().numpy(), bias, f"{target} (not folded)")
    return _first(problems + params)


def check_records(spec: Mapping[str, Any], data: bytes, tolerance: Any) -> list[str]:
    """Task 5.3: every saved record is the value of the node it names (or the output), within 1e-4."""
    import torch
    import torch.fx as fx
    from torch.fx.experimental.optimization import fuse

    from util.labs.lab5.nets import seeded_input

    arrays, problems = read_saved_arrays(data)
    if problems:
        return problems
    model, traced = _original(spec["model"])
    gm = (fuse(model, inplace=True) if spec.get("fold") else traced).double()   # the course's fold, as in the kernel
    values: dict[str, Any] = {}

    class EveryNode(fx.Interpreter):
        def run_node(self, node):
            result = super().run_node(node)
            if isinstance(result, torch.Tensor):
                values[node.name] = result.detach().clone()
            return result

    with torch.no_grad():
        values["output"] = EveryNode(gm).run(seeded_input(spec["input"], spec["seed"]).double())
    problems = [] if "output" in arrays else ["no record is named 'output' (the model's output)"]
    for name, found in arrays.items():
        if name not in values:
            problems.append(f"record {name!r} names no node of the graph")
        elif found.shape != tuple(values[name].shape):
            problems.append(f"record {name!r} has shape {list(found.shape)}; "
                            f"the node's is {list(values[name].shape)}")
        elif (err := max_rel(found, values[name].numpy())) > OUTPUT_RTOL:
            problems.append(f"record {name!r} differs from the node's value by {err:.1e} relative")
    return _first(problems)


def _disagreement(candidate, pattern, channels: int, seed: int) -> str | None:
    """``None`` when ``candidate(x)`` equals ``pattern(x)`` on every size of :data:`SIZES`, else what differs."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    for h, w in SIZES:
        x = torch.randn(2, channels, h, w, generator=gen, dtype=torch.float64)
        with torch.no_grad():
            try:
                expected = pattern(x)
            except RuntimeError:
                return f"on a {h}x{w} input the pattern's two branches have different shapes"
            try:
                found = candidate(x)
            except RuntimeError as exc:
                return f"on a {h}x{w} input it raises {str(exc).splitlines()[0][:200]}"
        if found.shape != expected.shape:
            return (f"on a {h}x{w} input it gives {list(found.shape[2:])}, the pattern "
                    f"{list(expected.shape[2:])}")
        if (err := max_rel(found.numpy(), expected.numpy())) > EXACT_RTOL:
            return f"on a {h}x{w} input it differs from the pattern by {err:.1e} relative"
    return None


def _judge_substitution(data: bytes, textbook, pattern, channels: int) -> list[str]:
    """Shared verdict of 5.6 and 5.7: None exactly when the textbook substitution is not exact everywhere.

    ``data`` is what the case saved; ``textbook`` is the conv the substitution builds, or a sentence saying
    why it cannot be built."""
    arrays, problems = read_saved_arrays(data)
    if problems:
        return problems
    why_invalid = textbook if isinstance(textbook, str) else _disagreement(textbook, pattern, channels, seed=7)
    if "none" in arrays:
        return [] if why_invalid else ["returned None, but the substitution is exact for every input size here"]
    if why_invalid:
        return [f"returned a convolution, but the substitution is not valid for every input size: {why_invalid}"]
    conv, problem = conv_from_arrays(arrays)
    if problem:
        return [problem]
    why = _disagreement(conv, pattern, channels, seed=8)
    return [f"the convolution is not exact: {why}"] if why else []


def check_avg_add(spec: Mapping[str, Any], data: bytes, tolerance: Any) -> list[str]:
    """Task 5.6: ``None`` exactly when no conv equals ``pool(x) + pool(x)`` for every size; else an exact conv."""
    import torch
    from torch import nn

    pool, channels = nn.AvgPool2d(**spec["pool"]), spec["channels"]
    k = pool.kernel_size if isinstance(pool.kernel_size, tuple) else (pool.kernel_size,) * 2
    textbook = nn.Conv2d(channels, channels, k, pool.stride, pool.padding, groups=channels, bias=False).double()
    with torch.no_grad():
        textbook.weight.fill_(2.0 / (pool.divisor_override or k[0] * k[1]))
    return _judge_substitution(data, textbook, lambda x: pool(x) + pool(x), channels)


def check_conv_add(spec: Mapping[str, Any], data: bytes, tolerance: Any) -> list[str]:
    """Task 5.7: ``None`` exactly when concatenating inputs and weights is not exact; else an exact merged conv."""
    import torch
    from torch import nn

    from util.labs.lab5.nets import conv_pair

    first, second = (c.double() for c in conv_pair(spec))
    split = first.in_channels
    textbook = nn.Conv2d(split + second.in_channels, first.out_channels, first.kernel_size, first.stride,
                         first.padding, first.dilation, bias=True, padding_mode=first.padding_mode).double()
    with torch.no_grad():
        try:
            textbook.weight.copy_(torch.cat([first.weight, second.weight], 1))
        except RuntimeError:
            textbook = "the two weights do not concatenate along the input channels"
        else:
            textbook.bias.zero_()
            for conv in (first, second):
                if conv.bias is not None:
                    textbook.bias.add_(conv.bias)

    def pattern(x):
        return first(x[:, :split]) + second(x[:, split:])

    return _judge_substitution(data, textbook, pattern, split + second.in_channels)
