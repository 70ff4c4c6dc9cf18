"""Task 16.8's judge: the student's pruning schedule against Zhu and Gupta's cubic formula, and pruned again by the
grader.

The kernel saves, for each case, the schedule ``cubic_schedule(final, steps, initial)`` returned (a JSON list, read
here as untrusted data: its length, and that every entry is a finite number in [0, 1], checked before use).

* **Value cases** (no ``"batches"`` in the spec): every sparsity within :data:`SPARSITY_ATOL` of
  :func:`reference_schedule`, the formula in float64 (``final + (initial - final) * (1 - k / steps) ** 3``, k = 1 to
  ``steps``).
* **The re-run** (``"batches"``): the grader prunes the course's trained DigitsCNN itself with the student's
  schedule, the course's loop (:func:`util.labs.lab16.schedule.prune_gradually`) and its own global magnitude masks
  (:func:`global_masks`, never the student's code), the fine-tuning batches in an order drawn from the grading secret
  (:func:`order_seed`, never from the spec), and measures the pruned model itself: exactly ``round(final * N)`` of its
  N prunable weights zero, and its test accuracy at least ``min_accuracy``. One cut to ``final`` followed by one step's
  fine-tuning, at the start or at the end of the schedule's batches, does not reach that floor on any draw
  (:data:`MEASURED`); the course's schedule passes every draw.

No student code runs in the judge: the schedule is a list of numbers, and the masks, the training and the accuracy
are the grader's.
"""
from __future__ import annotations

import json
import math
from typing import Any, Mapping

from util.contract import Tolerance

SPARSITY_ATOL = 1e-9
"""A sparsity against the grader's float64 formula (float64 rounding of another order of operations: about 1e-16)."""
MAX_STEPS = 1000
MEASURED = ("over the orders 0 to 7 (float64, one thread), of the 360 test images: the cubic schedule to 95 % in 8 steps "
            "of 8 batches 329 to 339 right; 95 % at the last step 36 to 38; one cut of the trained model to 95 %, then "
            "8 batches, 182 to 212; 95 % at the first step, then all 64 batches, 344 to 350 (that schedule's sparsities "
            "are wrong, which the value cases catch)")
"""What the re-run's floor separates (``python benchmarks/bench_lab16_grading.py --schedule-seeds 8``)."""


def reference_schedule(final: float, steps: int, initial: float = 0.0) -> list[float]:
    """Zhu and Gupta's cubic schedule: the sparsity after pruning step k of ``steps`` (k = 1 ... steps), from
    ``initial`` (before step 1) to ``final`` (at step ``steps``)."""
    return [final + (initial - final) * (1 - k / steps) ** 3 for k in range(1, steps + 1)]


def order_seed(spec: Mapping[str, Any]) -> int:
    """The seed of the re-run's fine-tuning order, drawn from the grading secret for this case."""
    from util.judging import secret

    return secret.seed("lab16", "16.8 order", json.dumps(dict(spec), sort_keys=True), bits=62)


def global_masks(model, sparsity: float) -> dict:
    """The grader's global magnitude masks: ``round(sparsity * N)`` of the N weights of every Conv2d and Linear of
    ``model`` pruned, the smallest magnitudes first (the earlier position first on a tie), as ``{name: mask}``."""
    import torch

    from util.labs.lab16.prune import prunable

    weights = prunable(model)
    magnitudes = torch.cat([w.detach().abs().flatten() for w in weights.values()])
    pruned = round(sparsity * magnitudes.numel())
    keep = torch.ones(magnitudes.numel(), dtype=torch.bool)
    keep[torch.argsort(magnitudes, stable=True)[:pruned]] = False
    masks, start = {}, 0
    for name, weight in weights.items():
        masks[name] = keep[start:start + weight.numel()].view(weight.shape).clone()
        start += weight.numel()
    return masks


def _schedule(spec: Mapping[str, Any], data: bytes) -> tuple[list[float] | None, str]:
    try:
        found = json.loads(data)["schedule"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None, "the schedule saved for this case is not what the course saves; run the notebook again from the top"
    steps = int(spec["steps"])
    if not isinstance(found, list) or len(found) != steps or steps > MAX_STEPS:
        return None, (f"cubic_schedule({spec['final']:g}, {steps}, {spec.get('initial', 0.0):g}) must return a list of "
                      f"{steps} sparsities, one per pruning step")
    if not all(isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s) and 0 <= s <= 1
               for s in found):
        return None, "every sparsity of the schedule must be a number from 0 to 1"
    return [float(s) for s in found], ""


def check_schedule(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 16.8 (see the module's help)."""
    import torch

    torch.set_num_threads(1)
    found, problem = _schedule(spec, data)
    if found is None:
        return [problem]
    final, steps, initial = float(spec["final"]), int(spec["steps"]), float(spec.get("initial", 0.0))
    call = f"cubic_schedule({final:g}, {steps}, {initial:g})"
    if "batches" not in spec:
        expected = reference_schedule(final, steps, initial)
        wrong = [k for k, (s, e) in enumerate(zip(found, expected), start=1) if not abs(s - e) <= SPARSITY_ATOL]
        if wrong:
            return [f"{call}: the sparsity after step {wrong[0]} differs from the cubic schedule's (s_k = final + "
                    f"(initial - final) * (1 - k / steps) ** 3 for k = 1 ... steps; yours is "
                    f"{'larger' if found[wrong[0] - 1] > expected[wrong[0] - 1] else 'smaller'})"
                    + (f", and at {len(wrong) - 1} more steps" if len(wrong) > 1 else "")]
        return []
    return _retrain(spec, found, call)


def _retrain(spec: Mapping[str, Any], schedule: list[float], call: str) -> list[str]:
    from util.data import digits_split
    from util.labs.lab16.digits import accuracy, trained_digits
    from util.labs.lab16.prune import prunable
    from util.labs.lab16.schedule import prune_gradually

    split = digits_split()
    model = prune_gradually(trained_digits(), schedule, global_masks, split.x_train, split.y_train,
                            int(spec["batches"]), seed=order_seed(spec))[-1]
    weights = prunable(model)
    total = sum(w.numel() for w in weights.values())
    zeros = sum(int((w == 0).sum()) for w in weights.values())
    wanted = round(float(spec["final"]) * total)
    problems = []
    if zeros != wanted:
        problems.append(f"pruned by the grader with your schedule ({call}), the model ends with {zeros:,} of its "
                        f"{total:,} weights zero; the stated sparsity prunes exactly {wanted:,}")
    found = accuracy(model, split.x_test, split.y_test)
    if not found >= float(spec["min_accuracy"]):
        problems.append(f"pruned again by the grader with your schedule ({call}: global magnitude masks, "
                        f"{spec['batches']} batches of fine-tuning after each step, in an order of the grader's), "
                        f"DigitsCNN reaches {found:.1%} test accuracy; at least {float(spec['min_accuracy']):.1%} is "
                        "needed (one cut to the final sparsity does not reach it)")
    return problems
