"""Lab 16's grader-side checks of what the hidden cases saved; each rebuilds the case's input from its spec and
decides with its own computation, never with the student's code (task 16.5's: ``judge_distill.py``).

* 16.2: the pruned ``ConvNet`` (its widths, pools, hidden layers and weights) against the plan: widths, then
  parameters and MACs (lab 1's convention) counted here on the rebuilt model against the grader's own pruned
  model, then outputs against the **masked** model the grader builds (the same network with the dropped filters and
  their BatchNorm scale and shift set to zero), on random images drawn from the grading secret.
* 16.3: the mask's pattern (exactly 2 kept of every 4 consecutive weights of a row), each group's choice (the two
  of largest magnitude, the earlier on a tie) and the storage counts against the grader's formulas.
* 16.4: the rank against the largest one the budget allows, the parameters against the budget, the bias and the
  convolution's geometry against the layer's, and the relative error of the factors' product against the best any
  matrix of that rank can do (the singular values the truncation drops, Eckart-Young).
* 16.6: a fresh adapter changes no output; the trainable parameters are exactly the adapters' ``r (in + out)``,
  counted here from every parameter the model holds, saved as plain data with its ``requires_grad`` flag
  (``tasks.plain_tensors``: read where PyTorch keeps them, never through a method of the student's model), and
  every parameter of the base model is still held, frozen and unchanged;
  with the course's adapter values the outputs are ``base(x) + (alpha / r) * (x @ A.T @ B.T)``'s and each merged
  layer holds ``W + (alpha / r) (B @ A)``.

The saved bytes are untrusted: arrays are read without pickle, their names, shapes and dtypes checked before use.
Feedback names what differs and how, never the grader's figure for a hidden case.
"""
from __future__ import annotations

import json
import math
from typing import Any, Mapping

from util.contract import Tolerance

OUTPUT_RTOL = 1e-4
"""Outputs against the grader's, relative to their largest magnitude (float32 sums in another order: 1e-6)."""
ERROR_SLACK = 1e-4
"""A factorisation's error may exceed the optimum by this fraction (float32 factors: about 1e-7)."""


def _setup() -> None:
    import torch

    torch.set_num_threads(1)


def _relative(found, expected) -> float:

    scale = float(expected.abs().max()) or 1.0
    return float((found.double() - expected.double()).abs().max()) / scale


# ---------------------------------------------------------------- 16.2

def kept_channels(weight, keep: int):
    """The ``keep`` filters of a convolution's ``weight`` with the largest L1 norms (the earlier on a tie), in
    increasing order."""
    norms = weight.detach().abs().sum(dim=tuple(range(1, weight.dim())))
    return norms.argsort(descending=True, stable=True)[:keep].sort().values


def masked_model(net, plan: Mapping[str, int]):
    """A copy of ``net`` whose dropped channels output zero: their filters, BatchNorm scale and shift zeroed."""
    import copy

    import torch

    masked = copy.deepcopy(net).eval()
    convs = masked.convs()
    with torch.no_grad():
        for i, name in enumerate(convs, start=1):
            if name in plan:
                dropped = torch.ones(masked.widths[i - 1], dtype=torch.bool)
                dropped[kept_channels(getattr(net, name).weight, plan[name])] = False
                getattr(masked, name).weight[dropped] = 0
                getattr(masked, f"bn{i}").weight[dropped] = 0
                getattr(masked, f"bn{i}").bias[dropped] = 0
    return masked


