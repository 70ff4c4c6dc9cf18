"""Lab 17's public checks (``check("17.3")``): hand-countable cases the notebook works out, published figures,
and consistency between the parts of an answer; never a hidden case's input. ``CHECKS[task id]`` is attached to
each task in ``tasks.py``.

The hand examples: for 17.1 the two small models the notebook builds on the meta device (``SMALL_MIXTRAL``,
``SMALL_DEEPSEEK``) measured by ``util.labs.lab17.moe.measured``; for 17.2 the 4-token batch of the notebook; for
17.3 the two-layer toys; for 17.4 a table of runs without noise, whose fit is the law itself; for 17.5 and 17.6
the stated identities (the parts add up, a price from a speed). 17.3's toys at context 10: GQA's attention
4 x 4 heads x 10 x 4 = 640 FLOPs a layer; MLA's naive 2 x 10 x 6 x 4 x 8 + 2 x 4 x 10 x 6 + 2 x 4 x 10 x 4 = 4,640,
absorbed 2 x 4 x 4 x 6 + 2 x 4 x 10 x 8 + 2 x 4 x 10 x 6 + 2 x 4 x 6 x 4 = 1,504.
"""
from __future__ import annotations

import math
from typing import Any

from util.checks import equal, first, has_keys, is_int
from util.contract import Check

SMALL_MIXTRAL = {"vocab": 64, "d_model": 32, "n_layers": 3, "n_heads": 4, "attention": "gqa", "n_kv_heads": 2,
                 "head_dim": 8, "d_ff": 64, "n_dense_layers": 1, "n_experts": 6, "n_shared": 1, "d_expert": 48,
                 "top_k": 2}
"""A small model with Mixtral's parts, a shared expert and one dense first layer."""
SMALL_DEEPSEEK = {"vocab": 64, "d_model": 32, "n_layers": 3, "n_heads": 4, "attention": "mla", "q_lora_rank": 16,
                  "kv_lora_rank": 8, "qk_nope_dim": 8, "qk_rope_dim": 4, "v_head_dim": 6, "d_ff": 64,
                  "n_dense_layers": 1, "n_experts": 6, "n_shared": 2, "d_expert": 16, "top_k": 3, "tied": True}
"""A small model with DeepSeek-V3's parts (latent attention, two shared experts, a tied head)."""
HAND_LOGITS = [[2.0, 1.0, 0.0, -1.0], [1.9, 0.5, 0.1, -2.0], [-1.0, 3.0, 0.0, 2.0], [0.0, 3.0, 2.0, 1.0]]
"""The notebook's batch: 4 tokens, 4 experts. Top-2 choices (0, 1), (0, 1), (1, 3), (1, 2); capacity at factor 1:
ceil(1 x 4 x 2 / 4) = 2 per expert. First choices: experts 0, 0, 1, 1 (all kept); second choices: expert 1 is full
for tokens 0 and 1 (dropped), tokens 2 and 3 keep experts 3 and 2. On 2 ranks (tokens 0-1 and experts 0-1 on rank
0), tokens 2 and 3 reach expert 1 across ranks."""
HAND_ROUTE = {"tokens_per_expert": [2, 2, 1, 1], "dropped": 2, "imbalance": 2.0, "a2a_bytes": 2 * 2 * 8 * 2}
"""Its route at top-2, capacity factor 1, ep = 2, d_model 8, 2 bytes: expert 1 was chosen 4 times (mean 2)."""
TOY_GQA = {"vocab": 10, "d_model": 16, "n_layers": 2, "n_heads": 4, "attention": "gqa", "n_kv_heads": 2,
           "head_dim": 4}
TOY_MLA = {"vocab": 10, "d_model": 16, "n_layers": 2, "n_heads": 4, "attention": "mla", "kv_lora_rank": 6,
           "qk_nope_dim": 4, "qk_rope_dim": 2, "v_head_dim": 4}


def _cfg(fields: dict):
    from util.labs.lab17.configs import ModelConfig

    return ModelConfig.from_dict(fields)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _close(found: Any, expected: float, rtol: float, what: str) -> str | None:
    if not _number(found):
        return f"{what} is {found!r}; expected a number"
    if abs(found - expected) > rtol * abs(expected):
        return f"{what} is {found:,.6g}; expected {expected:,.6g} (within {rtol:g} relative)"
    return None


# ---------------------------------------------------------------- 17.1

def _against_meta(fn) -> str | None:
    from util.labs.lab17.moe import measured

    for name, fields in (("SMALL_MIXTRAL", SMALL_MIXTRAL), ("SMALL_DEEPSEEK", SMALL_DEEPSEEK)):
        found = fn(_cfg(fields))
        problem = first(has_keys(found, ["total", "activated", "flops_per_token"], f"moe_counts({name})"),
                        equal(dict(found), measured(_cfg(fields)), f"moe_counts({name}) against the model built on "
                              "the meta device"))
        if problem:
            return problem
    return None


