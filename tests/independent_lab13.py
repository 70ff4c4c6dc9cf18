"""Two students' lab 13, written from the handout alone (its text and stubs; never the course's solution),
each in a style of its own: the independent notebooks the similarity tests compare with the solution.

``CELLS[author]`` maps the first function a handout cell defines to the cell that author wrote in its place;
:func:`notebook` fills a copy of the handout with them.
"""
from __future__ import annotations

import json
from pathlib import Path

AUTHOR_A = {
    "ring_step": '''def ring_step(send: torch.Tensor, like: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """Send ``send`` to the next rank; return what the previous rank sent (shaped like ``like``)."""
    incoming = torch.empty_like(like)
    request = dist.isend(send.contiguous(), dst=(rank + 1) % world)
    dist.recv(incoming, src=(rank - 1) % world)
    request.wait()
    return incoming


def ring_reduce_scatter(x: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """Chunk ``rank`` of the sum of every rank's ``x`` (chunks: ``torch.tensor_split(x, world)``)."""
    partial = [piece.clone() for piece in torch.tensor_split(x, world)]
    for s in range(world - 1):
        out_idx = (rank - s - 1) % world
        in_idx = (rank - s - 2) % world
        got = ring_step(partial[out_idx], partial[in_idx], rank, world)
        partial[in_idx] = partial[in_idx] + got
    return partial[rank]


def ring_all_gather(chunk: torch.Tensor, rank: int, world: int, n: int) -> torch.Tensor:
    """The ``n``-element tensor whose chunk ``c`` is rank ``c``'s ``chunk``."""
    shapes = torch.tensor_split(torch.zeros(n), world)
    held = [torch.zeros_like(s) for s in shapes]
    held[rank] = chunk.clone()
    for s in range(world - 1):
        outgoing = (rank - s) % world
        incoming = (rank - s - 1) % world
        held[incoming] = ring_step(held[outgoing], held[incoming], rank, world)
    return torch.cat(held)


def ring_all_reduce(x: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """Every rank's ``x`` summed, on every rank: a ring reduce-scatter, then a ring all-gather."""
    mine = ring_reduce_scatter(x, rank, world)
    return ring_all_gather(mine, rank, world, x.numel())
''',
    "allreduce_costs": '''def allreduce_costs(nbytes: float, world: int, alpha: float, beta: float) -> dict:
    """Ring, tree and naive all-reduce times under the alpha-beta model, the fastest, and the crossover size."""
    p = world
    levels = math.ceil(math.log2(p))
    ring = 2 * (p - 1) * alpha + 2 * (p - 1) / p * nbytes * beta
    tree = 2 * levels * (alpha + nbytes * beta)
    naive = 2 * (p - 1) * (alpha + nbytes * beta)
    times = {"ring": ring, "tree": tree, "naive": naive}
    best = min(["ring", "tree", "naive"], key=lambda k: times[k])
    if p - 1 <= levels:
        cross = 0.0
    else:
        cross = alpha * (p - 1 - levels) / (beta * (levels - (p - 1) / p))
    times["fastest"] = best
    times["crossover_bytes"] = float(cross)
    return times
''',
    "make_buckets": '''def make_buckets(sizes: list, cap_bytes: int) -> list:
    """Lists of indices into ``sizes`` (bytes per gradient, in gradient-ready order), each bucket closed once it
    holds at least ``cap_bytes``."""
    result, current, filled = [], [], 0
    for index, size in enumerate(sizes):
        current.append(index)
        filled += size
        if filled >= cap_bytes:
            result.append(current)
            current, filled = [], 0
    if current:
        result.append(current)
    return result


def ddp_gradients(model, x: torch.Tensor, y: torch.Tensor, rank: int, world: int, cap_bytes: int) -> dict:
    """This rank's gradients averaged over the ranks, one all-reduce per bucket; and the buckets."""
    model.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    ready = list(model.parameters())[::-1]
    buckets = make_buckets([p.grad.numel() * p.grad.element_size() for p in ready], cap_bytes)
    for bucket in buckets:
        flat = torch.cat([ready[i].grad.reshape(-1) for i in bucket])
        dist.all_reduce(flat)
        flat /= world
        offset = 0
        for i in bucket:
            count = ready[i].grad.numel()
            ready[i].grad.copy_(flat[offset:offset + count].view_as(ready[i].grad))
            offset += count
    grads = [p.grad.clone() for p in model.parameters()]
    return {"grads": grads, "buckets": buckets}
''',
    "zero_memory": '''def zero_memory(numel: int, world: int, stage: int) -> list:
    """Bytes of weights, gradients and Adam state each rank keeps under ZeRO stage ``stage`` (0 to 3)."""
    base, extra = divmod(numel, world)
    ranks = []
    for r in range(world):
        mine = base + (1 if r < extra else 0)
        weights = 4 * (mine if stage >= 3 else numel)
        grads = 4 * (mine if stage >= 2 else numel)
        state = 8 * (mine if stage >= 1 else numel)
        ranks.append({"weights": weights, "grads": grads, "optimizer_state": state,
                      "total": weights + grads + state})
    return ranks
''',
    "sharded_adam_step": '''def sharded_adam_step(params: torch.Tensor, grads: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
                      step: int, rank: int, world: int, lr: float) -> dict:
    """One Adam step of this rank's shard, then every rank's updated shard gathered into all the parameters."""
    b1, b2, eps = 0.9, 0.999, 1e-8
    p_shard = torch.tensor_split(params, world)[rank]
    g_shard = torch.tensor_split(grads, world)[rank]
    m = b1 * exp_avg + (1 - b1) * g_shard
    v = b2 * exp_avg_sq + (1 - b2) * g_shard * g_shard
    m_hat = m / (1 - b1 ** step)
    v_hat = v / (1 - b2 ** step)
    new_shard = p_shard - lr * m_hat / (torch.sqrt(v_hat) + eps)
    everything = ring_all_gather(new_shard, rank, world, params.numel())
    return {"params": everything, "exp_avg": m, "exp_avg_sq": v}
''',
    "tp_mlp": '''def tp_mlp(x, w1, b1, w2, b2, grad_y, rank: int, world: int) -> dict:
    """The MLP's output and gradients, its hidden units split over the ranks (column- then row-parallel)."""
    x_local = x.detach().clone().requires_grad_(True)
    w1_local = w1.detach().clone().requires_grad_(True)
    b1_local = b1.detach().clone().requires_grad_(True)
    w2_local = w2.detach().clone().requires_grad_(True)
    hidden = torch.relu(x_local @ w1_local.T + b1_local)
    share = hidden @ w2_local.T
    y = share.detach().clone()
    dist.all_reduce(y)
    y = y + b2
    share.backward(grad_y)
    gx = x_local.grad.clone()
    dist.all_reduce(gx)
    return {"y": y, "grad_x": gx, "grad_w1": w1_local.grad, "grad_b1": b1_local.grad,
            "grad_w2": w2_local.grad, "grad_b2": grad_y.sum(dim=0)}
''',
    "pipeline_schedule": '''def pipeline_schedule(kind: str, stages: int, microbatches: int, limit: int) -> list:
    """Each stage's order of operations ('F3', 'B3', ...) for GPipe in rounds of ``limit``, or for 1F1B."""
    orders = []
    for stage in range(stages):
        ops = []
        if kind == "gpipe":
            for first in range(0, microbatches, limit):
                batch = range(first, min(first + limit, microbatches))
                ops += ["F%d" % m for m in batch]
                ops += ["B%d" % m for m in batch]
        else:
            warm = min(stages - stage, microbatches, limit)
            forward, backward = 0, 0
            while forward < warm:
                ops.append("F%d" % forward)
                forward += 1
            while backward < microbatches:
                ops.append("B%d" % backward)
                backward += 1
                if forward < microbatches:
                    ops.append("F%d" % forward)
                    forward += 1
        orders.append(ops)
    return orders
''',
}

