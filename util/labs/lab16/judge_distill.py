"""Task 16.5's judge: the loss's values against the grader's own formula, and a distillation run the grader does.

* **Value cases** (``"rows"`` in the spec): the loss the student's function returned in the kernel, against
  :func:`reference_loss`, computed here in float64 from the same seeded logits (relative difference at most
  :data:`VALUE_RTOL`).
* **The re-run** (``"labels"`` in the spec): the kernel saved ``distillation_loss`` pickled by value (cloudpickle),
  at most :data:`MAX_PICKLE` bytes. Here the judge trains the small student itself, with the course's loop
  (:func:`util.labs.lab16.distill.train_student`) on the training images, a labeled subset and the teacher's logits,
  and evaluates the result on the test images itself. The student's initialisation, which images keep their label
  and the order of the batches are drawn from the grading secret (:func:`draws`, :mod:`util.judging.secret`), never
  from the case's spec, so nothing the student's code can compute tells it which images a call holds. The only thing
  it asks of the student's code is, per batch, the gradient of the loss with respect to the student's logits: that
  code runs in a student process the grader starts (``loss_harness.py``), where the digits' files cannot be read
  (``withhold=("digits",)``), which loads the function (bounded, :func:`util.judging.student_code.load`) before it
  receives anything of the case and never receives an image, the model, its weights, a seed or which images a batch
  holds: only each batch's logits, teacher's logits and labels. Its clock starts before the function is sent
  (unpickling is student code), and the process's CPU time over that window, measured by the grader from outside,
  must stay within the case's budget (checked every :data:`CPU_EVERY` batches too, so a run over it stops early);
  each answer must come within :data:`STEP_SECONDS`.

What the student's code can still do: answer with any gradient it likes, and keep state between calls. A gradient is
a function of what it is sent (logits and labels, 128 rows at a time), so a loss that reaches the threshold trains
this student from this initialisation on these labels; a loss that ignores the teacher does not reach it with 100
labels (at most 335 of the 360 test images over 200 seeds, against the threshold's 341:
``benchmarks/bench_lab16_grading.py --seeds 200``; ``tests/labs/test_lab16_distillation.py`` tries the draws). State
kept between calls cannot tie a call to images by its order (secret); the rows' only identity is the teacher's logits,
and the teacher's arg-max is every training image's true label (1,437 of 1,437), so labels carried in the pickle add
nothing the call was not already sent.
"""
from __future__ import annotations

import os
import time
from typing import Any, Mapping

from util.contract import Tolerance
from util.labs.lab16 import judge_kept as kept
from util.labs.lab16.distill import MAX_PICKLE, value_inputs

VALUE_RTOL = 1e-4
"""A loss value against the grader's float64 formula: float32 arithmetic lands between 1e-7 and 2e-6 (T^2 = 64
multiplies the rounding of a small KL)."""
START_SECONDS = 60.0
"""How long the student process may take to start, import PyTorch and warm up (course code only)."""
STEP_SECONDS = 10.0
"""How long one answer (one batch's gradient, or loading the function) may take."""
HARNESS = "util.labs.lab16.loss_harness:serve"
CPU_EVERY = 10
"""Batches between two readings of the student process's CPU time: a run over its budget stops there."""


def draws(spec: Mapping[str, Any]) -> dict[str, int]:
    """The seeds of a re-run, drawn from the grading secret for this case (never from its spec alone): ``init`` (the
    small student's initialisation), ``labels`` (which training images keep their label) and ``order`` (the
    batches' order). The same within one grading, others in the next; the course's loss passes every draw."""
    import json

    from util.judging import secret

    key = json.dumps(dict(spec), sort_keys=True)
    return {name: secret.seed("lab16", "16.5", name, key, bits=62) for name in ("init", "labels", "order")}