def _published(value: Any) -> str | None:
    problem = has_keys(value, ["mixtral", "deepseek_v3", "llama3_8b"])
    if problem:
        return problem
    return first(_close(value["mixtral"].get("total"), 46.7e9, 0.002, "Mixtral's total"),
                 _close(value["mixtral"].get("activated"), 12.9e9, 0.003, "Mixtral's activated parameters"),
                 _close(value["deepseek_v3"].get("total"), 671e9, 0.002, "DeepSeek-V3's total"),
                 _close(value["deepseek_v3"].get("activated"), 37e9, 0.02, "DeepSeek-V3's activated parameters"),
                 equal(value["llama3_8b"].get("activated"), value["llama3_8b"].get("total"),
                       "Llama 3 8B's activated parameters (a dense model uses all of them)"))


# ---------------------------------------------------------------- 17.2

def _hand_route(fn) -> str | None:
    import numpy as np

    found = fn(np.array(HAND_LOGITS), 2, 1.0, ep=2, d_model=8, bytes_per_element=2)
    return first(has_keys(found, list(HAND_ROUTE), "route(...) of the hand batch"),
                 equal({k: (list(map(int, v)) if k == "tokens_per_expert" else v) for k, v in dict(found).items()},
                       HAND_ROUTE, "route(...) of the hand batch"))


def _route_adds_up(value: Any) -> str | None:
    problem = has_keys(value, ["course_batch", "per_rank_bytes"])
    if problem:
        return problem
    batch = value["course_batch"]
    kept = sum(batch.get("tokens_per_expert", []))
    return first(equal(kept + batch.get("dropped", 0), 64 * 2, "kept + dropped assignments (64 tokens, top-2)"),
                 equal(value["per_rank_bytes"][0] if value["per_rank_bytes"] else None, 0,
                       "the all-to-all bytes at ep = 1 (every expert is local)"))


# ---------------------------------------------------------------- 17.3

def _hand_kv(fn) -> str | None:
    gqa = fn(_cfg(TOY_GQA), 10, 3, 10_000, 1_000, bytes_per_element=2)
    mla = fn(_cfg(TOY_MLA), 10, 3, 10_000, 1_000, bytes_per_element=2)
    return first(equal(dict(gqa), {"per_token": 2 * 2 * 2 * 4 * 2, "cache": 64 * 30, "max_context": 9_000 // 192,
                                   "decode_flops_naive": 2 * 640, "decode_flops_absorbed": 2 * 640},
                       "kv_plan(TOY_GQA, 10, 3, 10_000, 1_000)"),
                 equal(dict(mla), {"per_token": 2 * (6 + 2) * 2, "cache": 32 * 30, "max_context": 9_000 // 96,
                                   "decode_flops_naive": 2 * (3840 + 480 + 320),
                                   "decode_flops_absorbed": 2 * (192 + 640 + 480 + 192)},
                       "kv_plan(TOY_MLA, 10, 3, 10_000, 1_000)"))


def _kv_ratios(value: Any) -> str | None:
    problem = has_keys(value, ["mha", "gqa", "mqa", "mla"])
    if problem:
        return problem
    per = {k: value[k].get("per_token") for k in ("mha", "gqa", "mqa", "mla")}
    return first(is_int(per["mha"], "the MHA bytes per token"),
                 equal(per["mha"], 4 * per["gqa"], "MHA's bytes per token against 4 x GQA's (32 heads, 8 KV heads)"),
                 equal(per["gqa"], 8 * per["mqa"], "GQA's bytes per token against 8 x MQA's"))


# ---------------------------------------------------------------- 17.4

def _noise_free(fn) -> str | None:
    from util.labs.lab17.scaling import TRUTH, training_runs

    found = fn(training_runs(0, TRUTH, noise=0.0), [1e21])
    problem = has_keys(found, ["fit", "optimal"], "scaling_plan(runs without noise, [1e21])")
    if problem:
        return problem
    for name, true in TRUTH.items():
        problem = _close(found["fit"].get(name), true, 1e-3, f"the fit's {name} on runs without noise (the law)")
        if problem:
            return problem
    best = found["optimal"][0]
    return _close(6 * best.get("N", 0) * best.get("D", 0), 1e21, 1e-9, "6 N D of the optimum at 1e21 FLOPs")


def _rule_of_20(value: Any) -> str | None:
    problem = has_keys(value, ["course", "chinchilla", "rule_of_20"])
    if problem:
        return problem
    for C, rule in zip((1e21, 1e23), value["rule_of_20"]):
        problem = first(_close(rule.get("D"), 20 * rule.get("N", 0), 1e-9, f"the rule's D at {C:g} FLOPs (20 N)"),
                        _close(6 * rule.get("N", 0) * rule.get("D", 0), C, 1e-9, f"6 N D of the rule at {C:g}"))
        if problem:
            return problem
    return _close(value["chinchilla"][0].get("N") if value["chinchilla"] else None, 1.82e9, 0.01,
                  "Chinchilla's law at 1e21 FLOPs (about 1.82 B parameters with Hoffmann et al.'s approach-3 fit)")


