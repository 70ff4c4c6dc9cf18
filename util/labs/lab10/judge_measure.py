"""What the grader measures itself, in its own judge process, on models it builds from a case's spec.

Grader-only (never in a graded kernel, never in the students' copy): it holds a cached forward, the
answer of task 10.5. Nothing here is a formula for what tasks 10.1-10.4 ask; every figure is read off
a built model:

* parameters: ``model.named_parameters()`` (a tied weight once), grouped by the module that holds them;
* bytes: the parameters' and the cache tensors' own ``nbytes`` in the dtype asked for;
* MACs: ``torch.utils.flop_counter.FlopCounterMode`` (FLOPs / 2) around a forward of L new tokens over a
  cache of ``past`` entries, on the ``meta`` device (shapes without memory: GPT-2 small costs nothing).

* the optimized ONNX model of task 10.6 (:func:`optimized_export`): the course's export and onnxruntime's
  optimizer, run here on the judge's own copy of the case's model.

Users: ``judge.py`` (the checks of tasks 10.1-10.6) and the lab's tests.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Mapping

import torch

from util.labs.lab10.gpt import GPTConfig, TinyGPT, build_gpt

GROUPS = ("embedding", "attention", "mlp", "norm", "head")
"""The parts a parameter count is broken into (``param_count``'s keys besides ``total``)."""


def config(spec: Mapping[str, Any]) -> GPTConfig:
    return GPTConfig.from_dict(spec["config"])


def dtype(name: str) -> torch.dtype:
    found = getattr(torch, str(name), None)
    if not isinstance(found, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return found


def _group(name: str) -> str:
    if name.startswith(("wte.", "wpe.")):
        return "embedding"
    if name.startswith("head."):
        return "head"
    if ".attn." in name:
        return "attention"
    if ".mlp." in name:
        return "mlp"
    if ".ln" in name or name.startswith("ln_f."):
        return "norm"
    raise ValueError(f"parameter {name} belongs to no group")


@lru_cache(maxsize=32)
def meta_model(cfg: GPTConfig, kind: torch.dtype = torch.float32) -> TinyGPT:
    """The model of ``cfg`` on the ``meta`` device in ``kind``, built once per process (never modified)."""
    model = build_gpt(cfg, device="meta")
    return model if kind == torch.float32 else model.to(kind)


def parameters(cfg: GPTConfig) -> dict[str, int]:
    """Parameters of the built model (meta device) per group, and ``total``; a tied head counts 0."""
    counts = dict.fromkeys(GROUPS, 0)
    for name, parameter in meta_model(cfg).named_parameters():
        counts[_group(name)] += parameter.numel()
    return {**counts, "total": sum(counts.values())}


def weight_bytes(cfg: GPTConfig, kind: torch.dtype) -> int:
    """Bytes of the built model's parameters when stored in ``kind``."""
    return sum(p.to(kind).nbytes for p in meta_model(cfg).parameters())


def empty_cache(cfg: GPTConfig, past: int, batch: int, kind: torch.dtype, device: str = "meta") -> list:
    """A cache of ``past`` entries per layer (values never read on ``meta``)."""
    shape = (batch, cfg.kv_heads, past, cfg.head_dim)
    return [(torch.zeros(shape, dtype=kind, device=device), torch.zeros(shape, dtype=kind, device=device))
            for _ in range(cfg.n_layer)]


def step(model: TinyGPT, ids: torch.Tensor, cache: list, logits: str = "all") -> torch.Tensor:
    """The course's cached forward: logits of the new tokens ``ids [B, L]``; ``cache`` grows in place.

    ``cache`` is a list of ``(k, v)`` per layer (``[B, n_kv_head, past, head_dim]``) or of ``None``.
    ``logits="last"`` applies the head to the last position only.
    """
    past = 0 if cache[0] is None else cache[0][0].shape[2]
    length = ids.shape[1]
    x = model.wte(ids) + model.wpe(torch.arange(past, past + length, device=ids.device))
    for i, block in enumerate(model.blocks):
        q, k, v = block.attn.project(block.ln1(x))
        if cache[i] is not None:
            k, v = torch.cat([cache[i][0], k], dim=2), torch.cat([cache[i][1], v], dim=2)
        cache[i] = (k, v)
        x = x + block.attn.merge(block.attn.attend(q, k, v))
        x = x + block.mlp(block.ln2(x))
    if logits == "last":
        x = x[:, -1:]
    return model.head(model.ln_f(x))


def macs(cfg: GPTConfig, length: int, past: int = 0, logits: str = "all", batch: int = 1) -> int:
    """FlopCounterMode's FLOPs / 2 for L new tokens over ``past`` cached ones (meta device)."""
    from torch.utils.flop_counter import FlopCounterMode

    model = meta_model(cfg)
    cache = empty_cache(cfg, past, batch, torch.float32) if past else [None] * cfg.n_layer
    ids = torch.zeros((batch, length), dtype=torch.long, device="meta")
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        step(model, ids, cache, logits)
    flops = counter.get_total_flops()
    if flops % 2:
        raise AssertionError(f"FlopCounterMode counted an odd number of FLOPs ({flops})")
    return flops // 2


def cache_bytes(cfg: GPTConfig, tokens: int, batch: int, kind: torch.dtype) -> int:
    """Bytes of the cache tensors after a cached forward of ``tokens`` tokens in ``kind`` (meta device)."""
    model = meta_model(cfg, kind)
    cache: list = [None] * cfg.n_layer
    with torch.no_grad():
        step(model, torch.zeros((batch, tokens), dtype=torch.long, device="meta"), cache)
    return sum(k.nbytes + v.nbytes for k, v in cache)


def intensity(cfg: GPTConfig, length: int, past: int, kind: torch.dtype, batch: int = 1,
              logits: str = "all") -> float:
    """Measured MACs over measured bytes: the weights once, the cache read (``past``) and written (L)."""
    read = cache_bytes(cfg, past, batch, kind) if past else 0
    written = cache_bytes(cfg, past + length, batch, kind) - read
    return macs(cfg, length, past, logits, batch) / (weight_bytes(cfg, kind) + read + written)


@torch.no_grad()
def greedy_uncached(model: TinyGPT, prompt: torch.Tensor, new: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy decoding with ``model(ids)`` on the whole sequence at every step (no cache).

    Returns the ``new`` tokens ``[B, new]`` and, at every step, the gap between the largest and the
    second largest logit ``[B, new]`` (how clearly each token was chosen).
    """
    ids, gaps = prompt, []
    for _ in range(new):
        last = model(ids)[:, -1]
        top = last.topk(2, dim=-1).values
        gaps.append(top[:, 0] - top[:, 1])
        ids = torch.cat([ids, last.argmax(-1, keepdim=True)], dim=1)
    return ids[:, prompt.shape[1]:], torch.stack(gaps, dim=1)


@torch.no_grad()
def keys_values(model: TinyGPT, ids: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Every layer's keys and values for the whole sequence ``ids``, from one forward without a cache."""
    cache: list = [None] * len(model.blocks)
    step(model, ids, cache)
    return cache


def optimized_export(model: TinyGPT, cfg: GPTConfig):
    """The course's export of ``model`` (TorchScript exporter, opset 17, ``ids`` -> ``logits`` with a dynamic
    sequence axis) optimized by onnxruntime's transformer optimizer (``model_type="gpt2"``, ``opt_level=1``): the
    ``onnx.ModelProto`` whose operators a student's optimized model is compared with (task 10.6)."""
    import io
    import warnings

    import onnx
    from onnxruntime.transformers.optimizer import optimize_model

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the TorchScript exporter's deprecation warning
        torch.onnx.export(model, (torch.zeros((1, 8), dtype=torch.long),), buffer, dynamo=False, opset_version=17,
                          input_names=["ids"], output_names=["logits"],
                          dynamic_axes={"ids": {1: "sequence"}, "logits": {1: "sequence"}})
    return optimize_model(onnx.load_from_string(buffer.getvalue()), model_type="gpt2", num_heads=cfg.n_head,
                          hidden_size=cfg.d_model, opt_level=1).model
