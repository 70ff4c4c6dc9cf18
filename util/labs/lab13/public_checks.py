"""Lab 13's public checks (``check("13.3")``): hand-countable cases the notebook works out and stated rules,
never a hidden case's input. ``CHECKS[task id]`` is attached to each task in ``tasks.py``.

The checks that call a parallel function run it on ranks forked from the notebook
(:func:`util.labs.lab13.ranks.run_ranks`), as the notebook does.
"""
from __future__ import annotations

from typing import Any

from util.checks import equal, first, has_keys, is_int
from util.contract import Check

N = 1_000
"""Floats per rank in the notebook's all-reduces (13.1) and parameters in its Adam step (13.5)."""
GPT2_XL = 1_557_611_200
"""The parameters of the model 13.4 plans for."""
GIB = 1 << 30


def chunk_sizes(n: int, world: int) -> list[int]:
    """The sizes of ``torch.tensor_split`` of ``n`` elements into ``world`` chunks (the first ``n % world`` one
    longer)."""
    return [n // world + (1 if c < n % world else 0) for c in range(world)]


def ring_bytes(n: int, world: int) -> list[int]:
    """Per rank, the float32 bytes the stated ring all-reduce sends: every chunk but its own in the reduce-scatter,
    every chunk but the next rank's in the all-gather."""
    sizes = chunk_sizes(n, world)
    return [4 * (2 * n - sizes[r] - sizes[(r + 1) % world]) for r in range(world)]


def _close(found: Any, expected: Any, what: str, rtol: float = 1e-9) -> str | None:
    import math

    try:
        ok = math.isclose(float(found), float(expected), rel_tol=rtol, abs_tol=1e-300)
    except (TypeError, ValueError):
        ok = False
    return None if ok else f"{what} is {found!r}; expected {expected!r}"


def _numbers(value: Any) -> Any:
    """``value`` (an array, or the lists a check's call of your function gives back) as nested Python lists."""
    import numpy as np

    try:
        return np.asarray(value, dtype=np.float64).tolist()
    except (TypeError, ValueError):
        return value


def _tensor(value: Any):
    import numpy as np
    import torch

    return torch.from_numpy(np.asarray(value, dtype=np.float32))


def _run(fn, world: int):
    from util.labs.lab13.ranks import RankError, RankTimeout, run_ranks

    try:
        return run_ranks(fn, world, timeout=30), None
    except (RankError, RankTimeout) as exc:
        return None, str(exc).splitlines()[0]


def _two_rank_ring(fn) -> str | None:
    import torch

    inputs = [torch.tensor([1.0, 2.0, 3.0]), torch.tensor([10.0, 20.0, 30.0])]
    run, problem = _run(lambda rank, world: fn(inputs[rank].clone(), rank, world), 2)
    if problem:
        return problem
    for rank in range(2):
        found = _numbers(run.results[rank])
        if found != [11.0, 22.0, 33.0]:
            return f"rank {rank} returned {found}; expected [11.0, 22.0, 33.0]"
    return equal([run.sent_bytes(r) for r in range(2)], [12, 12], "the tensor bytes each rank sent")


def _costs_by_hand(fn) -> str | None:
    found = fn(1000, 2, 1e-6, 1e-9)
    problem = has_keys(found, ["ring", "tree", "naive", "fastest", "crossover_bytes"], "allreduce_costs(...)")
    if problem:
        return problem
    return first(_close(found["ring"], 3e-6, "ring"), _close(found["tree"], 4e-6, "tree"),
                 _close(found["naive"], 4e-6, "naive"), equal(found["fastest"], "ring", "fastest"),
                 _close(found["crossover_bytes"], 0.0, "crossover_bytes"))


def _costs_consistent(answer) -> str | None:
    times = {name: answer[name] for name in ("ring", "tree", "naive")}
    if not all(isinstance(t, float) and t > 0 for t in times.values()):
        return f"the times are {times}; each is a positive float of seconds"
    fastest = min(times, key=lambda name: (times[name], list(times).index(name)))
    return first(equal(answer["fastest"], fastest, "fastest"),
                 None if isinstance(answer["crossover_bytes"], float) and answer["crossover_bytes"] >= 0
                 else f"crossover_bytes is {answer['crossover_bytes']!r}; a float of bytes, 0 or more")


def _tiny_ddp(fn) -> str | None:
    import torch
    import torch.nn.functional as F

    from util.labs.lab13.nets import build_mlp

    x = torch.tensor([[1.0, 0.0, 2.0], [0.0, 1.0, -1.0], [3.0, 1.0, 0.0], [-1.0, 2.0, 1.0]])
    y = torch.tensor([0, 1, 1, 0])
    one = build_mlp([3, 2], seed=0)
    F.cross_entropy(one(x), y).backward()
    expected = [p.grad for p in one.parameters()]
    run, problem = _run(lambda rank, world: fn(build_mlp([3, 2], seed=0), x[2 * rank:2 * rank + 2],
                                               y[2 * rank:2 * rank + 2], rank, world, 8), 2)
    if problem:
        return problem
    for rank in range(2):
        found = run.results[rank]
        problem = has_keys(found, ["grads", "buckets"], f"rank {rank}'s result")
        if problem:
            return problem
        if found["buckets"] != [[0], [1]]:
            return f"rank {rank}'s buckets are {found['buckets']}; with a cap of 8 bytes the bias (8 bytes) and the " \
                   "weight (24 bytes) each fill a bucket: [[0], [1]]"
        grads = [_tensor(g) for g in found["grads"]]
        if len(grads) != 2 or any(tuple(g.shape) != tuple(e.shape) or not torch.allclose(g, e, rtol=1e-5, atol=1e-7)
                                  for g, e in zip(grads, expected)):
            return f"rank {rank}'s gradients differ from one process's on all 4 rows"
        calls = [m["op"] for m in run.messages[rank]]
        if calls.count("all_reduce") != 2:
            return f"rank {rank} called all_reduce {calls.count('all_reduce')} times; one call per bucket: 2"
    return None


def _mlp_bytes() -> int:
    from util.labs.lab13.nets import build_mlp

    return sum(p.numel() * p.element_size() for p in build_mlp([64, 128, 128, 10]).parameters())


def _zero_by_hand(fn) -> str | None:
    table = {0: [(40, 40, 80)] * 4,
             1: [(40, 40, 24), (40, 40, 24), (40, 40, 16), (40, 40, 16)],
             2: [(40, 12, 24), (40, 12, 24), (40, 8, 16), (40, 8, 16)],
             3: [(12, 12, 24), (12, 12, 24), (8, 8, 16), (8, 8, 16)]}
    for stage, rows in table.items():
        found = fn(10, 4, stage)
        expected = [{"weights": w, "grads": g, "optimizer_state": o, "total": w + g + o} for w, g, o in rows]
        problem = equal(found, expected, f"zero_memory(10, 4, {stage})")
        if problem:
            return problem
    return None


def _rank0_totals(answer, per_parameter: str) -> str | None:
    """A ZeRO table's exported rank-0 totals by stage (``per_parameter``: the bytes nothing sharded holds, in
    words) and the least stage that fits 12 GiB."""
    totals = answer["rank0_total"]
    if not isinstance(totals, list) or len(totals) != 4 or not all(isinstance(t, int) for t in totals):
        return f"rank0_total is {totals!r}; expected 4 integers (stages 0, 1, 2, 3)"
    fits = [stage for stage, total in enumerate(totals) if total <= 12 * GIB]
    return first(equal(totals[0], 16 * GPT2_XL, f"rank0_total[0] (nothing sharded: {per_parameter} bytes per parameter)"),
                 None if all(a > b for a, b in zip(totals, totals[1:])) else
                 f"rank0_total is {totals}; each stage shards more, so each total is smaller",
                 equal(answer["least_stage"], fits[0] if fits else None, "least_stage (the first stage whose rank 0 "
                                                                        "total fits 12 GiB)"))


def _zero_answer(answer) -> str | None:
    return _rank0_totals(answer, "4 + 4 + 8")


def _adam_by_hand(fn) -> str | None:
    import torch

    params, grads = torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([1.0, -1.0, 2.0, -2.0])
    run, problem = _run(lambda rank, world: fn(params.clone(), grads.clone(), torch.zeros(2), torch.zeros(2), 1, rank,
                                               world, 0.1), 2)
    if problem:
        return problem
    for rank in range(2):
        found = run.results[rank]
        problem = has_keys(found, ["params", "exp_avg", "exp_avg_sq"], f"rank {rank}'s result")
        if problem:
            return problem
        params, m_found, v_found = (_tensor(found[key]) for key in ("params", "exp_avg", "exp_avg_sq"))
        if params.shape != (4,) or not torch.allclose(params, torch.tensor([0.9, 2.1, 2.9, 4.1]), atol=1e-6):
            return f"rank {rank}'s parameters are {_numbers(found['params'])}; the first Adam step moves each by lr " \
                   "against its gradient's sign: [0.9, 2.1, 2.9, 4.1]"
        m, v = [0.1, -0.1] if rank == 0 else [0.2, -0.2], [0.001, 0.001] if rank == 0 else [0.004, 0.004]
        if not (m_found.shape == v_found.shape == (2,) and torch.allclose(m_found, torch.tensor(m), atol=1e-7)
                and torch.allclose(v_found, torch.tensor(v), atol=1e-8)):
            return f"rank {rank}'s state is {_numbers(found['exp_avg'])}, {_numbers(found['exp_avg_sq'])}; its shard " \
                   f"of (1 - beta1) g and (1 - beta2) g^2 is {m}, {v}"
    return None


def _tp_by_hand(fn) -> str | None:
    import torch

    x = torch.tensor([[1.0, -2.0]])
    w1, b1 = torch.tensor([[1.0, 0.0], [0.5, -1.0]]), torch.tensor([0.0, 0.5])
    w2, b2 = torch.tensor([[1.0, 2.0], [-1.0, 1.0]]), torch.tensor([0.1, 0.2])
    gy = torch.tensor([[1.0, 1.0]])
    full = {name: t.clone().requires_grad_(True)
            for name, t in (("x", x), ("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2))}
    y = torch.relu(full["x"] @ full["w1"].T + full["b1"]) @ full["w2"].T + full["b2"]
    y.backward(gy)
    run, problem = _run(lambda rank, world: fn(x, w1[rank:rank + 1], b1[rank:rank + 1], w2[:, rank:rank + 1], b2, gy,
                                               rank, world), 2)
    if problem:
        return problem
    for rank in range(2):
        found = run.results[rank]
        keys = ["y", "grad_x", "grad_w1", "grad_b1", "grad_w2", "grad_b2"]
        problem = has_keys(found, keys, f"rank {rank}'s result")
        if problem:
            return problem
        expected = {"y": y, "grad_x": full["x"].grad, "grad_w1": full["w1"].grad[rank:rank + 1],
                    "grad_b1": full["b1"].grad[rank:rank + 1], "grad_w2": full["w2"].grad[:, rank:rank + 1],
                    "grad_b2": full["b2"].grad}
        for key in keys:
            got, want = _tensor(found[key]), expected[key].detach()
            if got.shape != want.shape or not torch.allclose(got, want, atol=1e-6):
                return f"rank {rank}'s {key} is {_numbers(found[key])}; the unsplit MLP's (its shard) is " \
                       f"{want.tolist()}"
        calls = [m["op"] for m in run.messages[rank]]
        if calls != ["all_reduce", "all_reduce"]:
            return f"rank {rank} called {calls}; exactly two all_reduce calls (forward, backward)"
    return None


def _schedules_by_hand(fn) -> str | None:
    from util.labs.lab13.pipeline import replay

    for kind, peak in (("gpipe", [2, 2]), ("1f1b", [2, 1])):
        try:
            timeline = replay(fn(kind, 2, 2, 2), 2)
        except ValueError as exc:
            return f"pipeline_schedule({kind!r}, 2, 2, 2) is not a schedule: {exc}"
        problem = first(equal(timeline.makespan, 9, f"the makespan of {kind} on 2 stages, 2 micro-batches"),
                        equal(timeline.peak, peak, f"the activations {kind} holds per stage"))
        if problem:
            return problem
    return None


def _pipeline_answer(answer) -> str | None:
    for kind, makespan, peak in (("gpipe", 42, [4, 4, 4, 4]), ("1f1b", 33, [4, 3, 2, 1])):
        found = answer[kind]
        problem = first(has_keys(found, ["makespan", "bubble", "peak"], f"answer[{kind!r}]"),
                        equal(found.get("makespan") if isinstance(found, dict) else None, makespan,
                              f"{kind}'s makespan"),
                        equal(found.get("peak") if isinstance(found, dict) else None, peak, f"{kind}'s peaks"))
        if problem:
            return problem
        problem = _close(found["bubble"], 1 - 3 * 8 / makespan, f"{kind}'s bubble (1 - 3 m / makespan)")
        if problem:
            return problem
    return None


def _tiny_overlap(fn) -> str | None:
    import torch
    import torch.nn.functional as F

    from util.labs.lab13.hold import held_model
    from util.labs.lab13.nets import build_mlp

    x = torch.tensor([[1.0, 0.0, 2.0], [0.0, 1.0, -1.0], [3.0, 1.0, 0.0], [-1.0, 2.0, 1.0]])
    y = torch.tensor([0, 1, 1, 0])
    one = build_mlp([3, 4, 2], seed=0)
    F.cross_entropy(one(x), y).backward()
    expected = [p.grad for p in one.parameters()]
    # cap 8: b1 (8 bytes) and W1 (32) close their buckets before the first layer: the hold waits for half of 40
    run, problem = _run(lambda rank, world: fn(held_model(build_mlp([3, 4, 2], seed=0), 20),
                                               x[2 * rank:2 * rank + 2], y[2 * rank:2 * rank + 2], rank, world, 8), 2)
    if problem:
        return problem
    for rank in range(2):
        found = run.results[rank]
        problem = has_keys(found, ["grads", "buckets"], f"rank {rank}'s result")
        if problem:
            return problem
        if found["buckets"] != [[0], [1], [2], [3]]:
            return f"rank {rank}'s buckets are {found['buckets']}; with a cap of 8 bytes every gradient fills a " \
                   "bucket of its own: [[0], [1], [2], [3]] (b1, W1, b0, W0: gradient-ready order)"
        grads = [_tensor(g) for g in found["grads"]]
        if len(grads) != 4 or any(tuple(g.shape) != tuple(e.shape) or not torch.allclose(g, e, rtol=1e-5, atol=1e-7)
                                  for g, e in zip(grads, expected)):
            return f"rank {rank}'s gradients differ from one process's on all 4 rows"
        sizes = [m["bytes"] for m in run.messages[rank] if m["op"] == "all_reduce"]
        if sizes != [8, 32, 16, 48]:
            return f"rank {rank}'s all_reduce calls passed {sizes} bytes, in order; one per bucket, in the order the " \
                   "buckets fill: [8, 32, 16, 48]"
    return None


def _overlap_answer(answer) -> str | None:
    # the notebook's MLP 64-128-128-10 in gradient-ready order: 40, 5,120, 512, 65,536, 512, 32,768 bytes; cap 4,096
    buckets = [[0, 1], [2, 3], [4, 5]]
    return first(equal(answer["buckets"], buckets, "buckets (the stated rule, 13.3's, on the notebook's MLP)"),
                 equal(answer["allreduce_bytes"], [5_160, 66_048, 33_280],
                       "allreduce_bytes (each bucket's gradient bytes, in the order the backward pass fills them)"),
                 equal(answer["finished_when_held"], True, "finished_when_held"),
                 equal(answer["equal_to_one_process"], True, "equal_to_one_process"))


MIXED = {"fp16_weights": 2, "fp16_grads": 2, "optimizer_state": 12}
"""Bytes per parameter in mixed precision with Adam (the ZeRO paper's accounting): float16 weights and gradients,
and float32 master weights, momentum and variance."""


def _mixed_by_hand(fn) -> str | None:
    shards = (3, 3, 2, 2)
    for stage in range(4):
        expected = []
        for shard in shards:
            row = {part: per * (shard if stage >= level else 10)
                   for (part, per), level in zip(MIXED.items(), (3, 2, 1))}
            row["total"] = sum(row.values())
            expected.append(row)
        problem = equal(fn(10, 4, stage), expected, f"zero_mixed_memory(10, 4, {stage})")
        if problem:
            return problem
    return None


def _mixed_answer(answer) -> str | None:
    return _rank0_totals(answer, "2 + 2 + 12")


CHECKS: dict[str, tuple[Check, ...]] = {
    "13.1": (
        Check("1,000 floats: each rank sends 2(p-1)(4n/p) bytes on 2 and 4 ranks, 4(2n - its chunk - the next rank's "
              "chunk) on 3; 2(p-1) sends each; the result equals dist.all_reduce's",
              lambda a: first(equal(a["world"], [2, 3, 4], "world"),
                              equal(a["bytes_sent"], [ring_bytes(N, p) for p in (2, 3, 4)], "bytes_sent"),
                              equal(a["sends"], [[2 * (p - 1)] * p for p in (2, 3, 4)], "sends"),
                              equal(a["equal_to_all_reduce"], True, "equal_to_all_reduce")),
              "send only the chunk a step moves: in the reduce-scatter every chunk but your own, in the all-gather "
              "every chunk but the next rank's; chunks are torch.tensor_split(x, world). Bytes of 0: you called a "
              "name imported before the ranks started (from torch.distributed import isend), which the ranks' log "
              "cannot see; call dist.isend and dist.recv"),
        Check("[1, 2, 3] and [10, 20, 30] on 2 ranks: both hold [11, 22, 33], each sent 12 bytes", _two_rank_ring,
              "with 2 ranks the chunks are [0:2] and [2:3]; rank 0 sends chunk 1 then chunk 0 (3 floats in all)",
              calls_function=True),
    ),
    "13.2": (
        Check("1,000 bytes on 2 ranks, alpha 1 us, beta 1 ns/byte: ring 3 us, tree 4 us, naive 4 us, ring fastest, "
              "crossover 0", _costs_by_hand,
              "ring: 2(p-1) alpha + 2(p-1)/p n beta; tree: 2 ceil(log2 p) (alpha + n beta); "
              "naive: 2(p-1)(alpha + n beta)",
              calls_function=True),
        Check("fastest names the least time; crossover_bytes is 0 or more",
              _costs_consistent, "ties go to the first of ring, tree, naive"),
    ),
    "13.3": (
        Check("one Linear(3, 2) on 2 ranks of 2 rows, cap 8 bytes: buckets [[0], [1]], two all_reduce calls, the "
              "gradients of one process on all 4 rows", _tiny_ddp,
              "average: all_reduce sums, so divide by the world size; a bucket closes once it holds at least the cap",
              calls_function=True),
        Check("the notebook's MLP: each parameter in exactly one bucket, all_reduce bytes = its 104,488 gradient bytes, "
              "equal to one process",
              lambda a: first(equal(sorted(i for b in a["buckets"] for i in b), list(range(6)), "the buckets' indices"),
                              is_int(a["allreduce_calls"], "allreduce_calls"),
                              equal(a["allreduce_calls"], len(a["buckets"]), "allreduce_calls (one per bucket)"),
                              equal(a["allreduce_bytes"], _mlp_bytes(), "allreduce_bytes"),
                              equal(a["equal_to_one_process"], True, "equal_to_one_process")),
              "each gradient is all-reduced once, in exactly one bucket"),
    ),
    "13.4": (
        Check("10 parameters on 4 ranks (shards 3, 3, 2, 2), stages 0-3, by hand", _zero_by_hand,
              "stage 1 shards the optimizer state, 2 the gradients too, 3 the weights too; shard sizes are "
              "torch.tensor_split's", calls_function=True),
        Check("rank 0 holds 16 bytes per parameter unsharded, less at every stage; least_stage is the first that fits",
              _zero_answer, "fp32 weights (4), gradients (4), Adam's two moments (8) per parameter"),
    ),
    "13.5": (
        Check("[1, 2, 3, 4] with gradients [1, -1, 2, -2] on 2 ranks, zero state, step 1, lr 0.1: parameters "
              "[0.9, 2.1, 2.9, 4.1] on both, each rank's state its shard", _adam_by_hand,
              "update your shard, then all-gather the parameters with ring_all_gather", calls_function=True),
        Check("1,000 parameters on 3 ranks: state of 334, 333, 333 elements; the all-gather sends 4(n - the next "
              "rank's shard) bytes per rank; equal to one Adam step on all of them",
              lambda a: first(equal(a["state_elements"], [334, 333, 333], "state_elements"),
                              equal(a["bytes_sent"], [4 * (N - s) for s in (333, 333, 334)], "bytes_sent"),
                              equal(a["equal_to_adam"], True, "equal_to_adam")),
              "each rank keeps exp_avg and exp_avg_sq for its shard only"),
    ),
    "13.6": (
        Check("d 2, h 2 on 2 ranks (one hidden unit each): the unsplit MLP's output and gradients, two all_reduce "
              "calls",
              _tp_by_hand, "forward: all-reduce the partial outputs, then add b2; backward: all-reduce grad_x",
              calls_function=True),
        Check("2 all-reduces of batch x d floats (16,384 bytes), 33,280 bytes of weights per rank, equal to the "
              "unsplit MLP",
              lambda a: first(equal(a["allreduce_calls"], 2, "allreduce_calls"),
                              equal(a["allreduce_bytes"], 2 * 32 * 64 * 4, "allreduce_bytes"),
                              equal(a["weight_bytes"], 4 * (2 * 64 * 256 // 4 + 256 // 4 + 64), "weight_bytes"),
                              equal(a["equal_to_unsplit"], True, "equal_to_unsplit")),
              "W1's rows and b1 are split, W2's columns are split, b2 is whole on every rank"),
    ),
    "13.8": (
        Check("MLP 3-4-2 on 2 ranks of 2 rows, cap 8 bytes, the grader's hold after the first layer: it finishes, "
              "buckets [[0], [1], [2], [3]], all_reduce calls of 8, 32, 16 and 48 bytes in that order, the gradients "
              "of one process", _tiny_overlap,
              "start each bucket's all_reduce (async_op=True) in the hook of its last gradient; wait for them all "
              "after backward(), then divide by the world size", calls_function=True),
        Check("the notebook's MLP, cap 4,096 bytes: buckets [[0, 1], [2, 3], [4, 5]] of 5,160, 66,048 and 33,280 "
              "bytes, in that order; it finishes when held; equal to one process", _overlap_answer,
              "the buckets are 13.3's; only when their all-reduces start changes"),
    ),
    "13.9": (
        Check("10 parameters on 4 ranks (shards 3, 3, 2, 2), stages 0-3, by hand", _mixed_by_hand,
              "2 bytes of float16 weights, 2 of float16 gradients, 12 of optimizer state (float32 master weights, "
              "momentum, variance); stage 1 shards the 12, 2 the gradients too, 3 the weights too",
              calls_function=True),
        Check("rank 0 holds 16 bytes per parameter unsharded, less at every stage; least_stage is the first that fits",
              _mixed_answer, "the master weights are part of the 12 bytes of optimizer state, counted once"),
    ),
    "13.7": (
        Check("2 stages, 2 micro-batches: both schedules end at 9; GPipe holds [2, 2], 1F1B [2, 1]", _schedules_by_hand,
              "F takes 1 unit, B 2; 1F1B warms up with stages - s - 1 forwards", calls_function=True),
        Check("4 stages, 8 micro-batches, at most 4 held: GPipe (2 rounds) ends at 42, 1F1B at 33; bubble = 1 - 3m / "
              "makespan", _pipeline_answer, "GPipe flushes after every 4 micro-batches; 1F1B never holds more than 4"),
    ),
}
