"""Lab 10's public checks (``check("10.2")``): what the notebook states, on models it shows, never a hidden input.

The hand-countable toy is ``TOY`` (d_model 4, 1 layer, 1 head, vocabulary 3, 2 positions, tied head:
272 parameters, worked out in the notebook). GPT-2 small's 124,439,808 parameters are its model card's
figure. MACs are checked against ``FlopCounterMode`` on the toy the notebook builds; decoding on a
small seeded model against the plain loop the notebook gives.
"""
from __future__ import annotations

from typing import Any

from util.checks import equal, first, has_keys, is_int
from util.contract import Check

TOY = {"vocab": 3, "n_positions": 2, "d_model": 4, "n_layer": 1, "n_head": 1}
"""The notebook's hand-countable toy."""
DECODER = {"vocab": 32, "n_positions": 16, "d_model": 8, "n_layer": 1, "n_head": 2}
"""A small model for the decoding checks (seeded weights N(0, 0.3^2), a 3-token prompt)."""


def _cfg(fields: dict, **changes: Any):
    from util.labs.lab10.gpt import GPTConfig

    return GPTConfig.from_dict({**fields, **changes})


def _tiny(**changes: Any):
    from util.labs.lab10.gpt import TINY

    return _cfg(TINY.to_dict(), **changes)


def _measured_macs(cfg, length: int) -> int:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from util.labs.lab10.gpt import build_gpt

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        build_gpt(cfg)(torch.zeros((1, length), dtype=torch.long))
    return counter.get_total_flops() // 2


def _toy_params(fn) -> str | None:
    from util.labs.lab10.gpt import build_gpt

    found = fn(_cfg(TOY))
    counted = sum(p.numel() for p in build_gpt(_cfg(TOY)).parameters())
    return first(has_keys(found, ("embedding", "attention", "mlp", "norm", "head", "total"), "param_count(TOY)"),
                 equal(found["total"], 272, "param_count(TOY)['total'] (the hand count)"),
                 equal(counted, 272, "the built toy's sum(p.numel() for p in model.parameters())"))


def _parts_add_up(fn) -> str | None:
    for cfg in (_cfg(TOY), _tiny(tied=False), _tiny(n_kv_head=1)):
        found = fn(cfg)
        parts = sum(v for k, v in found.items() if k != "total")
        problem = equal(found["total"], parts, f"param_count({cfg})['total'] against the sum of the parts")
        if problem:
            return problem
    return None


def _prefill_measured(fn) -> str | None:
    for cfg, length in ((_cfg(TOY), 2), (_tiny(), 16)):
        problem = first(is_int(fn(cfg, length), "macs(cfg, L)"),
                        equal(fn(cfg, length), _measured_macs(cfg, length),
                              f"macs(cfg, {length}) for {cfg} against FlopCounterMode's FLOPs / 2 on model(ids)"))
        if problem:
            return problem
    return None


def _one_more_key(fn) -> str | None:
    cfg = _tiny()
    return equal(fn(cfg, 1, past=17) - fn(cfg, 1, past=16), 2 * cfg.n_layer * cfg.n_head * cfg.head_dim,
                 "macs(TINY, 1, past=17) - macs(TINY, 1, past=16)")


