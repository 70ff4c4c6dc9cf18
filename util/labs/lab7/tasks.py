"""Lab 7, mixed precision with op lists: the one declaration of its tasks.

MXNet's AMP converts a float32 model to mixed precision from op lists; students write the same
conversion as an ONNX graph pass (7.1-7.3), an emulator that shows the float16 numerics onnxruntime's
CPU provider hides (7.4), and a search for the smallest set of nodes to keep in float32 (7.5).

What the grader judges itself (``judge.py``), never trusting the kernel for a known constant:

* 7.2 / 7.3: every converted model is saved; the grader checks it (full checker, strict shape
  inference, onnxruntime loads it, the original interface in float32, outputs within 1e-2 of the
  float32 model under the course emulator). The counts the case returns must equal the references.
* 7.4: the outputs of the student's emulator are saved (.npz) and compared in the grader with the
  course emulator's on the same model: the same inf/NaN positions, finite values within 1e-4 of the
  largest output.
* 7.5: the returned fp32 list is saved; the grader checks that it is sufficient (the course emulator
  with those nodes in float32 is within rtol/atol of float32) and 1-minimal (dropping any one breaks it).
"""
from __future__ import annotations

import json
from typing import Any, Callable, Mapping

from util.contract import Lab, Release, Task, Written
from util.labs.lab7.public_checks import CHECKS as PUBLIC

LAB_NAME = "lab7"
JUDGE = "util.labs.lab7.judge"

def _model_and_lists(spec: Mapping[str, Any]):
    from util.labs.lab7.graphs import build
    from util.labs.lab7.lists import lists_for

    model = build(spec)
    return model, lists_for(spec, model)


def _classify(fn: Callable, spec: Mapping[str, Any]) -> Any:
    model, lists = _model_and_lists(spec)
    return fn(model, lists, excluded_names=tuple(spec.get("excluded", ())))


