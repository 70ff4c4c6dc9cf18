"""Lab 16, compression: the one declaration of its tasks.

On the course's DigitsCNN trained on the digits (as a configurable ``ConvNet``, ``nets.py``) students prune by
magnitude, globally and layer by layer, with a sensitivity scan (16.1); cut whole channels so the model really
shrinks (16.2); choose a 2:4 pattern and count its storage in stated formats (16.3); factor a layer to a rank a
parameter budget allows (16.4); write a distillation loss the grader trains a small student with (16.5); and add
LoRA adapters, counting what training them costs, and merge them back (16.6); since release 3, prune a residual
network (``residual.py``), whose channels are coupled through additions into groups found in the graph ``torch.fx``
traces, cut as one by their summed importance (16.7); since release 4, prune by a schedule (16.8); since release 5,
put LoRA on lab 10's TinyGPT's query and value projections, with the training memory the frozen layers still keep
(16.9).

What a correct answer must satisfy is decided by the grader on what the cases saved (``judge.py``,
``judge_distill.py``), never in the kernel: a pruned model's widths, parameters, MACs (lab 1's convention, counted
by the grader) and outputs against the masked model the grader builds itself; a 2:4 mask's pattern, each group's
choice and the storage against the grader's formulas; a factorisation's rank against the budget and its error
against the optimum (Eckart-Young); a distillation run the grader does itself, with the student's loss asked for
gradients in a student process that never sees an image; LoRA's trainable parameters, its adapted outputs and its
merged weights against the grader's own. 16.1's masks are compared with the course's, digest by digest. 16.7's
function runs in a student process on residual networks whose weights the judge draws from the grading secret
(``judge_residual.py``): the group it names against the architecture's, the network it returns rebuilt from its
tensors alone, its parameters and MACs counted there and its outputs against the masked network the grader builds.
16.8's schedule is checked against the cubic formula, and the grader prunes DigitsCNN again with it, with its own
masks and an order of its own (``judge_schedule.py``). 16.9's function runs in the lab's student process (the one
16.7's cases leave, ``judge_kept.py``) on TinyGPTs the judge draws from the grading secret (``judge_lora_gpt.py``):
the trainable parameters counted from the tensors and flags the adapted model holds, its logits and merged weights
against the grader's own adapters, its training memory against the grader's own measurement.
"""
from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Callable, Mapping

from util.contract import EXACT, Lab, Release, Task, Tolerance, Written
from util.labs.lab16.public_checks import CHECKS

LAB_NAME = "lab16"
JUDGE = "util.labs.lab16.judge"
ACCURACY = Tolerance(atol=0.006)
"""Test accuracies within 0.006, two of the 360 test images (they are measured on float32 models whose sums may
run in another order on another machine); every count exactly."""
FORMATS = ("dense", "indices", "bitmask", "csr")
"""Task 16.3's storage formats, in the order the cases save them."""


def _bool_mask(value: Any, shape, what: str):
    import torch

    if not isinstance(value, torch.Tensor) or value.dtype != torch.bool:
        raise TypeError(f"{what} must be a torch.bool tensor, not {type(value).__name__}"
                        + (f" of {value.dtype}" if isinstance(value, torch.Tensor) else ""))
    if tuple(value.shape) != tuple(shape):
        raise ValueError(f"{what} has shape {list(value.shape)}; its weight has shape {list(shape)}")
    return value.detach().cpu()


def _digest(mask) -> str:
    import hashlib

    import numpy as np

    return hashlib.sha256(np.packbits(mask.numpy().reshape(-1)).tobytes()).hexdigest()[:16]


