"""Lab 14, attention and GPU kernels without a GPU: the one declaration of its tasks.

Students count attention's bytes and FLOPs naive and fused (14.1), write FlashAttention's tiled forward and
backward in PyTorch (14.2), then three Triton kernels that Triton's interpreter runs on the CPU while the course
counts every byte they load and store (:mod:`util.labs.lab14.traffic`): a tiled matmul (14.3), a fused row
softmax (14.4) and a FlashAttention forward (14.5); then they choose a matmul's tile and predict its time on a
stated GPU from the counts (14.6); since release 4, they predict what an H100's compiler makes of a tile (14.7):
its shared memory from the tile, the element type and ``num_stages``, and how many blocks and warps an SM holds
from the registers and shared memory the compiler gave it (:mod:`util.labs.lab14.compiled`); since release 5, they
write FlashAttention-2's backward as a Triton kernel (14.8): dQ, dK and dV recomputing P from the forward's
log-sum-exp, its traffic counted as the forward's is; since release 6, they choose the tile kernel's launch
configuration (14.9): the fastest by 14.6's roofline with its throughput scaled by 14.7's occupancy, among the
candidates the compiler built without spilling and that fit an SM (:mod:`util.labs.lab14.choice`).

How the grader decides, for each task (the judges are grader-only; what they do is said here):

* 14.1 and 14.6: the function's values on inputs the notebook never shows, compared exactly with the course's
  (a predicted time within ``rtol=1e-9``).
* 14.7: ``shared_bytes`` called on configurations of the course's tile kernel the notebook never shows (the
  configuration alone), its answer compared exactly with the compiler's own figure (the solution's prediction is
  it); ``occupancy`` called on the registers and shared memory the grader's compile of each configuration gave,
  compiled when it wrote its references (the student's figures are never used), compared exactly.
* 14.9: ``choose_launch`` called on products and candidate lists the notebook never shows, each candidate with
  the registers, spills and shared memory the grader's own compile of it gave (compiled when it wrote its
  references); the chosen configuration compared exactly, every candidate's predicted time (or ``None``, excluded)
  within ``rtol=1e-9``.
* 14.2: ``FlashAttention`` is saved (pickled by value) and run again by the grader, forward and backward, in a
  process of its own that may start no process, write no file and give back nothing it has mapped; the grader
  reads that process's peak resident memory from outside, and it may rise at most 12 MiB above what the process
  held before any of the student's code ran: the largest case's score matrix alone would need 16 MiB. O, dQ, dK
  and dV are compared with float64 autograd on inputs the grader draws from its secret:
  ``max|yours - float64| / max|float64| <= 1e-4`` each.
* 14.3 to 14.5 and 14.8: the kernel's source is saved and read by the grader, which runs it only if it is written in
  Triton's language alone (:mod:`util.labs.lab14.rules`) and Triton's own compiler compiles it for an H100
  (:mod:`util.labs.lab14.gpu`: what only the interpreter could run is not counted), then runs it in a process of
  its own through the course's launcher (:mod:`util.labs.lab14.launch`) in Triton's interpreter with its own
  counter, on inputs it draws: outputs within ``1e-5`` of float64 (relative to the largest element), and the
  bytes loaded from and stored into each tensor equal to the closed form, exactly. A load or store outside the
  tensors fails the case. 14.8's kernel receives the grader's own O and L (float64 rounded to float32) with the
  q, k, v and dO it drew; its dQ, dK, dV are compared with float64 autograd.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping

from util.contract import EXACT, Lab, Release, Task, Tolerance, Written
from util.labs.lab14.public_checks import CHECKS

LAB_NAME = "lab14"
JUDGE = "util.labs.lab14.judge"
COSTS = ("scores_bytes", "naive_bytes", "flash_bytes", "naive_flops", "flash_flops")
"""The keys of ``attention_costs``'s answer (task 14.1)."""
PLAN = ("block", "bytes", "flops", "seconds", "bound")
"""The keys of ``plan_matmul``'s answer (task 14.6)."""
TILED = Tolerance(rtol=1e-4, atol=1e-5)
"""14.2: O and the gradients within 1e-4 of float64 (relative to the largest element; float32 tiles land near
4e-7); the answer's errors within atol=1e-5 of the course's."""
TILE = ("shared", "blocks", "warps", "limited_by")
"""The keys of task 14.7's answer: lists, one entry per configuration of ``compiled.PUBLIC_CONFIGS``."""
RESOURCES = ("registers", "shared", "threads", "blocks")
"""What may limit the blocks an SM holds (task 14.7's ``limited_by``)."""
PREDICTED = Tolerance(rtol=1e-9)
"""14.6 and 14.9: a predicted time is a quotient of exact integers; only the last bits of a float may differ."""
LAUNCH = ("config", "seconds", "times")
"""The keys of ``choose_launch``'s answer (task 14.9)."""
CONFIG = ("block", "dtype", "num_stages", "num_warps")
"""The keys of a launch configuration (tasks 14.7 and 14.9)."""