def check_channels(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 16.2 (see the module's help)."""
    import numpy as np
    import torch

    from util.artifacts import read_saved_arrays
    from util.labs.lab16.costs import count_macs, count_params
    from util.labs.lab16.nets import ConvNet, build_convnet

    _setup()
    arrays, problems = read_saved_arrays(data)
    if problems:
        return problems
    net = build_convnet(spec["model"], spec["seed"])
    plan = dict(spec["plan"])
    config = {key: arrays.get(f"config/{key}") for key in ("widths", "pools", "hidden")}
    if any(v is None or v.dtype.kind not in "iu" or v.ndim != 1 for v in config.values()):
        return ["the saved network has no readable widths, pools and hidden layers; run the notebook again"]
    config = {key: [int(v) for v in value] for key, value in config.items()}
    if config["pools"] != list(net.pools) or config["hidden"] != list(net.hidden):
        return ["prune_channels changed the network's pools or hidden layers; it may only cut convolution channels"]
    expected = [plan.get(name, width) for name, width in zip(net.convs(), net.widths)]
    if len(config["widths"]) != len(expected):
        return [f"the pruned network has {len(config['widths'])} convolutions; the model has {len(expected)}"]
    wrong = [f"{name} has {found} channels; the plan keeps {want}"
             for name, found, want in zip(net.convs(), config["widths"], expected) if found != want]
    if wrong:
        return wrong[:3]
    pruned = ConvNet(**{**net.config(), "widths": expected})
    state = {key[len("state/"):]: value for key, value in arrays.items() if key.startswith("state/")}
    reference = pruned.state_dict()
    if sorted(state) != sorted(reference):
        return ["the saved weights are not a ConvNet's state_dict for these widths"]
    for key, value in reference.items():
        if tuple(state[key].shape) != tuple(value.shape) or state[key].dtype != np.dtype(str(value.dtype)[6:]):
            return [f"{key} has shape {list(state[key].shape)} ({state[key].dtype}); the pruned network needs "
                    f"{list(value.shape)} ({str(value.dtype)[6:]})"]
    pruned.load_state_dict({key: torch.from_numpy(np.array(value)) for key, value in state.items()})
    pruned.eval()
    grader = ConvNet(**{**net.config(), "widths": expected})
    counts = (count_params(pruned), count_macs(pruned)), (count_params(grader), count_macs(grader.eval()))
    if counts[0] != counts[1]:
        return ["the pruned network's parameters or MACs, counted by the grader, differ from the plan's"]
    from util.judging import secret

    images = secret.seed("lab16", "16.2", "images", json.dumps(dict(spec), sort_keys=True))
    x = torch.randn(64, net.in_channels, net.size, net.size, generator=torch.Generator().manual_seed(images))
    with torch.no_grad():
        found, reference_out = pruned(x), masked_model(net, plan)(x)
    if not torch.isfinite(found).all():
        return ["the pruned network's outputs hold NaN or infinity"]
    difference = _relative(found, reference_out)
    if not difference <= OUTPUT_RTOL:
        return [f"the pruned network's outputs differ from those of the model with the same channels masked (zero "
                f"filters, BatchNorm scale and shift) by {difference:.2g} of their largest value (at most "
                f"{OUTPUT_RTOL:g}): keep the filters with the largest L1 norms, each channel's BatchNorm entries, and "
                "the next layer's inputs from those very channels (after the last convolution: the first Linear's "
                "columns that read them)"]
    return []


# ---------------------------------------------------------------- 16.3

def two_four_mask(weight):
    """The 2:4 mask of ``weight`` (rows = ``weight.reshape(out, -1)``): in each group of 4 consecutive weights of a
    row, the 2 of largest magnitude, the earlier on a tie."""
    import torch

    rows = weight.shape[0]
    groups = weight.reshape(rows, -1, 4).abs()
    order = groups.argsort(dim=2, descending=True, stable=True)
    return torch.zeros_like(groups, dtype=torch.bool).scatter_(2, order[..., :2], True).reshape(weight.shape)


def two_four_storage(rows: int, cols: int, value_bytes: int) -> dict[str, int]:
    """Bytes of a ``rows x cols`` weight pruned 2:4 in each of the notebook's formats."""
    n, kept = rows * cols, rows * cols // 2
    return {"dense": n * value_bytes, "indices": kept * value_bytes + math.ceil(kept * 2 / 8),
            "bitmask": kept * value_bytes + math.ceil(n / 8), "csr": kept * (value_bytes + 8) + (rows + 1) * 8}


def check_two_four(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 16.3 (see the module's help)."""
    import numpy as np
    import torch

    from util.artifacts import read_saved_arrays
    from util.labs.lab16.nets import build_matrix
    from util.labs.lab16.tasks import FORMATS

    arrays, problems = read_saved_arrays(data, expected=["mask", "storage"])
    if problems:
        return problems
    weight = build_matrix(spec["shape"], spec["seed"], spec["kind"])
    rows, n = weight.shape[0], weight.numel()
    packed, storage = arrays["mask"], arrays["storage"]
    if packed.dtype != np.uint8 or packed.shape != (math.ceil(n / 8),) or storage.shape != (len(FORMATS),) \
            or storage.dtype.kind not in "iu":
        return ["the saved mask or storage is not what the course saves; run the notebook again from the top"]
    mask = torch.from_numpy(np.unpackbits(packed)[:n].astype(bool)).reshape(rows, -1, 4)
    counts = mask.sum(dim=2)
    bad = (counts != 2).nonzero()
    if len(bad):
        r, g = (int(v) for v in bad[0])
        return [f"row {r}, columns {4 * g} to {4 * g + 3} keep {int(counts[r, g])} weights; 2:4 keeps exactly 2 of "
                f"every 4 consecutive weights of a row ({len(bad)} groups of {counts.numel()} do not)"]
    wrong = (mask != two_four_mask(weight).reshape(rows, -1, 4)).any(dim=2).nonzero()
    if len(wrong):
        r, g = (int(v) for v in wrong[0])
        return [f"row {r}, columns {4 * g} to {4 * g + 3}: the 2 weights kept are not the 2 of largest magnitude (on a "
                f"tie, the earlier one) ({len(wrong)} groups of {counts.numel()} differ)"]
    expected = two_four_storage(rows, n // rows, int(spec["value_bytes"]))
    return [f"storage[{key!r}] is {int(found):,} bytes, which differs from the grader's count for this weight "
            f"(yours is {'larger' if found > expected[key] else 'smaller'})"
            for key, found in zip(FORMATS, storage) if int(found) != expected[key]]


# ---------------------------------------------------------------- 16.4

def best_rank(layer, budget: int) -> int:
    """The largest rank whose factors (``r (fan_in + out)`` weights, plus the bias) fit ``budget``, at most the full
    rank; 0 when not even rank 1 fits."""
    out = layer.weight.shape[0]
    fan_in = layer.weight[0].numel()
    bias = 0 if layer.bias is None else out
    return max(0, min((budget - bias) // (fan_in + out), out, fan_in))


def check_low_rank(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 16.4 (see the module's help)."""
    import numpy as np
    import torch

    from util.artifacts import read_saved_arrays
    from util.labs.lab16.nets import build_layer

    _setup()
    layer = build_layer(spec["layer"], spec["seed"])
    rank = best_rank(layer, spec["budget"])
    if data[:1] == b"{":
        try:
            raised = json.loads(data).get("raised") == "ValueError"
        except (ValueError, AttributeError, UnicodeDecodeError):
            raised = False
        if not raised:
            return ["the file saved for this case is not what the course saves; run the notebook again from the top"]
        return [] if rank == 0 else ["low_rank raised ValueError, but a rank of at least 1 fits the budget"]
    if rank == 0:
        return ["not even rank 1 fits the budget: low_rank should raise ValueError"]
    arrays, problems = read_saved_arrays(data)
    if problems:
        return problems
    names = {"first", "second", "first_geometry", "second_geometry"}
    if not names <= set(arrays) or set(arrays) - names - {"bias"}:
        return ["the arrays saved for this case are not what the course saves; run the notebook again from the top"]
    W = layer.weight.detach().double().reshape(layer.weight.shape[0], -1)
    out, fan_in = W.shape
    first, second = arrays["first"], arrays["second"]
    if first.dtype.kind != "f" or second.dtype.kind != "f" or first.ndim != layer.weight.dim() \
            or second.ndim != layer.weight.dim():
        return ["the factors' weights are not float tensors of the layer's kind"]
    found = first.shape[0]
    if found != rank:
        return [f"the factorisation has rank {found}, which is {'larger' if found > rank else 'smaller'} than the "
                "largest rank whose parameters fit the budget (count the bias too)"]
    if first.reshape(found, -1).shape[1] != fan_in or second.shape[:2] != (out, found) or second[0, 0].size != 1:
        return [f"the factors have shapes {list(first.shape)} and {list(second.shape)}; they should take the layer's "
                f"inputs to {found} values, then those to its {out} outputs"]
    geometry = [int(v) for v in arrays["first_geometry"]]
    if isinstance(layer, torch.nn.Conv2d):
        want = [*layer.kernel_size, *layer.stride, *layer.padding, *layer.dilation, layer.groups]
        if geometry != want:
            return ["the first factor's kernel size, stride, padding, dilation or groups differ from the layer's"]
        if [int(v) for v in arrays["second_geometry"]] != [1, 1, 1, 1, 0, 0, 1, 1, 1]:
            return ["the second factor must be a 1 x 1 convolution with stride 1, no padding and no dilation"]
    if (layer.bias is None) != ("bias" not in arrays):
        return ["the second factor must keep the layer's bias" if layer.bias is not None
                else "the layer has no bias; its factors should have none either"]
    if layer.bias is not None and not np.array_equal(arrays["bias"], layer.bias.detach().numpy()):
        return ["the second factor's bias differs from the layer's: copy it unchanged"]
    params = first.size + second.size + (out if layer.bias is not None else 0)
    if params > spec["budget"]:
        return [f"the factors hold {params:,} parameters, more than the budget"]
    product = torch.from_numpy(second.astype(np.float64)).reshape(out, found) @ \
        torch.from_numpy(first.astype(np.float64)).reshape(found, fan_in)
    singular = torch.linalg.svdvals(W)
    optimum = float(singular[found:].pow(2).sum().sqrt())
    error = float(torch.linalg.norm(W - product))
    norm = float(torch.linalg.norm(W))
    if not error <= optimum * (1 + ERROR_SLACK) + 1e-6 * norm:
        return [f"the factors' product is {error / norm:.4g} of the weight away from it (relative Frobenius error); "
                f"the best rank-{found} approximation is {optimum / norm:.4g} away (a truncated SVD reaches it)"]
    return []


# ---------------------------------------------------------------- 16.6

def _lora_counts(net, spec: Mapping[str, Any], arrays, held: list[str], flags) -> list[str]:
    """16.6's counts, computed here from the parameters the case saved as plain data (values and a
    ``requires_grad`` flag each, found without calling a method of the student's model): the trainable ones are
    exactly the adapters (their count and shapes), and every parameter of the base model is still held, unchanged."""
    import numpy as np

    r = int(spec["r"])
    count = sum(int(arrays[f"parameter/{name}"].size) for name in held if bool(flags[name]))
    layers = [net.get_submodule(t) for t in spec["targets"]]
    expected = sum(r * (layer.in_features + layer.out_features) for layer in layers)
    if count != expected:
        return [f"{count:,} parameters are trainable, {'more' if count > expected else 'fewer'} than the adapters' r "
                "(in + out) per adapted layer: LoRA trains lora_A and lora_B only and freezes the rest of the model"]
    shapes = sorted(tuple(arrays[f"parameter/{name}"].shape) for name in held if bool(flags[name]))
    if shapes != sorted([(r, layer.in_features) for layer in layers] + [(layer.out_features, r) for layer in layers]):
        return ["the trainable parameters are not each adapted layer's lora_A (r x in) and lora_B (out x r)"]
    frozen = [arrays[f"parameter/{name}"] for name in held if not bool(flags[name])]
    for name, parameter in net.named_parameters():
        values = parameter.detach().numpy()
        match = next((i for i, found in enumerate(frozen)
                      if found.shape == values.shape and np.array_equal(found, values)), None)
        if match is None:
            return [f"the adapted model no longer holds the base model's {name} as a frozen parameter, unchanged"]
        frozen.pop(match)
    return []


def check_lora(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 16.6 (see the module's help)."""
    import numpy as np
    import torch

    from util.artifacts import read_saved_arrays
    from util.labs.lab16.nets import build_convnet, lora_values

    _setup()
    arrays, problems = read_saved_arrays(data)
    if problems:
        return problems
    net = build_convnet(spec["model"], spec["seed"])
    x = torch.randn(spec["batch"], 1, 8, 8, generator=torch.Generator().manual_seed(spec["seed"]))
    r, scaling = int(spec["r"]), spec["alpha"] / spec["r"]
    merged = {}
    for index, target in enumerate(spec["targets"]):
        base = net.get_submodule(target)
        a, b = lora_values(spec["seed"] + index, base.out_features, base.in_features, r)
        merged[target] = (base.weight.detach() + scaling * (b @ a), None if base.bias is None else base.bias.detach())
    held = sorted(key[len("parameter/"):] for key in arrays if key.startswith("parameter/"))
    wanted = {"fresh", "adapted"} | {f"merged/{t}/weight" for t in merged} | \
        {f"merged/{t}/bias" for t, (_, bias) in merged.items() if bias is not None} | \
        {f"parameter/{name}" for name in held} | {f"trainable/{name}" for name in held}
    if set(arrays) != wanted:
        return ["the arrays saved for this case are not what the course saves (a merged layer without its bias?); "
                "run the notebook again from the top"]
    flags = {name: arrays[f"trainable/{name}"] for name in held}
    if any(flag.dtype != np.bool_ or flag.shape != () for flag in flags.values()) \
            or any(arrays[f"parameter/{name}"].dtype.kind != "f" for name in held):
        return ["the parameters saved for this case are not what the course saves; run the notebook again from the top"]
    with torch.no_grad():
        base_out = net(x)
    for name in ("fresh", "adapted"):
        if arrays[name].shape != tuple(base_out.shape) or arrays[name].dtype.kind != "f":
            return ["the saved outputs are not what the course saves; run the notebook again from the top"]
    problems = []
    if not _relative(torch.from_numpy(arrays["fresh"]), base_out) <= OUTPUT_RTOL:
        problems.append("right after add_lora the model's outputs changed; a fresh adapter must leave them as they "
                        "were (lora_B starts at zero)")
    problems += _lora_counts(net, spec, arrays, held, flags)
    adapted_net = build_convnet(spec["model"], spec["seed"])
    with torch.no_grad():
        for target, (weight, _) in merged.items():
            adapted_net.get_submodule(target).weight.copy_(weight)
        expected_out = adapted_net(x)
    if not _relative(torch.from_numpy(arrays["adapted"]), expected_out) <= OUTPUT_RTOL:
        problems.append("with the course's values in lora_A and lora_B the outputs are not base(x) + (alpha / r) * "
                        "(x @ A.T @ B.T): check the scaling alpha / r and the order of the products")
    for target, (weight, bias) in merged.items():
        found = arrays[f"merged/{target}/weight"]
        if found.shape != tuple(weight.shape) or not _relative(torch.from_numpy(found.astype(np.float32)),
                                                                weight) <= OUTPUT_RTOL:
            problems.append(f"{target}.merged() does not hold W + (alpha / r) B A")
        elif bias is not None and not np.allclose(arrays[f"merged/{target}/bias"], bias.numpy(), rtol=0, atol=0):
            problems.append(f"{target}.merged() changed the bias; merging adds to the weight only")
    return problems[:3]
