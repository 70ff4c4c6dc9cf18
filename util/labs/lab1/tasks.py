"""Lab 1, PyTorch model analysis (GoogLeNet): the one declaration of its tasks.

The notebook exports one answer per task with ``util.submit``; the grader also calls the student's
functions on the hidden cases below (other torchvision models, other input shapes, frozen layers,
mixed dtypes, and ``tiny_tied``: a weight shared by two layers, a layer called twice, a transposed
convolution), so a hard-coded number cannot pass. The notebook states the convention for each.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from util.contract import Lab, Release, Task, Tolerance, Written
from util.labs.lab1.public_checks import CHECKS

STATS = Tolerance(rtol=1e-3, atol=1e-9)
"""Activation statistics are float sums: kernels differ by instruction set, so compare in a band.

The band is relative: GoogLeNet's deep activations are of order 1e-5 (small init, eval-mode
BatchNorm), so an absolute tolerance above ~1e-9 would accept any value there."""


RELEASES = (
    Release(1, "2026-11-22", "The first release: parameters, weight memory, a torchinfo layer table, MACs and "
            "conv activations of GoogLeNet."),
    Release(2, "2026-11-23",
            "The hidden models now include tiny_tied: a weight two layers share (it counts once in 1.1 and 1.2), "
            "a layer called twice (1.3 lists one row per call; 1.4 counts it twice) and a transposed convolution "
            "(1.4 counts input elements x C_out/groups x kernel elements; 1.5 counts nn.Conv2d only). The notebook "
            "states each rule with a hand count and a public check, and each task has a hidden check on "
            "tiny_tied, whose points came from the task's exported answer.",
            marker="Shared parameters count once."),
    Release(3, "2026-11-26", "Task 1.4 asks a written question, Q1 (5 points, marked by hand): where ptflops' extra "
            "MACs come from and why the convention counts elementwise layers as 0; its points came "
            "from 1.4's exported answer.",
            marker="(written, 5 points of task 1.4, marked by hand)"),
)
"""The lab's changelog (``Lab.releases``); the cases on ``tiny_tied`` came with release 2."""


def _model(spec: Mapping[str, Any]):
    # imported here so that ``util.labs`` (imported by the grader and every ``submit``) does not load torch
    from util.models import build_model

    model = build_model(spec["model"])
    for name, param in model.named_parameters():
        if any(name == p or name.startswith(p + ".") for p in spec.get("freeze", ())):
            param.requires_grad_(False)
    for prefix in spec.get("half", ()):
        model.get_submodule(prefix).half()
    return model


def _call_model(fn: Callable, spec: Mapping[str, Any]) -> Any:
    return fn(_model(spec))


def _call_model_shape(fn: Callable, spec: Mapping[str, Any]) -> Any:
    return fn(_model(spec), tuple(spec["input_shape"]))


def _call_model_input(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.models import example_input

    return fn(_model(spec), example_input(spec["input_shape"]))


WRITTEN = {
    "1.4": (Written("1.Q1", "ptflops counts 1,513,907,448 MACs for GoogLeNet, more than your counter. Using "
                     "your reconciliation table, say where the difference comes from, and why the "
                     "course's convention counts BatchNorm, activations and pooling as 0 MACs "
                     "although they take time to run.",
                     5, words=(30, 200), since=3),),
}
"""The lab's questions answered in words, marked by hand against ``rubrics.py`` (release 3): their
points came out of their task's exported answer."""


LAB = Lab(
    name="lab1",
    title="PyTorch model analysis",
    notebook="lab1_pytorch_analysis.ipynb",
    packages=("torch", "torchvision", "torchinfo", "ptflops", "numpy"),
    releases=RELEASES,
    tasks=(
        Task(
            id="1.1", title="Parameters", answer_points=4,
            answer="a dict {'total': int, 'trainable': int, 'non_trainable': int}",
            keys=("total", "trainable", "non_trainable"),
            function="count_parameters", run_case=_call_model,
            hidden_points=6,
            checks=CHECKS["1.1"],
        ),
        Task(
            id="1.2", title="Weight memory", answer_points=4,
            answer="a dict of weight bytes per dtype {'float32': int, 'float16': int, 'bfloat16': int}",
            keys=("float32", "float16", "bfloat16"),
            function="weight_bytes", run_case=_call_model,
            hidden_points=6,
            checks=CHECKS["1.2"],
        ),
        Task(
            id="1.3", title="Layer summary (torchinfo)", answer_points=6,
            answer="a list of rows {'name', 'type', 'output_shape', 'params'}, one per call of a leaf layer",
            function="layer_table", run_case=_call_model_shape,
            hidden_points=9,
            checks=CHECKS["1.3"],
        ),
        Task(
            id="1.4", title="MACs", answer_points=5, written=WRITTEN["1.4"],
            answer="a dict {'ptflops': {...}, 'own': {...}, 'tools': {...}}",
            keys=("ptflops", "own", "tools"),
            function="count_macs", run_case=_call_model_shape,
            hidden_points=30,
            checks=CHECKS["1.4"],
        ),
        Task(
            id="1.5", title="Conv activations (forward hooks)", answer_points=7,
            answer="a dict {'layers': [rows {'name','shape','mean','std','min','max','bytes'}], 'total_bytes': int}",
            keys=("layers", "total_bytes"), tolerance=STATS,
            function="conv_activation_summary", run_case=_call_model_input,
            hidden_points=18,
            checks=CHECKS["1.5"],
        ),
    ),
)