def _int_dict(found: Any, keys: tuple[str, ...], what: str) -> dict:
    if not isinstance(found, Mapping) or sorted(found) != sorted(keys):
        raise ValueError(f"{what} must return a dict with keys {', '.join(keys)}; it returned "
                         f"{sorted(found) if isinstance(found, Mapping) else type(found).__name__}")
    for key in keys:
        if not isinstance(found[key], int) or isinstance(found[key], bool):
            raise TypeError(f"{what}'s {key} is a {type(found[key]).__name__}; bytes and FLOPs are ints")
    return {key: int(found[key]) for key in keys}


def _costs(fn: Callable, spec: Mapping[str, Any]) -> Any:
    found = fn(spec["n"], spec["d"], spec["heads"], spec["block"], spec["causal"])
    return _int_dict(found, COSTS, "attention_costs")


def _attention(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """``FlashAttention`` run once here on a small input (so an error shows where it happened), then pickled by
    value and saved: the grader runs it again in a process of its own and decides there."""
    import cloudpickle
    import numpy as np
    import torch

    from util.artifacts import save_arrays

    if not (isinstance(fn, type) and issubclass(fn, torch.autograd.Function)):
        raise TypeError("FlashAttention must be a class derived from torch.autograd.Function")
    generator = torch.Generator().manual_seed(14)
    q, k, v, do = (torch.randn(1, 24, 16, generator=generator) for _ in range(4))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    out = fn.apply(q, k, v, bool(spec["causal"]), 8)
    out.backward(do)
    return save_arrays({"function": np.frombuffer(cloudpickle.dumps(fn), dtype=np.uint8)}, spec, LAB_NAME)


def _smoke(kind: str, kernel: Any) -> None:
    import torch

    from util.labs.lab14 import launch

    if kind == "matmul":
        launch.run_matmul(kernel, torch.ones(16, 16), torch.ones(16, 16), (16, 16, 16))
    elif kind == "softmax":
        launch.run_softmax(kernel, torch.ones(2, 8))
    elif kind == "flash":
        launch.run_flash(kernel, *(torch.ones(1, 16, 16) for _ in range(3)), False, (16, 16))
    else:
        launch.run_flash_backward(kernel, *(torch.ones(1, 16, 16) for _ in range(4)), torch.ones(1, 16),
                                  torch.ones(1, 16, 16), False, (16, 16))


def _kernel(kind: str, name: str, parameters: tuple[str, ...]) -> Callable:
    def run_case(fn: Callable, spec: Mapping[str, Any]) -> Any:
        """The kernel run once here on a tiny input (so an error shows where it happened), then its source saved:
        the grader reads it, and runs it in a process of its own on the case's input."""
        from util.artifacts import save_file
        from util.labs.lab14.rules import kernel_problems, kernel_source

        _smoke(kind, fn)
        source = kernel_source(fn)
        problems = kernel_problems(source, name, parameters)
        if problems:
            raise ValueError(f"the grader runs {name} only if it is written in Triton's language alone: "
                             + "; ".join(problems[:3]))
        return save_file(source.encode("utf-8"), spec, LAB_NAME, ".py")

    return run_case


def _plan(fn: Callable, spec: Mapping[str, Any]) -> Any:
    found = fn(spec["m"], spec["n"], spec["k"], dict(spec["machine"]))
    if not isinstance(found, Mapping) or sorted(found) != sorted(PLAN):
        raise ValueError(f"plan_matmul must return a dict with keys {', '.join(PLAN)}")
    block = [int(b) for b in found["block"]]
    if len(block) != 3:
        raise ValueError(f"block is {found['block']!r}; expected [BLOCK_M, BLOCK_N, BLOCK_K]")
    for key in ("bytes", "flops"):
        if not isinstance(found[key], int) or isinstance(found[key], bool):
            raise TypeError(f"{key} is a {type(found[key]).__name__}; bytes and FLOPs are ints")
    return {"block": block, "bytes": int(found["bytes"]), "flops": int(found["flops"]),
            "seconds": float(found["seconds"]), "bound": str(found["bound"])}


def _notebook_function(fn: Callable, name: str) -> Callable:
    """The notebook's function ``name``, found where the task's function ``fn`` was defined."""
    found = getattr(fn, "__globals__", {}).get(name)
    if not callable(found):
        raise NameError(f"the grader calls {name}() in this case, and the notebook defines no function of that name "
                        f"next to {getattr(fn, '__name__', 'the task function')}(); keep the names the notebook gives")
    return found


def _whole(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} is a {type(value).__name__}; it must be an int")
    return int(value)


def tile_shared(shared: Any) -> dict:
    """What a task 14.7 case records of ``shared_bytes``'s answer: ``{"shared": bytes}``, checked for its type."""
    return {"shared": _whole(shared, "shared_bytes's answer")}


def tile_occupancy(occupied: Any) -> dict:
    """What a task 14.7 case records of ``occupancy``'s answer: ``{"blocks", "warps", "limited_by"}``, checked for
    their types; ``limited_by`` sorted."""
    if not isinstance(occupied, Mapping) or sorted(occupied) != ["blocks", "limited_by", "warps"]:
        raise ValueError("occupancy must return a dict with keys blocks, warps, limited_by; it returned "
                         f"{sorted(occupied) if isinstance(occupied, Mapping) else type(occupied).__name__}")
    limited = occupied["limited_by"]
    if not isinstance(limited, (list, tuple)) or not limited or any(r not in RESOURCES for r in limited):
        raise ValueError(f"limited_by is {limited!r}; expected a list of the limits that decide the blocks, "
                         f"each one of {', '.join(RESOURCES)}")
    return {"blocks": _whole(occupied["blocks"], "blocks"), "warps": _whole(occupied["warps"], "warps"),
            "limited_by": sorted(set(limited))}


def _tile(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """A shared-memory case calls ``shared_bytes`` on a configuration; an occupancy case calls ``occupancy``
    (``fn``) on the registers and shared memory the grader's compiler gave a configuration (the case's spec)."""
    from util.labs.lab14.compiled import DTYPES

    if spec["part"] == "shared":
        return tile_shared(_notebook_function(fn, "shared_bytes")(tuple(spec["block"]), DTYPES[spec["dtype"]],
                                                                  int(spec["num_stages"])))
    if spec["registers"] is None:
        raise RuntimeError("the grader has no compiler figures for this configuration (a course error: "
                           "`python -m util.labs.lab14.compiled --write`)")
    return tile_occupancy(fn(int(spec["registers"]), int(spec["shared"]), int(spec["num_warps"])))


def launch_choice(found: Any, count: int) -> dict:
    """What a task 14.9 case (and the answer) records of ``choose_launch``'s answer over ``count`` candidates:
    ``{"config": {...}, "seconds": float, "times": [float or None]}``, checked for its types."""
    if not isinstance(found, Mapping) or sorted(found) != sorted(LAUNCH):
        raise ValueError(f"choose_launch must return a dict with keys {', '.join(LAUNCH)}; it returned "
                         f"{sorted(found) if isinstance(found, Mapping) else type(found).__name__}")
    config = found["config"]
    if not isinstance(config, Mapping) or sorted(config) != sorted(CONFIG):
        raise ValueError(f"config must be the chosen candidate's configuration, a dict with keys {', '.join(CONFIG)}")
    times = found["times"]
    if not isinstance(times, (list, tuple)) or len(times) != count:
        raise ValueError(f"times must be a list of {count} predicted times, one per candidate, in order")

    def seconds(value: Any, what: str) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{what} is a {type(value).__name__}; a predicted time is a float (or None: excluded)")
        return float(value)

    return {"config": {"block": [_whole(b, "a block size") for b in config["block"]], "dtype": str(config["dtype"]),
                       "num_stages": _whole(config["num_stages"], "num_stages"),
                       "num_warps": _whole(config["num_warps"], "num_warps")},
            "seconds": seconds(found["seconds"], "seconds"),
            "times": [seconds(t, f"times[{i}]") for i, t in enumerate(times)]}


def _launch(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """``choose_launch`` called on the case's product, machine and candidates (each with the grader's compiler
    figures; copies, so nothing the function does to them reaches another call)."""
    import copy

    rows = spec["candidates"]
    if any(row["compiled"] is None for row in rows):
        raise RuntimeError("the grader has no compiler figures for a candidate of this case (a course error: "
                           "`python -m util.labs.lab14.choice --write`)")
    found = fn(int(spec["m"]), int(spec["n"]), int(spec["k"]), copy.deepcopy(list(rows)), dict(spec["machine"]))
    return launch_choice(found, len(rows))


def _parameters() -> dict[str, tuple[str, ...]]:
    from util.labs.lab14.launch import (
        FLASH_BACKWARD_PARAMETERS,
        FLASH_PARAMETERS,
        MATMUL_PARAMETERS,
        SOFTMAX_PARAMETERS,
    )

    return {"matmul": MATMUL_PARAMETERS, "softmax": SOFTMAX_PARAMETERS, "flash": FLASH_PARAMETERS,
            "backward": FLASH_BACKWARD_PARAMETERS}


_PARAMETERS = _parameters()

WRITTEN = {
    "14.5": (Written("14.Q1", "Your kernel loaded 319,488, 172,032 and 122,880 bytes at blocks of 32, 64 and 128 "
                     "on one head of 192 x 32, and for GPT-2 small at 1,024 tokens task 14.1 counts 3.6 times "
                     "fewer bytes than naive attention. Why does FlashAttention move fewer bytes than the naive "
                     "form, though it does the same matrix products and reads K and V many times, why do its "
                     "bytes fall as the block grows, and what stops the block from growing further?",
                     3, words=(30, 200), since=2),),
    "14.6": (Written("14.Q2", "Your kernels ran in Triton's interpreter, and nothing in this lab was timed for a "
                     "grade. Why do the interpreter's timings say nothing about a kernel's speed on a GPU, while "
                     "the bytes it counted do, and why could a real H100 run the planned 4096 x 4096 x 4096 "
                     "product faster than your prediction?",
                     2, words=(20, 150), since=2),),
}
WRITTEN["14.9"] = (
    Written("14.Q3", "On a real H100, task 14.6's planned tile for the 4096 x 4096 x 4096 product (128 x 256 x 16 "
            "in float32, 4 warps a program) measured 3,907 us where its roofline predicted 982 us: 4 times slower, "
            "while 128 x 128 x 32 came within 1.3 times of its prediction. Using what the compiler makes of a tile "
            "(registers a thread, spills, occupancy), explain why the large tile fell so far short of its "
            "prediction though it moves the fewest bytes, and what your model of task 14.9 does and does not "
            "capture of it.",
            2, words=(30, 200), since=6),
)
"""The lab's questions answered in words, marked by hand against ``rubrics.py`` (release 2): their
points came out of their task's exported answer."""


TASKS = (
    Task(
        id="14.1", title="Attention's bytes and FLOPs", answer_points=2,
        answer="attention_costs(1024, 64, 12, 64, True): {'scores_bytes', 'naive_bytes', 'flash_bytes', "
               "'naive_flops', 'flash_flops'} (ints)",
        keys=COSTS, function="attention_costs", run_case=_costs, checks=CHECKS["14.1"], hidden_points=4,
    ),
    Task(
        id="14.2", title="Tiled attention forward and backward in PyTorch", answer_points=4,
        answer="{'o_error', 'dq_error', 'dk_error', 'dv_error'}: max|yours - float64| / max|float64| on the "
               "notebook's causal example",
        keys=("o_error", "dq_error", "dk_error", "dv_error"), tolerance=TILED,
        function="FlashAttention", run_case=_attention, grader_check=f"{JUDGE}:check_attention",
        checks=CHECKS["14.2"], hidden_points=4, judged=("function", "memory"),
    ),
    Task(
        id="14.3", title="A Triton tiled matmul", answer_points=2,
        answer="{'loaded_bytes': [at tiles 32, 64, 128 and 128 x 32], 'stored_bytes': int, 'correct': bool} "
               "for the 128 x 128 x 128 product",
        keys=("loaded_bytes", "stored_bytes", "correct"), tolerance=EXACT,
        function="matmul_kernel", run_case=_kernel("matmul", "matmul_kernel", _PARAMETERS["matmul"]),
        grader_check=f"{JUDGE}:check_matmul", checks=CHECKS["14.3"], hidden_points=14,
        judged=("function", "kernel"),
    ),
    Task(
        id="14.4", title="A fused Triton softmax", answer_points=2,
        answer="{'loaded_bytes': int, 'stored_bytes': int, 'correct': bool} for the 64 x 1000 matrix",
        keys=("loaded_bytes", "stored_bytes", "correct"), tolerance=EXACT,
        function="softmax_kernel", run_case=_kernel("softmax", "softmax_kernel", _PARAMETERS["softmax"]),
        grader_check=f"{JUDGE}:check_softmax", checks=CHECKS["14.4"], hidden_points=6,
        judged=("function", "kernel"),
    ),
    Task(
        id="14.5", title="A Triton FlashAttention forward", answer_points=1, written=WRITTEN["14.5"],
        answer="{'loaded_bytes': [at blocks 32, 64, 128], 'stored_bytes': int, 'correct': bool, "
               "'causal_correct': bool} for one head of 192 x 32",
        keys=("loaded_bytes", "stored_bytes", "correct", "causal_correct"), tolerance=EXACT,
        function="flash_kernel", run_case=_kernel("flash", "flash_kernel", _PARAMETERS["flash"]),
        grader_check=f"{JUDGE}:check_flash", checks=CHECKS["14.5"], hidden_points=18,
        judged=("function", "kernel"),
    ),
    Task(
        id="14.6", title="The best tile and predicted GPU time", answer_points=2, written=WRITTEN["14.6"],
        answer="plan_matmul(4096, 4096, 4096, H100): {'block': [BLOCK_M, BLOCK_N, BLOCK_K], 'bytes': int, "
               "'flops': int, 'seconds': float, 'bound': 'memory' or 'compute'}",
        keys=PLAN, tolerance=PREDICTED, function="plan_matmul", run_case=_plan, checks=CHECKS["14.6"],
        hidden_points=4,
    ),
    Task(
        id="14.7", title="What the compiler makes of a tile", answer_points=2, since=4,
        answer="{'shared': [bytes], 'blocks': [int], 'warps': [int], 'limited_by': [[resources]]}, one entry per "
               "configuration of PUBLIC_CONFIGS, in order",
        keys=TILE, tolerance=EXACT, function="occupancy", run_case=_tile, checks=CHECKS["14.7"],
        hidden_points=10,
    ),
    Task(
        id="14.8", title="A Triton FlashAttention backward", answer_points=2, since=5,
        answer="{'loaded_bytes': [at N = 64, 128, 256], 'causal_loaded_bytes': [the same, causal], "
               "'stored_bytes': int, 'correct': bool, 'causal_correct': bool} for one head of N x 32 in blocks of 64",
        keys=("loaded_bytes", "causal_loaded_bytes", "stored_bytes", "correct", "causal_correct"), tolerance=EXACT,
        function="flash_backward_kernel",
        run_case=_kernel("backward", "flash_backward_kernel", _PARAMETERS["backward"]),
        grader_check=f"{JUDGE}:check_backward", checks=CHECKS["14.8"], hidden_points=8,
        judged=("function", "kernel"),
    ),
    Task(
        id="14.9", title="Choosing a launch configuration", answer_points=2, since=6, written=WRITTEN["14.9"],
        answer="choose_launch(4096, 4096, 4096, the public candidates, H100_FP16): {'config': the chosen "
               "configuration, 'seconds': its predicted time, 'times': [each candidate's, or None]}",
        keys=LAUNCH, tolerance=PREDICTED, function="choose_launch", run_case=_launch, checks=CHECKS["14.9"],
        hidden_points=6,
    ),
)
"""The tasks of the current release (6), in notebook order."""

BEFORE_4 = {"14.1": (4, 8), "14.2": (4, 16), "14.6": (2, 12)}
"""Task id -> (answer points, hidden points) as releases 1 to 3 declared them: release 4's task 14.7 took its
points from these tasks, each hidden case keeping its share (``Lab.with_cases``)."""

BEFORE_5 = {"14.2": (4, 12), "14.3": (4, 14), "14.4": (3, 9)}
"""Task id -> (answer points, hidden points) as releases 1 to 4 declared them: release 5's task 14.8 took its
points from these tasks, each hidden case keeping its share."""

BEFORE_6 = {"14.1": (4, 4), "14.2": (4, 8), "14.6": (2, 8)}
"""Task id -> (answer points, hidden points) as releases 1 to 5 declared them: release 6's task 14.9 took its
points from these tasks (2, 4 and 4), each hidden case keeping its share."""

LAB = Lab(
    name=LAB_NAME,
    title="Attention and GPU kernels without a GPU",
    notebook="lab14_attention_kernels.ipynb",
    judge_timeout=300,  # the judges' student processes serve every case of a notebook: imports, then ~1 s a case
    packages=("torch", "triton", "numpy", "cloudpickle"),
    releases=(
        Release(1, "2026-11-26", "The first release: attention's bytes and FLOPs, FlashAttention's tiled forward and "
                "backward in PyTorch, Triton kernels run in the interpreter with their traffic counted (a tiled "
                "matmul, a fused softmax, a FlashAttention forward), and the best tile for a stated GPU."),
        Release(2, "2026-11-26", "Tasks 14.5 and 14.6 ask written questions, Q1 (3 points) and Q2 (2 points), marked by "
                "hand: why FlashAttention moves fewer bytes than naive attention and less as its block grows, and "
                "why the interpreter's timings say nothing of a GPU's speed; their points came from the two "
                "tasks' exported answers.",
                marker="(written, 3 points of task 14.5, marked by hand)"),
        Release(3, "2026-12-02", "Task 14.4's hidden case of large values now draws values around 1,000, so that a "
                "softmax without the row's maximum overflows even in float64 (a notebook of an earlier release is "
                "graded without it: its 3 points go to the task's answer). The grader also compiles every Triton kernel with "
                "Triton's own compiler for an H100 before it counts it: a Python list that grows, or a value set on "
                "a pointer argument, runs in the interpreter but not on a GPU, and is not counted. And 14.2's "
                "memory is now the peak resident memory the grader measures, at most 12 MiB above what the "
                "process held before your code ran.",
                marker="overflow an exponential of the raw values even in float64"),
        Release(4, "2026-12-02", "A new task: 14.7, what an H100's compiler makes of a tile. The course compiled its "
                "tile kernel with Triton for an H100 (registers and spills from ptxas, shared memory from Triton); you "
                "predict its shared memory from the tile, the element type and num_stages, and the blocks and warps "
                "an SM holds from the registers and shared memory it needs, under H100's stated limits. Its 12 points "
                "come from tasks 14.1 (4), 14.2 (4) and 14.6 (4); a notebook of an earlier release is graded as it "
                "was.",
                marker="keeps num_stages copies of the A tile and the B tile",
                previous=tuple(replace(task, answer_points=BEFORE_4[task.id][0], hidden_points=BEFORE_4[task.id][1])
                               for task in TASKS if task.id in BEFORE_4)),
        Release(5, "2026-12-02", "A new task: 14.8, FlashAttention-2's backward as one Triton kernel: dQ, dK and dV "
                "recomputing P from the forward's log-sum-exp, each program summing its own block's gradient (no "
                "atomics), graded against float64 autograd, its traffic counted against its closed form and "
                "compiled for an H100. Its 10 points come from tasks 14.2 (4: the same derivation, in PyTorch), "
                "14.3 (2) and 14.4 (4); a notebook of an earlier release is graded as it was.",
                marker="the key-block programs come first",
                previous=tuple(replace(task, answer_points=BEFORE_5[task.id][0], hidden_points=BEFORE_5[task.id][1])
                               for task in TASKS if task.id in BEFORE_5)),
        Release(6, "2026-12-02", "A new task: 14.9, choosing a launch configuration: the tile kernel's configuration "
                "(tile, warps, stages) that task 14.6's roofline, its throughput scaled by task 14.7's occupancy, "
                "predicts fastest among candidates the compiler built without spilling and that fit an SM, on "
                "compiler figures the course compiled, with a written question (Q3) on why a large tile ran 4 times "
                "slower than predicted. Its 10 points come from tasks 14.1 (2), 14.2 (4) and 14.6 (4); a notebook "
                "of an earlier release is graded as it was.",
                marker="the throughput an SM reaches scales with the warps it holds",
                previous=tuple(replace(task, answer_points=BEFORE_6[task.id][0], hidden_points=BEFORE_6[task.id][1])
                               for task in TASKS if task.id in BEFORE_6)),
    ),
    tasks=TASKS,
)
