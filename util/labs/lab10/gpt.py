"""TinyGPT, the course's small GPT: GPT-2's layout with attention written as explicit matrix products.

The layout is GPT-2's: token and learned position embeddings added, ``n_layer`` pre-LayerNorm blocks
(``x + attn(ln1(x))``, then ``x + mlp(ln2(x))``), a final LayerNorm, and a head to the vocabulary that
is tied to the token embedding by default (one tensor, two uses). The MLP is ``d -> d_ff -> d`` with
GPT-2's tanh GELU. Every Linear except the head has a bias (GPT-2's), LayerNorms have both parameters.

Two choices differ from GPT-2's code on purpose:

* **q, k and v are three Linears**, not one fused ``c_attn``: the keys and values then have their own
  width ``n_kv_head * head_dim``, so grouped-query (``n_kv_head`` < ``n_head``) and multi-query
  (``n_kv_head`` = 1) attention are a change of config, nothing else.
* **attention is written as matrix products** (:meth:`Attention.attend`), not
  ``F.scaled_dot_product_attention``: PyTorch's ``FlopCounterMode`` counts nothing for the CPU's
  fused attention kernel, so a count of the model's MACs would silently miss ``QK^T`` and ``AV``.

Nothing here decodes with a cache: :meth:`TinyGPT.forward` reads a whole sequence each time. The
pieces a cached forward needs are separate methods (:meth:`Attention.project`, :meth:`Attention.attend`,
:meth:`Attention.merge`), so it can be written from the model's own modules.

Its users: lab 10's notebook, public checks, hidden cases and grader-side judges.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping

import torch
from torch import nn

TEST_STD = 0.3
"""Standard deviation of the weight matrices of :func:`seeded_gpt` (see there why not PyTorch's init)."""


@dataclass(frozen=True)
class GPTConfig:
    """The shape of a TinyGPT: everything a count of its parameters, MACs or cache needs.

    ``n_kv_head`` is the number of key/value heads: ``n_head`` (multi-head attention, the default when
    left ``None``), a divisor of ``n_head`` (grouped-query attention) or 1 (multi-query attention).
    ``d_ff`` is the MLP's hidden width (``4 * d_model`` when left ``None``, as in GPT-2).
    """

    vocab: int = 512
    n_positions: int = 128
    d_model: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_kv_head: int | None = None
    d_ff: int | None = None
    tied: bool = True

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} is not a multiple of n_head={self.n_head}")
        if self.n_head % self.kv_heads:
            raise ValueError(f"n_head={self.n_head} is not a multiple of n_kv_head={self.kv_heads}")

    @property
    def head_dim(self) -> int:
        """``d_model // n_head``: the width of one head's queries, keys and values."""
        return self.d_model // self.n_head

    @property
    def kv_heads(self) -> int:
        """The number of key/value heads (``n_kv_head``, or ``n_head`` when that is ``None``)."""
        return self.n_head if self.n_kv_head is None else self.n_kv_head

    @property
    def ff(self) -> int:
        """The MLP's hidden width (``d_ff``, or ``4 * d_model`` when that is ``None``)."""
        return 4 * self.d_model if self.d_ff is None else self.d_ff

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-able dict (what a hidden case's spec holds)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, fields: Mapping[str, Any]) -> "GPTConfig":
        return cls(**dict(fields))


TINY = GPTConfig()
"""The lab's TinyGPT: d_model 64, 2 layers, 4 heads, vocabulary 512, 128 positions, tied head."""
GPT2_SMALL = GPTConfig(vocab=50257, n_positions=1024, d_model=768, n_layer=12, n_head=12)
"""GPT-2 small's shape (124,439,808 parameters, the figure its model card gives). Only ever counted,
or built on the ``meta`` device (shapes without memory): this lab never needs its weights."""


class Attention(nn.Module):
    """Multi-head, grouped-query or multi-query self-attention with separate q, k, v Linears."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head, self.n_kv_head, self.head_dim = cfg.n_head, cfg.kv_heads, cfg.head_dim
        self.q = nn.Linear(cfg.d_model, cfg.n_head * cfg.head_dim)
        self.k = nn.Linear(cfg.d_model, cfg.kv_heads * cfg.head_dim)
        self.v = nn.Linear(cfg.d_model, cfg.kv_heads * cfg.head_dim)
        self.o = nn.Linear(cfg.n_head * cfg.head_dim, cfg.d_model)

    def project(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``q [B, n_head, L, head_dim]``, ``k`` and ``v [B, n_kv_head, L, head_dim]`` of ``h [B, L, d]``."""
        batch, length, _ = h.shape
        q = self.q(h).view(batch, length, self.n_head, self.head_dim).transpose(1, 2)
        k = self.k(h).view(batch, length, self.n_kv_head, self.head_dim).transpose(1, 2)
        v = self.v(h).view(batch, length, self.n_kv_head, self.head_dim).transpose(1, 2)
        return q, k, v

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Causal attention of L queries over T >= L keys, as explicit matrix products.

        ``q`` is ``[B, n_head, L, head_dim]``; ``k`` and ``v`` are ``[B, n_kv_head, T, head_dim]``, where the
        last L keys belong to the L queries (the first ``T - L`` came before them: a cache). Each
        key/value head serves ``n_head // n_kv_head`` query heads. Query ``i`` (at position
        ``T - L + i``) sees keys ``0 .. T - L + i``. Returns ``[B, n_head, L, head_dim]``.

        The scores ``QK^T`` are computed for every (query, key) pair, the masked ones too, and the
        mask then sets those to -inf: a MAC count sees ``L * T`` products per head, never fewer.
        """
        group = self.n_head // self.n_kv_head
        if group > 1:   # a Python int: the same branch for every input, so a trace (ONNX export) keeps it
            k = k.unsqueeze(2).expand(-1, -1, group, -1, -1).flatten(1, 2)
            v = v.unsqueeze(2).expand(-1, -1, group, -1, -1).flatten(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        length, total = q.shape[-2], k.shape[-2]
        rows = torch.arange(length, device=q.device).unsqueeze(1) + (total - length)
        future = torch.arange(total, device=q.device).unsqueeze(0) > rows
        scores = scores.masked_fill(future, float("-inf"))
        return torch.matmul(torch.softmax(scores, dim=-1), v)

    def merge(self, a: torch.Tensor) -> torch.Tensor:
        """The output projection of the heads' results ``a [B, n_head, L, head_dim]``: ``[B, L, d]``."""
        batch, _, length, _ = a.shape
        return self.o(a.transpose(1, 2).reshape(batch, length, self.n_head * self.head_dim))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        q, k, v = self.project(h)
        return self.merge(self.attend(q, k, v))


