"""What the grader computes itself for lab 15's judges: its own allocator's counts, its own schedule, its own
paged attention and its own speculative and greedy decodings.

Grader-only (``util.labs.GRADER_ONLY``): it holds the answers of tasks 15.3-15.6, so neither a graded kernel
nor the students' copy can read it. The judges (``judge.py``) compare what a submission did with these,
computed in the grader's judge process from the case's spec alone.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

from util.labs.lab15.paged import OutOfBlocks, blocks_for
from util.labs.lab15.serving import Decision, View


class ReferenceAllocator:
    """The grader's paged allocator: reference counts, copy-on-write only when a token is written into a
    block another sequence holds, every call all-or-nothing. It takes the lowest free block (any choice
    would do: the judges compare counts, never block ids)."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.block_size = block_size
        self.free_list = list(range(num_blocks))
        self.refs = [0] * num_blocks
        self.tables: dict[int, list[int]] = {}
        self.lengths: dict[int, int] = {}

    def _take(self) -> int:
        self.free_list.sort()
        block = self.free_list.pop(0)
        self.refs[block] = 1
        return block

    def allocate(self, seq: int, tokens: int) -> None:
        need = blocks_for(tokens, self.block_size)
        if need > len(self.free_list):
            raise OutOfBlocks(seq)
        self.tables[seq] = [self._take() for _ in range(need)]
        self.lengths[seq] = tokens

    def append(self, seq: int) -> tuple[int, int] | None:
        table, position = self.tables[seq], self.lengths[seq]
        if position % self.block_size == 0:
            if not self.free_list:
                raise OutOfBlocks(seq)
            table.append(self._take())
            self.lengths[seq] += 1
            return None
        last = table[position // self.block_size]
        if self.refs[last] > 1:
            if not self.free_list:
                raise OutOfBlocks(seq)
            copy = self._take()
            self.refs[last] -= 1
            table[position // self.block_size] = copy
            self.lengths[seq] += 1
            return last, copy
        self.lengths[seq] += 1
        return None

    def fork(self, parent: int, child: int) -> None:
        self.tables[child] = list(self.tables[parent])
        self.lengths[child] = self.lengths[parent]
        for block in self.tables[child]:
            self.refs[block] += 1

    def free(self, seq: int) -> None:
        for block in self.tables.pop(seq):
            self.refs[block] -= 1
            if self.refs[block] == 0:
                self.free_list.append(block)
        del self.lengths[seq]

    def num_free(self) -> int:
        return len(self.free_list)

    def block_table(self, seq: int) -> list[int]:
        return list(self.tables[seq])


def reference_schedule(view: View) -> Decision:
    """The policy task 15.5 states: every running request decodes, oldest first, taking a block when its
    cache's last one is full; when none is free, the newest running request is preempted (possibly the one
    asking); in an iteration that preempts nobody, waiting requests are admitted in queue order while the
    token budget, the running limit and the free blocks allow, stopping at the first that does not fit."""
    config, free = view.config, view.free_blocks
    running = list(view.running)
    preempt: list[int] = []
    decode: list[int] = []
    index = 0
    while index < len(running):
        seq = running[index]
        need = config.blocks(seq.context + 1) - seq.blocks
        while need > free:
            victim = running.pop()
            preempt.append(victim.id)
            free += victim.blocks
            if victim is seq:
                break
        else:
            free -= need
            decode.append(seq.id)
            index += 1
    admit: list[int] = []
    if not preempt:
        tokens = count = len(decode)
        for seq in view.waiting:
            need = config.blocks(seq.prefill)
            if tokens + seq.prefill > config.max_tokens or count + 1 > config.max_running or need > free:
                break
            admit.append(seq.id)
            tokens, count, free = tokens + seq.prefill, count + 1, free - need
    return Decision(tuple(preempt), tuple(decode), tuple(admit))


def paged_attention_reference(q: torch.Tensor, k_pool: torch.Tensor, v_pool: torch.Tensor,
                              tables: Sequence[Sequence[int]], lengths: Sequence[int]) -> torch.Tensor:
    """Each sequence's keys and values gathered through its table (the first ``length`` slots), then
    softmax(q k^T / sqrt(head_dim)) v, each key/value head serving ``n_head // n_kv_head`` query heads; in
    float64."""
    n_head, head_dim = q.shape[1], q.shape[2]
    group = n_head // k_pool.shape[1]
    out = []
    for b, (table, length) in enumerate(zip(tables, lengths)):
        k = torch.cat([k_pool[block] for block in table], dim=1)[:, :length].double()
        v = torch.cat([v_pool[block] for block in table], dim=1)[:, :length].double()
        k, v = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)
        scores = torch.einsum("hd,htd->ht", q[b].double(), k) / head_dim ** 0.5
        out.append(torch.einsum("ht,htd->hd", torch.softmax(scores, dim=-1), v))
    return torch.stack(out)


@torch.no_grad()
def greedy(model: torch.nn.Module, prompt: list[int], n: int) -> tuple[list[int], float]:
    """The target's greedy decoding without a cache (``model(ids)`` over the whole sequence each step), and
    the smallest gap between its two largest logits over the ``n`` steps."""
    ids = torch.tensor([prompt], dtype=torch.long)
    gap = float("inf")
    for _ in range(n):
        last = model(ids)[0, -1]
        top = last.topk(2).values
        gap = min(gap, float(top[0] - top[1]))
        ids = torch.cat([ids, last.argmax().view(1, 1)], dim=1)
    return ids[0, len(prompt):].tolist(), gap


@torch.no_grad()
def speculative(target: torch.nn.Module, draft: torch.nn.Module, prompt: list[int], n: int, k: int) -> dict[str, Any]:
    """Greedy speculative decoding as task 15.6 states it, uncached: each round the draft proposes
    ``m = min(k, n - decided)`` tokens greedily, one target call checks them on ``prompt + decided +
    proposals``, the leading proposals equal to the target's argmax are kept, then the target's own token at
    the first difference (or after the last proposal); a round never keeps more than ``n`` tokens in all.
    Returns ``{"tokens", "calls": [the ids of each target call], "starts": [the length of each call's prompt
    and decided tokens, before its proposals], "accepted", "gap"}``; ``gap`` is the smallest top-two logit gap
    of every argmax taken (target and draft)."""
    decided: list[int] = []
    calls: list[list[int]] = []
    starts: list[int] = []
    accepted, gap = 0, float("inf")
    while len(decided) < n:
        m = min(k, n - len(decided))
        sequence = list(prompt) + decided
        for _ in range(m):
            last = draft(torch.tensor([sequence], dtype=torch.long))[0, -1]
            top = last.topk(2).values
            gap = min(gap, float(top[0] - top[1]))
            sequence.append(int(last.argmax()))
        calls.append(list(sequence))
        starts.append(len(prompt) + len(decided))
        logits = target(torch.tensor([sequence], dtype=torch.long))[0]
        start = len(prompt) + len(decided)
        checked = []
        for position in range(start - 1, start + m):
            top = logits[position].topk(2).values
            gap = min(gap, float(top[0] - top[1]))
            checked.append(int(logits[position].argmax()))
        proposals = sequence[start:]
        kept = 0
        while kept < m and proposals[kept] == checked[kept]:
            kept += 1
        accepted += kept
        decided += (proposals[:kept] + [checked[kept]])[:n - len(decided)]
    return {"tokens": decided, "calls": calls, "starts": starts, "accepted": accepted, "gap": gap}


class ReferencePrefixCache:
    """The grader's prefix cache (task 15.7): every full block named by its whole prefix (the tuple of every token
    up to its end: no collision is possible, as a chained hash intends), looked up block by block over the
    prompt's full blocks before its last token; a block no sequence holds stays cached, in a queue from least to
    most recently used (a freed sequence's blocks enter it last block first); a new block is an empty one when
    one is free, else the front of the queue, evicted. A block that fills under a name the cache already holds
    stays the sequence's own and is empty once freed."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        from collections import OrderedDict

        self.block_size = block_size
        self.empty = list(range(num_blocks))
        self.queue: "OrderedDict[int, None]" = OrderedDict()   # free cached blocks, least recently used first
        self.name_of: dict[int, tuple] = {}                     # block -> its name, while cached
        self.by_name: dict[tuple, int] = {}
        self.refs = [0] * num_blocks
        self.tables: dict[int, list[int]] = {}
        self.tokens: dict[int, list[int]] = {}
        self.evicted = 0

    def _available(self) -> int:
        return len(self.empty) + len(self.queue)

    def _take(self) -> int:
        if self.empty:
            block = self.empty.pop()
        else:
            block, _ = self.queue.popitem(last=False)
            del self.by_name[self.name_of.pop(block)]
            self.evicted += 1
        self.refs[block] = 1
        return block

    def _name(self, seq: int, index: int) -> None:
        name = tuple(self.tokens[seq][:(index + 1) * self.block_size])
        block = self.tables[seq][index]
        if name not in self.by_name:
            self.by_name[name] = block
            self.name_of[block] = name

    def allocate(self, seq: int, tokens: list[int]) -> int:
        size = self.block_size
        hits: list[int] = []
        for index in range((len(tokens) - 1) // size):
            block = self.by_name.get(tuple(tokens[:(index + 1) * size]))
            if block is None:
                break
            hits.append(block)
        need = blocks_for(len(tokens), size) - len(hits)
        if need > self._available() - sum(block in self.queue for block in hits):
            raise OutOfBlocks(seq)
        for block in hits:
            self.queue.pop(block, None)
            self.refs[block] += 1
        self.tables[seq] = hits + []
        self.tokens[seq] = list(tokens)
        for _ in range(need):
            self.tables[seq].append(self._take())
        for index in range(len(hits), len(tokens) // size):
            self._name(seq, index)
        return len(hits)

    def append(self, seq: int, token: int) -> None:
        position = len(self.tokens[seq])
        if position % self.block_size == 0:
            if not self._available():
                raise OutOfBlocks(seq)
            self.tables[seq].append(self._take())
        self.tokens[seq].append(token)
        if (position + 1) % self.block_size == 0:
            self._name(seq, position // self.block_size)

    def free(self, seq: int) -> None:
        for block in reversed(self.tables.pop(seq)):
            self.refs[block] -= 1
            if self.refs[block] == 0:
                if block in self.name_of:
                    self.queue[block] = None
                else:
                    self.empty.append(block)
        del self.tokens[seq]

    def block_table(self, seq: int) -> list[int]:
        return list(self.tables[seq])

    def num_free(self) -> int:
        return self._available()

    def num_cached(self) -> int:
        return len(self.name_of)

    def evictions(self) -> int:
        return self.evicted


@torch.no_grad()
def speculative_sampling(target: torch.nn.Module, draft: torch.nn.Module, prompt: list[int], n: int, k: int,
                         draws) -> dict[str, Any]:
    """Speculative sampling as task 15.8 states it (Leviathan et al., Chen et al.), uncached, every random choice
    from ``draws`` (:class:`~util.labs.lab15.speculative.Uniforms`) in the stated order: the draft samples ``m =
    min(k, n - decided)`` proposals from its softmax (one draw each), one target call gives ``p`` at the ``m + 1``
    positions, proposal ``i`` is accepted while a draw ``u < p_i(x_i) / q_i(x_i)`` (one draw per test, stopping
    at the first rejection), then one more draw samples the round's own token: from ``max(0, p_i - q_i)`` after a
    rejection at ``i``, from ``p_m`` after ``m`` acceptances. Returns ``{"tokens", "calls", "starts", "accepted",
    "used"}``."""
    from util.labs.lab15.speculative import sample

    decided: list[int] = []
    calls: list[list[int]] = []
    starts: list[int] = []
    accepted = 0
    while len(decided) < n:
        m = min(k, n - len(decided))
        sequence = list(prompt) + decided
        start = len(sequence)
        qs = []
        for _ in range(m):
            q = torch.softmax(draft(torch.tensor([sequence], dtype=torch.long))[0, -1].double(), dim=-1)
            qs.append(q)
            sequence.append(sample(q, draws()))
        calls.append(list(sequence))
        starts.append(start)
        p = torch.softmax(target(torch.tensor([sequence], dtype=torch.long))[0, start - 1:].double(), dim=-1)
        kept = 0
        while kept < m:
            x = sequence[start + kept]
            if draws() < float(p[kept, x]) / float(qs[kept][x]):
                kept += 1
            else:
                break
        if kept < m:
            token = sample(torch.clamp(p[kept] - qs[kept], min=0), draws())
        else:
            token = sample(p[m], draws())
        accepted += kept
        decided += (sequence[start:start + kept] + [token])[:n - len(decided)]
    return {"tokens": decided, "calls": calls, "starts": starts, "accepted": accepted, "used": draws.used}


def reference_chunked(view):
    """The policy task 15.9 states (chunked prefill): every decoding request decodes, oldest admitted first (1 token
    each); what is left of the budget goes to chunks, first of the running requests still prefilling (oldest
    admitted first), then of the waiting ones in queue order, each admitted while the running limit allows (the
    walk stops at the first that is not); a chunk is what is left of its prompt or of the budget, whichever is
    smaller, and the walk stops when the budget is spent."""
    from util.labs.lab15.chunked import Chunks

    decode = [seq.id for seq in view.running if seq.remaining == 0]
    budget = view.config.max_tokens - len(decode)
    prefill: list[tuple[int, int]] = []
    for seq in view.running:
        if budget == 0:
            break
        if seq.remaining:
            prefill.append((seq.id, min(seq.remaining, budget)))
            budget -= prefill[-1][1]
    count = len(view.running)
    for seq in view.waiting:
        if budget == 0 or count == view.config.max_running:
            break
        prefill.append((seq.id, min(seq.prompt, budget)))
        budget -= prefill[-1][1]
        count += 1
    return Chunks(tuple(decode), tuple(prefill))


def reference_swapping(view):
    """The policy task 15.10 states (preemption by swapping): 15.5's policy (every running request decodes, oldest
    first; when no block is free the newest running request is preempted, possibly the one asking), where each
    victim is **swapped out** when swapping its blocks out and back in costs less than recomputing it
    (``config.swap_ns(blocks) < view.recompute_ns(victim)``) and the CPU blocks still free hold them, else
    recomputed; in an iteration that preempts nobody, swapped requests are swapped back in, oldest swapped out
    first, while the running limit and the free GPU blocks allow (stopping at the first that does not fit), and
    only when none is left swapped out are waiting requests admitted as in 15.5."""
    from util.labs.lab15.swapping import SwapDecision

    config, free, cpu = view.config, view.free_blocks, view.free_cpu_blocks
    running = list(view.running)
    preempt: list[int] = []
    swap_out: list[int] = []
    decode: list[int] = []
    index = 0
    while index < len(running):
        seq = running[index]
        need = config.blocks(seq.context + 1) - seq.blocks
        while need > free:
            victim = running.pop()
            if config.swap_ns(victim.blocks) < view.recompute_ns(victim) and victim.blocks <= cpu:
                swap_out.append(victim.id)
                cpu -= victim.blocks
            else:
                preempt.append(victim.id)
            free += victim.blocks
            if victim is seq:
                break
        else:
            free -= need
            decode.append(seq.id)
            index += 1
    swap_in: list[int] = []
    admit: list[int] = []
    if not preempt and not swap_out:
        count = len(decode)
        for seq in view.swapped:
            if count + 1 > config.max_running or seq.blocks > free:
                break
            swap_in.append(seq.id)
            count, free = count + 1, free - seq.blocks
        if len(swap_in) == len(view.swapped):
            tokens = len(decode)
            for seq in view.waiting:
                need = config.blocks(seq.prefill)
                if tokens + seq.prefill > config.max_tokens or count + 1 > config.max_running or need > free:
                    break
                admit.append(seq.id)
                tokens, count, free = tokens + seq.prefill, count + 1, free - need
    return SwapDecision(tuple(preempt), tuple(swap_out), tuple(swap_in), tuple(decode), tuple(admit))