# ---------------------------------------------------------------- 17.5

def _no_deadline(fn) -> str | None:
    from util.labs.lab17.configs import H100, LLAMA3_8B, TrainingPlan

    plan = TrainingPlan(tokens=1e9, seq_len=2048, global_batch=64, micro_batch=1, dp=8, tp=8, pp=4, zero=1)
    found = fn(LLAMA3_8B, H100, plan, 1e9)
    if not isinstance(found, dict):
        return f"smallest_cluster(...) with a deadline of 1e9 days is {found!r}; expected a dict"
    return first(equal(found.get("dp"), 1, "the replicas needed for a billion tokens and no deadline (one fits)"),
                 equal(found.get("gpus"), 32, "its GPUs (tp x pp = 32)"),
                 equal(fn(LLAMA3_8B, H100, plan, 0.0), None, "smallest_cluster(...) with a deadline of 0 days"))


def _parts_add_up(value: Any) -> str | None:
    problem = has_keys(value, ["llama3_8b", "deepseek_v3", "smallest"])
    if problem:
        return problem
    for name in ("llama3_8b", "deepseek_v3"):
        memory = value[name].get("memory", {})
        parts = sum(memory.get(k, 0) for k in ("weights", "gradients", "optimizer", "activations"))
        problem = _close(memory.get("total"), parts, 1e-9, f"{name}'s memory total against the sum of its parts")
        if problem:
            return problem
    return None


# ---------------------------------------------------------------- 17.6

def _price_from_speed(value: Any) -> str | None:
    problem = has_keys(value, ["mixtral", "dense_same_activated", "deepseek_v3", "llama3_8b"])
    if problem:
        return problem
    for name, gpus in (("mixtral", 2), ("dense_same_activated", 2), ("llama3_8b", 1)):
        plan = value[name]
        speed = plan.get("tokens_per_second")
        if not _number(speed) or speed <= 0:
            return f"{name}'s tokens_per_second is {speed!r}; expected a positive number"
        problem = first(_close(plan.get("usd_per_million_tokens"), gpus * 2.0 / 3600 / speed * 1e6, 1e-9,
                               f"{name}'s price per million tokens ({gpus} GPUs at $2.00 an hour)"),
                        _close(speed, plan.get("max_batch", 0) / plan.get("step_seconds", math.inf), 1e-9,
                               f"{name}'s tokens per second against max_batch / step_seconds"))
        if problem:
            return problem
    return None


CHECKS = {
    "17.1": (
        Check("moe_counts equals the meta-device model's parameters and FlopCounterMode's FLOPs (SMALL_MIXTRAL, "
              "SMALL_DEEPSEEK)", _against_meta, "count every part the ModelConfig docstring lists: norms, the router, "
              "shared experts, dense first layers, MLA's two latent norms; FLOPs are 2 x the activated Linears' "
              "weights", calls_function=True),
        Check("the published totals: Mixtral 46.7 B (12.9 B active), DeepSeek-V3 671 B (37 B activated), Llama 3 "
              "all active", _published, "activated counts top_k routed experts plus every shared one"),
    ),
    "17.2": (
        Check("route(...) of the notebook's 4-token batch", _hand_route,
              "fill first choices of every token before any second choice; the capacity is per expert",
              calls_function=True),
        Check("kept + dropped = tokens x top_k; no bytes cross at ep = 1", _route_adds_up,
              "count every assignment once, kept or dropped"),
    ),
    "17.3": (
        Check("kv_plan(...) of the GQA and MLA toys (bytes and decode FLOPs)", _hand_kv,
              "MLA caches the latent and the rotary key per layer, not the heads' keys and values",
              calls_function=True),
        Check("MHA = 4 x GQA = 32 x MQA bytes per token (Llama 3 8B's shape)", _kv_ratios,
              "GQA and MQA cache n_kv_heads heads of keys and values per layer"),
    ),
    "17.4": (
        Check("the fit of runs without noise is the law (within 1e-3); 6 N D = C at the optimum", _noise_free,
              "fit log(loss) with the stated parametrisation, starts and bounds", calls_function=True),
        Check("the rule of 20: D = 20 N and 6 N D = C; Chinchilla's law at 1e21 FLOPs", _rule_of_20,
              "N = sqrt(C / 120)"),
    ),
    "17.5": (
        Check("no deadline: one replica; a deadline of 0 days: None", _no_deadline,
              "search dp upwards over the divisors of global_batch / micro_batch", calls_function=True),
        Check("memory total = weights + gradients + optimizer + activations", _parts_add_up,
              "return every part in bytes"),
    ),
    "17.6": (
        Check("price = GPUs x $/GPU-hour / 3600 / tokens per second x 1e6; speed = batch / step", _price_from_speed,
              "the step at the largest batch is the longer of its memory and compute times"),
    ),
}
"""Task id -> its public checks."""
