"""Lab 13, parallelism on one machine: the one declaration of its tasks.

Real ranks (processes forked from the notebook's kernel, joined in a ``torch.distributed`` gloo group,
:mod:`util.labs.lab13.ranks`) run collectives built from ``send``/``recv`` (13.1), data parallelism with
gradient buckets (13.3), a sharded Adam step (13.5), a tensor-parallel MLP (13.6) and, since release 3, data
parallelism whose buckets' all-reduces overlap the backward pass (13.8); the alpha-beta cost of an all-reduce
(13.2), ZeRO's memory per rank in float32 (13.4) and in mixed precision (13.9, release 3) and pipeline schedules
(13.7) are computed.

What a correct answer must satisfy is decided by the grader: the parallel functions are run again on the
grader's own ranks on inputs drawn from the grading secret, each rank holding only its own inputs and
reading nothing of another's, behind walls that leave the process group as the only way between ranks, and
the bytes between every pair of ranks are counted on the wire by a process no student code runs in
(``judge.py``); the schedules are replayed by the grader. 13.8's overlap is observed from outside the student's
code: in a run of its own, the grader's hold (:mod:`util.labs.lab13.hold`) keeps the backward pass of the first
layer waiting until the bytes of the buckets that closed before it have arrived on the rank's connections
(the kernel's counts), so a step that all-reduces only after ``backward()`` never finishes.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Mapping

from util.contract import Lab, Release, Task, Tolerance, Written
from util.labs.lab13.public_checks import CHECKS

LAB_NAME = "lab13"
JUDGE = "util.labs.lab13.judge"
RANKS = ("function", "ranks")
"""What the judge of 13.1, 13.3, 13.5, 13.6 and 13.8 handles (``Task.judged``): the student's function, unpickled and
called again on ranks of the grader's."""
FORMULA = Tolerance(rtol=1e-9)
"""Alpha-beta times and bubble fractions: the same formula computed in another order differs in its last bits."""