def _kv_scales(fn) -> str | None:
    import torch

    cfg = _tiny()
    base = fn(cfg, 17, batch=1, dtype=torch.float32)
    return first(is_int(base, "kv_cache_bytes(TINY, 17)"),
                 equal(fn(cfg, 34, batch=1, dtype=torch.float32), 2 * base, "kv_cache_bytes at T=34 (twice T=17)"),
                 equal(fn(cfg, 17, batch=3, dtype=torch.float32), 3 * base, "kv_cache_bytes at batch 3"),
                 equal(fn(cfg, 17, batch=1, dtype=torch.float16), base // 2, "kv_cache_bytes in float16"))


def _kv_mqa(fn) -> str | None:
    import torch

    mha = fn(_tiny(), 17, batch=1, dtype=torch.float32)
    return equal(fn(_tiny(n_kv_head=1), 17, batch=1, dtype=torch.float32), mha // 4,
                 "kv_cache_bytes of TinyGPT with one KV head (MQA) against 4 heads (MHA) / 4")


def _intensity_order(fn) -> str | None:
    import torch

    cfg = _tiny()
    decode = [fn(cfg, 1, 16, torch.float32, batch=b) for b in (1, 2, 8)]
    prefill = fn(cfg, 16, 0, torch.float32)
    return first(equal(decode[0] < decode[1] < decode[2], True, "decode intensity growing with the batch (1, 2, 8)"),
                 equal(prefill > decode[0], True, "prefill's intensity (16 tokens) above one decode step's"))


def _ridge_answer(answer: Any) -> str | None:
    for key in ("batch_to_ridge_10", "batch_to_ridge_100"):
        problem = has_keys(answer[key], ("mha", "gqa4", "mqa"), f"answer[{key!r}]")
        if problem:
            return problem
        for name, value in answer[key].items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                return f"answer[{key!r}][{name!r}] is {value!r}; expected a batch (an int >= 1) or None (never)"
    return None


def _slow_greedy(model, prompt, n: int):
    import torch

    ids = prompt
    with torch.no_grad():
        for _ in range(n):
            ids = torch.cat([ids, model(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return ids[:, prompt.shape[1]:]


def _decoder():
    from util.labs.lab10.gpt import prompt_ids, seeded_gpt

    cfg = _cfg(DECODER)
    return seeded_gpt(cfg, 5), prompt_ids(cfg, 3, 5)


def _pair(result: Any, what: str) -> tuple[Any, Any]:
    """``(tokens, cache)`` as the check receives them (tensors become nested lists), or a ``TypeError``."""
    if not (isinstance(result, (list, tuple)) and len(result) == 2):
        raise TypeError(f"{what} must return (tokens, cache), not {type(result).__name__}")
    return result[0], result[1]


def _uncached_loop(fn) -> str | None:
    model, prompt = _decoder()
    tokens, cache = _pair(fn(model, prompt, 6, use_cache=False), "generate(..., use_cache=False)")
    return first(equal(cache is None, True, "the cache returned with use_cache=False is None"),
                 equal(tokens, _slow_greedy(model, prompt, 6).tolist(),
                       "generate(toy, 3-token prompt, 6, use_cache=False) against the plain loop"))


def _cached_steps(fn) -> str | None:
    import numpy as np

    from util.labs.lab10.recorder import StepRecorder

    model, prompt = _decoder()
    with StepRecorder(model) as steps:
        tokens, cache = _pair(fn(model, prompt, 6, use_cache=True), "generate(..., use_cache=True)")
    shapes = [list(np.shape(pair[0])) for pair in cache] if isinstance(cache, list) else cache
    return first(equal(tokens, _slow_greedy(model, prompt, 6).tolist(),
                       "generate(toy, 3-token prompt, 6, use_cache=True) against the plain loop"),
                 equal(steps.lengths(), [3, 1, 1, 1, 1, 1], "the tokens fed to model.wte in each step"),
                 equal(shapes, [[1, 2, 8, 4]], "the cache's k shapes, per layer"))


CHECKS: dict[str, tuple[Check, ...]] = {
    "10.1": (
        Check("the toy has 272 parameters (hand count), as the built toy", _toy_params,
              "12 + 8 in the embeddings, 244 in the block, 8 in the final LayerNorm, 0 in the tied head", calls_function=True),
        Check("GPT-2 small has 124,439,808 parameters (its model card's figure)",
              lambda fn: equal(fn(_cfg({"vocab": 50257, "n_positions": 1024, "d_model": 768, "n_layer": 12,
                                        "n_head": 12}))["total"], 124_439_808, "param_count(GPT2_SMALL)['total']"),
              "a tied head adds no parameter: the head's weight is the token embedding", calls_function=True),
        Check("the total is the sum of the parts", _parts_add_up,
              "total = embedding + attention + mlp + norm + head", calls_function=True),
        Check("TinyGPT: 141,056 parameters, 4 bytes each in float32",
              lambda a: first(equal(a["tiny"]["total"], 141_056, "answer['tiny']['total']"),
                              equal(a["tiny_bytes_fp32"], 4 * 141_056, "answer['tiny_bytes_fp32']")),
              "weight_bytes = parameters x bytes per element (torch.empty(0, dtype=dtype).element_size())"),
    ),
    "10.2": (
        Check("prefill MACs equal FlopCounterMode's on the built toy and TinyGPT", _prefill_measured,
              "every Linear (L x in x out), QK^T and AV (n_head x L x T x head_dim each), the head on all L positions",
              calls_function=True),
        Check("one more cached token adds 2 x n_layer x n_head x head_dim MACs to a decode step", _one_more_key,
              "attention is counted over all T = past + L keys (QK^T and AV)", calls_function=True),
        Check("TinyGPT: prefill of 16 tokens, then a decode step",
              lambda a: first(equal(a["tiny_prefill_16"], 2_162_688, "answer['tiny_prefill_16'] (stated)"),
                              equal(a["tiny_decode_past_16"] < a["tiny_prefill_16"] // 16 + 2 * 2 * 4 * 17 * 16, True,
                                    "a decode step's MACs below a prefill's per token plus its attention")),
              "the notebook states TinyGPT's prefill of 16 tokens"),
    ),
    "10.3": (
        Check("the cache doubles with T, triples with batch 3, halves in float16", _kv_scales,
              "2 (k and v) x n_layer x n_kv_head x head_dim x T x batch x bytes per element", calls_function=True),
        Check("multi-query attention: a quarter of TinyGPT's 4-head cache", _kv_mqa,
              "use n_kv_head (cfg.kv_heads), not n_head", calls_function=True),
        Check("TinyGPT at T=17: 17,408 bytes in float32",
              lambda a: equal(a["tiny_17_fp32"], 17_408, "answer['tiny_17_fp32'] (stated)"),
              "2 x 2 layers x 4 heads x 16 x 17 tokens x 4 bytes"),
    ),
    "10.4": (
        Check("decode's intensity grows with the batch and stays below prefill's", _intensity_order,
              "MACs grow with the batch, the weights are read once whatever the batch", calls_function=True),
        Check("GPT-2 small: prefill about 90 MAC/B, decode about 0.25 MAC/B in float32",
              lambda a: first(equal(89 < a["gpt2_prefill_512"] < 92, True, "89 < answer['gpt2_prefill_512'] < 92"),
                              equal(0.2 < a["gpt2_decode_past_512"] < 0.3, True,
                                    "0.2 < answer['gpt2_decode_past_512'] < 0.3")),
              "the notebook states both to two digits"),
        Check("batch_to_ridge answers are batches or None", _ridge_answer,
              "None when the intensity never reaches the ridge, however large the batch"),
    ),
    "10.5": (
        Check("use_cache=False is the plain loop", _uncached_loop,
              "feed the whole sequence to model(ids) at every step and take the argmax of the last logits",
              calls_function=True),
        Check("use_cache=True: the same tokens, the prompt fed once, then one token per step", _cached_steps,
              "positions continue at the cache's length; keep k and v of every layer; never feed the last token",
              calls_function=True),
        Check("48 tokens and a cache of 55 entries per layer",
              lambda a: first(has_keys(a, ("tokens", "distinct", "cache_shape", "cache_bytes", "macs_cached",
                                           "macs_uncached")),
                              equal([len(row) for row in a["tokens"]], [48], "the lengths of answer['tokens'] [1, 48]"),
                              equal(a["cache_shape"], [1, 4, 55, 16], "answer['cache_shape']"),
                              equal(a["macs_cached"] < a["macs_uncached"], True, "macs_cached < macs_uncached")),
              "8 prompt tokens + 48 generated - 1 never fed back = 55"),
    ),
    "10.6": (
        Check("the optimizer fused FastGelu and SkipLayerNormalization, and no Attention",
              lambda a: first(has_keys(a, ("nodes_before", "nodes_after", "fused", "relmax_log10")),
                              equal(a["fused"]["Attention"], 0, "answer['fused']['Attention'] (stated)"),
                              equal(a["fused"]["FastGelu"], 2, "answer['fused']['FastGelu'] (one per layer)"),
                              equal(a["nodes_after"] < a["nodes_before"], True, "nodes_after < nodes_before"),
                              equal(a["relmax_log10"] < -4, True, "relmax_log10 < -4")),
              "optimize_model(..., model_type='gpt2', num_heads=cfg.n_head, hidden_size=cfg.d_model, opt_level=1)"),
    ),
}
