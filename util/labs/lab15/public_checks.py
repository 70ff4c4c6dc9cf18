"""Lab 15's public checks (``check("15.3")``): what the notebook states, on inputs it shows, never a hidden one.

BPE: the notebook's worked example (``aaabdaaabac``: merges ``a a``, then ``a b`` by the tie-break, then
``aa ab``) and a round trip through characters the tokenizer never saw. KV bytes: TinyGPT's 1,024 bytes per
token (lab 10) and the hand counts of the notebook. The allocator: the notebook's hand-counted traces, each
record also checked by simulating the memory (:func:`util.labs.lab15.paged.trace_problems`). Paged attention:
a cache laid out contiguously by hand and attended by lab 10's ``Attention.attend``, and indifference to
garbage. The scheduler: the notebook's two-request example, iteration by iteration. Speculative
decoding: the plain greedy loop's tokens, and a perfect draft's ``ceil(n / (k + 1))`` target calls.

``check()`` hands a check a wrapper of the student's class or function (its results stored as the grader
stores them); the checks that need the object itself (a class's methods, a scheduler's ``Decision``) take it
with ``inspect.unwrap``.
"""
from __future__ import annotations

import inspect
from typing import Any

from util.checks import equal, first, has_keys, is_int
from util.contract import Check

WORKED = "aaabdaaabac"
WORKED_MERGES = [(b"a", b"a"), (b"a", b"b"), (b"aa", b"ab")]
"""The notebook's worked example and the merges it works out by hand."""


# ---------------------------------------------------------------- 15.1

def _worked_example(cls) -> str | None:
    tokenizer = inspect.unwrap(cls).train(WORKED, 3)
    merges = [(bytes(a), bytes(b)) for a, b in tokenizer.merges]
    return first(equal(merges, WORKED_MERGES, "BPETokenizer.train('aaabdaaabac', 3).merges"),
                 equal(tokenizer.encode(WORKED), [258, 100, 258, 97, 99], "encode('aaabdaaabac')"))


def _stops_early(cls) -> str | None:
    return equal(len(inspect.unwrap(cls).train("ab ab", 10).merges), 2,
                 "len(BPETokenizer.train('ab ab', 10).merges): once every pre-token is one token, no pair is left")


def _byte_fallback(cls) -> str | None:
    tokenizer = inspect.unwrap(cls).train("the cat sat on the mat, the end", 12)
    text = "naïve café ☕ the cat"
    ids = tokenizer.encode(text)
    return first(equal(tokenizer.decode(ids), text, f"decode(encode({text!r}))"),
                 equal(all(0 <= i < 256 + len(tokenizer.merges) for i in ids), True,
                       "every id below 256 + len(merges)"),
                 equal(tokenizer.encode("☕"), list("☕".encode("utf-8")), "encode('☕'), never seen: its UTF-8 bytes"))


# ---------------------------------------------------------------- 15.2

def _config(**changes: Any):
    from util.labs.lab10.gpt import TINY, GPTConfig

    return GPTConfig.from_dict({**TINY.to_dict(), **changes})


def _tiny_counts(fn) -> str | None:
    import torch

    found = fn(_config(), [17], [128], 16, torch.float32)
    return first(has_keys(found, ("bytes_per_token", "needed", "contiguous", "paged"), "footprint(...)"),
                 equal(found["bytes_per_token"], 1024, "bytes_per_token of TinyGPT in float32 (lab 10: 2 x 2 x 4 x 16 x 4)"),
                 equal([found["needed"], found["contiguous"], found["paged"]], [17 * 1024, 128 * 1024, 32 * 1024],
                       "[needed, contiguous, paged] for one sequence of 17 tokens, 128 reserved, blocks of 16"))