def reference_loss(student, teacher, labels, T: float, alpha: float) -> float:
    """The distillation loss in float64: ``alpha * T**2 * KL(softmax(teacher / T) || softmax(student / T))``
    (summed over classes, averaged over rows) ``+ (1 - alpha) *`` the mean cross-entropy over the labeled rows
    (0 when none is)."""
    import torch

    s, t = student.double(), teacher.double()
    p = torch.softmax(t / T, 1)
    soft = (p * (torch.log_softmax(t / T, 1) - torch.log_softmax(s / T, 1))).sum(1).mean()
    labeled = labels >= 0
    hard = -torch.log_softmax(s[labeled], 1)[torch.arange(int(labeled.sum())), labels[labeled]].mean() \
        if labeled.any() else torch.zeros((), dtype=torch.float64)
    return float(alpha * T * T * soft + (1 - alpha) * hard)


def _check_value(spec: Mapping[str, Any], data: bytes) -> list[str]:
    import json

    try:
        found = json.loads(data)["loss"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return ["the value saved for this case is not what the course saves; run the notebook again from the top"]
    if isinstance(found, bool) or not isinstance(found, (int, float)):
        return [f"distillation_loss returned {type(found).__name__}, not a number"]
    expected = reference_loss(*value_inputs(spec), float(spec["T"]), float(spec["alpha"]))
    if not abs(found - expected) <= VALUE_RTOL * max(1.0, abs(expected)):
        return [f"distillation_loss returned {found:.6g}, which differs from the grader's float64 formula by more than "
                f"rtol={VALUE_RTOL:g} (yours is {'larger' if found > expected else 'smaller'})"]
    return []


class _Remote:
    """The gradient of the student's loss, asked of the student process batch by batch (``train_student``'s
    ``gradient``); what comes back is checked for size here and for shape and finiteness by the loop."""

    def __init__(self, student, T: float, alpha: float, cpu_budget: float, cpu_before: float) -> None:
        self.student, self.T, self.alpha = student, T, alpha
        self.cpu_budget, self.cpu_before, self.calls = cpu_budget, cpu_before, 0

    def __call__(self, logits, teacher, labels):
        import numpy as np
        import torch

        from util.student_process import ChannelError

        rows, classes = logits.shape
        self.student.send({"rows": rows, "classes": classes, "T": self.T, "alpha": self.alpha},
                          data=logits.double().numpy().tobytes() + teacher.double().numpy().tobytes()
                          + labels.to(torch.int64).numpy().tobytes())
        try:
            reply, data = self.student.receive(timeout=STEP_SECONDS)
        except ChannelError as exc:
            raise _Stop(f"distillation_loss did not answer ({exc}); each call may take at most {STEP_SECONDS:g} s") from None
        if "raised" in reply:
            raise _Stop(f"distillation_loss raised {str(reply['raised'])[:250]}")
        if "loss" not in reply or len(data) != rows * classes * 8:
            raise _Stop("the student process answered something other than a gradient of the logits' shape")
        self.calls += 1
        if self.calls % CPU_EVERY == 0:
            used = self.student.stats()["cpu_seconds"] - self.cpu_before
            if used > self.cpu_budget:
                raise _OverBudget(f"distillation_loss used {used:.1f} s of CPU in the grader's process within "
                            f"{self.calls} batches (loading it and every call); at most {self.cpu_budget:g} s")
        return torch.from_numpy(np.frombuffer(data, dtype=np.float64).reshape(rows, classes).copy())


class _Stop(Exception):
    """Why the re-run ended without a trained student, in words for the student."""


class _OverBudget(_Stop):
    """The student process used more CPU than the case allows before the run ended."""


def retrain(spec: Mapping[str, Any], pickled: bytes) -> tuple[float | None, dict, str]:
    """Train the small student with the pickled loss (see the module's help): ``(test accuracy, measures,
    problem)``; the accuracy is ``None`` and ``problem`` says why when there is none. ``measures``: the window's
    ``wall_seconds`` and ``cpu_seconds`` (the student process's, measured by the grader)."""
    import torch

    from util.data import digits_split
    from util.labs.lab16.digits import accuracy, teacher_logits, trained_digits
    from util.labs.lab16.distill import distillation_data, train_student
    from util.student_process import ChannelError, StudentProcess

    measures: dict = {}
    try:
        with StudentProcess.start(HARNESS, max_data=1 << 20, withhold=("digits",),
                                  seconds=START_SECONDS + float(spec["wall_seconds"]) + 30) as student:
            # the student process imports PyTorch and warms up (course code) while the judge prepares the data;
            # the lab's other student process (16.7's and 16.9's) starts beside this run (judge_kept.prestart)
            kept.prestart(max(os.sched_getaffinity(0)))
            split, seeds = digits_split(), draws(spec)
            torch.optim.Adam([torch.zeros(1, requires_grad=True)])  # its one-off import (torch._dynamo), here too
            x, teacher, labels = distillation_data(split.x_train, split.y_train,
                                                   teacher_logits(trained_digits(), split.x_train),
                                                   int(spec["labels"]), seeds["labels"])
            reply, _ = student.receive(timeout=START_SECONDS)
            if reply.get("ready") is not True:
                return None, measures, "the grader's student process did not start"
            if reply.get("readable"):
                return None, measures, ("the grader could not withhold the digits from its process on this machine "
                                        f"({str(reply['readable'])[:200]} readable), so it does not grade the run: "
                                        "tell your instructor")
            before = student.stats()["cpu_seconds"]
            start = time.perf_counter()  # from here on, student code may run: it is all measured
            student.send({"function": True}, data=pickled)
            try:
                reply, _ = student.receive(timeout=STEP_SECONDS)
            except ChannelError as exc:
                return None, measures, f"distillation_loss could not be loaded in the grader's process ({exc})"
            if reply.get("loaded") is not True:
                return None, measures, f"distillation_loss could not be loaded: {str(reply.get('raised'))[:250]}"
            try:
                remote = _Remote(student, float(spec["T"]), float(spec["alpha"]), float(spec["cpu_seconds"]), before)
                model = train_student(remote, x, teacher, labels, seeds["init"], int(spec["epochs"]),
                                      order_seed=seeds["order"])
            except _Stop as stop:
                measures["over_budget"] = isinstance(stop, _OverBudget)
                return None, measures, str(stop)
            except ValueError as exc:
                return None, measures, str(exc)
            measures["wall_seconds"] = time.perf_counter() - start
            stats = student.stats()
            measures["cpu_seconds"] = stats["cpu_seconds"] - before
            try:
                student.send({"stop": True})
            except ChannelError:
                pass
    except ChannelError as exc:
        return None, measures, f"the grader could not run distillation_loss again ({exc})"
    return accuracy(model, split.x_test, split.y_test), measures, ""


def check_distillation(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 16.5: a value case against :func:`reference_loss`, or the re-run against the case's accuracy
    threshold and CPU budget (see the module's help)."""
    import torch

    torch.set_num_threads(1)
    if "rows" in spec:
        return _check_value(spec, data)
    from util.artifacts import read_saved_arrays

    arrays, problems = read_saved_arrays(data, expected=["loss"])
    if problems:
        return problems
    pickled = arrays["loss"].tobytes()
    if len(pickled) > MAX_PICKLE:
        return [f"distillation_loss pickles to {len(pickled):,} bytes; the grader accepts at most {MAX_PICKLE:,} "
                "(a loss function is a few lines: keep data and weights out of what it refers to)"]
    found, measures, problem = retrain(spec, pickled)
    if found is None:
        return [problem if measures.get("over_budget") else f"trained again by the grader: {problem}"]
    problems = []
    if measures["cpu_seconds"] > float(spec["cpu_seconds"]):
        problems.append(f"distillation_loss used {measures['cpu_seconds']:.1f} s of CPU in the grader's process "
                        f"(loading it and every call); at most {float(spec['cpu_seconds']):g} s")
    if measures["wall_seconds"] > float(spec["wall_seconds"]):
        problems.append(f"the grader's distillation run took {measures['wall_seconds']:.1f} s; at most "
                        f"{float(spec['wall_seconds']):g} s")
    if not found >= float(spec["min_accuracy"]):
        problems.append(f"trained again by the grader (the small student from a seed of the grader's, {spec['labels']} "
                        f"labels and the teacher's logits, T={spec['T']:g}, alpha={spec['alpha']:g}), the student reaches "
                        f"{found:.1%} test accuracy; at least {float(spec['min_accuracy']):.1%} is needed")
    return problems
