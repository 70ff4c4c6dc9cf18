"""Lab 8, a graph executor (dlsys 2018 assignment 2 on ONNX): the one declaration of its tasks.

Students infer every tensor's shape (8.1), plan memory so tensors share buffers under a stated
policy (8.2), run the graph inside a plan with numpy (8.3), write a C++ matmul kernel that beats
the course's naive one (8.4) and put the two together (8.5). A submission is a folder: the notebook
and its ``kernel/`` (the C++ source), built with g++ inside the sandbox.

Verdicts that are known to be true of a correct answer are decided by the grader on what a case
saved (``judge.py``): the plan's validity, the run inside the plan, outputs against onnxruntime,
the kernel's correctness and speed (timed by the grader in processes of its own, ``judge_timing.py``).
Tasks 8.3 and 8.5 receive the course's shapes and plan, so a slip in 8.1 or 8.2 is charged once.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from util.contract import Lab, Leaderboard, Release, Task, Tolerance, Written
from util.labs.lab8.public_checks import CHECKS

LAB_NAME = "lab8"
JUDGE = "util.labs.lab8.judge"
KERNEL_SOURCE = "kernel/mm_fast.cpp"
"""The student's kernel, relative to the notebook's folder (the grader's scratch folder)."""
OUTPUTS = Tolerance(rtol=1e-4, atol=1e-5)
"""An executor's outputs against onnxruntime's: float32 summation orders differ by about 1e-7."""
KERNEL = Tolerance(rtol=1e-4, atol=1e-4)
"""A kernel's ``C`` against float64: sums of up to 2,000 products of numbers in [-1, 1]."""

def _graph(spec: Mapping[str, Any]):
    from util.labs.lab8.graphs import graph

    return graph(spec["graph"])


def _infer(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's shapes for every graph input and node output (``onnx.shape_inference`` refused)."""
    import onnx.shape_inference

    def refused(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("infer_shapes must work the shapes out itself; onnx.shape_inference is not "
                           "available to it")

    model, original = _graph(spec), onnx.shape_inference.infer_shapes
    onnx.shape_inference.infer_shapes = refused
    try:
        return fn(model, {name: list(shape) for name, shape in spec["inputs"].items()})
    finally:
        onnx.shape_inference.infer_shapes = original


def _plan(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's plan on the course's shapes: summarised for the reference, saved for the judge."""
    import json

    from util.answers import to_jsonable
    from util.artifacts import save_file
    from util.labs.lab8.plans import course_shapes, summarize_plan

    model = _graph(spec)
    shapes = course_shapes(model, spec["inputs"])
    plan = to_jsonable(fn(model, shapes), "plan")
    saved = save_file(json.dumps(plan).encode(), spec, LAB_NAME, ".json")
    return {**summarize_plan(model, shapes, plan), **saved}


def _execute(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's executor inside the course's plan; what it left is saved for the judge."""
    import cloudpickle
    import numpy as np

    from util.artifacts import save_arrays
    from util.labs.lab8.graphs import random_feeds
    from util.labs.lab8.harness import run_arrays, run_in_plan

    model = _graph(spec)
    run = run_in_plan(fn, model, random_feeds(model, spec["inputs"], spec["seed"]))
    pickled = np.frombuffer(cloudpickle.dumps(fn), dtype=np.uint8)  # the grader runs it again, measuring memory
    return save_arrays({**run_arrays(run), "execute": pickled}, spec, LAB_NAME)


def _kernel(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The library the student's ``build_fast_kernel()`` built, saved for the grader to test and time."""
    from pathlib import Path

    import numpy as np

    from util.artifacts import save_arrays

    path = Path(fn())
    if not path.is_file():
        raise FileNotFoundError(f"build_fast_kernel() returned {str(path)!r}, which is not a file")
    return save_arrays({"library": np.frombuffer(path.read_bytes(), dtype=np.uint8)}, spec, LAB_NAME)


def _end_to_end(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's ``run_with_kernel`` on the graph with their kernel; outputs and library saved."""
    import numpy as np

    from util.artifacts import save_arrays
    from util.labs.lab8.graphs import random_feeds
    from util.labs.lab8.kernel import build_library

    model = _graph(spec)
    library = build_library(KERNEL_SOURCE)
    outputs = fn(model, random_feeds(model, spec["inputs"], spec["seed"]), str(library))
    arrays = {f"output/{name}": np.asarray(value, dtype=np.float64) for name, value in dict(outputs).items()}
    arrays["library"] = np.frombuffer(library.read_bytes(), dtype=np.uint8)
    return save_arrays(arrays, spec, LAB_NAME)


def prepare() -> None:
    """Fill the ONNX export cache with ResNet-18 at 1x3x64x64 (hidden cases of 8.1 and 8.2) and the
    ``native`` cache with the course's naive kernel, the baseline 8.4 and 8.5 are timed against (built
    here, by the grader, before any student code runs; never where a student's process can write)."""
    from util.labs.lab8.graphs import resnet18
    from util.labs.lab8.kernel import prepare_naive

    resnet18()
    prepare_naive()



WRITTEN = {
    "8.2": (Written("8.Q1", "Your plan and the course's pack the residual MLP differently. Why can best fit "
                     "waste memory that another assignment would not, and why must a node never write "
                     "its output into a buffer it still reads?",
                     2, words=(20, 150), since=2),),
    "8.4": (Written("8.Q2", "Where does your kernel's speed-up over the naive one come from? Name what your "
                     "loop order (and blocking, if you used it) does for the cache and for "
                     "vectorisation, and why threads would not change the grader's measurement.",
                     3, words=(30, 200), since=2),),
}
"""The lab's questions answered in words, marked by hand against ``rubrics.py`` (release 2): their
points came out of their task's exported answer."""


LAB = Lab(
    name=LAB_NAME,
    title="Graph executor",
    notebook="lab8_graph_executor/lab8_graph_executor.ipynb",
    packages=("torch", "torchvision", "onnx", "onnxscript", "onnxruntime", "numpy"),
    releases=(
        Release(1, "2026-11-23", "The first release: shape inference, a memory plan, an executor inside the plan, a C++ "
                "matmul kernel and end-to-end runs, below the framework."),
        Release(2, "2026-11-26", "Tasks 8.2 and 8.4 ask written questions, Q1 (2 points) and Q2 (3 points), marked by "
                "hand: what best fit wastes and why a node never writes over its input, and where the "
                "kernel's speed-up comes from; their points came from the two tasks' exported answers.",
                marker="(written, 2 points of task 8.2, marked by hand)"),
    ),
    support=("kernel",),
    requires=("g++",),
    prepare="util.labs.lab8.tasks:prepare",
    leaderboard=Leaderboard("Speed-up of mm_fast over the naive kernel, as the grader timed it", task="8.4",
                            fact="speedup", unit="x", band=1.15),  # the timer's noise: best-of-5 pairs
    notebook_timeout=600,
    shared_sources=("solutions/lab8_graph_executor/kernel/mm_fast.cpp",),
    tasks=(
        Task(
            id="8.1", title="Shape inference", answer_points=4,
            answer="infer_shapes(mlp, {'x': [1000, 784]}): {tensor: shape} for the graph input and every node "
                   "output",
            keys=("x", "h1", "a1", "h2", "a2", "logits", "y"),
            function="infer_shapes", run_case=_infer, checks=CHECKS["8.1"],
            hidden_points=16,
        ),
        Task(
            id="8.2", title="Memory plan", answer_points=3, written=WRITTEN["8.2"],
            answer="summarize_plan(mlp, shapes, plan) plus the plan's assign: {'naive_bytes', 'planned_bytes', "
                   "'buffers', 'buffer_bytes', 'assign'}",
            keys=("naive_bytes", "planned_bytes", "buffers", "buffer_bytes", "assign"),
            function="plan_memory", run_case=_plan, grader_check=f"{JUDGE}:check_plan", checks=CHECKS["8.2"],
            hidden_points=20,
        ),
        Task(
            id="8.3", title="Executor inside the plan", answer_points=5,
            answer="execution_report(run) of the MLP at batch 1000: {'y_first_row', 'tensors_in_place', "
                   "'peak_within_bound'}",
            keys=("y_first_row", "tensors_in_place", "peak_within_bound"), tolerance=OUTPUTS,
            function="execute", run_case=_execute, grader_check=f"{JUDGE}:check_execution", judged=("function", "memory"), checks=CHECKS["8.3"],
            hidden_points=15,
        ),
        Task(
            id="8.4", title="Fast matmul kernel", answer_points=2, written=WRITTEN["8.4"],
            answer="kernel_report(mm_fast): {'hand_example': 2x2 list, 'odd_sizes_correct': {size: bool}}",
            keys=("hand_example", "odd_sizes_correct"), tolerance=KERNEL,
            function="build_fast_kernel", run_case=_kernel, grader_check=f"{JUDGE}:check_kernel", judged=("function",),
            checks=CHECKS["8.4"],
            hidden_points=20,
        ),
        Task(
            id="8.5", title="End to end", answer_points=4,
            answer="end_to_end_report(...) of the MLP at batch 1000: {'gemms_transposed', 'transB_left', "
                   "'y_first_row'}",
            keys=("gemms_transposed", "transB_left", "y_first_row"), tolerance=OUTPUTS,
            function="run_with_kernel", run_case=_end_to_end, grader_check=f"{JUDGE}:check_end_to_end", judged=("function",),
            checks=CHECKS["8.5"],
            hidden_points=6,
        ),
    ),
)
