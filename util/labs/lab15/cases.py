"""Lab 15's hidden cases: the inputs the grader runs the student's functions on, which the notebook never shows.

Grader-only (``util.labs.GRADER_ONLY``): never in the students' copy, the student image or a graded kernel,
which receives each case's input only when the grader runs it (``util.hidden``). ``tasks.py`` states what
each task's cases are worth (``Task.hidden_points``); the registry attaches these to it (``Lab.with_cases``).

Seeds listed in ``seeds`` make a valid case whatever their value (random pools, random traces, Poisson
arrivals sized so that any draw is under memory pressure, or not). Task 15.6's case names no seed (since release
5): the judge draws each run's target, draft and prompt from the grading secret at every grading and keeps the
first draw whose every argmax wins by a clear margin (``judge.spec_setting``). Task 15.9's cases name no seed
either: the judge draws their ``traces`` request streams from the grading secret at every grading
(``judge.chunk_traces``), from the ranges given here, which make any draw finish under the stated policy. Task
15.8's cases name no seed since release 6: the judge draws their models and prompts from the grading secret
(``judge.sampling_models``), the distribution case's screened so that its test tells the residual from ``p``
(``judge.distribution_setting``). Task 15.10's (release 7) draw their ``traces`` as 15.9's do (``judge.swap_traces``).
"""
from __future__ import annotations

from util.contract import Case

TINY = {"vocab": 512, "n_positions": 128, "d_model": 64, "n_layer": 2, "n_head": 4}
GQA_DEEP = {"vocab": 1000, "n_positions": 128, "d_model": 96, "n_layer": 3, "n_head": 6, "n_kv_head": 2}
MQA = {**TINY, "n_kv_head": 1, "tied": False}
SMALL_VOCAB = {"vocab": 12, "n_positions": 32, "d_model": 32, "n_layer": 1, "n_head": 2}
"""Task 15.8's distribution case: a vocabulary small enough that 1,000 runs test every likely token."""

_RANKS = [["61", "61"], ["62", "63"], ["6161", "61"], ["61", "62"], ["6162", "63"], ["3d", "3d"], ["3d3d", "3d3d"],
          ["20", "61"], ["2061", "6161"], ["63", "63"]]
"""Merges (hex pairs) where the order of application matters: ``aa`` before ``ab``, ``bc`` before ``abc``."""

_PREFIX_OPS = [
    ["allocate", 0, [1, 2, 3, 4, 5, 6, 7, 8]], ["free", 0],
    ["allocate", 1, [1, 2, 3, 4, 5, 6, 7, 8]],            # its last token is computed: one block reused
    ["allocate", 2, [5, 6, 7, 8, 1, 2, 3, 4, 0]],         # the tokens of cached blocks, after another prefix
    ["free", 1], ["allocate", 3, [1, 2, 3, 4, 7, 7]], ["free", 2],
    ["allocate", 4, [5, 6, 7, 8, 1, 2, 3, 4, 5]], ["append", 4, 6], ["append", 4, 7], ["append", 4, 8],
    ["allocate", 5, [2] * 9],                             # no room: OutOfBlocks, nothing changes
    ["free", 4], ["allocate", 5, [2] * 9], ["free", 3], ["free", 5],   # evictions: the least recently used first
    ["allocate", 6, [5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 9]],
    ["allocate", 7, [5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8, 9]], ["free", 6], ["free", 7]]
"""A hand-written trace of task 15.7 (6 blocks of 4 slots)."""

