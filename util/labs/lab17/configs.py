"""The configurations lab 17 counts: as their authors published them, and the GPU's figures.

Sources: Mixtral 8x7B's ``config.json`` (Mistral AI, 2023), DeepSeek-V3's ``config.json`` and technical report
(DeepSeek-AI, 2024), Llama 3 8B's ``config.json`` (Meta, 2024), NVIDIA's H100 SXM data sheet (dense BF16 tensor
throughput, without sparsity), Hoffmann et al. 2022 ("Chinchilla", approach 3) for the scaling law.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer whose feed-forward layers may be mixtures of experts.

    Every Linear has no bias; every norm is an RMSNorm with one weight vector of its width. The feed-forward
    blocks are SwiGLU (three matrices ``d_model x width``: gate, up, down). The first ``n_dense_layers`` layers
    have a dense feed-forward block of width ``d_ff``; the others are mixtures of ``n_experts`` routed experts
    (each a SwiGLU of width ``d_expert``, ``top_k`` of them used per token), ``n_shared`` shared experts (the same
    SwiGLU of width ``d_expert``, used by every token) and a router (a Linear ``d_model -> n_experts``). With
    ``n_experts = 0`` every layer is dense.

    Attention is ``"gqa"`` (multi-head, grouped-query or multi-query: ``n_kv_heads`` key/value heads of
    ``head_dim``) or ``"mla"`` (DeepSeek's multi-head latent attention: queries through a ``q_lora_rank`` latent,
    or directly when it is 0; keys and values through one ``kv_lora_rank`` latent, plus a decoupled rotary key of
    ``qk_rope_dim`` shared by all heads; per head a ``qk_nope_dim`` key part and a ``v_head_dim`` value)."""

    vocab: int
    d_model: int
    n_layers: int
    n_heads: int
    attention: str = "gqa"
    n_kv_heads: int = 0
    """Key/value heads of ``"gqa"`` attention (``n_heads``: multi-head, 1: multi-query)."""
    head_dim: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_dim: int = 0
    qk_rope_dim: int = 0
    v_head_dim: int = 0
    d_ff: int = 0
    """Width of the dense layers' SwiGLU."""
    n_dense_layers: int = 0
    n_experts: int = 0
    n_shared: int = 0
    d_expert: int = 0
    top_k: int = 0
    tied: bool = False
    """Whether the output head is the token embedding (one matrix, counted once)."""

    @property
    def n_moe_layers(self) -> int:
        """Layers whose feed-forward block is a mixture of experts."""
        return self.n_layers - self.n_dense_layers if self.n_experts else 0

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (JSON)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, fields: Mapping[str, Any]) -> "ModelConfig":
        """A config from a dict of its fields (the others take their defaults)."""
        return cls(**dict(fields))

    def with_(self, **changes: Any) -> "ModelConfig":
        """This config with some fields changed."""
        return replace(self, **changes)


MIXTRAL_8X7B = ModelConfig(vocab=32000, d_model=4096, n_layers=32, n_heads=32, attention="gqa", n_kv_heads=8,
                           head_dim=128, n_experts=8, n_shared=0, d_expert=14336, top_k=2)
"""Mixtral 8x7B: 8 experts, 2 per token, no shared expert, every layer a mixture; published 46.7 B parameters,
12.9 B active."""

DEEPSEEK_V3 = ModelConfig(vocab=129280, d_model=7168, n_layers=61, n_heads=128, attention="mla", q_lora_rank=1536,
                          kv_lora_rank=512, qk_nope_dim=128, qk_rope_dim=64, v_head_dim=128, d_ff=18432,
                          n_dense_layers=3, n_experts=256, n_shared=1, d_expert=2048, top_k=8)
"""DeepSeek-V3 (without its multi-token-prediction module): 3 dense layers, then 58 with 256 routed experts (8 per
token) and 1 shared; multi-head latent attention; published 671 B parameters, 37 B activated."""

LLAMA3_8B = ModelConfig(vocab=128256, d_model=4096, n_layers=32, n_heads=32, attention="gqa", n_kv_heads=8,
                        head_dim=128, d_ff=14336)
"""Llama 3 8B: dense, grouped-query attention with 8 key/value heads; 8.03 B parameters."""


@dataclass(frozen=True)
class GPU:
    """The figures of one accelerator the plans use."""

    name: str
    peak_flops: float
    """Dense 16-bit tensor FLOP/s."""
    bandwidth: float
    """Memory bandwidth, bytes/s."""
    memory: int
    """Memory, bytes."""

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (JSON)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, fields: Mapping[str, Any]) -> "GPU":
        """A GPU from a dict of its fields."""
        return cls(**dict(fields))


H100 = GPU("H100 SXM", peak_flops=989e12, bandwidth=3.35e12, memory=80 * 10**9)
"""NVIDIA H100 SXM: 989 TFLOP/s dense BF16, 3.35 TB/s HBM3, 80 GB (10^9 bytes)."""

CHINCHILLA = {"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28}
"""Hoffmann et al. 2022's fit (approach 3) of ``L(N, D) = E + A / N^alpha + B / D^beta``."""


@dataclass(frozen=True)
class TrainingPlan:
    """How a training run is laid out on a cluster (task 17.5).

    ``dp x tp x pp`` GPUs: data parallelism over ``dp`` replicas, tensor parallelism over ``tp`` GPUs (Megatron's,
    with sequence parallelism), a pipeline of ``pp`` stages (1F1B, ``n_layers / pp`` layers each). Each step trains
    on ``global_batch`` sequences of ``seq_len`` tokens, ``micro_batch`` at a time per replica. ``zero`` is the
    ZeRO stage over the ``dp`` replicas (0: nothing sharded; 1: optimizer state; 2: and gradients; 3: and
    weights). ``checkpointing``: full activation checkpointing (each layer keeps only its input and recomputes the
    rest in the backward pass). ``utilisation``: the fraction of the GPU's peak it sustains on the FLOPs it runs."""

    tokens: float
    """Tokens of the whole run."""
    seq_len: int
    global_batch: int
    micro_batch: int
    dp: int
    tp: int
    pp: int
    zero: int = 1
    checkpointing: bool = False
    utilisation: float = 0.4

    @property
    def gpus(self) -> int:
        """``dp x tp x pp``."""
        return self.dp * self.tp * self.pp

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (JSON)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, fields: Mapping[str, Any]) -> "TrainingPlan":
        """A plan from a dict of its fields."""
        return cls(**dict(fields))

    def with_(self, **changes: Any) -> "TrainingPlan":
        """This plan with some fields changed."""
        return replace(self, **changes)


def router_logits(tokens: int, experts: int, seed: int):
    """A router's logits for a batch: ``numpy.random.default_rng(seed).standard_normal((tokens, experts))``, float64
    (no two of a row are equal in practice, so a top-k never has a tie). Task 17.2's batches, the notebook's
    (seed 17) and the grader's, are drawn this way."""
    import numpy as np

    return np.random.default_rng(seed).standard_normal((tokens, experts))
