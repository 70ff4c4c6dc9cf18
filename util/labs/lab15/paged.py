"""Lab 15's given pieces of a paged KV cache: traces of allocator calls, their replay, their invariants, pools.

A paged KV cache (vLLM's PagedAttention) stores each sequence's keys and values in fixed-size **blocks**
of ``block_size`` token slots taken from one pool, found through the sequence's **block table** (the
list of its blocks, in order). The lab's task 15.3 writes the allocator (``PagedAllocator``); this module
is what the notebook, the public checks and the grader share:

* a **trace** is a list of calls, each a JSON list: ``["allocate", seq, n_tokens]``, ``["append", seq]``,
  ``["fork", parent, child]``, ``["free", seq]``; :func:`random_trace` draws one from a seed;
* :func:`replay` plays a trace on an allocator and records, after every call, what it returned
  (``None``, a copy ``[src, dst]`` or ``"raised"`` for :class:`OutOfBlocks`), ``num_free()`` and the block
  table of every live sequence;
* :func:`trace_problems` checks such a record against what any correct paged allocator must do, by
  **simulating the memory**: every token written lands in the slot its sequence's table names, a copy
  moves a block's contents, and after every call each live sequence must read back exactly its own
  tokens. A block freed while another sequence still reads it, or written while shared, shows as a token
  overwritten. It also checks that tables change only for the sequences a call names, that table lengths
  fit the sequences' lengths and that ``num_free()`` counts exactly the blocks no table holds. It does
  **not** know how many blocks a correct allocator uses: that is the task (the grader also counts them);
* :func:`make_pool` fills a pool of keys or values for task 15.4 (garbage in every slot no sequence
  owns).
"""
from __future__ import annotations

import random
from typing import Any, Sequence


class OutOfBlocks(Exception):
    """Raised by an allocator asked for more blocks than are free; the allocator is left as it was."""


