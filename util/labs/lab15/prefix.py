"""Lab 15's given pieces of a prefix cache: request traces, their replay, and the memory they imply.

Requests that share a beginning (one system prompt before every user's question, each turn of a conversation
repeating the turns before it) share the keys and values of that beginning. A **prefix cache** (vLLM's
automatic prefix caching) keeps every *full* block of the paged cache under a name that says which tokens it
holds *and which tokens came before them*: the hash of its parent block's name and its own tokens. A new request
looks its prompt's full blocks up, one after the other, and reuses every cached block of its longest cached
prefix instead of computing it. Task 15.7 writes the cache (``PrefixCache``); this module is what the notebook,
the public checks and the grader share:

* a **trace** is a list of calls, each a JSON list: ``["allocate", seq, [token, ...]]`` (a request's prompt),
  ``["append", seq, token]`` (one generated token), ``["free", seq]`` (the request finished);
  :func:`prefix_trace` draws one of shared system prompts, multi-turn conversations and unrelated requests;
* :func:`replay` plays a trace on a cache and records, after every call, what ``allocate`` returned (the blocks it
  reused, or ``"raised"`` for :class:`~util.labs.lab15.paged.OutOfBlocks`), ``num_free()``, ``num_cached()``,
  ``evictions()`` and the block table of every live sequence;
* :func:`trace_problems` checks such a record against what any correct cache must do, by **simulating the
  memory**: a block a call computes is written with its tokens *in their context* (a key depends on every token
  before it), a reused block is read as it is, and after every call every live sequence must read back exactly
  its own prefix. A block handed out while another sequence still reads it, a cached block served after it was
  overwritten, or a block reused for the same tokens after another prefix shows as a sequence reading another
  context. It does **not** know which blocks a correct cache reuses or evicts: that is the task (the grader
  counts them with its own cache).

Which tokens a request could reuse: the longest prefix of *full* blocks within its prompt but its last token
(the last token is always computed: its logits give the first new token). Hit rate: blocks reused over the
prompts' blocks (reused + computed), appends aside.
"""
from __future__ import annotations

import random
from typing import Any, Sequence

from util.labs.lab15.paged import OutOfBlocks, blocks_for

VOCAB = 1000
"""Token ids in the traces: 0 .. VOCAB - 1."""


def _describe(op: Sequence[Any]) -> str:
    if op[0] == "allocate":
        return f"allocate {op[1]}, {len(op[2])} tokens"
    return op[0] + " " + ", ".join(str(x) for x in op[1:])


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{what} is {value!r}; block ids and counts are ints")
    return int(value)