AUTHOR_B = {
    "ring_step": '''def ring_step(send: torch.Tensor, like: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """Send ``send`` to the next rank; return what the previous rank sent (shaped like ``like``)."""
    nxt, prv = (rank + 1) % world, (rank + world - 1) % world
    buf = like.new_empty(like.shape)
    handle = dist.isend(send.contiguous(), nxt)
    dist.recv(buf, prv)
    handle.wait()
    return buf


def ring_reduce_scatter(x: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """Chunk ``rank`` of the sum of every rank's ``x`` (chunks: ``torch.tensor_split(x, world)``)."""
    acc = list(map(torch.clone, torch.tensor_split(x, world)))
    step = 0
    while step < world - 1:
        a = (rank - step - 1) % world
        b = (rank - step - 2) % world
        acc[b] = acc[b].add(ring_step(acc[a], acc[b], rank, world))
        step += 1
    return acc[rank]


def ring_all_gather(chunk: torch.Tensor, rank: int, world: int, n: int) -> torch.Tensor:
    """The ``n``-element tensor whose chunk ``c`` is rank ``c``'s ``chunk``."""
    lengths = [len(t) for t in torch.tensor_split(torch.arange(n), world)]
    pieces = {rank: chunk}
    for step in range(world - 1):
        give, take = (rank - step) % world, (rank - step - 1) % world
        pieces[take] = ring_step(pieces[give], torch.empty(lengths[take], dtype=chunk.dtype), rank, world)
    return torch.cat([pieces[c] for c in range(world)])


def ring_all_reduce(x: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """Every rank's ``x`` summed, on every rank: a ring reduce-scatter, then a ring all-gather."""
    return ring_all_gather(ring_reduce_scatter(x, rank, world), rank, world, len(x))
''',
    "allreduce_costs": '''def allreduce_costs(nbytes: float, world: int, alpha: float, beta: float) -> dict:
    """Ring, tree and naive all-reduce times under the alpha-beta model, the fastest, and the crossover size."""
    L = (world - 1).bit_length()  # ceil(log2(world))
    out = {
        "ring": 2 * (world - 1) * (alpha + nbytes / world * beta),
        "tree": 2 * L * (alpha + nbytes * beta),
        "naive": 2 * (world - 1) * (alpha + nbytes * beta),
    }
    fastest = "ring"
    for name in ("tree", "naive"):
        if out[name] < out[fastest]:
            fastest = name
    denominator = beta * (L - (world - 1) / world)
    crossover = 0.0 if world - 1 <= L else alpha * (world - 1 - L) / denominator
    return {**out, "fastest": fastest, "crossover_bytes": crossover}
''',
    "make_buckets": '''def make_buckets(sizes: list, cap_bytes: int) -> list:
    """Lists of indices into ``sizes`` (bytes per gradient, in gradient-ready order), each bucket closed once it
    holds at least ``cap_bytes``."""
    buckets = [[]]
    total = 0
    for i in range(len(sizes)):
        if total >= cap_bytes:
            buckets.append([])
            total = 0
        buckets[-1].append(i)
        total = total + sizes[i]
    return [b for b in buckets if b]


def ddp_gradients(model, x: torch.Tensor, y: torch.Tensor, rank: int, world: int, cap_bytes: int) -> dict:
    """This rank's gradients averaged over the ranks, one all-reduce per bucket; and the buckets."""
    for p in model.parameters():
        p.grad = None
    F.cross_entropy(model(x), y).backward()
    order = [p for p in model.parameters()][::-1]
    plan = make_buckets([4 * p.numel() for p in order], cap_bytes)
    for group in plan:
        packed = torch.cat([order[k].grad.flatten() for k in group])
        dist.all_reduce(packed, op=dist.ReduceOp.SUM)
        parts = torch.split(packed / world, [order[k].numel() for k in group])
        for k, part in zip(group, parts):
            order[k].grad = part.reshape(order[k].shape).clone()
    return {"grads": [p.grad for p in model.parameters()], "buckets": plan}
''',
    "zero_memory": '''def zero_memory(numel: int, world: int, stage: int) -> list:
    """Bytes of weights, gradients and Adam state each rank keeps under ZeRO stage ``stage`` (0 to 3)."""
    shard_sizes = [len(s) for s in torch.tensor_split(torch.empty(numel, dtype=torch.uint8, device="meta"), world)]
    table = []
    for n_local in shard_sizes:
        row = {
            "weights": 4 * n_local if stage == 3 else 4 * numel,
            "grads": 4 * n_local if stage in (2, 3) else 4 * numel,
            "optimizer_state": 8 * numel if stage == 0 else 8 * n_local,
        }
        row["total"] = sum(row.values())
        table.append(row)
    return table
''',
    "sharded_adam_step": '''def sharded_adam_step(params: torch.Tensor, grads: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor,
                      step: int, rank: int, world: int, lr: float) -> dict:
    """One Adam step of this rank's shard, then every rank's updated shard gathered into all the parameters."""
    beta1, beta2 = 0.9, 0.999
    g = grads.tensor_split(world)[rank]
    m_new = exp_avg.mul(beta1).add(g, alpha=1 - beta1)
    v_new = exp_avg_sq.mul(beta2).addcmul(g, g, value=1 - beta2)
    bias1, bias2 = 1 - beta1 ** step, 1 - beta2 ** step
    denom = (v_new / bias2).sqrt().add(1e-8)
    updated = params.tensor_split(world)[rank] - lr * (m_new / bias1) / denom
    return {"params": ring_all_gather(updated, rank, world, len(params)), "exp_avg": m_new, "exp_avg_sq": v_new}
''',
    "tp_mlp": '''def tp_mlp(x, w1, b1, w2, b2, grad_y, rank: int, world: int) -> dict:
    """The MLP's output and gradients, its hidden units split over the ranks (column- then row-parallel)."""
    pre = x @ w1.t() + b1
    act = pre.clamp(min=0)
    partial = act @ w2.t()
    dist.all_reduce(partial)
    out = partial + b2
    # backward by hand
    g_w2 = grad_y.t() @ act
    g_act = grad_y @ w2
    g_pre = g_act * (pre > 0).to(g_act.dtype)
    g_w1 = g_pre.t() @ x
    g_b1 = g_pre.sum(0)
    g_x = g_pre @ w1
    dist.all_reduce(g_x)
    return dict(y=out, grad_x=g_x, grad_w1=g_w1, grad_b1=g_b1, grad_w2=g_w2, grad_b2=grad_y.sum(0))
''',
    "pipeline_schedule": '''def pipeline_schedule(kind: str, stages: int, microbatches: int, limit: int) -> list:
    """Each stage's order of operations ('F3', 'B3', ...) for GPipe in rounds of ``limit``, or for 1F1B."""
    def gpipe(stage):
        seq = []
        start = 0
        while start < microbatches:
            stop = min(start + limit, microbatches)
            seq.extend(f"F{i}" for i in range(start, stop))
            seq.extend(f"B{i}" for i in range(start, stop))
            start = stop
        return seq

    def one_f_one_b(stage):
        in_flight = min(limit, stages - stage, microbatches)
        seq = [f"F{i}" for i in range(in_flight)]
        done_f = in_flight
        for i in range(microbatches):
            seq.append(f"B{i}")
            if done_f < microbatches:
                seq.append(f"F{done_f}")
                done_f += 1
        return seq

    make = gpipe if kind == "gpipe" else one_f_one_b
    return [make(s) for s in range(stages)]
''',
}

AUTHOR_C = {  # a student who wrote one function and left the rest of the handout blank
    "zero_memory": '''def zero_memory(numel: int, world: int, stage: int) -> list:
    """Bytes of weights, gradients and Adam state each rank keeps under ZeRO stage ``stage`` (0 to 3)."""
    out = []
    for r in range(world):
        n = numel // world + int(r < numel % world)
        w = numel * 4 if stage < 3 else n * 4
        g = numel * 4 if stage < 2 else n * 4
        o = numel * 8 if stage < 1 else n * 8
        out.append(dict(weights=w, grads=g, optimizer_state=o, total=w + g + o))
    return out
''',
}

CELLS = {"a": AUTHOR_A, "b": AUTHOR_B, "c": AUTHOR_C}


def notebook(handout: Path, dest: Path, author: str, *, only: tuple[str, ...] | None = None) -> Path:
    """The handout ``handout`` with ``author``'s cells in place of its stubs (``only``: of these functions)."""
    nb = json.loads(handout.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "code" and text.startswith("def "):
            name = text[4:].split("(")[0]
            if name in CELLS[author] and (only is None or name in only):
                cell["source"] = CELLS[author][name]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    return dest
