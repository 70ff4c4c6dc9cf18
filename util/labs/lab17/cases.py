"""Lab 17's hidden cases: the inputs the grader runs the student's functions on, which the notebook never shows.

Grader-only (``util.labs.GRADER_ONLY``): never in the students' copy, the student image or a graded kernel,
which receives each case's input only when the grader runs it (``util.hidden``). ``tasks.py`` states what
each task's cases are worth (``Task.hidden_points``); the registry attaches these to it (``Lab.with_cases``).
The configurations are the published ones perturbed (``configs.py``); the router's logits and the tables of runs
are drawn from each case's seed (a term secret redraws them).
"""
from __future__ import annotations

from typing import Any

from util.contract import Case
from util.labs.lab17.configs import DEEPSEEK_V3, H100, LLAMA3_8B, MIXTRAL_8X7B

MIXTRAL, DEEPSEEK, LLAMA = MIXTRAL_8X7B.to_dict(), DEEPSEEK_V3.to_dict(), LLAMA3_8B.to_dict()
SMALL_GQA = {"vocab": 96, "d_model": 48, "n_layers": 4, "n_heads": 6, "attention": "gqa", "n_kv_heads": 3,
             "head_dim": 8, "d_ff": 80, "n_dense_layers": 1, "n_experts": 5, "n_shared": 2, "d_expert": 24, "top_k": 3}
SMALL_MLA = {"vocab": 80, "d_model": 40, "n_layers": 3, "n_heads": 5, "attention": "mla", "q_lora_rank": 0,
             "kv_lora_rank": 12, "qk_nope_dim": 6, "qk_rope_dim": 2, "v_head_dim": 4, "d_ff": 72}
B200_LIKE = {"name": "a B200-like GPU", "peak_flops": 2.25e15, "bandwidth": 8e12, "memory": 192 * 10**9}


def _with(base: dict, **changes: Any) -> dict:
    return {**base, **changes}


def _route(name: str, tokens: int, experts: int, seed: int, queries: list) -> Case:
    keys = ("top_k", "capacity_factor", "ep", "d_model", "bytes")
    return Case(name, {"tokens": tokens, "experts": experts, "seed": seed,
                       "queries": [dict(zip(keys, q)) for q in queries]}, 4, seeds=("seed",))


def _plan(tokens: float, seq_len: int, global_batch: int, micro_batch: int, tp: int, pp: int, zero: int,
          checkpointing: bool, utilisation: float) -> dict:
    return {"tokens": tokens, "seq_len": seq_len, "global_batch": global_batch, "micro_batch": micro_batch, "dp": 1,
            "tp": tp, "pp": pp, "zero": zero, "checkpointing": checkpointing, "utilisation": utilisation}


H100_FIELDS = H100.to_dict()

