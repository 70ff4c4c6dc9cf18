"""Lab 12's public checks (``check("12.2")``): hand-countable cases the notebook works out and stated
rules, never a hidden case's input. ``CHECKS[task id]`` is attached to each task in ``tasks.py``.
"""
from __future__ import annotations

from typing import Any

from util.checks import equal, first, has_keys, is_int
from util.contract import Check

MLP_PARAMETERS = ["w0", "b0", "w1", "b1", "w2", "b2"]
DIGITS_CNN_WEIGHT_BYTES = 77_032
"""DigitsCNN's 19,258 parameters x 4 bytes."""
SQRT_PLAN_MACS = 5 * 128 * 256 * 256
"""The sqrt(n) plan [0, 3, 6] on the notebook's chain recomputes blocks 0, 1, 3, 4 and 6."""
SQRT_PLAN_PEAK = 7 * 4 * 128 * 256


def _as_list(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") else value


def _close(found: Any, expected: list, what: str) -> str | None:
    import numpy as np

    try:
        array = np.asarray(_as_list(found), dtype=np.float64)
    except (TypeError, ValueError):
        return f"{what} is {str(found)[:80]}; expected numbers like {expected}"
    if array.shape != np.asarray(expected).shape or not np.allclose(array, expected, rtol=1e-5, atol=1e-6):
        return f"{what} is {np.round(array, 6).tolist()}; expected {expected}"
    return None


def _sum_mul(fn) -> str | None:
    import torch

    from util.labs.lab12.graphs import build_graph

    gm = build_graph("sum_mul")
    found = fn(gm, {"x": torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])}, ["w"])
    return first(has_keys(found, ["w"], "grad(...)"), _close(found.get("w") if isinstance(found, dict) else None,
                                                               [5.0, 7.0, 9.0], "the gradient of w"))


def _tiny(fn) -> str | None:
    import torch

    from util.labs.lab12.graphs import build_graph

    gm = build_graph("tiny")
    found = fn(gm, {"x": torch.tensor([[1.0, 2.0]]), "y": torch.tensor([0])}, ["w", "b"])
    if not isinstance(found, dict):
        return f"grad(...) returned a {type(found).__name__}; expected a dict {{parameter name: gradient}}"
    return first(has_keys(found, ["w", "b"], "grad(...)"),
                 _close(found.get("b"), [-0.5, 0.5], "the gradient of b"),
                 _close(found.get("w"), [[-0.5, -1.0], [0.5, 1.0]], "the gradient of w"))


def _one_linear(fn) -> str | None:
    import torch
    from torch import nn

    torch.manual_seed(0)
    found = fn(nn.Linear(4, 3), (2, 4), "sgd")
    return first(has_keys(found, ["weights", "grads", "optimizer_state", "saved_activations", "total"], "the result"),
                 equal({k: found[k] for k in found}, {"weights": 60, "grads": 60, "optimizer_state": 0,
                                                      "saved_activations": 76, "total": 196}, "the result"))


def _tiny_walk(fn) -> str | None:
    import torch

    from util.labs.lab12.graphs import build_graph
    from util.labs.lab12.schedule import training_graph

    nodes, nbytes = training_graph(build_graph("tiny"), {"x": torch.tensor([[1.0, 2.0]]), "y": torch.tensor([1])})
    found = fn(nodes, nbytes)
    return first(has_keys(found, ["peak_bytes", "peak_at"], "the result"),
                 equal(dict(found), {"peak_bytes": 32, "peak_at": "log_softmax"}, "the result"))


def _one_block(fn) -> str | None:
    from util.labs.lab12.executor import Chain

    return equal(_as_list(fn(Chain(2, (8, 8)), 10_000)), [0], "the plan of a 1-block chain")


def _too_small(fn) -> str | None:
    from util.labs.lab12.executor import uniform_chain

    try:
        plan = fn(uniform_chain(4, width=8, batch=2), 100)
    except ValueError:
        return None
    return f"with a budget of 100 bytes (below every plan's peak) checkpoint_plan returned {_as_list(plan)!r}; " \
           "it should raise ValueError"


def _train_small(fn) -> str | None:
    import torch

    from util.data import digits_split
    from util.models import build_model

    split = digits_split()
    model = build_model("digits_cnn", seed=5)
    before = model.conv1.weight.detach().clone()
    returned = fn(model, (split.x_train[:128], split.y_train[:128]), 1, 0)
    if not isinstance(returned, torch.nn.Module):
        return f"train returned a {type(returned).__name__}; it should return the model"
    if returned.training:
        return "train returned the model in training mode; call model.eval() before returning it"
    if torch.equal(returned.conv1.weight.detach(), before):
        return "after one epoch on 128 images, conv1's weights have not changed"
    return None