def _pickled(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's function pickled by value (with the helpers it calls) and saved: the grader runs it again
    on ranks of its own, with inputs of its own, and decides there (``judge.py``)."""
    import cloudpickle
    import numpy as np

    from util.artifacts import save_arrays

    return save_arrays({"function": np.frombuffer(cloudpickle.dumps(fn), dtype=np.uint8)}, spec, LAB_NAME)


def _costs(fn: Callable, spec: Mapping[str, Any]) -> Any:
    return fn(spec["nbytes"], spec["world"], spec["alpha"], spec["beta"])


def _zero(fn: Callable, spec: Mapping[str, Any]) -> Any:
    return fn(spec["numel"], spec["world"], spec["stage"])


def _schedule(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's orders, saved: the grader replays them itself."""
    import json

    from util.answers import to_jsonable
    from util.artifacts import save_file

    orders = to_jsonable(fn(spec["kind"], spec["stages"], spec["microbatches"], spec["limit"]), "schedule")
    return save_file(json.dumps({"orders": orders}).encode(), spec, LAB_NAME, ".json")


WRITTEN = {
    "13.1": (Written("13.Q1", "Your ring sent 4,000, about 5,333 and 6,000 bytes per rank for 1,000 floats (4,000 "
                     "bytes) on 2, 3 and 4 ranks. Why does each rank send 2 (p - 1) / p of the tensor's bytes, "
                     "why does that stay below twice the tensor however many ranks there are, and what would "
                     "the rank that sums everything send and receive if every rank sent its tensor to it?",
                     3, words=(30, 200), since=2),),
    "13.4": (Written("13.Q2", "GPT-2 XL's training state fits 12 GiB per rank only from ZeRO stage 2 on. What "
                     "does each stage shard, and what does a rank pay in communication for it, compared with "
                     "plain data parallelism?",
                     2, words=(20, 150), since=2),),
}
"""The lab's questions answered in words, marked by hand against ``rubrics.py`` (release 2): their
points came out of their task's exported answer."""


TASKS = (
    Task(
        id="13.1", title="Ring collectives from send/recv", answer_points=1, written=WRITTEN["13.1"],
        answer="{'world': [2, 3, 4], 'bytes_sent': [per rank, for each world size], 'sends': [the same for the "
               "number of sends], 'equal_to_all_reduce': bool} of your ring_all_reduce on 1,000 floats",
        keys=("world", "bytes_sent", "sends", "equal_to_all_reduce"),
        function="ring_all_reduce", run_case=_pickled, grader_check=f"{JUDGE}:check_ring", judged=RANKS, checks=CHECKS["13.1"],
        hidden_points=15,
    ),
    Task(
        id="13.2", title="The alpha-beta cost of an all-reduce", answer_points=1,
        answer="allreduce_costs(4 MiB, 8 ranks, alpha, beta): {'ring', 'tree', 'naive': seconds, 'fastest': name, "
               "'crossover_bytes': float}",
        keys=("ring", "tree", "naive", "fastest", "crossover_bytes"), tolerance=FORMULA,
        function="allreduce_costs", run_case=_costs, checks=CHECKS["13.2"],
        hidden_points=7,
    ),
    Task(
        id="13.3", title="Data parallel with buckets", answer_points=1,
        answer="{'buckets': [[...], ...], 'allreduce_calls': int, 'allreduce_bytes': int, 'equal_to_one_process': "
               "bool} of ddp_gradients on 4 ranks (the notebook's MLP, cap 4,096 bytes)",
        keys=("buckets", "allreduce_calls", "allreduce_bytes", "equal_to_one_process"),
        function="ddp_gradients", run_case=_pickled, grader_check=f"{JUDGE}:check_ddp", judged=RANKS, checks=CHECKS["13.3"],
        hidden_points=15,
    ),
    Task(
        id="13.4", title="Sharded state: ZeRO's memory per rank", answer_points=1, written=WRITTEN["13.4"],
        answer="{'rank0_total': [rank 0's bytes at stages 0, 1, 2, 3], 'least_stage': int} for the notebook's "
               "1,557,611,200-parameter model on 8 ranks of 12 GiB",
        keys=("rank0_total", "least_stage"),
        function="zero_memory", run_case=_zero, checks=CHECKS["13.4"],
        hidden_points=7,
    ),
    Task(
        id="13.5", title="A sharded Adam step", answer_points=1,
        answer="{'equal_to_adam': bool, 'state_elements': [per rank], 'bytes_sent': [per rank]} of "
               "sharded_adam_step on 3 ranks (1,000 parameters)",
        keys=("equal_to_adam", "state_elements", "bytes_sent"),
        function="sharded_adam_step", run_case=_pickled, grader_check=f"{JUDGE}:check_adam", judged=RANKS, checks=CHECKS["13.5"],
        hidden_points=7,
    ),
    Task(
        id="13.6", title="A tensor-parallel MLP", answer_points=1,
        answer="{'equal_to_unsplit': bool, 'allreduce_calls': int, 'allreduce_bytes': int, 'weight_bytes': int} "
               "per rank of tp_mlp on 4 ranks (d 64, h 256, batch 32)",
        keys=("equal_to_unsplit", "allreduce_calls", "allreduce_bytes", "weight_bytes"),
        function="tp_mlp", run_case=_pickled, grader_check=f"{JUDGE}:check_tp", judged=RANKS, checks=CHECKS["13.6"],
        hidden_points=10,
    ),
    Task(
        id="13.7", title="Pipeline schedules", answer_points=1,
        answer="{'gpipe': {'makespan', 'bubble', 'peak'}, '1f1b': {...}} of your schedules replayed on 4 stages, "
               "8 micro-batches, at most 4 held per stage",
        keys=("gpipe", "1f1b"), tolerance=FORMULA,
        function="pipeline_schedule", run_case=_schedule, grader_check=f"{JUDGE}:check_schedule",
        checks=CHECKS["13.7"],
        hidden_points=10,
    ),
    Task(
        id="13.8", title="Overlapped data parallelism", answer_points=2, since=3,
        answer="{'buckets': [[...], ...], 'allreduce_bytes': [per bucket, in the order started], 'finished_when_held': "
               "bool, 'equal_to_one_process': bool} of overlapped_ddp on 4 ranks (the notebook's MLP, cap 4,096 bytes)",
        keys=("buckets", "allreduce_bytes", "finished_when_held", "equal_to_one_process"),
        function="overlapped_ddp", run_case=_pickled, grader_check=f"{JUDGE}:check_overlap", judged=RANKS,
        checks=CHECKS["13.8"], hidden_points=10,
    ),
    Task(
        id="13.9", title="ZeRO in mixed precision", answer_points=1, since=3,
        answer="{'rank0_total': [rank 0's bytes at stages 0, 1, 2, 3], 'least_stage': int} for the notebook's "
               "1,557,611,200-parameter model on 8 ranks of 12 GiB, in mixed precision (2 + 2 + 12 bytes)",
        keys=("rank0_total", "least_stage"),
        function="zero_mixed_memory", run_case=_zero, checks=CHECKS["13.9"],
        hidden_points=4,
    ),
)
"""The tasks of the current release (3), in notebook order."""

BEFORE_3 = {"13.1": 2, "13.2": 3, "13.3": 5, "13.5": 3, "13.6": 5, "13.7": 5}
"""Task id -> its answer points in releases 1 and 2: release 3's tasks 13.8 and 13.9 took their 17 points from
these tasks' exported answers (what the notebook reports of itself), every hidden case keeping its points."""


LAB = Lab(
    name=LAB_NAME,
    title="Parallelism on one machine",
    notebook="lab13_parallelism.ipynb",
    judge_timeout=180,  # the first case starts the student process (imports torch) before its run
    packages=("torch", "numpy", "cloudpickle"),
    releases=(
        Release(1, "2026-11-26", "The first release: ring collectives from send/recv on real ranks, the alpha-beta cost "
                "of an all-reduce, data parallelism with buckets, ZeRO's memory per rank, a sharded Adam step, a "
                "tensor-parallel MLP and pipeline schedules."),
        Release(2, "2026-11-26", "Tasks 13.1 and 13.4 ask written questions, Q1 (3 points) and Q2 (2 points), marked by "
                "hand: why a ring all-reduce sends 2 (p - 1) / p of the tensor per rank, and what ZeRO's stages "
                "shard and what they cost in communication; their points came from the two tasks' exported "
                "answers.",
                marker="(written, 3 points of task 13.1, marked by hand)"),
        Release(3, "2026-12-02", "Two new tasks. 13.8, overlapped data parallelism: each bucket's all-reduce starts "
                "from a post-accumulate-gradient hook as soon as the bucket fills, while the backward pass goes on, "
                "and is waited for before the step; the grader holds the backward pass of the first layer until the "
                "first buckets' bytes have arrived on the wire, so only an overlapping step finishes. 13.9, ZeRO in "
                "mixed precision: the paper's 2 + 2 + 12 bytes per parameter, by stage. Their 17 points come from "
                "the exported answers of 13.1 (1), 13.2 (2), 13.3 (4), 13.5 (2), 13.6 (4) and 13.7 (4); every hidden "
                "case keeps its points, and a notebook of an earlier release is graded as it was. The handout also "
                "states what was left unstated: 13.3's bucket example, uneven shards and gradients already "
                "present, 13.5's tolerance, names imported from torch.distributed before the ranks start, the edges "
                "of 13.1, 13.2, 13.6 and 13.7, and that the grader pickles your functions by value.",
                marker="the grader holds the backward pass of the first layer",
                previous=tuple(replace(task, answer_points=BEFORE_3[task.id]) for task in TASKS
                               if task.id in BEFORE_3)),
    ),
    tasks=TASKS,
)
