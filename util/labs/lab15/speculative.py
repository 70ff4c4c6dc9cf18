"""Lab 15's given pieces for speculative decoding: a draft model that agrees with the target, and a target
that counts its calls.

Speculative decoding (task 15.6) lets a cheap **draft** model propose ``k`` tokens and the expensive
**target** check them all in one forward pass. A draft is only useful if it often agrees with the target;
a small random model never does (measured: acceptance 0.00). A trained small model is out of reach without
downloads, so the lab's draft is the target with every weight matrix perturbed (:func:`draft_of`): the more
noise, the less it agrees: on the notebook's TinyGPT (k = 4, 40 tokens) the acceptance rate, accepted / (accepted +
rejected) as the notebook defines it (a call rejects at most one proposal), is 0.97 at sigma 0.003, 0.66 at 0.01
and 0.40 at 0.02 (of the proposals made, 0.89, 0.45 and 0.17 are accepted). Its *cost* is then a stated
fraction of the target's (the notebook's cost model), as a smaller model's would be.

Both models run in **float64**: over dozens of greedy steps some of TinyGPT's top-two logit gaps are as
small as 1e-4, within a few times the float32 difference between two correct ways of computing them; in
float64 that difference is about 1e-14, so equal tokens mean equal computations.

:class:`Uniforms` (a stream of uniform draws, :func:`uniform_stream`) and :func:`sample` (the one way a draw
picks a token) are what speculative *sampling* (task 15.8) takes every random choice from, so that a stream gives
one answer.

:class:`CountingTarget` is how the notebook (and the grader, in its own process) hands the target to
``speculative_generate``: a model you can only call, ``target(ids) -> logits``, that counts and records its
calls.
"""
from __future__ import annotations

import copy
from typing import Any

import torch


def draft_of(target: torch.nn.Module, sigma: float, seed: int) -> torch.nn.Module:
    """A copy of ``target`` with N(0, sigma^2) noise (drawn from ``seed``) added to every weight matrix
    (embeddings and Linears; a tied head gets its embedding's noise), in ``target``'s dtype, eval mode."""
    draft = copy.deepcopy(target).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in draft.parameters():
            if parameter.dim() == 2:
                noise = torch.randn(parameter.shape, generator=generator, dtype=torch.float64) * sigma
                parameter.add_(noise.to(parameter.dtype))
    return draft


class CountingTarget:
    """The target model as ``speculative_generate`` may use it: ``target(ids)`` with ``ids`` a ``[1, T]``
    tensor of token ids gives the logits of every position, ``[1, T, vocab]`` (as ``model(ids)`` does: one
    forward pass over the whole sequence, no cache). Nothing else of the model is reachable. ``calls``
    counts the calls and ``inputs`` records each call's ids (a list of ints); ``cfg`` is the model's
    :class:`~util.labs.lab10.gpt.GPTConfig`."""

    def __init__(self, model: torch.nn.Module) -> None:
        self._model = model
        self.cfg = model.cfg
        self.calls = 0
        self.inputs: list[list[int]] = []

    @torch.no_grad()
    def __call__(self, ids: Any) -> torch.Tensor:
        ids = torch.as_tensor(ids)
        if ids.dim() != 2 or ids.shape[0] != 1 or ids.dtype != torch.long:
            raise ValueError(f"target(ids) takes a [1, T] tensor of token ids (int64); got {tuple(ids.shape)} "
                             f"({ids.dtype})")
        self.calls += 1
        self.inputs.append([int(i) for i in ids[0]])
        return self._model(ids)


def rounds(inputs: list[list[int]], prompt: int, tokens: list[int]) -> list[tuple[int, int]]:
    """``(proposed, accepted)`` for each target call, worked out from the calls the target received
    (``inputs``, a :class:`CountingTarget`'s), the prompt's length and the final ``tokens``: a call's proposals
    are its ids after the prompt and the tokens decided before it, and those accepted are the leading ones the
    final tokens keep (each call decides its accepted proposals and one token of the target's)."""
    decided, out = 0, []
    for ids in inputs:
        proposals = ids[prompt + decided:]
        kept = 0
        while kept < len(proposals) and decided + kept < len(tokens) and proposals[kept] == tokens[decided + kept]:
            kept += 1
        out.append((len(proposals), kept))
        decided += kept + 1
    return out


def accepted_from(inputs: list[list[int]], prompt: int, tokens: list[int]) -> int:
    """Draft tokens the target accepted in all (:func:`rounds`)."""
    return sum(kept for _, kept in rounds(inputs, prompt, tokens))


class Uniforms:
    """The uniform draws speculative *sampling* (task 15.8) consumes, one call at a time: ``draws()`` is the next
    float in ``[0, 1)`` of a fixed stream, and ``used`` counts the draws taken. The notebook makes one with
    :func:`uniform_stream`; the grader serves its own, drawn from a secret, so the tokens of a correct
    implementation are exactly the grader's."""

    def __init__(self, values) -> None:
        self._values = [float(v) for v in values]
        self.used = 0

    def __call__(self) -> float:
        if self.used >= len(self._values):
            raise RuntimeError(f"the stream of {len(self._values)} uniform draws is used up: each round takes one "
                               "draw per proposal, one per acceptance test and one for the token it samples")
        value = self._values[self.used]
        self.used += 1
        return value


def uniform_stream(seed: int, count: int = 4096) -> Uniforms:
    """:class:`Uniforms` of ``count`` draws from ``numpy.random.default_rng(seed).random``."""
    import numpy as np

    return Uniforms(np.random.default_rng(seed).random(count).tolist())


def sample(weights: torch.Tensor, u: float) -> int:
    """The token that the uniform draw ``u`` picks from ``weights`` (a 1-D tensor of non-negative weights, not
    necessarily summing to 1): the smallest ``i`` whose cumulative weight (float64, in vocabulary order) exceeds
    ``u`` times the total. Every sampled token of task 15.8 is drawn with it, so a stream gives one answer."""
    cumulative = torch.cumsum(torch.as_tensor(weights, dtype=torch.float64).reshape(-1), dim=0)
    if not float(cumulative[-1]) > 0 or bool((torch.as_tensor(weights) < 0).any()):
        raise ValueError("sample() needs non-negative weights with a positive total")
    index = int(torch.searchsorted(cumulative, torch.tensor([float(u) * float(cumulative[-1])],
                                                            dtype=torch.float64), right=True))
    return min(index, cumulative.numel() - 1)
