"""Lab 12, training systems (the half of CMU dlsys's assignment lab 8 left out): the one declaration of its tasks.

Students write reverse-mode autodiff over small ``torch.fx`` graphs (12.1), count a training step's
memory by part, the saved activations measured with autograd's own hooks (12.2), walk the
forward+backward schedule for its peak (12.3), plan activation checkpointing under a budget with the
least recomputation (12.4) and train DigitsCNN on scikit-learn's digits (12.5).

What a correct answer must satisfy is decided by the grader on what the cases saved (``judge.py``,
``judge_training.py``): gradients against float64 autograd, saved bytes against its own measurement
on a real step, a plan run by the course's executor (peak and recompute counted as it runs, never
with module hooks: under ``torch.utils.checkpoint`` they miss recomputed blocks), and training re-run
from a fresh model with the student's ``train`` in a student process, timed and evaluated by the judge.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from util.contract import Lab, Release, Task, Tolerance, Written
from util.labs.lab12.public_checks import CHECKS

LAB_NAME = "lab12"
JUDGE = "util.labs.lab12.judge"
GRADIENTS = Tolerance(rtol=1e-5)
"""Gradients against float64 autograd (relative to the gradient's largest element): float32 backward
passes land at 1e-7 to 7e-7 (measured; PyTorch's own float32 autograd: 6e-7)."""
ACCURACY = Tolerance(atol=0.02)
"""Test accuracy of a float32 training run: the course's run reaches 0.997; other CPUs and thread counts
sum in other orders and may move a few of the 360 test images."""


def _refuse(_tensor: Any) -> Any:
    raise RuntimeError("grad must work the gradients out itself: autograd (backward(), torch.autograd.grad, "
                       "torch.func) is not available inside it")


def _grad(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's gradients on a course graph, autograd refused; saved for the judge (float64 compare)."""
    import numpy as np
    import torch

    from util.artifacts import save_arrays
    from util.labs.lab12.graphs import build_graph, feeds, parameter_names

    gm = build_graph(spec["graph"])
    gm.requires_grad_(False)
    names = parameter_names(gm)
    with torch.autograd.graph.saved_tensors_hooks(_refuse, _refuse):
        found = fn(gm, feeds(spec["graph"], spec["batch"], spec["start"]), list(names))
    if not isinstance(found, Mapping) or sorted(found) != sorted(names):
        raise ValueError(f"grad must return {{parameter name: gradient}} for {names}; it returned "
                         f"{sorted(found) if isinstance(found, Mapping) else type(found).__name__}")
    arrays = {}
    for name in names:
        value = found[name]
        array = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value, dtype=np.float64)
        arrays[f"grad/{name}"] = array
    shapes = {name: list(arrays[f"grad/{name}"].shape) for name in names}
    import cloudpickle  # the grader runs grad again where autograd cannot run (util/labs/lab12/grad_harness.py)

    arrays["grad_fn"] = np.frombuffer(cloudpickle.dumps(fn), dtype=np.uint8)
    return {"shapes": shapes, **save_arrays(arrays, spec, LAB_NAME)}


def _memory(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's memory parts; the saved activations and the total are saved for the judge, which
    measures them itself on a real step."""
    import numpy as np

    from util.artifacts import save_arrays
    from util.labs.lab12.nets import build_net

    found = fn(build_net(spec["model"]), tuple(spec["batch"]), spec["optimizer"])
    keys = ("weights", "grads", "optimizer_state", "saved_activations", "total")
    if not isinstance(found, Mapping) or sorted(found) != sorted(keys):
        raise ValueError(f"training_memory must return a dict with keys {', '.join(keys)}")
    for key in keys:
        if not isinstance(found[key], (int, np.integer)) or isinstance(found[key], bool):
            raise TypeError(f"{key} is a {type(found[key]).__name__}; byte counts are ints")
    saved = save_arrays({key: np.array(int(found[key]), dtype=np.int64) for key in ("saved_activations", "total")},
                        spec, LAB_NAME)
    return {**{key: int(found[key]) for key in ("weights", "grads", "optimizer_state")}, **saved}


def _peak(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab12.graphs import build_graph, feeds
    from util.labs.lab12.schedule import training_graph

    nodes, nbytes = training_graph(build_graph(spec["graph"]), feeds(spec["graph"], spec["batch"], spec["start"]))
    return fn(nodes, nbytes)


def _plan(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's plan, run by the course's executor here (for the reference) and saved for the judge,
    which runs it again; a ``ValueError`` is what a budget no plan fits must give."""
    import json

    from util.answers import to_jsonable
    from util.artifacts import save_file
    from util.labs.lab12.executor import Chain, plan_problems, run_plan

    chain = Chain(spec["batch"], tuple(spec["widths"]))
    try:
        plan = to_jsonable(fn(chain, spec["budget"]), "plan")
    except ValueError:
        return {"raised": "ValueError", **save_file(json.dumps({"raised": "ValueError"}).encode(), spec, LAB_NAME,
                                                    ".json")}
    problems = plan_problems(chain, plan)
    if problems:
        raise ValueError(problems[0])
    run = run_plan(chain, plan)
    saved = save_file(json.dumps({"plan": plan}).encode(), spec, LAB_NAME, ".json")
    return {"recompute_macs": run.recompute_macs, "within_budget": run.peak_bytes <= spec["budget"], **saved}


def _train(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's ``train`` run once on 64 images (so an error shows here, where it happened), then
    pickled by value and saved: the grader trains with it in a process of its own and decides there."""
    import cloudpickle
    import numpy as np

    from util.artifacts import save_arrays
    from util.data import digits_split
    from util.models import build_model

    split = digits_split()
    fn(build_model("digits_cnn", seed=spec["seed"]), (split.x_train[:64], split.y_train[:64]), 1, spec["seed"])
    return save_arrays({"train": np.frombuffer(cloudpickle.dumps(fn), dtype=np.uint8)}, spec, LAB_NAME)



RELEASES = (
    Release(1, "2026-11-25", "The first release: reverse-mode autodiff on torch.fx graphs, a training step's memory, "
            "the peak over forward and backward, a checkpointing plan and a training loop for DigitsCNN."),
    Release(2, "2026-11-26",
            "Task 12.5's re-run by the grader cannot read the digits (nor any model the course trained on them): "
            "train on the data you are given. Its clock starts when your train is handed over (unpickling it "
            "counts), the CPU time of every thread and process of it counts too (at most the budget, and no more "
            "than the wall time), and train travels pickled with what it reads from the notebook, at most 16 KB. "
            "Task 12.1's grad is run again by the grader in a process of its own, on one thread where no thread "
            "or process can start and autograd stays refused: the gradients it returns there are graded.",
            marker="That process cannot read the digits"),
    Release(3, "2026-11-26", "Tasks 12.2 and 12.4 ask written questions, Q1 (2 points) and Q2 (3 points), marked by "
            "hand: what grows with the batch in training memory, and why an exact checkpointing plan "
            "recomputes less than the square-root rule; their points came from the two tasks' "
            "exported answers.",
            marker="(written, 2 points of task 12.2, marked by hand)"),
)
"""The lab's changelog (``Lab.releases``). Release 2 changed no case: the judges of 12.5 (``judge_training.py``) and
12.1 (``judge.py``, ``grad_harness.py``) measure and withhold more, for notebooks of either release."""


WRITTEN = {
    "12.2": (Written("12.Q1", "Why does Adam need more memory than SGD for the same model, and which part of "
                     "training memory grows with the batch? Give DigitsCNN's numbers.",
                     2, words=(20, 150), since=3),),
    "12.4": (Written("12.Q2", "Checkpointing trades memory for recomputation. Why can a plan that fits the "
                     "budget exactly recompute less than the square-root rule, and why does the rule "
                     "do worse still when the blocks have different widths?",
                     3, words=(30, 200), since=3),),
}
"""The lab's questions answered in words, marked by hand against ``rubrics.py`` (release 3): their
points came out of their task's exported answer."""


LAB = Lab(
    name=LAB_NAME,
    title="Training systems",
    notebook="lab12_training_systems.ipynb",
    judge_timeout=180,  # 12.5 starts a student process: up to 60 s to start and warm up, 40 s to train
    packages=("torch", "numpy", "scikit-learn", "cloudpickle"),
    releases=RELEASES,
    tasks=(
        Task(
            id="12.1", title="Reverse-mode autodiff", answer_points=5,
            answer="{parameter: float(norm of its gradient)} for the MLP on 64 digits (w0, b0, w1, b1, w2, b2)",
            keys=("w0", "b0", "w1", "b1", "w2", "b2"), tolerance=GRADIENTS,
            function="grad", run_case=_grad, grader_check=f"{JUDGE}:check_grads", checks=CHECKS["12.1"],
            hidden_points=20, judged=("function",),
        ),
        Task(
            id="12.2", title="Training memory", answer_points=2, written=WRITTEN["12.2"],
            answer="training_memory(DigitsCNN, (64, 1, 8, 8), 'adam'): {'weights', 'grads', 'optimizer_state', "
                   "'saved_activations', 'total'} in bytes",
            keys=("weights", "grads", "optimizer_state", "saved_activations", "total"),
            function="training_memory", run_case=_memory, grader_check=f"{JUDGE}:check_memory", checks=CHECKS["12.2"],
            hidden_points=16,
        ),
        Task(
            id="12.3", title="Peak over the forward and backward passes", answer_points=3,
            answer="training_peak(*training_graph(chain, batch 128)): {'peak_bytes': int, 'peak_at': step name}",
            keys=("peak_bytes", "peak_at"),
            function="training_peak", run_case=_peak, checks=CHECKS["12.3"],
            hidden_points=12,
        ),
        Task(
            id="12.4", title="Checkpointing plan", answer_points=1, written=WRITTEN["12.4"],
            answer="{'recompute_macs', 'within_budget'} of your plan for the 8-block chain within 917,504 bytes, and "
                   "{'sqrt_rule_recompute_macs', 'sqrt_rule_peak_bytes'} of the sqrt(n) plan [0, 3, 6]",
            keys=("recompute_macs", "within_budget", "sqrt_rule_recompute_macs", "sqrt_rule_peak_bytes"),
            function="checkpoint_plan", run_case=_plan, grader_check=f"{JUDGE}:check_plan", checks=CHECKS["12.4"],
            hidden_points=16,
        ),
        Task(
            id="12.5", title="Train on the digits", answer_points=5,
            answer="{'test_accuracy': float, 'eval_mode': bool} of DigitsCNN trained with train(model, data, 4, 0)",
            keys=("test_accuracy", "eval_mode"), tolerance=ACCURACY,
            function="train", run_case=_train, grader_check="util.labs.lab12.judge_training:check_training",
            checks=CHECKS["12.5"],
            hidden_points=15, judged=("function",),
        ),
    ),
)