def replay(cache: Any, ops: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """Play ``ops`` on ``cache`` (an object with ``allocate(seq, tokens) -> blocks reused``, ``append(seq,
    token)``, ``free(seq)``, ``block_table(seq)``, ``num_free()``, ``num_cached()`` and ``evictions()``); after
    every call record ``{"result", "free", "cached", "evictions", "tables"}``: what the call returned (for
    ``allocate`` the number of blocks reused, ``"raised"`` when a call raised ``OutOfBlocks``, else ``None``),
    the three counts and ``{seq: block_table(seq)}`` for every live sequence (keys as strings). Any other
    exception propagates."""
    live: list[int] = []
    steps = []
    for op in ops:
        kind = op[0]
        try:
            if kind == "allocate":
                result = _int(cache.allocate(int(op[1]), [int(t) for t in op[2]]), "allocate's result (blocks reused)")
            elif kind == "append":
                result = cache.append(int(op[1]), int(op[2]))
            elif kind == "free":
                result = cache.free(int(op[1]))
            else:
                raise ValueError(f"unknown call {kind!r} in a trace")
        except OutOfBlocks:
            result = "raised"
        if result != "raised":
            if kind == "allocate":
                live.append(int(op[1]))
            elif kind == "free":
                live.remove(int(op[1]))
            elif result is not None:
                raise TypeError(f"{kind} returned {result!r}; only allocate returns something (the blocks reused)")
        tables = {str(seq): [_int(b, f"a block in sequence {seq}'s table") for b in cache.block_table(seq)]
                  for seq in live}
        steps.append({"result": result, "free": _int(cache.num_free(), "num_free()"),
                      "cached": _int(cache.num_cached(), "num_cached()"),
                      "evictions": _int(cache.evictions(), "evictions()"), "tables": tables})
    return steps


def prefix_trace(seed: int, requests: int, num_blocks: int, block_size: int, *, systems: int = 3,
                 system_tokens: tuple[int, int] = (30, 70), conversations: int = 3,
                 user_tokens: tuple[int, int] = (4, 30), output_tokens: tuple[int, int] = (3, 24),
                 mix: tuple[float, float, float] = (0.45, 0.35, 0.2), live_at_most: int = 4, questions: int = 0,
                 aligned: bool = False) -> list[list]:
    """A trace of ``requests`` requests drawn from ``random.Random(seed)``, each a prompt (``allocate``), its
    generated tokens (``append``, interleaved with the other live requests') and its end (``free``), at most
    ``live_at_most`` alive at once. A request is, by the weights of ``mix``: one of ``systems`` system prompts
    followed by a user's question; the next turn of one of ``conversations`` conversations (the whole
    conversation so far, the answers generated included, then the user's new words; a conversation whose next turn
    could need more than half the pool starts again from its system prompt); or unrelated tokens.
    With ``questions``, a user's words are half the time one of that many questions everyone asks, and an unrelated
    request is half the time such a question alone; with ``aligned``, system prompts fill whole blocks (so a
    question's blocks hold the same tokens behind a system prompt and alone, after another prefix). It never runs
    out of blocks: a request starts only when the live requests' own blocks
    (``ceil(length / block_size)`` each, as if nothing were shared) leave room for it to its last token."""
    generator = random.Random(seed)

    def words(bounds: tuple[int, int]) -> list[int]:
        return [generator.randrange(VOCAB) for _ in range(generator.randint(*bounds))]

    system_prompts = [words(system_tokens) for _ in range(systems)]
    if aligned:
        system_prompts = [p[:max(len(p) // block_size, 1) * block_size] for p in system_prompts]
    asked = [words(user_tokens) for _ in range(questions)]

    def user() -> list[int]:
        if asked and generator.random() < 0.5:
            return list(generator.choice(asked))
        return words(user_tokens)

    history: list[list[int]] = [list(system_prompts[i % systems]) for i in range(conversations)]
    busy: set[int] = set()  # conversations with a turn in flight
    live: dict[int, dict[str, Any]] = {}
    ops: list[list] = []
    started = 0

    def room(extra: int) -> bool:
        return sum(blocks_for(r["end"], block_size) for r in live.values()) + extra <= num_blocks

    while started < requests or live:
        can_start = started < requests and len(live) < live_at_most
        if can_start and (not live or generator.random() < 0.3):
            kind = generator.choices(("system", "conversation", "unrelated"), weights=mix)[0]
            free_conversations = [c for c in range(conversations) if c not in busy]
            if kind == "conversation" and free_conversations:
                chat = generator.choice(free_conversations)
                longest = len(history[chat]) + user_tokens[1] + output_tokens[1]
                if blocks_for(longest, block_size) > num_blocks // 2:  # a conversation too long: a new one begins
                    history[chat] = list(system_prompts[chat % systems])
                prompt = history[chat] + user()
            else:
                chat = None
                prompt = (list(generator.choice(system_prompts)) if kind != "unrelated" else []) + user()
            output = words(output_tokens) or [generator.randrange(VOCAB)]
            if room(blocks_for(len(prompt) + len(output), block_size)):
                seq = started
                started += 1
                live[seq] = {"tokens": prompt + output, "at": len(prompt), "end": len(prompt) + len(output),
                             "chat": chat}
                if chat is not None:
                    busy.add(chat)
                ops.append(["allocate", seq, prompt])
                continue
            if not live:  # pragma: no cover - a pool too small for one request
                raise ValueError("the pool cannot hold one request of this trace")
        seq = generator.choice(sorted(live))
        request = live[seq]
        if request["at"] < request["end"]:
            ops.append(["append", seq, request["tokens"][request["at"]]])
            request["at"] += 1
        else:
            ops.append(["free", seq])
            if request["chat"] is not None:
                history[request["chat"]] = request["tokens"]
                busy.discard(request["chat"])
            del live[seq]
    return ops


def trace_from(spec: dict) -> tuple[int, int, list[list]]:
    """``(num_blocks, block_size, ops)`` of a task-15.7 case: its ``ops``, or :func:`prefix_trace` of its
    ``seed``, ``requests`` and any of the trace's keyword arguments it names."""
    num_blocks, block_size = int(spec["num_blocks"]), int(spec["block_size"])
    if "ops" in spec:
        return num_blocks, block_size, [list(op) for op in spec["ops"]]
    options = {key: (tuple(value) if isinstance(value, list) else value) for key, value in spec.items()
               if key in ("systems", "system_tokens", "conversations", "user_tokens", "output_tokens", "mix",
                          "live_at_most", "questions", "aligned")}
    return num_blocks, block_size, prefix_trace(int(spec["seed"]), int(spec["requests"]), num_blocks, block_size,
                                                **options)


def prompt_blocks(ops: Sequence[Sequence[Any]], steps: Sequence[dict[str, Any]], block_size: int) -> tuple[int, int]:
    """``(reused, computed)`` over a replay's prompts: the blocks each ``allocate`` reused (its result) and the
    rest of its prompt's blocks; calls that raised count nothing."""
    reused = computed = 0
    for op, step in zip(ops, steps):
        if op[0] == "allocate" and step["result"] != "raised":
            reused += step["result"]
            computed += blocks_for(len(op[2]), block_size) - step["result"]
    return reused, computed


def summary(ops: Sequence[Sequence[Any]], steps: Sequence[dict[str, Any]], block_size: int) -> dict[str, Any]:
    """A replay's figures: ``reused`` and ``computed`` prompt blocks (:func:`prompt_blocks`), ``hit_rate``
    (reused over both), ``evictions`` (the cache's count at the end)."""
    reused, computed = prompt_blocks(ops, steps, block_size)
    return {"reused": reused, "computed": computed,
            "hit_rate": reused / (reused + computed) if reused + computed else 0.0,
            "evictions": steps[-1]["evictions"] if steps else 0}


class _Labels:
    """Each position's context as one int: the label of (the label before it, its token), numbered as met."""

    def __init__(self) -> None:
        self.ids: dict[tuple[int, int], int] = {}

    def of(self, tokens: Sequence[int]) -> list[int]:
        out, last = [], -1
        for token in tokens:
            last = self.ids.setdefault((last, int(token)), len(self.ids))
            out.append(last)
        return out


def trace_problems(ops: Sequence[Sequence[Any]], steps: Sequence[Any], num_blocks: int, block_size: int,
                   limit: int = 3) -> list[str]:
    """What is wrong with ``steps`` (a :func:`replay` record of ``ops``) for any prefix cache of ``num_blocks``
    blocks of ``block_size`` slots; at most ``limit`` problems, the first first. Empty: nothing.

    It **simulates the memory**: a slot holds a token *in its context* (the tokens before it matter: a key
    depends on all of them). ``allocate`` that reused ``r`` blocks reads them as they are and writes the rest of
    its prompt into the blocks after them; ``append`` writes one slot (into a new block at a block's start);
    ``free`` writes nothing. A block written must be held by no other live sequence. After every call every live
    sequence must read back its own tokens in their context, and ``num_free()`` must count the blocks no live
    table holds; a table has ``ceil(length / block_size)`` blocks, changes only for the sequence a call names and
    only by a block added at its end; ``allocate`` reuses no more than the full blocks before its prompt's last
    token; the counts never go negative and evictions never decrease. Which blocks a correct cache reuses, how
    many it keeps cached and evicts, it does not judge (the grader counts them with its own cache)."""
    if not isinstance(steps, list) or len(steps) != len(ops):
        return [f"the record has {len(steps) if isinstance(steps, list) else 'no'} steps; the trace has {len(ops)} calls"]
    labels = _Labels()
    memory: dict[int, list[int | None]] = {}
    content: dict[int, list[int]] = {}  # live sequence -> the labels of its tokens
    tokens_of: dict[int, list[int]] = {}
    tables: dict[int, list[int]] = {}
    evicted = 0
    problems: list[str] = []

    def slot(block: int, position: int, label: int) -> None:
        memory.setdefault(block, [None] * block_size)[position % block_size] = label

    for index, (op, step) in enumerate(zip(ops, steps)):
        where = f"after call {index} ({_describe(op)})"
        if not (isinstance(step, dict) and set(step) == {"result", "free", "cached", "evictions", "tables"}
                and isinstance(step["tables"], dict)):
            return problems + [f"{where}: the record is not the one replay() makes; run the notebook again"]
        try:
            new_tables = {int(k): [int(b) for b in v] for k, v in step["tables"].items()}
            free, cached, evictions = int(step["free"]), int(step["cached"]), int(step["evictions"])
        except (TypeError, ValueError):
            return problems + [f"{where}: the record is not the one replay() makes; run the notebook again"]
        kind, seq, result = op[0], int(op[1]), step["result"]
        if min(free, cached, evictions) < 0 or evictions < evicted:
            return problems + [f"{where}: num_free() {free}, num_cached() {cached}, evictions() {evictions}: counts "
                               "are never negative and evictions never decrease"]
        evicted = evictions
        if result == "raised":
            if new_tables != tables:
                return problems + [f"{where}: the cache raised OutOfBlocks but changed block tables; a call that "
                                   "raises leaves the cache as it was"]
            if kind == "free":
                return problems + [f"{where}: free raised OutOfBlocks; free never needs a block"]
            continue
        if kind == "allocate":
            content[seq] = labels.of(op[2])
            tokens_of[seq] = [int(t) for t in op[2]]
        elif kind == "append":
            tokens_of[seq].append(int(op[2]))
            content[seq] = labels.of(tokens_of[seq])
        else:
            content.pop(seq, None)
            tokens_of.pop(seq, None)
        if set(new_tables) != set(content):
            return problems + [f"{where}: the live sequences are {sorted(content)}, but tables were recorded for "
                               f"{sorted(new_tables)}"]
        for other, table in new_tables.items():
            if other != seq and table != tables.get(other):
                return problems + [f"{where}: sequence {other}'s block table changed, but the call does not name it: "
                                   "only the sequence a call names may change"]
            bad = [b for b in table if not 0 <= b < num_blocks]
            if bad:
                return problems + [f"{where}: sequence {other}'s table holds block {bad[0]}; blocks are numbered "
                                   f"0 to {num_blocks - 1}"]
            if len(table) != blocks_for(len(content[other]), block_size):
                return problems + [f"{where}: sequence {other} holds {len(content[other])} tokens in {len(table)} "
                                   f"blocks; they need ceil({len(content[other])} / {block_size}) = "
                                   f"{blocks_for(len(content[other]), block_size)}"]
            if len(set(table)) != len(table):
                return problems + [f"{where}: sequence {other}'s table holds a block twice"]
        others = {b for other, table in new_tables.items() if other != seq for b in table}
        if kind == "allocate":
            table = new_tables[seq]
            length = len(content[seq])
            if not (isinstance(result, int) and not isinstance(result, bool)
                    and 0 <= result <= (length - 1) // block_size):
                return problems + [f"{where}: allocate returned {result!r}; it returns the blocks it reused, from 0 "
                                   f"to the full blocks before the prompt's last token ({(length - 1) // block_size} "
                                   "here: the last token is always computed)"]
            for position in range(result * block_size):
                if memory.get(table[position // block_size], [None] * block_size)[position % block_size] \
                        != content[seq][position]:
                    return problems + [f"{where}: the prompt reused block {table[position // block_size]} for its "
                                       f"tokens {position // block_size * block_size} to "
                                       f"{(position // block_size + 1) * block_size - 1}, but that block holds other "
                                       "tokens or the same tokens after another prefix (a block's name must say "
                                       "which blocks came before it), or it was evicted and written since"]
            written = table[result:]
            for position in range(result * block_size, length):
                slot(table[position // block_size], position, content[seq][position])
        elif kind == "append":
            table, old = new_tables[seq], tables[seq]
            position = len(content[seq]) - 1
            if table[:len(old)] != old or len(table) - len(old) != (position % block_size == 0):
                return problems + [f"{where}: the table went from {old} to {table}; append adds one block at the end "
                                   "exactly when the new token starts a block, and changes nothing else"]
            written = [table[position // block_size]]
            slot(written[0], position, content[seq][position])
        else:
            written = []
        shared = sorted(set(written) & others)
        if shared:
            return problems + [f"{where}: block {shared[0]} was written for sequence {seq} while another live sequence "
                               "still reads it: a block held by a sequence is never handed out (nor evicted) "
                               "until every sequence holding it has freed it"]
        held = {b for table in new_tables.values() for b in table}
        if free != num_blocks - len(held):
            return problems + [f"{where}: num_free() is {free}, but {num_blocks - len(held)} blocks are held by no "
                               "live sequence (cached or not, a block no sequence holds is free)"]
        for other, table in new_tables.items():
            for position, label in enumerate(content[other]):
                if memory.get(table[position // block_size], [None] * block_size)[position % block_size] != label:
                    return problems + [f"{where}: sequence {other} reads the wrong context at its token {position} "
                                       f"(block {table[position // block_size]}): that block was handed to another "
                                       "sequence, or overwritten, while it still held this one's tokens"]
        tables = new_tables
    return problems[:limit]
