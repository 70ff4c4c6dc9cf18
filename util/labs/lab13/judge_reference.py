"""The grader's own versions of what lab 13 asks, by the stated rules: what the judge compares with.

Grader-only (``util.labs.GRADER_ONLY``: a ``judge*`` file): they are the lab's answers. The judge runs the
parallel ones on ranks of its own (:func:`util.labs.lab13.ranks.launch`, the launcher the students' ranks
use), so that the bytes the stated algorithm puts on the wire are counted, not assumed; the pipeline orders
are replayed by the course's :func:`util.labs.lab13.pipeline.replay` for the makespan and activations the
stated schedules reach.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

BETAS = (0.9, 0.999)
EPS = 1e-8


def _unflatten(flat, params) -> None:
    """Copy the all-reduced ``flat`` bucket back into its parameters' gradients, in bucket order."""
    offset = 0
    for param in params:
        param.grad.copy_(flat[offset:offset + param.grad.numel()].view_as(param.grad))
        offset += param.grad.numel()


def _ring_step(send: torch.Tensor, like: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    buffer = torch.empty_like(like)
    request = dist.isend(send.contiguous(), (rank + 1) % world)
    dist.recv(buffer, (rank - 1) % world)
    request.wait()
    return buffer


def ring_reduce_scatter(x: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    acc = [chunk.clone() for chunk in torch.tensor_split(x, world)]
    for step in range(world - 1):
        out, into = (rank - step - 1) % world, (rank - step - 2) % world
        acc[into] = acc[into] + _ring_step(acc[out], acc[into], rank, world)
    return acc[rank]


def ring_all_gather(chunk: torch.Tensor, rank: int, world: int, n: int) -> torch.Tensor:
    parts = [part.clone() for part in torch.tensor_split(torch.zeros(n, dtype=chunk.dtype), world)]
    parts[rank] = chunk.clone()
    for step in range(world - 1):
        out, into = (rank - step) % world, (rank - step - 1) % world
        parts[into] = _ring_step(parts[out], parts[into], rank, world)
    return torch.cat(parts)


def ring_all_reduce(x: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    return ring_all_gather(ring_reduce_scatter(x, rank, world), rank, world, x.numel())


def make_buckets(sizes: list[int], cap_bytes: int) -> list[list[int]]:
    buckets, current, held = [], [], 0
    for index, size in enumerate(sizes):
        current.append(index)
        held += size
        if held >= cap_bytes:
            buckets.append(current)
            current, held = [], 0
    if current:
        buckets.append(current)
    return buckets


def hold_floor(model: torch.nn.Module, cap_bytes: int, world: int) -> int:
    """The bytes 13.8's hold waits for (:func:`util.labs.lab13.hold.held_model`): ``(world - 1) / world`` of the
    bytes of every bucket that closes before any gradient of the first layer is ready (0 when none does)."""
    sizes = ready_sizes(model)
    first = len(list(model[0].parameters()))
    closed = [b for b in make_buckets(sizes, cap_bytes) if max(b) < len(sizes) - first]
    return (world - 1) * sum(sizes[i] for b in closed for i in b) // world


def ready_sizes(model: torch.nn.Module) -> list[int]:
    """Bytes of each parameter, in the order their gradients become ready (the reverse of ``parameters()``)."""
    return [p.numel() * p.element_size() for p in reversed(list(model.parameters()))]


def ddp_gradients(model, x, y, rank: int, world: int, cap_bytes: int) -> dict:
    params = list(model.parameters())
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()
    ready = params[::-1]
    buckets = make_buckets([p.numel() * p.element_size() for p in ready], cap_bytes)
    for bucket in buckets:
        flat = torch.cat([ready[i].grad.flatten() for i in bucket])
        dist.all_reduce(flat)
        flat /= world
        _unflatten(flat, [ready[i] for i in bucket])
    return {"grads": [p.grad for p in params], "buckets": buckets}


def overlapped_ddp(model, x, y, rank: int, world: int, cap_bytes: int) -> dict:
    """13.8's stated step: each bucket's all-reduce started (``async_op=True``) from the post-accumulate-gradient
    hook of its last gradient, the last bucket after ``backward()``, every one waited for before returning."""
    params = list(model.parameters())
    ready: list = []
    buckets: list = []
    pending: list = []
    state = {"current": [], "held": 0}

    def launch() -> None:
        bucket = state["current"]
        flat = torch.cat([ready[i].grad.flatten() for i in bucket])
        pending.append((dist.all_reduce(flat, async_op=True), flat, bucket))
        buckets.append(bucket)
        state["current"], state["held"] = [], 0

    def on_ready(p) -> None:
        ready.append(p)
        state["current"].append(len(ready) - 1)
        state["held"] += p.numel() * p.element_size()
        if state["held"] >= cap_bytes:
            launch()

    hooks = [p.register_post_accumulate_grad_hook(on_ready) for p in params]
    try:
        model.zero_grad()
        F.cross_entropy(model(x), y).backward()
        if state["current"]:
            launch()
    finally:
        for hook in hooks:
            hook.remove()
    for work, flat, bucket in pending:
        work.wait()
        flat /= world
        _unflatten(flat, [ready[i] for i in bucket])
    return {"grads": [p.grad for p in params], "buckets": buckets}


def sharded_adam_step(params, grads, exp_avg, exp_avg_sq, step: int, rank: int, world: int, lr: float) -> dict:
    (beta1, beta2), n = BETAS, params.numel()
    p = torch.tensor_split(params, world)[rank]
    g = torch.tensor_split(grads, world)[rank]
    m = beta1 * exp_avg + (1 - beta1) * g
    v = beta2 * exp_avg_sq + (1 - beta2) * g * g
    update = (m / (1 - beta1 ** step)) / ((v / (1 - beta2 ** step)).sqrt() + EPS)
    return {"params": ring_all_gather(p - lr * update, rank, world, n), "exp_avg": m, "exp_avg_sq": v}


def tp_mlp(x, w1, b1, w2, b2, grad_y, rank: int, world: int) -> dict:
    x, w1, b1, w2 = (t.detach().clone().requires_grad_(True) for t in (x, w1, b1, w2))
    partial = F.relu(x @ w1.T + b1) @ w2.T
    y = partial.detach().clone()
    dist.all_reduce(y)
    partial.backward(grad_y)
    grad_x = x.grad.clone()
    dist.all_reduce(grad_x)
    return {"y": y + b2, "grad_x": grad_x, "grad_w1": w1.grad, "grad_b1": b1.grad, "grad_w2": w2.grad,
            "grad_b2": grad_y.sum(0)}


FUNCTIONS = {"ring_all_reduce": ring_all_reduce, "ddp_gradients": ddp_gradients, "overlapped_ddp": overlapped_ddp,
             "sharded_adam_step": sharded_adam_step, "tp_mlp": tp_mlp}
"""What the judge runs on its own ranks, by the name of the student's function it stands for."""


def schedule(kind: str, stages: int, microbatches: int, limit: int) -> list[list[str]]:
    """GPipe in rounds of at most ``limit`` micro-batches (all forwards of a round, then its backwards, then
    a flush), or 1F1B (``stages - s - 1`` forwards to warm up, then one forward and one backward in turn,
    then the remaining backwards), micro-batches in order."""
    if kind == "gpipe":
        rounds = [range(start, min(start + limit, microbatches)) for start in range(0, microbatches, limit)]
        order = [op for r in rounds for op in [f"F{i}" for i in r] + [f"B{i}" for i in r]]
        return [list(order) for _ in range(stages)]
    orders = []
    for s in range(stages):
        warm = min(stages - s - 1, microbatches)
        order = [f"F{i}" for i in range(warm)]
        for i in range(microbatches - warm):
            order += [f"F{warm + i}", f"B{i}"]
        orders.append(order + [f"B{i}" for i in range(microbatches - warm, microbatches)])
    return orders