CASES = {
    "17.1": (
        Case("Mixtral with more experts, a shared one and dense first layers", {"configs": [
            _with(MIXTRAL, n_experts=16, top_k=4, n_shared=1, n_dense_layers=2, d_ff=14336, d_expert=7168),
            _with(MIXTRAL, n_experts=32, top_k=1)]}, 4),
        Case("DeepSeek-V3 with 64 experts, top-6, 2 shared, no query latent, other latents", {"configs": [
            _with(DEEPSEEK, n_experts=64, top_k=6, n_shared=2, q_lora_rank=0, n_dense_layers=1),
            _with(DEEPSEEK, kv_lora_rank=256, qk_rope_dim=32, n_experts=128, top_k=4, n_layers=30)]}, 4),
        Case("small models: tied heads, two shared experts, dense MLA", {"configs": [
            _with(SMALL_GQA, tied=True), SMALL_GQA, SMALL_MLA, _with(SMALL_MLA, tied=True, q_lora_rank=10)]}, 4),
    ),
    "17.2": (
        _route("128 tokens, 16 experts, top-2 and top-4", 128, 16, 4021,
               [(2, 1.0, 4, 1024, 2), (4, 1.5, 8, 1024, 2), (2, 1.0, 16, 1024, 2)]),
        _route("96 tokens, 64 experts, top-8, tight capacity", 96, 64, 977,
               [(8, 1.0, 16, 7168, 1), (8, 0.5, 64, 7168, 2)]),
        _route("50 tokens on 3 ranks, 6 experts, top-1 and top-3", 50, 6, 31337,
               [(1, 1.0, 3, 64, 4), (3, 2.0, 2, 64, 2), (1, 0.3, 1, 64, 2)]),
    ),
    "17.3": (
        Case("GQA and MQA: other heads, layers, bytes; weights that do not fit", {"queries": [
            {"config": _with(LLAMA, n_kv_heads=4), "context": 100_000, "batch": 4, "memory": 80 * 10**9,
             "weight_bytes": 16 * 10**9, "bytes": 2},
            {"config": _with(LLAMA, n_kv_heads=1, n_layers=48), "context": 8192, "batch": 3, "memory": 80 * 10**9,
             "weight_bytes": 9 * 10**9, "bytes": 1},
            {"config": _with(LLAMA, n_kv_heads=16, head_dim=64), "context": 4096, "batch": 2, "memory": 40 * 10**9,
             "weight_bytes": 41 * 10**9, "bytes": 2}]}, 5),
        Case("MLA: other latents and rotary keys, batches, element sizes", {"queries": [
            {"config": _with(DEEPSEEK, kv_lora_rank=256, qk_rope_dim=32), "context": 65536, "batch": 8,
             "memory": 32 * 80 * 10**9, "weight_bytes": 1_342_052_808_704, "bytes": 2},
            {"config": _with(LLAMA, attention="mla", kv_lora_rank=1024, qk_rope_dim=128, qk_nope_dim=64,
                             v_head_dim=64), "context": 131072, "batch": 5, "memory": 80 * 10**9,
             "weight_bytes": 15 * 10**9, "bytes": 1}]}, 5),
    ),
    "17.4": (
        Case("Chinchilla's law, another seed, two budgets", {
            "seed": 11, "truth": {"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28},
            "budgets": [1e20, 1e24]}, 7, seeds=("seed",)),
        Case("a law with beta > alpha, three budgets", {
            "seed": 23, "truth": {"E": 2.1, "A": 300.0, "alpha": 0.3, "B": 900.0, "beta": 0.35},
            "budgets": [3e21, 5e22, 1e25]}, 7, seeds=("seed",)),
    ),
    "17.5": (
        Case("Llama 3 8B, ZeRO-3, no checkpointing, a deadline", {"queries": [
            {"config": LLAMA, "gpu": H100_FIELDS, "deadline_days": 20,
             "plan": _plan(2e12, 4096, 1024, 2, 4, 2, 3, False, 0.45)}]}, 4),
        Case("Mixtral on a pipeline of 8, ZeRO-2, checkpointing, a deadline", {"queries": [
            {"config": MIXTRAL, "gpu": H100_FIELDS, "deadline_days": 45,
             "plan": _plan(8e12, 4096, 2048, 1, 8, 8, 2, True, 0.35)}]}, 4),
        Case("a DeepSeek-V3 of 64 experts whose memory sets the cluster", {"queries": [
            {"config": _with(DEEPSEEK, n_experts=64, n_layers=32), "gpu": H100_FIELDS, "deadline_days": 1e6,
             "plan": _plan(1e12, 4096, 4096, 1, 4, 8, 1, False, 0.3)}]}, 4),
        Case("no cluster meets the deadline; a small GPU", {"queries": [
            {"config": LLAMA, "gpu": H100_FIELDS, "deadline_days": 0.5,
             "plan": _plan(15e12, 8192, 256, 1, 8, 4, 1, True, 0.4)},
            {"config": _with(LLAMA, n_layers=16), "gpu": {**H100_FIELDS, "name": "a 24 GB GPU", "memory": 24 * 10**9},
             "deadline_days": 200, "plan": _plan(1e12, 2048, 512, 4, 2, 2, 1, True, 0.5)}]}, 4),
    ),
    "17.6": (
        Case("MoE and dense: other experts, GPUs, contexts, prices, 8-bit", {"queries": [
            {"config": _with(MIXTRAL, n_experts=16), "gpu": H100_FIELDS, "gpus": 4, "context": 8192, "price": 2.5,
             "bytes": 2},
            {"config": LLAMA, "gpu": H100_FIELDS, "gpus": 1, "context": 32768, "price": 1.8, "bytes": 1}]}, 5),
        Case("MLA on a cluster, a model too large, a compute-bound batch", {"queries": [
            {"config": DEEPSEEK, "gpu": H100_FIELDS, "gpus": 32, "context": 16384, "price": 3.0, "bytes": 1},
            {"config": DEEPSEEK, "gpu": H100_FIELDS, "gpus": 8, "context": 4096, "price": 3.0, "bytes": 2},
            {"config": _with(LLAMA, n_kv_heads=1), "gpu": B200_LIKE, "gpus": 1, "context": 256, "price": 5.0,
             "bytes": 2}]}, 5),
    ),
}
"""Task id -> its hidden cases (``Lab.with_cases``)."""