CASES = {
    "15.1": (
        Case("UTF-8 text: accents, Greek, Cyrillic, CJK and emoji",
             {"text": {"$file": "cases_data/multilingual.txt"}, "merges": 60,
              "encode": "Zoë's naïve résumé: 東京で 🙂🙂, κόσμε, мир; Ünïcödé ✓ never seen"}, 3),
        Case("a synthetic text where ties decide most merges",
             {"seed": 1515, "words": 1500, "merges": 90, "encode": "abcde edcba aaaaa b cc ddd"}, 3,
             seeds=("seed",)),
        Case("encoding applies merges by rank, not left to right",
             {"given": _RANKS, "encode": "aaaaa abc abcc aab ====== = == ccc aaab a aa"}, 3),
    ),
    "15.2": (
        Case("GQA in float16, lengths around the block size",
             {"config": {**TINY, "n_kv_head": 2}, "lengths": [1, 15, 16, 17, 33, 100], "reserved": [128] * 6,
              "block_size": 16, "dtype": "float16"}, 2),
        Case("a shared prompt of 37 tokens across 5 sequences, bfloat16",
             {"config": GQA_DEEP, "lengths": [40, 52, 38, 90, 64], "reserved": [128] * 5, "block_size": 8,
              "dtype": "bfloat16", "shared": 37}, 2),
        Case("a shared prompt filling its blocks exactly, one-token blocks beside",
             {"config": MQA, "lengths": [32, 64, 96, 33], "reserved": [96, 96, 96, 40], "block_size": 32,
              "dtype": "float32", "shared": 32}, 2),
    ),
    "15.3": (
        Case("parallel sampling: a prompt forked into four, freed before its forks",
             {"num_blocks": 16, "block_size": 4, "ops": [
                 ["allocate", 0, 10], ["fork", 0, 1], ["fork", 0, 2], ["fork", 0, 3], ["append", 1], ["append", 2],
                 ["append", 0], ["append", 3], ["free", 0], ["append", 1], ["append", 1], ["append", 2],
                 ["append", 2], ["append", 2], ["free", 3], ["free", 1], ["append", 2], ["free", 2]]}, 2),
        Case("forks at a block boundary, and forks of forks",
             {"num_blocks": 20, "block_size": 4, "ops": [
                 ["allocate", 5, 8], ["fork", 5, 6], ["append", 6], ["append", 5], ["fork", 6, 7], ["append", 7],
                 ["append", 6], ["fork", 7, 8], ["fork", 8, 9], ["append", 9], ["append", 8], ["append", 7],
                 ["free", 6], ["free", 8], ["append", 9], ["append", 9], ["append", 9], ["append", 9], ["free", 5],
                 ["free", 7], ["free", 9]]}, 2),
        Case("running out of blocks: every call that needs one raises, and nothing changes",
             {"num_blocks": 6, "block_size": 4, "ops": [
                 ["allocate", 0, 12], ["allocate", 1, 20], ["allocate", 1, 9], ["append", 0], ["fork", 1, 2],
                 ["append", 2], ["free", 1], ["append", 2], ["free", 0], ["append", 2], ["append", 2], ["append", 2],
                 ["allocate", 3, 8], ["allocate", 4, 1], ["append", 3], ["free", 2], ["allocate", 4, 16],
                 ["append", 4]]}, 2),
        Case("a random trace of 300 calls", {"num_blocks": 40, "block_size": 8, "seed": 2718, "calls": 300,
                                             "max_prompt": 40}, 2, seeds=("seed",)),
    ),
    "15.4": (
        Case("shuffled blocks, partial last blocks, garbage everywhere else",
             {"seed": 404, "n_head": 4, "n_kv_head": 4, "head_dim": 16, "block_size": 4, "num_blocks": 24,
              "tables": [[17, 3, 9], [0, 21], [12, 5, 8, 2, 19]], "lengths": [11, 5, 18]}, 2, seeds=("seed",)),
        Case("grouped-query attention (8 heads over 2) and a shared prefix",
             {"seed": 405, "n_head": 8, "n_kv_head": 2, "head_dim": 8, "block_size": 8, "num_blocks": 16,
              "tables": [[6, 1, 13], [6, 1, 4], [6, 10]], "lengths": [19, 24, 9]}, 2, seeds=("seed",)),
        Case("full last blocks and one-token sequences",
             {"seed": 406, "n_head": 2, "n_kv_head": 1, "head_dim": 32, "block_size": 16, "num_blocks": 10,
              "tables": [[7, 2], [4], [9, 0, 5]], "lengths": [32, 1, 48]}, 2, seeds=("seed",)),
    ),
    "15.5": (
        Case("light load: no block runs out",
             {"config": {"num_blocks": 4000, "block_size": 16, "max_tokens": 2048, "max_running": 32},
              "seed": 51, "count": 40, "rate_per_ms": 0.5, "prompt": [16, 300], "output": [8, 200]}, 2,
             seeds=("seed",)),
        Case("memory pressure: decodes preempt the newest requests",
             {"config": {"num_blocks": 90, "block_size": 16, "max_tokens": 1024, "max_running": 64},
              "seed": 52, "count": 50, "rate_per_ms": 5.0, "prompt": [20, 250], "output": [40, 300]}, 2,
             seeds=("seed",)),
        Case("a burst at time 0 under a small token budget (first come, first served)",
             {"config": {"num_blocks": 200, "block_size": 8, "max_tokens": 300, "max_running": 16},
              "requests": [[i, 0, p, o] for i, (p, o) in enumerate(
                  [(120, 30), (200, 10), (60, 50), (250, 20), (30, 40), (90, 90), (10, 5), (280, 12), (45, 60),
                   (150, 25), (75, 35), (5, 70)])]}, 2),
        Case("a small running limit and long outputs",
             {"config": {"num_blocks": 150, "block_size": 16, "max_tokens": 1536, "max_running": 6},
              "seed": 54, "count": 30, "rate_per_ms": 2.0, "prompt": [50, 400], "output": [100, 500]}, 2,
             seeds=("seed",)),
    ),
    "15.6": (
        Case("TinyGPT with k = 4, then a 3-layer GQA model with k = 3 from a one-token prompt",
             {"runs": [{"config": TINY, "sigma": 0.01, "prompt": 8, "n": 40, "k": 4},
                       {"config": GQA_DEEP, "sigma": 0.005, "prompt": 1, "n": 40, "k": 3}]}, 8),
    ),
    "15.7": (
        Case("shared system prompts and questions everyone asks, with and without a system prompt",
             {"num_blocks": 48, "block_size": 8, "seed": 1571, "requests": 60, "mix": [0.7, 0.0, 0.3], "questions": 4,
              "aligned": True, "user_tokens": [8, 30]}, 2,
             seeds=("seed",)),
        Case("multi-turn conversations: each turn repeats the conversation so far",
             {"num_blocks": 64, "block_size": 4, "seed": 1572, "requests": 50, "mix": [0.0, 0.9, 0.1],
              "conversations": 4, "system_tokens": [8, 20]}, 2, seeds=("seed",)),
        Case("a small pool: evictions, least recently used first",
             {"num_blocks": 20, "block_size": 4, "seed": 1573, "requests": 80, "system_tokens": [12, 30],
              "user_tokens": [2, 12], "output_tokens": [2, 10]}, 2, seeds=("seed",)),
        Case("whole-block prompts, the same tokens after another prefix, a pool that runs out",
             {"num_blocks": 6, "block_size": 4, "ops": _PREFIX_OPS}, 2),
    ),
    "15.8": (
        Case("TinyGPT with k = 4, then a 3-layer GQA model with k = 3 from a one-token prompt, on the grader's draws",
             {"runs": [{"config": TINY, "sigma": 0.02, "prompt": 8, "n": 40, "k": 4},
                       {"config": GQA_DEEP, "sigma": 0.01, "prompt": 1, "n": 30, "k": 3}]}, 4),
        # the id kept from release 3 (ids are stable; renaming would make it a new case): since release 6 the
        # judge runs 1,000 runs ("samples"), not 400, on models it draws from the secret
        Case("the tokens' distribution over 400 runs on fresh draws (chi-square at 1e-6)",
             {"distribution": {"config": SMALL_VOCAB, "sigma": 0.3, "prompt": 4, "n": 1, "k": 1}, "samples": 1000}, 4),
    ),
    "15.9": (
        Case("a steady stream of long prompts under a budget of 512 tokens (3 traces the grader draws)",
             {"config": {"max_tokens": 512, "max_running": 24}, "traces": 3, "count": 30, "rate_per_ms": 1.5,
              "prompt": [40, 1800], "output": [5, 150]}, 2),
        Case("a small budget: every prompt in many chunks beside many decodes (3 traces the grader draws)",
             {"config": {"max_tokens": 48, "max_running": 32}, "traces": 3, "count": 25, "rate_per_ms": 6.0,
              "prompt": [30, 400], "output": [10, 120]}, 2),
        Case("a burst at time 0: chunks cut at the budget, admissions stopped by the running limit",
             {"config": {"max_tokens": 12, "max_running": 4},
              "requests": [[i, 0, p, o] for i, (p, o) in enumerate(
                  [(12, 3), (5, 6), (7, 2), (1, 9), (30, 1), (11, 4), (2, 2), (4, 12), (13, 3)])]}, 2),
    ),
    "15.10": (
        Case("memory pressure, 40 CPU blocks: short victims swapped, long ones recomputed (3 traces the grader draws)",
             {"config": {"num_blocks": 90, "cpu_blocks": 40, "block_size": 16, "max_tokens": 1024, "max_running": 64,
                         "swap_ns_per_block": 11_000},
              "traces": 3, "count": 50, "rate_per_ms": 5.0, "prompt": [20, 250], "output": [40, 300]}, 2),
        Case("a CPU pool of 8 blocks: victims recomputed when it has no room (3 traces the grader draws)",
             {"config": {"num_blocks": 90, "cpu_blocks": 8, "block_size": 16, "max_tokens": 1024, "max_running": 64,
                         "swap_ns_per_block": 5_000},
              "traces": 3, "count": 50, "rate_per_ms": 5.0, "prompt": [20, 250], "output": [40, 300]}, 2),
        Case("a burst at time 0 under a small running limit: swaps, recomputes and swap-ins",
             {"config": {"num_blocks": 24, "cpu_blocks": 12, "block_size": 8, "max_tokens": 256, "max_running": 5,
                         "swap_ns_per_block": 12_000},
              "requests": [[i, 0, p, o] for i, (p, o) in enumerate(
                  [(20, 40), (60, 30), (9, 50), (33, 20), (70, 12), (14, 60), (5, 45), (40, 25), (25, 35),
                   (50, 15)])]}, 2),
    ),
}
"""Task id -> its hidden cases (``Lab.with_cases``)."""