def _masks(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """16.1: the student's masks on a seeded ConvNet, each as (weights pruned, a digest of the mask)."""
    from util.labs.lab16.nets import build_convnet, zero_fraction
    from util.labs.lab16.prune import prunable

    net = build_convnet(spec["model"], spec["seed"])
    if spec.get("zeroed"):
        zero_fraction(net, spec["zeroed"], spec["seed"])
    shapes = {name: tuple(w.shape) for name, w in prunable(net).items()}
    masks = fn(net, spec["sparsity"], spec["scope"])
    if not isinstance(masks, Mapping) or sorted(masks) != sorted(shapes):
        raise ValueError(f"magnitude_masks must return {{weight name: mask}} for {', '.join(shapes)}; it returned "
                         f"{sorted(masks) if isinstance(masks, Mapping) else type(masks).__name__}")
    found = {name: _bool_mask(masks[name], shape, f"the mask of {name}") for name, shape in shapes.items()}
    return {name: {"pruned": int((~mask).sum()), "digest": _digest(mask)} for name, mask in found.items()}


def _channels(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """16.2: the student's pruned ConvNet, rebuilt from its config and weights, counted and saved for the judge."""
    import numpy as np

    from util.artifacts import save_arrays
    from util.labs.lab16.costs import count_macs, count_params
    from util.labs.lab16.nets import ConvNet, build_convnet

    net = build_convnet(spec["model"], spec["seed"])
    pruned = fn(net, dict(spec["plan"]))
    if not isinstance(pruned, ConvNet):
        raise TypeError(f"prune_channels must return a ConvNet (util.labs.lab16.nets), not {type(pruned).__name__}")
    attributes = object.__getattribute__(pruned, "__dict__")  # what it holds, not what a method of it says
    config = {key: [int(v) for v in attributes[key]] if key in ("widths", "pools", "hidden") else int(attributes[key])
              for key in ("widths", "pools", "hidden", "in_channels", "size", "classes")}
    rebuilt = ConvNet(**config)
    expected = {key: tuple(value.shape) for key, value in rebuilt.state_dict().items()}
    state = {name: tensor for name, (tensor, _) in plain_tensors(pruned, buffers=True).items()}
    wrong = [f"{key} {list(state[key].shape)} (expected {list(shape)})" for key, shape in expected.items()
             if key in state and tuple(state[key].shape) != shape]
    if sorted(state) != sorted(expected) or wrong:
        raise ValueError(f"the returned ConvNet's weights do not fit its own widths {config['widths']}: "
                         + (", ".join(wrong[:3]) or "other parameter names") + "; cut the inputs of the layer after "
                         "each pruned one too")
    rebuilt.load_state_dict(state)
    arrays = {f"state/{key}": value.float() if value.is_floating_point() else value for key, value in state.items()}
    arrays.update({f"config/{key}": np.asarray(config[key], dtype=np.int64) for key in ("widths", "pools", "hidden")})
    save_arrays(arrays, spec, LAB_NAME)
    return {"widths": list(config["widths"]), "params": count_params(rebuilt), "macs": count_macs(rebuilt.eval())}


def _two_four(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """16.3: the student's mask (packed bits) and storage counts, saved for the judge."""
    import numpy as np

    from util.artifacts import save_arrays
    from util.labs.lab16.nets import build_matrix

    weight = build_matrix(spec["shape"], spec["seed"], spec["kind"])
    result = fn(weight.clone(), spec["value_bytes"])
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise TypeError(f"two_four must return (mask, storage), not {type(result).__name__}")
    mask = _bool_mask(result[0], weight.shape, "the mask")
    storage = result[1]
    if not isinstance(storage, Mapping) or sorted(storage) != sorted(FORMATS):
        raise ValueError(f"two_four's storage must be a dict with the keys {', '.join(FORMATS)}")
    for key in FORMATS:
        if isinstance(storage[key], bool) or not isinstance(storage[key], (int, np.integer)):
            raise TypeError(f"storage[{key!r}] is a {type(storage[key]).__name__}; byte counts are ints")
    save_arrays({"mask": np.packbits(mask.numpy().reshape(-1)),
                 "storage": np.asarray([int(storage[key]) for key in FORMATS], dtype=np.int64)}, spec, LAB_NAME)
    return {"kept": int(mask.sum()), "storage": {key: int(storage[key]) for key in FORMATS}}


def _geometry(module) -> list[int]:
    from torch import nn

    if isinstance(module, nn.Linear):
        return []
    return [*module.kernel_size, *module.stride, *module.padding, *module.dilation, module.groups]


def _low_rank(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """16.4: the student's two factors (weights, bias, geometry) saved for the judge; rank, parameters and the
    relative error of their product reported."""
    import json

    import numpy as np
    import torch
    from torch import nn

    from util.artifacts import save_arrays, save_file
    from util.labs.lab16.nets import build_layer

    layer = build_layer(spec["layer"], spec["seed"])
    try:
        found = fn(layer, spec["budget"])
    except ValueError:
        save_file(json.dumps({"raised": "ValueError"}).encode(), spec, LAB_NAME, ".json")
        return {"raised": "ValueError"}
    kind = type(layer)
    # the two layers it holds, read from where nn.Sequential keeps them (not through a method a subclass may override)
    held = list(object.__getattribute__(found, "__dict__").get("_modules", {}).values()) \
        if isinstance(found, nn.Sequential) else []
    if not (len(held) == 2 and all(type(m) is kind for m in held)):
        raise TypeError(f"low_rank must return nn.Sequential of two {kind.__name__} layers")
    first, second = held
    if first.bias is not None:
        raise ValueError("the first factor has a bias; only the second keeps the layer's bias")
    rank = first.weight.shape[0]
    if second.weight.shape[:2] != (layer.weight.shape[0], rank) or second.weight[0, 0].numel() != 1:
        raise ValueError(f"the second factor's weight has shape {list(second.weight.shape)}; it should take the "
                         f"{rank} outputs of the first to the layer's {layer.weight.shape[0]} (a 1 x 1 convolution)")
    arrays = {"first": first.weight.detach(), "second": second.weight.detach(),
              "first_geometry": np.asarray(_geometry(first), dtype=np.int64),
              "second_geometry": np.asarray(_geometry(second), dtype=np.int64)}
    if second.bias is not None:
        arrays["bias"] = second.bias.detach()
    save_arrays(arrays, spec, LAB_NAME)
    W = layer.weight.detach().double().reshape(layer.weight.shape[0], -1)
    product = second.weight.detach().double().reshape(W.shape[0], rank) @ first.weight.detach().double().reshape(rank, -1)
    if product.shape != W.shape:
        raise ValueError(f"the factors' product has shape {list(product.shape)}; the layer's weight is {list(W.shape)}")
    error = float(torch.linalg.norm(W - product) / torch.linalg.norm(W))
    params = sum(int(np.asarray(value).size) for key, value in arrays.items() if not key.endswith("geometry"))
    return {"rank": int(rank), "params": params, "relative_error": error}


def _distill(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """16.5: a value case calls the student's loss on seeded logits; the re-run case pickles it (by value) for the
    judge, which trains a student with it in a process of its own."""
    import numpy as np
    import torch

    from util.artifacts import save_arrays, save_file
    from util.labs.lab16.distill import MAX_PICKLE, value_inputs

    if "rows" in spec:
        loss = fn(*value_inputs(spec), spec["T"], spec["alpha"])
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise TypeError(f"distillation_loss must return a one-element tensor, not {type(loss).__name__}")
        value = float(loss.detach())
        save_file(json.dumps({"loss": value}).encode(), spec, LAB_NAME, ".json")
        return {"loss": value}
    import cloudpickle

    logits, teacher, labels = value_inputs({"rows": 4, "labeled": 2, "seed": 0, "scale": 1.0})
    loss = fn(logits.double().requires_grad_(True), teacher.double(), labels, spec["T"], spec["alpha"])
    if not isinstance(loss, torch.Tensor) or not loss.requires_grad:
        raise TypeError("distillation_loss must return a tensor computed from student_logits (the grader trains "
                        "with its gradient)")
    pickled = cloudpickle.dumps(fn)
    if len(pickled) > MAX_PICKLE:
        raise ValueError(f"distillation_loss pickles to {len(pickled):,} bytes; the grader accepts at most "
                         f"{MAX_PICKLE:,}: keep data and weights out of what it refers to")
    return save_arrays({"loss": np.frombuffer(pickled, dtype=np.uint8)}, spec, LAB_NAME)


MAX_MODULES = 10_000
"""The most modules a returned model may hold for :func:`plain_tensors` (DigitsCNN with adapters: about 12)."""


def plain_tensors(model, *, buffers: bool = False) -> dict[str, tuple[Any, bool]]:
    """``{name: (a plain tensor of its values, requires_grad)}`` of every parameter ``model`` holds (and, with
    ``buffers``, every buffer its ``state_dict`` would hold), found through the instance dictionaries PyTorch keeps
    them in (``_parameters``, ``_buffers``, ``_modules``, as ``named_parameters`` walks them), never through a method
    of the model or of its modules: a class of the student's may override ``parameters``, ``named_parameters``,
    ``state_dict`` or ``numel`` to say what it likes, and what the grader counts is what the model holds. A tensor
    held twice is listed once, under its first name."""
    import torch

    tensor_base = torch._C.TensorBase
    found: dict[str, tuple[Any, bool]] = {}
    seen_tensors: set[int] = set()
    seen_modules: set[int] = set()
    stack = [("", model)]
    while stack:
        prefix, module = stack.pop()
        if id(module) in seen_modules:
            continue
        seen_modules.add(id(module))
        if len(seen_modules) > MAX_MODULES:
            raise ValueError(f"the returned model holds more than {MAX_MODULES:,} modules")
        state = object.__getattribute__(module, "__dict__")
        held = list(dict(state.get("_parameters") or {}).items())
        if buffers:
            transient = set(state.get("_non_persistent_buffers_set") or ())
            held += [(name, value) for name, value in dict(state.get("_buffers") or {}).items() if name not in transient]
        for name, value in held:
            if value is None or id(value) in seen_tensors:
                continue
            if not isinstance(value, torch.Tensor):
                raise TypeError(f"{prefix}{name} is registered as a parameter or buffer but is a {type(value).__name__}")
            seen_tensors.add(id(value))
            with torch._C.DisableTorchFunctionSubclass():
                plain = tensor_base.detach(value).cpu().clone()
            found[f"{prefix}{name}"] = plain, bool(tensor_base.requires_grad.__get__(value))
        children = [(f"{prefix}{name}.", child) for name, child in dict(state.get("_modules") or {}).items()
                    if isinstance(child, torch.nn.Module)]
        stack.extend(reversed(children))
    return found


def _lora(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """16.6: the student's adapters on a seeded ConvNet: every parameter it holds with its ``requires_grad`` flag
    (:func:`plain_tensors`: the judge counts from them), its outputs fresh and with the course's adapter values,
    and its merged layers, saved for the judge."""
    import numpy as np
    import torch
    from torch import nn

    from util.artifacts import save_arrays
    from util.labs.lab16.nets import build_convnet, lora_values

    net = build_convnet(spec["model"], spec["seed"])
    x = torch.randn(spec["batch"], 1, 8, 8, generator=torch.Generator().manual_seed(spec["seed"]))
    adapted = fn(net, list(spec["targets"]), spec["r"], spec["alpha"])
    if not isinstance(adapted, nn.Module):
        raise TypeError(f"add_lora must return the model, not {type(adapted).__name__}")
    adapted.eval()
    with torch.no_grad():
        fresh = adapted(x)
    held = plain_tensors(adapted)
    trainable = sorted(name for name, (_, flag) in held.items() if flag)
    count = sum(values.numel() for values, flag in held.values() if flag)
    arrays: dict[str, Any] = {"fresh": fresh}
    for name, (values, flag) in held.items():
        arrays[f"parameter/{name}"] = values.float()
        arrays[f"trainable/{name}"] = np.asarray(flag)
    for index, target in enumerate(spec["targets"]):
        module = adapted.get_submodule(target)
        A, B = getattr(module, "lora_A", None), getattr(module, "lora_B", None)
        if not (isinstance(A, torch.Tensor) and isinstance(B, torch.Tensor) and callable(getattr(module, "merged", None))):
            raise TypeError(f"{target} should be a LoRALinear with lora_A, lora_B and merged(); it is a "
                            f"{type(module).__name__}")
        a, b = lora_values(spec["seed"] + index, B.shape[0], A.shape[1], A.shape[0])
        if A.shape != a.shape or B.shape != b.shape:
            raise ValueError(f"{target}: lora_A is {list(A.shape)} and lora_B {list(B.shape)}; with r={spec['r']} "
                             f"they should be {list(a.shape)} and {list(b.shape)}")
        with torch.no_grad():
            A.copy_(a)
            B.copy_(b)
    with torch.no_grad():
        arrays["adapted"] = adapted(x)
    for target in spec["targets"]:
        merged = adapted.get_submodule(target).merged()
        if not isinstance(merged, nn.Linear):
            raise TypeError(f"{target}.merged() must return an nn.Linear, not {type(merged).__name__}")
        arrays[f"merged/{target}/weight"] = merged.weight.detach()
        if merged.bias is not None:
            arrays[f"merged/{target}/bias"] = merged.bias.detach()
    save_arrays(arrays, spec, LAB_NAME)
    return {"trainable": count, "trainable_names": trainable}


def _residual(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """16.7: the student's ``prune_residual`` pickled by value and saved: the grader runs it in a student process on
    networks it draws itself from the grading secret (nothing is run here)."""
    import cloudpickle
    import numpy as np

    from util.artifacts import save_arrays

    return save_arrays({"function": np.frombuffer(cloudpickle.dumps(fn), dtype=np.uint8)}, spec, LAB_NAME)


def _schedule(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """16.8: the student's schedule for the case's final sparsity, steps and initial sparsity, saved for the judge
    (which checks it against the cubic formula or prunes DigitsCNN again with it)."""
    import math

    from util.artifacts import save_file

    found = fn(float(spec["final"]), int(spec["steps"]), float(spec.get("initial", 0.0)))
    if not isinstance(found, (list, tuple)):
        raise TypeError(f"cubic_schedule must return a list of sparsities, not {type(found).__name__}")
    values = []
    for value in found:
        if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
            raise TypeError(f"cubic_schedule returned a {type(value).__name__} among its sparsities; they are numbers")
        values.append(float(value))
    if not all(math.isfinite(v) for v in values):
        raise ValueError("cubic_schedule returned a sparsity that is not a finite number")
    save_file(json.dumps({"schedule": values}).encode(), spec, LAB_NAME, ".json")
    return {"schedule": values}


def _lora_gpt(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """16.9: the student's ``lora_gpt`` pickled by value and saved: the grader runs it in the lab's student process on
    TinyGPTs it draws itself from the grading secret (nothing is run here)."""
    import cloudpickle
    import numpy as np

    from util.artifacts import save_arrays

    return save_arrays({"function": np.frombuffer(cloudpickle.dumps(fn), dtype=np.uint8)}, spec, LAB_NAME)


WRITTEN = {
    "16.3": (Written("16.Q1", "Pruning 80 % of DigitsCNN's weights by magnitude (16.1) left its parameters and MACs "
                     "as they were, and on a CPU a product with half its weights zero took as long as the dense "
                     "one, in CSR longer. Why does unstructured sparsity save no time on a dense kernel, why can "
                     "2:4 sparsity run up to twice as fast on a GPU that supports it, and why does CSR store fc "
                     "in more bytes than dense at 50 %?",
                     3, words=(30, 200), since=2),),
    "16.5": (Written("16.Q2", "With the teacher your student reached about 97 % from 100 labels, against about "
                     "90 % on the labels alone. What does the temperature T do to the teacher's probabilities, "
                     "why does that help a student with so few labels, and why is the KL term multiplied by "
                     "T^2?",
                     2, words=(20, 150), since=2),),
}
"""The lab's questions answered in words, marked by hand against ``rubrics.py`` (release 2): their
points came out of their task's exported answer."""


TASKS = (
    Task(
        id="16.1", title="Magnitude pruning", answer_points=5,
        answer="{'pruned_global_80', 'sparsities', 'global', 'per_layer', 'sensitivity', 'fine_tuned_90'} for the "
               "trained DigitsCNN",
        keys=("pruned_global_80", "sparsities", "global", "per_layer", "sensitivity", "fine_tuned_90"),
        tolerance=ACCURACY, function="magnitude_masks", run_case=_masks, checks=CHECKS["16.1"],
        hidden_points=4,
    ),
    Task(
        id="16.2", title="Channel pruning that shrinks the model", answer_points=5,
        answer="{'params', 'macs', 'accuracy', 'equal_outputs'} of DigitsCNN with conv2 cut to 16 channels",
        keys=("params", "macs", "accuracy", "equal_outputs"), tolerance=ACCURACY,
        function="prune_channels", run_case=_channels, grader_check=f"{JUDGE}:check_channels",
        checks=CHECKS["16.2"], hidden_points=9, judged=("object",),
    ),
    Task(
        id="16.3", title="2:4 sparsity and its storage", answer_points=1, written=WRITTEN["16.3"],
        answer="{'accuracy', 'kept', 'fc_fp16', 'fc_fp32'} of DigitsCNN with 2:4 masks on conv2, conv3 and fc",
        keys=("accuracy", "kept", "fc_fp16", "fc_fp32"), tolerance=ACCURACY,
        function="two_four", run_case=_two_four, grader_check=f"{JUDGE}:check_two_four", checks=CHECKS["16.3"],
        hidden_points=6,
    ),
    Task(
        id="16.4", title="Low rank under a parameter budget", answer_points=4,
        answer="{'ranks', 'accuracy', 'relative_error', 'params', 'budget_rank'} of conv3 factorised",
        keys=("ranks", "accuracy", "relative_error", "params", "budget_rank"), tolerance=ACCURACY,
        function="low_rank", run_case=_low_rank, grader_check=f"{JUDGE}:check_low_rank", checks=CHECKS["16.4"],
        hidden_points=6, judged=("object",),
    ),
    Task(
        id="16.5", title="Distillation with few labels", answer_points=2, written=WRITTEN["16.5"],
        answer="{'loss_example', 'kd_accuracy', 'labels_only_accuracy'}: the small student with 100 labels",
        keys=("loss_example", "kd_accuracy", "labels_only_accuracy"), tolerance=ACCURACY,
        function="distillation_loss", run_case=_distill,
        grader_check="util.labs.lab16.judge_distill:check_distillation", checks=CHECKS["16.5"],
        hidden_points=12, judged=("function", "calls"),
    ),
    Task(
        id="16.6", title="LoRA", answer_points=3,
        answer="{'trainable_full', 'trainable_lora', 'memory_full', 'memory_lora', 'merged_equal'} for DigitsCNN "
               "with LoRA (r=4) on fc",
        keys=("trainable_full", "trainable_lora", "memory_full", "memory_lora", "merged_equal"), tolerance=EXACT,
        function="add_lora", run_case=_lora, grader_check=f"{JUDGE}:check_lora", checks=CHECKS["16.6"],
        hidden_points=6, judged=("object",),
    ),
    Task(
        id="16.7", title="Pruning a residual network", answer_points=3, since=3,
        answer="{'groups', 'params', 'macs', 'equal_outputs'} of the notebook's ResidualNet with block 2's group cut "
               "to 16 channels",
        keys=("groups", "params", "macs", "equal_outputs"), tolerance=EXACT,
        function="prune_residual", run_case=_residual, grader_check="util.labs.lab16.judge_residual:check_residual",
        checks=CHECKS["16.7"], hidden_points=9, judged=("function",),
    ),
    Task(
        id="16.8", title="A schedule, not a cut", answer_points=2, since=4,
        answer="{'schedule', 'gradual', 'one_shot'}: DigitsCNN pruned to 95 % by the cubic schedule in 8 steps, and by "
               "one cut to its sparsities at steps 2, 4, 6 and 8",
        keys=("schedule", "gradual", "one_shot"), tolerance=ACCURACY,
        function="cubic_schedule", run_case=_schedule, grader_check="util.labs.lab16.judge_schedule:check_schedule",
        checks=CHECKS["16.8"], hidden_points=8,
    ),
    Task(
        id="16.9", title="LoRA where it is used: TinyGPT's attention", answer_points=2, since=5,
        answer="{'trainable', 'memory', 'memory_full', 'merged_equal'}: lab 10's TinyGPT in float64 with LoRA (r=4, "
               "alpha=8) on every block's q and v, trained on 4 sequences of 32 tokens",
        keys=("trainable", "memory", "memory_full", "merged_equal"), tolerance=EXACT,
        function="lora_gpt", run_case=_lora_gpt, grader_check="util.labs.lab16.judge_lora_gpt:check_lora_gpt",
        checks=CHECKS["16.9"], hidden_points=8, judged=("function",),
    ),
)
"""The tasks of the current release (5), in notebook order."""

BEFORE_5 = {"16.1": 6, "16.3": 8, "16.4": 8, "16.6": 8, "16.8": 10}
"""Task id -> hidden points as release 4 declared them: release 5's task 16.9 took its 10 points from these tasks'
hidden cases (2 each), each case keeping its share (``Lab.with_cases``: a notebook of release 4 is graded with every
case worth what it was)."""

BEFORE_4 = {"16.2": 12, "16.3": 10, "16.5": 16, "16.7": 12}
"""Task id -> hidden points as release 3 declared them: release 4's task 16.8 took its 12 points from these tasks'
hidden cases (3 + 2 + 4 + 3), each case keeping its share (``Lab.with_cases``: a notebook of release 3 is graded
with every case worth what it was)."""

BEFORE_3 = {"16.1": 10, "16.2": 15, "16.3": 12, "16.4": 12, "16.6": 10}
"""Task id -> hidden points as releases 1 and 2 declared them: release 3's task 16.7 took its 15 points from these
tasks' hidden cases (4 + 3 + 2 + 4 + 2), each case keeping its share (``Lab.with_cases``)."""

LAB = Lab(
    name=LAB_NAME,
    title="Compression",
    notebook="lab16_compression.ipynb",
    judge_timeout=180,  # 16.5 starts a student process (up to 60 s to start) and trains with it
    packages=("torch", "numpy", "scikit-learn", "cloudpickle"),
    releases=(
        Release(1, "2026-11-26", "The first release: magnitude pruning with a sensitivity scan, channel pruning that "
                "shrinks the model, 2:4 masks and their storage, a layer factored under a parameter budget, "
                "distillation with few labels, and LoRA."),
        Release(2, "2026-11-26", "Tasks 16.3 and 16.5 ask written questions, Q1 (3 points) and Q2 (2 points), marked by "
                "hand: why unstructured zeros save no time on a dense kernel while 2:4 sparsity can, and what "
                "distillation's temperature does; their points came from the two tasks' exported answers.",
                marker="(written, 3 points of task 16.3, marked by hand)"),
        Release(3, "2026-12-02", "A new task, 16.7: pruning a residual network, whose channels are coupled through "
                "additions into groups found in the graph torch.fx traces and cut as one by their summed importance, "
                "graded on residual networks the grader draws afresh at each grading and prunes with your function "
                "in a process of its own, which times the network you return there against the dense one. Its 15 points "
                "come from the hidden cases of tasks 16.1 (4), 16.2 (3), 16.3 (2), 16.4 (4) and 16.6 (2); a notebook "
                "of an earlier release is graded as it was. The handout also states what it left unsaid: 16.1's "
                "amount, 16.2's plans and tie rule against topk, 16.3's CSR count and timer (a warm-up first), 16.4's "
                "grouped convolutions, 16.5's accuracy on the labels alone (about 90 %), 16.6's formula as matrix "
                "products, what is frozen and merged()'s flags.",
                marker="An addition couples the channels of its two inputs",
                previous=tuple(replace(task, hidden_points=BEFORE_3[task.id]) for task in TASKS if task.id in BEFORE_3)),
        Release(4, "2026-12-02", "A new task, 16.8: a schedule, not a cut. Gradual magnitude pruning with Zhu and Gupta's "
                "cubic schedule and fine-tuning between the steps, against one cut to the same sparsity; graded on "
                "the schedule's sparsities and by the grader pruning DigitsCNN again with your schedule, in an order of "
                "its own, to a stated accuracy. Its 12 points come from the hidden cases of tasks 16.2 (3), 16.3 (2), "
                "16.5 (4) and 16.7 (3); a notebook of an earlier release is graded as it was.",
                marker="A schedule, not a cut",
                previous=tuple(replace(task, hidden_points=BEFORE_4[task.id]) for task in TASKS if task.id in BEFORE_4)),
        Release(5, "2026-12-03", "A new task, 16.9: LoRA where it is used, on the query and value projections of lab 10's "
                "TinyGPT, with its trainable parameters and training memory by lab 12's convention (the activations "
                "kept through the frozen layers included), merged back; graded on TinyGPTs the grader draws afresh "
                "at each grading and adapts with your function in a process of its own. Its 10 points come from the "
                "hidden cases of tasks 16.1, 16.3, 16.4, 16.6 and 16.8 (2 each); a notebook of an earlier release is "
                "graded as it was.",
                marker="LoRA where it is used",
                previous=tuple(replace(task, hidden_points=BEFORE_5[task.id]) for task in TASKS if task.id in BEFORE_5)),
    ),
    prepare="util.labs.lab16.tasks:prepare",
    tasks=TASKS,
)


def prepare() -> None:
    """Train (or verify) the cached DigitsCNN the notebook and the judges load, before any kernel runs."""
    from util.labs.lab16.digits import trained_digits

    trained_digits()