def _convert(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.artifacts import save_model
    from util.labs.lab7.summary import summarize

    model, lists = _model_and_lists(spec)
    converted = fn(model, lists, excluded_names=tuple(spec.get("excluded", ())))
    save_model(converted, spec, LAB_NAME, fn.__name__)
    return summarize(converted)


def _emulate(fn: Callable, spec: Mapping[str, Any]) -> Any:
    import numpy as np

    from util.artifacts import save_arrays
    from util.labs.lab7.graphs import all_fp16, build, feeds_for
    from util.labs.lab7.summary import row_counts

    model = build(spec)
    if spec.get("all_fp16"):
        model = all_fp16(model)
    outputs = fn(model, feeds_for(spec))
    if not isinstance(outputs, Mapping):
        raise TypeError(f"emulate_fp16() must return a dict (output name -> array), not a {type(outputs).__name__}")
    arrays = {str(name): np.asarray(value) for name, value in outputs.items()}
    save_arrays(arrays, spec, LAB_NAME)
    return {name: row_counts(value) for name, value in sorted(arrays.items())}


def _search(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.artifacts import save_file
    from util.labs.lab7.graphs import build, feeds_for
    from util.labs.lab7.lists import all_fp16_lists

    model = build(spec)
    names = fn(model, feeds_for(spec), all_fp16_lists(model), rtol=spec["rtol"], atol=spec["atol"])
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"auto_fp32() must return a list of node names, not {type(names).__name__}")
    save_file(json.dumps(list(names)).encode(), spec, LAB_NAME, ".json")
    return {"fp32_nodes": len(names)}


def prepare() -> None:
    """Fill the ONNX export cache with both ResNet-18 exports (the notebook's and the hidden cases')."""
    from util.labs.lab7.graphs import resnet18

    resnet18()
    resnet18(folded=True)



def _convert_cast_params(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """Release 1's task 7.3: the student's ``convert`` with ``cast_params=True`` (release 2 made it
    ``convert_fp16_params``, a function of its own)."""
    from util.artifacts import save_model
    from util.labs.lab7.summary import summarize

    model, lists = _model_and_lists(spec)
    converted = fn(model, lists, excluded_names=tuple(spec.get("excluded", ())), cast_params=True)
    save_model(converted, spec, LAB_NAME, fn.__name__)
    return summarize(converted)


RELEASES = (
    Release(1, "2026-11-23", "The first release: node dtypes from op lists, Casts, float16 parameters, a float16 "
            "emulator and a 1-minimal fp32 list, on ResNet-18 and hand-built graphs."),
    Release(2, "2026-11-23",
            "Task 7.3 is a function of its own, convert_fp16_params(model, lists, excluded_names=()): it converts as "
            "7.2's convert does, then stores in float16 every initializer only float16 nodes read (release 1 asked "
            "for convert(..., cast_params=True) instead). The 7.4 answer cell calls emulate_fp16 itself.",
            marker="convert_fp16_params",
            previous=(Task(
                id="7.3", title="Cast parameters offline", answer_points=4,
                answer="a dict {'casts', 'fp16_initializers', 'param_bytes_before', 'param_bytes_after'} for "
                       "ResNet-18",
                keys=("casts", "fp16_initializers", "param_bytes_before", "param_bytes_after"),
                function="convert", run_case=_convert_cast_params, grader_check=f"{JUDGE}:check_converted",
                hidden_points=6),)),
    Release(3, "2026-11-26", "Tasks 7.4 and 7.5 ask written questions, Q1 (3 points) and Q2 (2 points), marked by "
            "hand: why real float16 zeroes frag's rows while onnxruntime on a CPU does not, and why "
            "no single node fixes it; their points came from the two tasks' exported answers.",
            marker="(written, 3 points of task 7.4, marked by hand)"),
)
"""The lab's changelog (``Lab.releases``); release 1's task 7.3 called ``convert(..., cast_params=True)``."""


WRITTEN = {
    "7.4": (Written("7.Q1", "Your plot shows frag's rows in float32, in onnxruntime's float16 and in your "
                     "emulation. Why do the rows whose sum of squares passes 65,504 come out as zeros "
                     "in real float16, and why does onnxruntime on a CPU not show it?",
                     3, words=(30, 200), since=3),),
    "7.5": (Written("7.Q2", "In frag no single node fixes the overflow. Why not, and why is the list "
                     "`auto_fp32` returns an answer for this network only, not a rule for the op "
                     "lists?",
                     2, words=(20, 150), since=3),),
}
"""The lab's questions answered in words, marked by hand against ``rubrics.py`` (release 3): their
points came out of their task's exported answer."""


LAB = Lab(
    name=LAB_NAME,
    title="Mixed precision with op lists",
    notebook="lab7_mixed_precision.ipynb",
    packages=("torch", "torchvision", "onnx", "onnxscript", "onnxruntime", "numpy"),
    prepare="util.labs.lab7.tasks:prepare",
    releases=RELEASES,
    tasks=(
        Task(
            id="7.1", title="Classify nodes", answer_points=5,
            answer="node_dtypes(resnet18, DEFAULT_LISTS): a dict node name -> 'float16' or 'float32'",
            function="node_dtypes", run_case=_classify, checks=PUBLIC["7.1"],
            hidden_points=15,
        ),
        Task(
            id="7.2", title="Insert casts", answer_points=5,
            answer="summarize(convert(resnet18, DEFAULT_LISTS)): the dict summarize returns",
            keys=("nodes", "casts", "casts_to_fp16", "fp16_nodes", "param_bytes", "output_dtypes"),
            function="convert", run_case=_convert, grader_check=f"{JUDGE}:check_converted", checks=PUBLIC["7.2"],
            hidden_points=20,
        ),
        Task(
            id="7.3", title="Cast parameters offline", answer_points=4,
            answer="a dict {'casts', 'fp16_initializers', 'param_bytes_before', 'param_bytes_after'} for ResNet-18",
            keys=("casts", "fp16_initializers", "param_bytes_before", "param_bytes_after"),
            function="convert_fp16_params", run_case=_convert, grader_check=f"{JUDGE}:check_converted",
            checks=PUBLIC["7.3"], hidden_points=6,
        ),
        Task(
            id="7.4", title="Emulate fp16 on a CPU", answer_points=2, written=WRITTEN["7.4"],
            answer="a dict {'zero_rows', 'nonfinite_rows', 'onnxruntime_zero_rows'} for frag in float16",
            keys=("zero_rows", "nonfinite_rows", "onnxruntime_zero_rows"),
            function="emulate_fp16", run_case=_emulate, grader_check=f"{JUDGE}:check_emulated", checks=PUBLIC["7.4"],
            hidden_points=15,
        ),
        Task(
            id="7.5", title="Minimal fp32 list", answer_points=3, written=WRITTEN["7.5"],
            answer="auto_fp32(frag(), frag_feeds(), all_fp16_lists(frag()), rtol=1e-2, atol=1e-3): node names in graph order",
            function="auto_fp32", run_case=_search, grader_check=f"{JUDGE}:check_fp32_list", checks=PUBLIC["7.5"],
            hidden_points=20,
        ),
    ),
)