def _shared_counts(fn) -> str | None:
    import torch

    found = fn(_config(n_kv_head=1), [10, 12], [16, 16], 4, torch.float16, shared=8)
    return first(equal(found["bytes_per_token"], 2 * 2 * 1 * 16 * 2, "bytes_per_token with one KV head in float16"),
                 is_int(found["paged"], "paged"),
                 equal(found["paged"] // (4 * 128), 4, "blocks of the two sequences sharing 8 tokens (3 + 3 - 2)"))


# ---------------------------------------------------------------- 15.3

HAND_TRACES = {
    "a sequence grows": (8, 4, [["allocate", 0, 6], ["append", 0], ["append", 0], ["append", 0], ["free", 0]],
                         [6, 6, 6, 5, 8], 0),
    "a fork copies its partial block when it writes": (8, 4, [["allocate", 0, 6], ["fork", 0, 1], ["append", 1],
                                                               ["append", 0], ["free", 0], ["free", 1]],
                                                       [6, 6, 5, 5, 6, 8], 1),
    "a fork at a block boundary copies nothing": (8, 4, [["allocate", 0, 8], ["fork", 0, 1], ["append", 1],
                                                          ["append", 0], ["free", 1], ["free", 0]],
                                                  [6, 6, 5, 4, 5, 8], 0),
    "out of blocks: raise and change nothing": (3, 4, [["allocate", 0, 5], ["allocate", 1, 5], ["allocate", 1, 4],
                                                        ["append", 1], ["free", 1], ["append", 0]],
                                                [1, 1, 0, 0, 1, 1], 0),
}
"""Name -> (num_blocks, block_size, trace, num_free() after each call, copies): the notebook's hand counts."""


def _hand_traces(cls) -> str | None:
    from util.labs.lab15.paged import replay, trace_problems

    for name, (blocks, size, ops, free, copies) in HAND_TRACES.items():
        steps = replay(inspect.unwrap(cls)(blocks, size), ops)
        problem = first(next(iter(trace_problems(ops, steps, blocks, size)), None),
                        equal([s["free"] for s in steps], free, f"num_free() after each call ({name})"),
                        equal(sum(isinstance(s["result"], list) for s in steps), copies, f"copies ({name})"))
        if problem:
            return problem
    return None


def _raises(cls) -> str | None:
    from util.labs.lab15.paged import replay

    steps = replay(inspect.unwrap(cls)(3, 4), HAND_TRACES["out of blocks: raise and change nothing"][2])
    return equal([s["result"] for s in steps], [None, "raised", None, "raised", None, None],
                 "what each call of the out-of-blocks trace returned ('raised': OutOfBlocks)")


# ---------------------------------------------------------------- 15.4

def _contiguous_case():
    """A small cache laid out by hand: keys and values of 2 sequences (MHA 2 heads and GQA 4 over 2), written
    into a pool of blocks of 3 through shuffled tables, and lab 10's explicit attention of the last query."""
    import torch

    from util.labs.lab10.gpt import Attention

    generator = torch.Generator().manual_seed(15)
    cases = []
    for n_head, n_kv_head in ((2, 2), (4, 2)):
        head_dim, size, lengths, tables = 4, 3, [7, 3], [[5, 0, 3], [2]]
        pool_k = torch.randn((6, n_kv_head, size, head_dim), generator=generator, dtype=torch.float64) * 30
        pool_v = torch.randn((6, n_kv_head, size, head_dim), generator=generator, dtype=torch.float64) * 30
        q = torch.randn((2, n_head, head_dim), generator=generator, dtype=torch.float64)
        expected = []
        attention = Attention(_config(d_model=n_head * head_dim, n_head=n_head, n_kv_head=n_kv_head))
        for b, (table, length) in enumerate(zip(tables, lengths)):
            k = torch.randn((n_kv_head, length, head_dim), generator=generator, dtype=torch.float64)
            v = torch.randn((n_kv_head, length, head_dim), generator=generator, dtype=torch.float64)
            for position in range(length):
                pool_k[table[position // size], :, position % size] = k[:, position]
                pool_v[table[position // size], :, position % size] = v[:, position]
            expected.append(attention.attend(q[b][None, :, None], k[None], v[None])[0, :, 0])
        cases.append((q, pool_k, pool_v, tables, lengths, torch.stack(expected)))
    return cases


def _matches_attend(fn) -> str | None:
    import torch

    for q, pool_k, pool_v, tables, lengths, expected in _contiguous_case():
        found = torch.as_tensor(fn(q.clone(), pool_k.clone(), pool_v.clone(), tables, lengths))
        heads = f"{q.shape[1]} heads over {pool_k.shape[1]} KV heads"
        problem = first(equal(list(found.shape), list(expected.shape), f"the output's shape ({heads})"),
                        equal(bool(torch.allclose(found.double(), expected, rtol=1e-6, atol=1e-9)), True,
                              f"the output ({heads}) close to Attention.attend over the same keys and values"))
        if problem:
            return problem
    return None


def _ignores_garbage(fn) -> str | None:
    import torch

    q, pool_k, pool_v, tables, lengths, _ = _contiguous_case()[0]
    first_run = torch.as_tensor(fn(q.clone(), pool_k.clone(), pool_v.clone(), tables, lengths))
    spoiled_k, spoiled_v = pool_k.clone(), pool_v.clone()
    for block in (1, 4):          # blocks in no table
        spoiled_k[block] = 1e3
        spoiled_v[block] = -1e3
    spoiled_k[3, :, 1:] = 1e3     # past sequence 0's 7 tokens, in its last block
    spoiled_v[3, :, 1:] = -1e3
    second = torch.as_tensor(fn(q.clone(), spoiled_k, spoiled_v, tables, lengths))
    return equal(bool(torch.equal(first_run, second)), True,
                 "the same output when slots no sequence owns (other blocks, past the length) change")


# ---------------------------------------------------------------- 15.5

HAND_CONFIG = {"num_blocks": 4, "block_size": 4, "max_tokens": 16, "max_running": 4}
HAND_REQUESTS = [[0, 0, 7, 6], [1, 0, 6, 5]]
"""The notebook's example: 2 requests at time 0, 4 blocks of 4 slots, 16 tokens per iteration."""
HAND_ITERATIONS = [([], [], [0, 1]), ([], [0, 1], []), ([1], [0], []), ([], [0], []), ([], [0], []), ([], [0], []),
                   ([], [], [1]), ([], [1], []), ([], [1], [])]
"""(preempt, decode, admit) of each iteration, worked out in the notebook."""


def _hand_schedule(fn) -> str | None:
    from util.labs.lab15.serving import config_from, requests_from, simulate

    run = simulate(inspect.unwrap(fn), requests_from({"requests": HAND_REQUESTS}), config_from({"config": HAND_CONFIG}))
    found = [(it["preempt"], it["decode"], it["admit"]) for it in run.iterations]
    return first(equal(run.deadlock, None, "the run's deadlock"),
                 equal(found, HAND_ITERATIONS, "(preempt, decode, admit) of each iteration of the notebook's example"))


def _no_preemption_when_roomy(fn) -> str | None:
    from util.labs.lab15.serving import config_from, requests_from, simulate

    config = {"config": {**HAND_CONFIG, "num_blocks": 64, "max_tokens": 64}}
    run = simulate(inspect.unwrap(fn), requests_from({"requests": HAND_REQUESTS}), config_from(config))
    return first(equal(run.preemptions, 0, "preemptions with 64 blocks"),
                 equal([it["admit"] for it in run.iterations][0], [0, 1],
                       "the first iteration's admissions with room for both"))


# ---------------------------------------------------------------- 15.6

SMALL = {"vocab": 64, "n_positions": 64, "d_model": 16, "n_layer": 1, "n_head": 2}


def _small_models(sigma: float):
    from util.labs.lab10.gpt import GPTConfig, prompt_ids, seeded_gpt
    from util.labs.lab15.speculative import CountingTarget, draft_of

    cfg = GPTConfig.from_dict(SMALL)
    model = seeded_gpt(cfg, 3).double()
    draft = model if sigma == 0 else draft_of(model, sigma, 4)
    return model, CountingTarget(model), draft, prompt_ids(cfg, 3, 3)


def _greedy(model, prompt, n: int) -> list[int]:
    import torch

    ids = prompt
    with torch.no_grad():
        for _ in range(n):
            ids = torch.cat([ids, model(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return ids[0, prompt.shape[1]:].tolist()


def _tokens(value: Any) -> list[int]:
    import torch

    return [int(t) for t in torch.as_tensor(value).reshape(-1).tolist()]


def _same_as_greedy(fn) -> str | None:
    model, target, draft, prompt = _small_models(0.05)
    tokens = _tokens(fn(target, draft, prompt.clone(), 20, 3))
    return first(equal(tokens, _greedy(model, prompt, 20), "speculative_generate(small model, 20 tokens, k=3) "
                                                           "against the plain greedy loop of the target"),
                 equal(target.calls <= 20, True, f"{target.calls} target calls <= 20"))


def _perfect_draft(fn) -> str | None:
    for n, k in ((20, 3), (7, 4), (5, 1)):
        model, target, draft, prompt = _small_models(0)
        tokens = _tokens(fn(target, draft, prompt.clone(), n, k))
        problem = first(equal(tokens, _greedy(model, prompt, n), f"tokens with the target as its own draft (n={n})"),
                        equal(target.calls, -(-n // (k + 1)),
                              f"target calls with a perfect draft, n={n}, k={k}: ceil(n / (k + 1))"))
        if problem:
            return problem
    return None


# ---------------------------------------------------------------- 15.7

HAND_PREFIX = [["allocate", 0, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]], ["allocate", 1, [1, 2, 3, 4, 5, 6, 7, 8, 11]],
               ["free", 0], ["free", 1], ["allocate", 2, [1, 2, 3, 4, 5, 6, 7, 8]], ["allocate", 3, [9] * 13],
               ["allocate", 4, [1, 2, 3, 4, 5, 6, 7, 8, 12]]]
"""The notebook's hand-counted requests on 6 blocks of 4 slots (a system prompt of 8 tokens, then a request too
large to share anything)."""
HAND_PREFIX_COUNTS = [(0, 3, 2, 0), (2, 2, 2, 0), (None, 3, 2, 0), (None, 6, 2, 0), (1, 4, 2, 0), (0, 0, 4, 1),
                      ("raised", 0, 4, 1)]
"""After each call of :data:`HAND_PREFIX`: (blocks reused, num_free(), num_cached(), evictions())."""


def _hand_prefix(cls) -> str | None:
    from util.labs.lab15.prefix import replay, trace_problems

    steps = replay(inspect.unwrap(cls)(6, 4), HAND_PREFIX)
    problems = trace_problems(HAND_PREFIX, steps, 6, 4)
    if problems:
        return problems[0]
    found = [(s["result"], s["free"], s["cached"], s["evictions"]) for s in steps]
    return equal(found, HAND_PREFIX_COUNTS, "(reused, num_free(), num_cached(), evictions()) after each call")


def _prefix_raises(cls) -> str | None:
    from util.labs.lab15.paged import OutOfBlocks

    cache = inspect.unwrap(cls)(2, 4)
    cache.allocate(0, [1, 2, 3])
    try:
        cache.allocate(1, list(range(9)))
    except OutOfBlocks:
        return equal((cache.num_free(), cache.block_table(0)), (1, cache.block_table(0)),
                     "num_free() after a refused allocate")
    return "allocate(1, 9 tokens) on a pool with 1 free block of 4 slots did not raise OutOfBlocks"


def _by_size(answer: Any) -> list[float]:
    """The answer's hit rates from the smallest cache to the largest (JSON gives the sizes back as strings)."""
    return [rate for _, rate in sorted((int(size), rate) for size, rate in answer["hit_rate_by_blocks"].items())]


# ---------------------------------------------------------------- 15.8

def _sampling_models(sigma: float):
    """A one-layer TinyGPT over 12 tokens (float64), its draft of noise ``sigma`` (the model itself at 0) and a
    4-token prompt: small enough that 300 samples show its distribution."""
    from util.labs.lab10.gpt import GPTConfig, prompt_ids, seeded_gpt
    from util.labs.lab15.speculative import draft_of

    cfg = GPTConfig.from_dict({"vocab": 12, "n_positions": 32, "d_model": 32, "n_layer": 1, "n_head": 2})
    model = seeded_gpt(cfg, 9).double().eval()
    return model, (model if sigma == 0 else draft_of(model, sigma, 90)), prompt_ids(cfg, 4, 9)


def _equal_draft_sampling(fn) -> str | None:
    from util.labs.lab15.speculative import CountingTarget, uniform_stream

    target_model, draft, prompt = _sampling_models(0.0)
    counted = CountingTarget(target_model)
    draws = uniform_stream(5)
    tokens = _tokens(fn(counted, draft, prompt, 10, 4, draws))
    return first(equal(len(tokens), 10, "the number of tokens"),
                 equal(counted.calls, 2, "target calls for n = 10, k = 4 with the target as its own draft "
                                         "(every proposal accepted: ceil(10 / 5))"),
                 equal(draws.used, 18, "draws used (each round: 4 proposals, 4 tests, 1 token)"))


def _sampling_frequencies(fn) -> str | None:
    import torch

    from util.labs.lab15.speculative import CountingTarget, uniform_stream

    target_model, draft, prompt = _sampling_models(0.3)
    with torch.no_grad():
        p = torch.softmax(target_model(prompt)[0, -1].double(), -1)
    counts = torch.zeros_like(p)
    for seed in range(300):
        tokens = _tokens(fn(CountingTarget(target_model), draft, prompt.clone(), 1, 1, uniform_stream(seed, 8)))
        counts[tokens[0]] += 1
    distance = float((counts / 300 - p).abs().sum() / 2)
    return None if distance < 0.12 else (f"over 300 streams the first token's frequencies are {distance:.2f} away "
                                         "(total variation) from the target's softmax; sampling correctly stays "
                                         "within 0.12")


# ---------------------------------------------------------------- 15.9

HAND_CHUNK_REQUESTS = [[0, 0, 4, 4], [1, 0, 3, 3], [2, 0, 9, 2], [3, 0, 5, 2]]
"""The notebook's example of chunked prefill: 4 requests at time 0, a budget of 8 tokens, at most 3 running."""
HAND_CHUNKS = [([], [[0, 4], [1, 3], [2, 1]]), ([0, 1], [[2, 6]]), ([0, 1], [[2, 2]]), ([0, 2], [[3, 5]]), ([3], [])]
"""(decode, prefill) of each iteration, worked out in the notebook."""


def _hand_chunks(fn) -> str | None:
    from util.labs.lab15.chunked import ChunkConfig, chunked_requests, simulate_chunked

    run = simulate_chunked(inspect.unwrap(fn), chunked_requests(0, {"requests": HAND_CHUNK_REQUESTS}), ChunkConfig(8, 3))
    found = [(it["decode"], it["prefill"]) for it in run.iterations]
    return first(equal(run.deadlock, None, "the run's deadlock"),
                 equal(found, HAND_CHUNKS, "(decode, prefill) of each iteration of the notebook's example"))


def _decodes_first(fn) -> str | None:
    from util.labs.lab15.chunked import ChunkConfig, chunked_requests, simulate_chunked

    requests = chunked_requests(0, {"requests": [[0, 0, 2, 5], [1, 0, 2, 5], [2, 0, 40, 2]]})
    run = simulate_chunked(inspect.unwrap(fn), requests, ChunkConfig(4, 3))
    return equal([(it["decode"], it["prefill"]) for it in run.iterations[:3]],
                 [([], [[0, 2], [1, 2]]), ([0, 1], [[2, 2]]), ([0, 1], [[2, 2]])],
                 "the first three iterations of 2 short prompts and a 40-token one under a budget of 4")


def _by_budget(answer: Any, key: str) -> list[float]:
    return [value for _, value in sorted(answer[key].items(), key=lambda item: int(item[0]))]


# ---------------------------------------------------------------- 15.10

HAND_SWAP_REQUESTS = [[0, 0, 7, 3], [1, 0, 8, 4], [2, 0, 2, 2]]
HAND_SWAP_CONFIG = {"num_blocks": 5, "cpu_blocks": 1, "block_size": 4, "max_tokens": 64, "max_running": 3,
                    "swap_ns_per_block": 60_000}
"""The notebook's example of preemption by swapping: 3 requests at time 0, 5 GPU blocks and 1 CPU block of 4 slots,
a block moved in 60 us."""
HAND_SWAPS = [[[], [], [], [], [0, 1, 2]], [[], [2], [], [0, 1], []], [[1], [], [], [0], []],
              [[], [], [2], [], [1]], [[], [], [], [2, 1], []]]
"""(preempt, swap_out, swap_in, decode, admit) of each iteration, worked out in the notebook."""


def _hand_swaps(fn) -> str | None:
    from util.labs.lab15.swapping import simulate_swapping, swap_config_from, swap_requests

    run = simulate_swapping(inspect.unwrap(fn), swap_requests(0, {"requests": HAND_SWAP_REQUESTS}),
                            swap_config_from({"config": HAND_SWAP_CONFIG}))
    found = [[it[key] for key in ("preempt", "swap_out", "swap_in", "decode", "admit")] for it in run.iterations]
    return first(equal(run.deadlock, None, "the run's deadlock"),
                 equal(found, HAND_SWAPS, "(preempt, swap_out, swap_in, decode, admit) of each iteration of the "
                       "notebook's example"))


def _no_cpu_room(fn) -> str | None:
    from util.labs.lab15.swapping import simulate_swapping, swap_config_from, swap_requests

    config = swap_config_from({"config": {**HAND_SWAP_CONFIG, "cpu_blocks": 0}})
    run = simulate_swapping(inspect.unwrap(fn), swap_requests(0, {"requests": HAND_SWAP_REQUESTS}), config)
    return first(equal(run.deadlock, None, "the run's deadlock"),
                 equal(run.swaps, 0, "swaps with no CPU block at all"),
                 equal(run.preemptions > 0, True, "preemptions (recomputed) of the example with no CPU block"))


def _by_prompt(answer: Any, kind: str) -> list[float]:
    return [value for _, value in sorted(answer["throughput_by_prompt"][kind].items(), key=lambda item: int(item[0]))]


CHECKS: dict[str, tuple[Check, ...]] = {
    "15.1": (
        Check("the worked example: merges 'a a', 'a b', 'aa ab' and its ids", _worked_example,
              "count every adjacent pair (overlaps too); ties go to the smallest pair of byte strings; merge left to "
              "right", calls_function=True),
        Check("training stops when no pair is left", _stops_early,
              "merges never cross a pre-token's edge: ' ab' and 'ab' are words of their own", calls_function=True),
        Check("byte fallback: unseen characters round-trip as their UTF-8 bytes", _byte_fallback,
              "encode the UTF-8 bytes of each pre-token; decode joins the tokens' bytes", calls_function=True),
        Check("256 merges, the first one ' t', and a lossless round trip",
              lambda a: first(has_keys(a, ("first_merges", "merges", "tokens", "bytes_per_token", "roundtrip",
                                           "unseen")),
                              equal(a["merges"], 256, "answer['merges']"),
                              equal(a["first_merges"][0], ["·", "t"], "answer['first_merges'][0] (stated)"),
                              equal(a["roundtrip"], True, "answer['roundtrip']")),
              "the notebook states the first merge; decode(encode(text)) must give the text back"),
    ),
    "15.2": (
        Check("TinyGPT: 1,024 bytes per token; one sequence of 17 tokens", _tiny_counts,
              "needed = tokens x bytes per token; contiguous = reserved slots; paged = whole blocks",
              calls_function=True),
        Check("a shared prefix's full blocks are stored once", _shared_counts,
              "only full blocks of the shared prefix are shared; the block it ends in is copied per sequence",
              calls_function=True),
        Check("BPE's cache is smaller than byte-level's, and paging beats reserving",
              lambda a: first(equal(a["kv_bytes_bpe"] < a["kv_bytes_byte_level"], True,
                                    "kv_bytes_bpe < kv_bytes_byte_level"),
                              equal(a["footprint"]["needed"] <= a["footprint"]["paged"] < a["footprint"]["contiguous"],
                                    True, "needed <= paged < contiguous")),
              "a BPE token carries about two bytes of this text"),
    ),
    "15.3": (
        Check("the notebook's hand-counted traces", _hand_traces,
              "allocate takes ceil(n / block_size) blocks; append a block only when the last is full, or to copy a "
              "shared block it writes into; fork none; free gives back what no other sequence holds",
              calls_function=True),
        Check("a call that cannot get its blocks raises OutOfBlocks", _raises,
              "check the free blocks before changing anything", calls_function=True),
        Check("the answer's free counts stay within the pool",
              lambda a: first(has_keys(a, ("free", "copies", "raised", "peak_blocks")),
                              equal(all(0 <= f <= 24 for f in a["free"]), True, "0 <= free <= 24 after every call")),
              "the notebook's trace runs on 24 blocks"),
    ),
    "15.4": (
        Check("a hand-laid cache: the same output as Attention.attend", _matches_attend,
              "read each sequence's keys and values through its block table, its first `length` slots; each KV head "
              "serves n_head // n_kv_head query heads", calls_function=True),
        Check("slots no sequence owns change nothing", _ignores_garbage,
              "read only the blocks in the table and only the first `length` slots", calls_function=True),
        Check("the paged decoding gives the uncached tokens",
              lambda a: first(equal(a["equal_to_uncached"], True, "answer['equal_to_uncached']"),
                              equal(a["logits_close"], True, "answer['logits_close']"),
                              equal(len(a["tokens"]), 40, "the number of tokens")),
              "positions continue at the cache's length; write the new key and value before attending"),
    ),
    "15.5": (
        Check("the notebook's two requests, iteration by iteration", _hand_schedule,
              "decode oldest first; preempt the newest when a block is missing; admit only when nobody was preempted, "
              "in queue order, stopping at the first that does not fit", calls_function=True),
        Check("with room for everything, nothing is preempted", _no_preemption_when_roomy,
              "preempt only when a decode needs a block and none is free", calls_function=True),
        Check("no deadlock on the notebook's trace, throughput grows with the running limit",
              lambda a: first(equal(a["summary"]["deadlock"], None, "answer['summary']['deadlock']"),
                              equal(a["throughput_by_max_running"]["1"] < a["throughput_by_max_running"]["8"], True,
                                    "throughput at max_running 1 < at 8")),
              "a batch of decodes costs about what one decode costs: the weights are read once"),
    ),
    "15.6": (
        Check("the target's greedy tokens, whatever the draft", _same_as_greedy,
              "keep proposals up to the first the target disagrees with, then the target's own token",
              calls_function=True),
        Check("a perfect draft: ceil(n / (k + 1)) target calls", _perfect_draft,
              "one target call checks all k proposals and adds one token of its own (the bonus)",
              calls_function=True),
        Check("40 tokens, fewer target calls than tokens",
              lambda a: first(has_keys(a, ("tokens", "target_calls", "accepted", "calls_by_sigma")),
                              equal(len(a["tokens"]), 40, "the number of tokens"),
                              equal(a["target_calls"] < 40, True, "target_calls < 40"),
                              equal(a["target_calls"] + a["accepted"] >= 40, True,
                                    "target_calls + accepted >= 40 (each call gives one token besides the accepted)")),
              "tokens = accepted + one per call (the last call's may be cut at n)"),
    ),
    "15.7": (
        Check("the notebook's hand-counted requests", _hand_prefix,
              "reuse the cached full blocks of the longest prefix (never the block of the prompt's last token); a "
              "freed block stays cached; evict only when no empty block is free, least recently used first",
              calls_function=True),
        Check("an allocate that cannot get its blocks raises OutOfBlocks", _prefix_raises,
              "count the blocks you can take (free and not reused) before changing anything", calls_function=True),
        Check("hit rate = reused / (reused + computed), higher with more blocks",
              lambda a: first(has_keys(a, ("reused", "computed", "hit_rate", "evictions", "hit_rate_by_blocks")),
                              equal(abs(a["hit_rate"] - a["reused"] / max(a["reused"] + a["computed"], 1)) < 1e-12,
                                    True, "hit_rate == reused / (reused + computed)"),
                              equal(_by_size(a)[-1] >= _by_size(a)[0], True,
                                    "the hit rate of the largest cache >= that of the smallest")),
              "a larger pool evicts less, so it keeps more prefixes"),
    ),
    "15.8": (
        Check("the target as its own draft: every proposal accepted", _equal_draft_sampling,
              "p / q = 1 accepts every proposal; one draw per proposal, one per test, one for the round's token",
              calls_function=True),
        Check("the first token follows the target's softmax", _sampling_frequencies,
              "after a rejection sample from max(0, p - q), not from p", calls_function=True),
        Check("n tokens, each call giving its accepted proposals and one token",
              lambda a: first(has_keys(a, ("tokens", "target_calls", "accepted", "draws", "first_token_tv",
                                           "tokens_per_call")),
                              equal(len(a["tokens"]), 40, "the number of tokens"),
                              equal(a["target_calls"] + a["accepted"] >= 40, True, "target_calls + accepted >= 40")),
              "tokens = accepted + one per call (the last call's may be cut at n)"),
    ),
    "15.9": (
        Check("the notebook's four requests, iteration by iteration", _hand_chunks,
              "decode every request whose prompt is all prefilled, oldest first; then chunks: prefilling requests "
              "first, then the queue while the running limit allows; a chunk is min(remaining, budget left)",
              calls_function=True),
        Check("decodes come before chunks: a long prompt never stalls them", _decodes_first,
              "take each decode's token out of the budget before giving any chunk", calls_function=True),
        Check("no deadlock; a larger budget gives a shorter TTFT and a longer TPOT",
              lambda a: first(has_keys(a, ("summary", "ttft_p50_by_budget", "tpot_p50_by_budget")),
                              equal(a["summary"]["deadlock"], None, "answer['summary']['deadlock']"),
                              equal(_by_budget(a, "ttft_p50_by_budget")[-1] < _by_budget(a, "ttft_p50_by_budget")[0],
                                    True, "TTFT p50 at the largest budget < at the smallest"),
                              equal(_by_budget(a, "tpot_p50_by_budget")[-1] > _by_budget(a, "tpot_p50_by_budget")[0],
                                    True, "TPOT p50 at the largest budget > at the smallest")),
              "a large chunk prefills a prompt in few iterations, but every decode waits for those long iterations"),
    ),
    "15.10": (
        Check("the notebook's three requests, iteration by iteration", _hand_swaps,
              "a victim is the newest running request; swap it out when config.swap_ns(blocks) < "
              "view.recompute_ns(victim) and the free CPU blocks hold it, else recompute it; swap back in, oldest "
              "first, only in an iteration that preempts nobody, and admit only when nobody is left swapped out",
              calls_function=True),
        Check("no CPU block: every victim is recomputed, as in 15.5", _no_cpu_room,
              "a victim is swapped out only when the free CPU blocks hold all its blocks", calls_function=True),
        Check("no deadlock; swapping pays for short prompts, recomputing for long ones",
              lambda a: first(has_keys(a, ("summary", "throughput_by_prompt")),
                              equal(a["summary"]["deadlock"], None, "answer['summary']['deadlock']"),
                              equal(a["summary"]["swaps"] > 0, True, "answer['summary']['swaps'] > 0"),
                              equal(_by_prompt(a, "swap")[0] > _by_prompt(a, "recompute")[0], True,
                                    "throughput with swapping > recomputing only, at the shortest prompt"),
                              equal(_by_prompt(a, "swap")[-1] == _by_prompt(a, "recompute")[-1], True,
                                    "throughput with swapping == recomputing only, at the longest prompt (nothing "
                                    "is swapped: recomputing is cheaper)")),
              "swapping moves every block twice; recomputing a short prompt costs a whole pass over the weights"),
    ),
}