CHECKS: dict[str, tuple[Check, ...]] = {
    "12.1": (
        Check("a gradient norm for each of the MLP's 6 parameters, all positive",
              lambda a: first(equal(sorted(a), sorted(MLP_PARAMETERS), "the answer's keys"),
                              None if all(isinstance(v, float) and v > 0 for v in a.values())
                              else f"the norms are {a}; each should be a positive float"),
              "submit {name: float(grads[name].norm())} for every parameter of the MLP"),
        Check("sum(x * w) over the rows [1, 2, 3] and [4, 5, 6]: the gradient of w is [5, 7, 9]", _sum_mul,
              "the gradient of a * b with respect to b is the incoming gradient times a, summed over the "
              "dimensions along which b was broadcast (here the batch)", calls_function=True),
        Check("tiny: one example [1, 2] of class 0, zero weights: b gets [-0.5, 0.5], w gets [[-0.5, -1], [0.5, 1]]",
              _tiny, "for a mean cross-entropy the logits' gradient is (softmax - one_hot) / batch; a linear layer's "
                     "weight gets grad_out.T @ x", calls_function=True),
    ),
    "12.2": (
        Check("DigitsCNN: weights = grads = 77,032 bytes, Adam's state twice that, total the sum of the four parts",
              lambda a: first(*(is_int(a[k], k) for k in a),
                              equal(a["weights"], DIGITS_CNN_WEIGHT_BYTES, "weights"),
                              equal(a["grads"], DIGITS_CNN_WEIGHT_BYTES, "grads"),
                              equal(a["optimizer_state"], 2 * DIGITS_CNN_WEIGHT_BYTES, "optimizer_state"),
                              equal(a["total"], a["weights"] + a["grads"] + a["optimizer_state"]
                                    + a["saved_activations"], "total")),
              "Adam keeps two numbers per trainable parameter (exp_avg and exp_avg_sq)"),
        Check("Linear(4, 3) on a batch of 2 with SGD: 60, 60, 0 and 76 bytes saved (x 32, log-probabilities 24, "
              "labels 16, the loss's total weight 4)", _one_linear,
              "count each storage once (a view or a tensor saved twice is one storage), leave the parameters and "
              "buffers out, and count the loss's tensors too", calls_function=True),
    ),
    "12.3": (
        Check("peak_bytes is an int and peak_at names a step of the schedule",
              lambda a: first(is_int(a["peak_bytes"], "peak_bytes"),
                              None if isinstance(a["peak_at"], str) and a["peak_at"] else
                              f"peak_at is {a['peak_at']!r}; expected a step name such as 'relu_3.backward'"),
              "a forward step is named by its node, a backward step by its node followed by '.backward'"),
        Check("tiny at batch 1 (the notebook's table): 32 bytes, first reached at log_softmax", _tiny_walk,
              "a tensor is alive from the step that writes it through the last step that reads it, both included; "
              "the backward of a node reads what it saves and the gradient of its result", calls_function=True),
    ),
    "12.4": (
        Check("the sqrt(n) plan [0, 3, 6] recomputes 41,943,040 multiply-adds and peaks at 917,504 bytes; your "
              "plan is within the budget",
              lambda a: first(equal(a["sqrt_rule_recompute_macs"], SQRT_PLAN_MACS, "sqrt_rule_recompute_macs"),
                              equal(a["sqrt_rule_peak_bytes"], SQRT_PLAN_PEAK, "sqrt_rule_peak_bytes"),
                              equal(a["within_budget"], True, "within_budget")),
              "run_plan(chain, plan) executes a plan the way the grader does"),
        Check("a 1-block chain needs no checkpoint: [0]", _one_block,
              "a plan is the list of segment starts and always starts with 0", calls_function=True),
        Check("a budget below every plan's peak raises ValueError", _too_small,
              "when no plan fits, raise ValueError instead of returning the best you found", calls_function=True),
    ),
    "12.5": (
        Check("at least 97 % test accuracy, the model returned in eval mode",
              lambda a: first(None if isinstance(a["test_accuracy"], float) and a["test_accuracy"] >= 0.97
                              else f"test_accuracy is {a['test_accuracy']!r}; at least 0.97 is needed",
                              equal(a["eval_mode"], True, "eval_mode")),
              "Adam with lr 3e-3, batches of 64 in a new random order each epoch, 4 epochs; model.eval() at the end"),
        Check("one epoch on 128 images changes the weights and returns the model in eval mode", _train_small,
              "train the model you are given (model.train() first), then return it after model.eval()",
              calls_function=True),
    ),
}