class MLP(nn.Module):
    """``d -> d_ff -> d`` with GPT-2's GELU (the tanh approximation)."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, cfg.ff)
        self.act = nn.GELU(approximate="tanh")
        self.proj = nn.Linear(cfg.ff, cfg.d_model)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.proj(self.act(self.fc(h)))


class Block(nn.Module):
    """A pre-LayerNorm transformer block: ``x + attn(ln1(x))``, then ``x + mlp(ln2(x))``."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.attn = Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    """GPT-2's layout at any size (:class:`GPTConfig`); ``model(ids)`` gives logits for every position.

    Modules: ``wte`` (token embedding), ``wpe`` (position embedding), ``blocks`` (a list of
    :class:`Block`), ``ln_f`` (final LayerNorm), ``head`` (a bias-free Linear to the vocabulary, whose
    weight *is* ``wte.weight`` when ``cfg.tied``). ``model.cfg`` is the config it was built from.
    """

    def __init__(self, cfg: GPTConfig = TINY) -> None:
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab, cfg.d_model)
        self.wpe = nn.Embedding(cfg.n_positions, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        if cfg.tied:
            self.head.weight = self.wte.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits ``[B, L, vocab]`` for token ids ``[B, L]`` at positions ``0 .. L - 1`` (no cache)."""
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def build_gpt(cfg: GPTConfig = TINY, seed: int = 0, device: str | torch.device = "cpu") -> TinyGPT:
    """A TinyGPT with PyTorch's default initialisation from ``seed``, in eval mode.

    ``device="meta"`` builds it without memory (shapes and dtypes only): enough to count parameters,
    bytes and, under ``FlopCounterMode``, MACs of a model as large as GPT-2 small in milliseconds.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        with torch.device(device):
            model = TinyGPT(cfg)
    return model.eval()


def seeded_gpt(cfg: GPTConfig = TINY, seed: int = 0, std: float = TEST_STD) -> TinyGPT:
    """A TinyGPT whose weight matrices (embeddings and Linears) are drawn from N(0, std^2), eval mode.

    Why not PyTorch's initialisation: a freshly initialised TinyGPT is nearly a constant function
    (small weights, LayerNorms everywhere), and greedy decoding repeats one or two tokens. Cached and
    uncached decoding then agree whether or not the cache is right. With std 0.3 the model decodes
    dozens of distinct tokens, each chosen by a clear margin between the two largest logits, so
    equal tokens mean equal computations. Biases and LayerNorms keep PyTorch's initialisation.
    """
    model = build_gpt(cfg, seed)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():   # the tied head's weight comes once, as wte's
            if parameter.dim() == 2:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * std)
    return model


def prompt_ids(cfg: GPTConfig, length: int, seed: int = 0, batch: int = 1) -> torch.Tensor:
    """Token ids ``[batch, length]`` drawn uniformly from the vocabulary with ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, cfg.vocab, (batch, length), generator=generator)
