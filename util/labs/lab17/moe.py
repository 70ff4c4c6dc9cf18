"""A small mixture-of-experts transformer the course builds to measure what task 17.1 counts.

``build_moe(cfg, device="meta")`` builds the :class:`MoETransformer` of a :class:`~util.labs.lab17.configs.ModelConfig`
on PyTorch's meta device: shapes and dtypes only, no memory, so DeepSeek-V3's 671 billion parameters build in
a fraction of a second. ``measured(cfg, tokens)`` counts its parameters (all of them, and those one token uses)
and measures the FLOPs of a forward with ``FlopCounterMode``, lab 10's way.

What the counting forward computes: every Linear of the model (attention projections, the router, the experts,
the head) on every token, and nothing else: the attention scores (``QK^T`` and the weighted values, which grow
with the context) are left out, as the lab's convention leaves them out. A meta tensor holds no values, so the
router cannot choose: every token goes to routed experts ``0 .. top_k - 1``. The FLOPs do not depend on which
experts a token goes to, only on how many.
"""
from __future__ import annotations

from typing import Any

from util.labs.lab17.configs import ModelConfig


def _modules():
    import torch
    from torch import nn

    class RMSNorm(nn.Module):
        """One weight vector of the norm's width (no bias)."""

        def __init__(self, width: int):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(width))

        def forward(self, x):
            return x * self.weight

    class SwiGLU(nn.Module):
        """``down(silu(gate(x)) * up(x))``: three matrices ``d_model x width``."""

        def __init__(self, d: int, width: int):
            super().__init__()
            self.gate = nn.Linear(d, width, bias=False)
            self.up = nn.Linear(d, width, bias=False)
            self.down = nn.Linear(width, d, bias=False)

        def forward(self, x):
            return self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))

    class GQA(nn.Module):
        """Multi-head, grouped-query or multi-query attention's four projections."""

        def __init__(self, cfg: ModelConfig):
            super().__init__()
            d, h, kv = cfg.d_model, cfg.n_heads * cfg.head_dim, cfg.n_kv_heads * cfg.head_dim
            self.q, self.k, self.v = nn.Linear(d, h, bias=False), nn.Linear(d, kv, bias=False), nn.Linear(d, kv, bias=False)
            self.o = nn.Linear(h, d, bias=False)

        def forward(self, x):
            self.k(x), self.v(x)
            return self.o(self.q(x))        # the scores are left out: the output projection on a query-shaped tensor

    class MLA(nn.Module):
        """Multi-head latent attention's projections (DeepSeek-V2/V3)."""

        def __init__(self, cfg: ModelConfig):
            super().__init__()
            d, h = cfg.d_model, cfg.n_heads
            self.cfg = cfg
            qk = cfg.qk_nope_dim + cfg.qk_rope_dim
            if cfg.q_lora_rank:
                self.q_a = nn.Linear(d, cfg.q_lora_rank, bias=False)
                self.q_norm = RMSNorm(cfg.q_lora_rank)
                self.q_b = nn.Linear(cfg.q_lora_rank, h * qk, bias=False)
            else:
                self.q = nn.Linear(d, h * qk, bias=False)
            self.kv_a = nn.Linear(d, cfg.kv_lora_rank + cfg.qk_rope_dim, bias=False)   # the latent and the rotary key
            self.kv_norm = RMSNorm(cfg.kv_lora_rank)
            self.kv_b = nn.Linear(cfg.kv_lora_rank, h * (cfg.qk_nope_dim + cfg.v_head_dim), bias=False)
            self.o = nn.Linear(h * cfg.v_head_dim, d, bias=False)

        def forward(self, x):
            cfg = self.cfg
            if cfg.q_lora_rank:
                self.q_b(self.q_norm(self.q_a(x)))
            else:
                self.q(x)
            latent = self.kv_a(x)[..., :cfg.kv_lora_rank]
            kv = self.kv_b(self.kv_norm(latent))
            return self.o(kv[..., :cfg.n_heads * cfg.v_head_dim])

    class MoE(nn.Module):
        """A router, ``n_experts`` routed experts and ``n_shared`` shared ones."""

        def __init__(self, cfg: ModelConfig):
            super().__init__()
            self.top_k = cfg.top_k
            self.router = nn.Linear(cfg.d_model, cfg.n_experts, bias=False)
            self.experts = nn.ModuleList(SwiGLU(cfg.d_model, cfg.d_expert) for _ in range(cfg.n_experts))
            self.shared = nn.ModuleList(SwiGLU(cfg.d_model, cfg.d_expert) for _ in range(cfg.n_shared))

        def forward(self, x):
            self.router(x)
            out = sum(expert(x) for expert in self.experts[:self.top_k])   # meta tensors: experts 0 .. k-1 for all
            for expert in self.shared:
                out = out + expert(x)
            return out

    class Layer(nn.Module):
        def __init__(self, cfg: ModelConfig, dense: bool):
            super().__init__()
            self.norm1, self.norm2 = RMSNorm(cfg.d_model), RMSNorm(cfg.d_model)
            self.attn = MLA(cfg) if cfg.attention == "mla" else GQA(cfg)
            self.ffn = SwiGLU(cfg.d_model, cfg.d_ff) if dense else MoE(cfg)

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.ffn(self.norm2(x))

    class MoETransformer(nn.Module):
        """The transformer a :class:`ModelConfig` describes (see its docstring for every part)."""

        def __init__(self, cfg: ModelConfig):
            super().__init__()
            self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
            self.layers = nn.ModuleList(Layer(cfg, dense=not cfg.n_experts or i < cfg.n_dense_layers)
                                        for i in range(cfg.n_layers))
            self.norm = RMSNorm(cfg.d_model)
            self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
            if cfg.tied:
                self.head.weight = self.embed.weight

        def forward(self, ids):
            x = self.embed(ids)
            for layer in self.layers:
                x = layer(x)
            return self.head(self.norm(x))

    return MoETransformer


def build_moe(cfg: ModelConfig, device: str = "meta"):
    """The :class:`MoETransformer` of ``cfg`` (on the meta device unless told otherwise: shapes, no memory)."""
    import torch

    with torch.device(device):
        return _modules()(cfg)


def measured(cfg: ModelConfig, tokens: int = 4) -> dict[str, Any]:
    """What the built model says: ``{"total": parameters (a tied head once), "activated": those one token uses
    (the routed experts it goes to, all the rest), "flops_per_token": FlopCounterMode's FLOPs of a forward of
    `tokens` tokens, divided by `tokens`}``. A routed expert is "used" when it is among experts ``0 .. top_k - 1``."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    model = build_moe(cfg)
    total = sum(p.numel() for p in model.parameters())
    unused = sum(p.numel() for layer in model.layers if hasattr(layer.ffn, "experts")
                 for expert in layer.ffn.experts[cfg.top_k:] for p in expert.parameters())
    ids = torch.zeros((1, tokens), dtype=torch.long, device="meta")
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(ids)
    return {"total": total, "activated": total - unused, "flops_per_token": counter.get_total_flops() // tokens}