def blocks_for(tokens: int, block_size: int) -> int:
    """Blocks that hold ``tokens`` token slots: ``ceil(tokens / block_size)``."""
    return -(-tokens // block_size)


def _describe(op: Sequence[Any]) -> str:
    return op[0] + " " + ", ".join(str(x) for x in op[1:])


def replay(allocator: Any, ops: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """Play ``ops`` on ``allocator`` (an object with ``allocate``, ``append``, ``fork``, ``free``,
    ``block_table`` and ``num_free``); after every call record ``{"result", "free", "tables"}``: what the call
    returned (``None``; for ``append``, a copy ``[src, dst]`` or ``None``; ``"raised"`` when it raised
    :class:`OutOfBlocks`), ``num_free()`` and ``{seq: block_table(seq)}`` for every live sequence (as
    strings, JSON's keys). Any other exception propagates. A call that raised changes no live set."""
    live: list[int] = []
    steps = []
    for op in ops:
        kind = op[0]
        try:
            if kind == "allocate":
                result = allocator.allocate(int(op[1]), int(op[2]))
            elif kind == "append":
                result = allocator.append(int(op[1]))
            elif kind == "fork":
                result = allocator.fork(int(op[1]), int(op[2]))
            elif kind == "free":
                result = allocator.free(int(op[1]))
            else:
                raise ValueError(f"unknown call {kind!r} in a trace")
        except OutOfBlocks:
            result = "raised"
        if result != "raised":
            if kind == "allocate":
                live.append(int(op[1]))
            elif kind == "fork":
                live.append(int(op[2]))
            elif kind == "free":
                live.remove(int(op[1]))
        if result is not None and result != "raised":
            if kind != "append":
                raise TypeError(f"{kind} returned {result!r}; only append returns something (a copy or None)")
            if not (isinstance(result, (tuple, list)) and len(result) == 2):
                raise TypeError(f"append returned {result!r}; expected None or a copy (src, dst) of two block ids")
            result = [_int(result[0], "a copy's source block"), _int(result[1], "a copy's destination block")]
        tables = {str(seq): [_int(b, f"a block in sequence {seq}'s table") for b in allocator.block_table(seq)]
                  for seq in live}
        steps.append({"result": result, "free": _int(allocator.num_free(), "num_free()"), "tables": tables})
    return steps


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{what} is {value!r}; block ids and counts are ints")
    return int(value)


def random_trace(seed: int, calls: int, num_blocks: int, block_size: int, max_prompt: int = 24,
                 live_at_most: int = 6) -> list[list]:
    """A trace of ``calls`` calls drawn from ``random.Random(seed)``: new sequences (prompts of 1 to
    ``max_prompt`` tokens), appends (the most frequent call, as in decoding), forks and frees, at most
    ``live_at_most`` sequences alive at once. It never runs out of blocks: a call is drawn only if it fits
    even when no block is shared (each live sequence counted at ``ceil(length / block_size)`` blocks of its
    own); otherwise a sequence is freed."""
    generator = random.Random(seed)
    lengths: dict[int, int] = {}
    ops: list[list] = []
    next_seq = 0

    def room(extra: int) -> bool:
        return sum(blocks_for(n, block_size) for n in lengths.values()) + extra <= num_blocks

    for _ in range(calls):
        roll, live = generator.random(), sorted(lengths)
        prompt = generator.randint(1, max_prompt)
        parent = generator.choice(live) if live else None
        if not live or (roll < 0.12 and len(live) < live_at_most and room(blocks_for(prompt, block_size))):
            if not room(blocks_for(prompt, block_size)):
                ops.append(["free", parent])
                del lengths[parent]
                continue
            ops.append(["allocate", next_seq, prompt])
            lengths[next_seq] = prompt
            next_seq += 1
        elif roll < 0.22 and len(live) < live_at_most and room(blocks_for(lengths[parent], block_size)):
            ops.append(["fork", parent, next_seq])
            lengths[next_seq] = lengths[parent]
            next_seq += 1
        elif roll < 0.3 or not room(1):
            ops.append(["free", parent])
            del lengths[parent]
        else:
            ops.append(["append", parent])
            lengths[parent] += 1
    return ops


def live_after(ops: Sequence[Sequence[Any]], steps: Sequence[dict[str, Any]]) -> list[list[int]]:
    """The live sequences after each call (a call that raised changes nothing)."""
    live: list[int] = []
    out = []
    for op, step in zip(ops, steps):
        if step["result"] != "raised":
            if op[0] == "allocate":
                live.append(int(op[1]))
            elif op[0] == "fork":
                live.append(int(op[2]))
            elif op[0] == "free" and int(op[1]) in live:
                live.remove(int(op[1]))
        out.append(list(live))
    return out


def trace_problems(ops: Sequence[Sequence[Any]], steps: Sequence[Any], num_blocks: int, block_size: int,
                   limit: int = 3) -> list[str]:
    """What is wrong with ``steps`` (a :func:`replay` record of ``ops``) for any paged allocator of
    ``num_blocks`` blocks of ``block_size`` slots; at most ``limit`` problems, the first first, each saying
    after which call and what was found. Empty: nothing.

    It **simulates the memory**: every token a call writes (the ``n`` tokens of ``allocate``, the new token of
    ``append``) is put in the slot the sequence's recorded table names for it (token ``p``: slot
    ``p % block_size`` of block ``table[p // block_size]``), a copy ``(src, dst)`` returned by ``append`` copies
    block ``src`` into ``dst`` first, ``fork`` writes nothing and ``free`` nothing. After every call, every live
    sequence must read back exactly its own tokens through its table: a block handed to another sequence (or
    written by one) while this one still reads it shows as a token overwritten. It also checks that a call
    that raised ``OutOfBlocks`` changed no table (and that fork and free never raise), that tables change only
    for the sequences a call names and only by a returned copy, that every table has ``ceil(length /
    block_size)`` blocks numbered ``0 .. num_blocks - 1``, that a copy goes into a block no table held, and that
    ``num_free()`` equals the blocks no live table holds (fewer: a leak; more: a block counted free while in
    use, or freed twice). Whether a call should have raised, and how many blocks a correct allocator holds
    after each call, it does not judge (that is the task; the grader counts them with its own allocator)."""
    if not isinstance(steps, list) or len(steps) != len(ops):
        return [f"the record has {len(steps) if isinstance(steps, list) else 'no'} steps; the trace has {len(ops)} calls"]
    memory: dict[int, list[Any]] = {}
    content: dict[int, list[Any]] = {}
    tables: dict[int, list[int]] = {}
    problems: list[str] = []
    for index, (op, step) in enumerate(zip(ops, steps)):
        where = f"after call {index} ({_describe(op)})"
        found = _step_tables(step, where)
        if isinstance(found, str):
            return problems + [found]
        result, free, new_tables = found
        kind = op[0]
        if result == "raised":
            if new_tables != tables:
                problems.append(f"{where}: the allocator raised OutOfBlocks but changed block tables; a call that "
                                "raises must leave the allocator as it was")
            if kind in ("fork", "free"):
                problems.append(f"{where}: {kind} raised OutOfBlocks; {kind} never needs a free block")
            if problems:
                return problems[:limit]
            continue
        seq = int(op[1])
        if (kind == "allocate") == (seq in content) or (kind == "fork" and int(op[2]) in content):
            return problems + [f"{where}: the call names a sequence that an earlier call failed to create, or one "
                               "that already exists: an earlier call raised OutOfBlocks where a correct allocator "
                               "has the blocks"]
        if kind == "allocate":
            content[seq] = [(seq, p) for p in range(int(op[2]))]
        elif kind == "fork":
            content[int(op[2])] = list(content.get(seq, []))
        elif kind == "free":
            content.pop(seq, None)
        if set(new_tables) != set(content):
            return problems + [f"{where}: the live sequences are {sorted(content)}, but tables were recorded for "
                               f"{sorted(new_tables)}"]
        named = {seq} | ({int(op[2])} if kind == "fork" else set())
        for other, table in new_tables.items():
            if other not in named and table != tables.get(other):
                problems.append(f"{where}: sequence {other}'s block table changed from {tables.get(other)} to {table}, "
                                "but the call does not name it: only the sequences a call names may change "
                                "(block_table() must not change anything)")
        for other, table in new_tables.items():
            bad = [b for b in table if not 0 <= b < num_blocks]
            if bad:
                return problems + [f"{where}: sequence {other}'s table holds block {bad[0]}; blocks are numbered "
                                   f"0 to {num_blocks - 1}"]
        for other, table in new_tables.items():
            old = tables.get(other)
            if old is None:
                continue
            copied = kind == "append" and other == seq and result is not None
            for index, (before, after) in enumerate(zip(old, table)):
                if before != after and not (copied and index == len(content[seq]) // block_size
                                            and [before, after] == list(result)):
                    problems.append(f"{where}: sequence {other}'s block {before} (its tokens {index * block_size} to "
                                    f"{(index + 1) * block_size - 1}) was replaced by block {after} with no copy "
                                    "returned: a table changes only by append, at the block its new token goes into, "
                                    "and a copy-on-write returns (src, dst)")
                    break
        if problems:
            return problems[:limit]
        if kind == "append":
            position = len(content[seq])
            if result is not None:
                src, dst = result
                held = {b for table in tables.values() for b in table}
                if not (0 <= src < num_blocks and 0 <= dst < num_blocks):
                    return problems + [f"{where}: append returned a copy {result} of blocks outside 0 to {num_blocks - 1}"]
                if dst in held:
                    problems.append(f"{where}: the copy's destination, block {dst}, was in use (held by a block table) "
                                    "before the call; copy into a free block")
                old = tables.get(seq, [])
                if position // block_size >= len(old) or old[position // block_size] != src:
                    problems.append(f"{where}: append copied block {src}, which is not the block the new token goes "
                                    "into (the one at index position // block_size of the sequence's table)")
                memory[dst] = list(memory.get(src, [None] * block_size))
            content[seq].append((seq, position))
            table = new_tables[seq]
            if position // block_size < len(table):
                memory.setdefault(table[position // block_size], [None] * block_size)[position % block_size] = \
                    content[seq][-1]
        elif kind == "allocate":
            table = new_tables.get(seq, [])
            for position, label in enumerate(content[seq]):
                if position // block_size < len(table):
                    memory.setdefault(table[position // block_size], [None] * block_size)[position % block_size] = label
        for other, table in new_tables.items():
            length = len(content[other])
            if len(table) != blocks_for(length, block_size):
                problems.append(f"{where}: sequence {other} holds {length} tokens in {len(table)} blocks; "
                                f"{length} tokens need ceil({length} / {block_size}) = "
                                f"{blocks_for(length, block_size)} blocks of {block_size} slots")
                continue
            for position, label in enumerate(content[other]):
                block = table[position // block_size]
                if memory.get(block, [None] * block_size)[position % block_size] != label:
                    problems.append(f"{where}: sequence {other} reads token {position} from block {block}, which no "
                                    "longer holds it: a block was given to another sequence (or written) while this "
                                    "sequence still read it")
                    break
        held = {b for table in new_tables.values() for b in table}
        if free != num_blocks - len(held):
            problems.append(f"{where}: num_free() is {free}, but {num_blocks - len(held)} of the {num_blocks} blocks "
                            f"are in no live sequence's table ("
                            + ("a block was lost: a leak" if free < num_blocks - len(held) else
                               "a block in use is counted free, or one was freed twice") + ")")
        tables = new_tables
        if problems:
            return problems[:limit]
    return problems


def _step_tables(step: Any, where: str) -> tuple[Any, int, dict[int, list[int]]] | str:
    """``(result, free, {seq: table})`` of one recorded step, or what is malformed about it."""
    if not isinstance(step, dict) or set(step) != {"result", "free", "tables"}:
        return f"{where}: the record is not the course's (result, free, tables); run the notebook again"
    result, free, raw = step["result"], step["free"], step["tables"]
    if not (result is None or result == "raised" or (isinstance(result, list) and len(result) == 2
                                                      and all(type(x) is int for x in result))):
        return f"{where}: the recorded result {result!r} is not None, a copy [src, dst] or 'raised'"
    if type(free) is not int or not isinstance(raw, dict):
        return f"{where}: the record's free count or tables are malformed"
    tables: dict[int, list[int]] = {}
    for key, table in raw.items():
        if not (isinstance(key, str) and key.lstrip("-").isdigit()) or not isinstance(table, list) \
                or not all(type(b) is int for b in table):
            return f"{where}: the record's block tables are malformed"
        tables[int(key)] = table
    return result, free, tables


def make_pool(num_blocks: int, n_kv_head: int, block_size: int, head_dim: int, seed: int, scale: float = 1.0):
    """A float64 pool ``[num_blocks, n_kv_head, block_size, head_dim]`` of N(0, scale^2) values drawn from
    ``seed`` (:func:`fill_garbage` then spoils the slots no sequence owns)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    return torch.randn((num_blocks, n_kv_head, block_size, head_dim), generator=generator,
                       dtype=torch.float64) * scale


def fill_garbage(pool, tables: Sequence[Sequence[int]], lengths: Sequence[int], seed: int, garbage: float = 50.0):
    """``pool`` with every slot that no sequence owns (blocks in no table, and slots past a sequence's
    length in its last block) overwritten by N(0, garbage^2) values drawn from ``seed``: what a real pool
    holds there is whatever an earlier sequence left."""
    import torch

    owned = torch.zeros(pool.shape[0], pool.shape[2], dtype=torch.bool)
    for table, length in zip(tables, lengths):
        for position in range(length):
            owned[table[position // pool.shape[2]], position % pool.shape[2]] = True
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn(pool.shape, generator=generator, dtype=pool.dtype) * garbage
    mask = (~owned)[:, None, :, None].expand_as(pool)
    return torch.where(mask, noise, pool)


def paged_inputs(spec: dict) -> tuple[Any, Any, Any, list[list[int]], list[int]]:
    """The inputs of a task-15.4 case from its spec (float64): ``q [B, n_head, head_dim]``, ``k_pool``,
    ``v_pool`` (``[num_blocks, n_kv_head, block_size, head_dim]``, garbage where no sequence owns a slot),
    the block tables and the lengths. Deterministic in ``spec["seed"]``."""
    import torch

    seed, tables, lengths = int(spec["seed"]), [list(map(int, t)) for t in spec["tables"]], list(map(int, spec["lengths"]))
    shape = (int(spec["num_blocks"]), int(spec["n_kv_head"]), int(spec["block_size"]), int(spec["head_dim"]))
    k_pool = fill_garbage(make_pool(*shape, seed=seed), tables, lengths, seed + 1)
    v_pool = fill_garbage(make_pool(*shape, seed=seed + 2), tables, lengths, seed + 3)
    generator = torch.Generator().manual_seed(seed + 4)
    q = torch.randn((len(tables), int(spec["n_head"]), shape[3]), generator=generator, dtype=torch.float64)
    return q, k_pool, v_pool, tables, lengths



def trace_from(spec: dict) -> tuple[int, int, list[list]]:
    """``(num_blocks, block_size, ops)`` of a task-15.3 case: its ``ops``, or :func:`random_trace` of its
    ``seed`` and ``calls`` (and ``max_prompt``, ``live_at_most`` if given) for its blocks."""
    num_blocks, block_size = int(spec["num_blocks"]), int(spec["block_size"])
    if "ops" in spec:
        ops = spec["ops"]
    else:
        extra = {key: int(spec[key]) for key in ("max_prompt", "live_at_most") if key in spec}
        ops = random_trace(int(spec["seed"]), int(spec["calls"]), num_blocks, block_size, **extra)
    return num_blocks, block_size, [list(op) for op in ops]
