"""Task 12.4's chain and the course's executor of a checkpointing plan (the one the grader runs).

The chain, plans and the schedule the executor runs are described once, in :func:`run_plan`'s docstring
(``help(run_plan)``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import torch


@dataclass(frozen=True)
class Chain:
    """A chain of ``len(widths) - 1`` Linear + ReLU blocks on ``batch`` rows: block ``i`` computes
    ``x[i+1] = relu(x[i] @ W[i].T + b[i])`` from ``widths[i]`` to ``widths[i+1]`` features; ``help(run_plan)``
    says how a plan runs on it."""

    batch: int
    """Rows of every ``x[k]``."""
    widths: tuple[int, ...]
    """Features of ``x[0] .. x[n]``."""

    @property
    def n(self) -> int:
        """Number of blocks."""
        return len(self.widths) - 1

    @property
    def bytes(self) -> list[int]:
        """``bytes[k]``: size of ``x[k]`` (and of its gradient ``g[k]``), float32."""
        return [4 * self.batch * width for width in self.widths]

    @property
    def macs(self) -> list[int]:
        """``macs[i]``: multiply-adds of block ``i``'s forward pass."""
        return [self.batch * a * b for a, b in zip(self.widths, self.widths[1:])]


def uniform_chain(n: int, width: int = 256, batch: int = 128) -> Chain:
    """``n`` blocks of ``width`` features each: the notebook's chain is ``uniform_chain(8)``."""
    return Chain(batch, (width,) * (n + 1))


@dataclass
class Run:
    """What :func:`run_plan` measured."""

    peak_bytes: int
    """The highest memory over the schedule."""
    peak_at: str
    """The first step at which it was reached, e.g. ``"backward 7"``."""
    recompute_macs: int
    """Multiply-adds of the recompute steps, counted as they ran."""
    steps: list[str] = field(default_factory=list)
    """Every step's name, in order."""
    memory: list[int] = field(default_factory=list)
    """Bytes alive at each step."""
    grads: dict[str, torch.Tensor] = field(default_factory=dict)
    """The parameters' gradients (``"W3"``, ``"b3"``, ...): the same for every plan."""


def plan_problems(chain: Chain, plan: object) -> list[str]:
    """Why ``plan`` is not a plan for ``chain`` (empty: it is one)."""
    if not isinstance(plan, (list, tuple)) or not all(isinstance(k, int) and not isinstance(k, bool) for k in plan):
        return [f"a plan is a list of ints (the segment starts); found {str(plan)[:80]}"]
    if not plan or plan[0] != 0:
        return [f"a plan's first segment starts at block 0; found {list(plan)[:12]}"]
    if any(b <= a for a, b in zip(plan, plan[1:])) or plan[-1] >= chain.n:
        return [f"segment starts must increase and stay below {chain.n} (the number of blocks); "
                f"found {list(plan)[:12]}{' ...' if len(plan) > 12 else ''}"]
    return []


def schedule(chain: Chain, plan: Sequence[int]) -> list[tuple[str, list[str], list[str]]]:
    """The steps of ``plan`` as ``(name, reads, writes)`` with tensors named ``"x3"``, ``"g3"``."""
    n = chain.n
    steps = [(f"forward {i}", [f"x{i}"], [f"x{i + 1}"]) for i in range(n)]
    steps.append(("loss", [f"x{n}"], [f"g{n}"]))
    bounds = [*plan, n]
    for s, e in reversed(list(zip(bounds, bounds[1:]))):
        steps += [(f"recompute {i}", [f"x{i}"], [f"x{i + 1}"]) for i in range(s, e - 1)]
        steps += [(f"backward {i}", [f"x{i}", f"x{i + 1}", f"g{i + 1}"], [f"g{i}"] if i else [])
                  for i in range(e - 1, s - 1, -1)]
    return steps


def run_plan(chain: Chain, plan: Sequence[int], seed: int = 0) -> Run:
    """Execute ``plan`` on ``chain`` (weights and inputs seeded with ``seed``) in the schedule below: every
    step computes real tensors, a tensor is freed after the last step that reads it, and the memory and the
    recompute are counted from the tensors held and multiplied; returns a :class:`Run`.

    A **chain** of ``n`` blocks: block ``i`` computes ``x[i+1] = relu(x[i] @ W[i].T + b[i])``, from
    ``widths[i]`` to ``widths[i+1]`` features, on a batch of ``batch`` rows; the loss is the mean
    cross-entropy of ``x[n]`` (``widths[n]`` classes). ``x[k]`` holds ``bytes[k] = 4 * batch * widths[k]``
    bytes and block ``i`` costs ``macs[i] = batch * widths[i] * widths[i+1]`` multiply-adds.

    A **plan** is the sorted list of segment starts, ``0`` first: ``[0, 3, 6]`` cuts 8 blocks into
    ``[0, 3)``, ``[3, 6)``, ``[6, 8)``. The forward pass keeps the segment starts and ``x[n]`` and drops
    every other ``x[k]``; the backward pass recomputes a segment's dropped tensors from its start just
    before it needs them. :func:`run_plan` executes a plan step by step, with real tensors, in this
    schedule:

    * ``forward i`` (i = 0 .. n-1): reads ``x[i]``, writes ``x[i+1]``;
    * ``loss``: reads ``x[n]``, writes ``g[n]``, the loss's gradient with respect to ``x[n]``;
    * then for each segment ``[s, e)``, the last first: ``recompute i`` for i = s .. e-2 (reads
      ``x[i]``, writes ``x[i+1]`` again), then ``backward i`` for i = e-1 down to s (reads ``x[i]``,
      ``x[i+1]`` and ``g[i+1]``, writes ``g[i]``; ``backward 0`` writes no ``g[0]``: the chain's input
      needs no gradient).

    A tensor is alive from the step that writes it through the last step that reads it, both included
    (lab 8.2's rule); ``x[0]`` from the start. The memory at a step is the bytes of every ``x`` and ``g``
    alive at it (parameters and their gradients are not counted); the **peak** is its maximum over the
    schedule, and the **recompute** is the multiply-adds of the ``recompute`` steps. With every block its
    own segment (``list(range(n))``) nothing is dropped or recomputed: no checkpointing.

    The peak, in closed form (widths equal or not): the largest, over the plan's segments ``[s, e)``, of the
    bytes of the segment starts ``<= s`` plus the segment's need, the memory at its largest backward step::

        need(s, e) = max over i = s .. e-1 of  bytes[s+1] + ... + bytes[i+1]   # x[s+1] .. x[i+1] still held
                                              + bytes[i+1]                     # g[i+1], read
                                              + (bytes[i] if i > 0 else 0)     # g[i], written

    (the forward steps, the loss and the recompute steps never hold more). With equal widths ``A`` it is
    ``(e - s + 2) A`` (``2 A`` for ``[0, 1)``), reached at ``backward e-1``.
    """
    problems = plan_problems(chain, plan)
    if problems:
        raise ValueError(problems[0])
    steps = schedule(chain, list(plan))
    last_read: dict[tuple[str, int], int] = {}   # (tensor, which time it was written) -> last step reading it
    version: dict[str, int] = {"x0": 0}
    for index, (_, reads, writes) in enumerate(steps):
        for name in reads:
            last_read[(name, version[name])] = index
        for name in writes:
            version[name] = version.get(name, -1) + 1
    generator = torch.Generator().manual_seed(seed)
    weights = [(torch.randn(b, a, generator=generator) / a ** 0.5, torch.randn(b, generator=generator) * 0.1)
               for a, b in zip(chain.widths, chain.widths[1:])]
    labels = torch.randint(0, chain.widths[-1], (chain.batch,), generator=generator)
    held = {"x0": torch.rand(chain.batch, chain.widths[0], generator=generator)}
    written = {"x0": 0}
    grads: dict[str, torch.Tensor] = {}
    run = Run(0, "", 0)
    with torch.no_grad():
        for index, (name, _, writes) in enumerate(steps):
            kind, _, block = name.partition(" ")
            if kind in ("forward", "recompute"):
                i = int(block)
                w, b = weights[i]
                x = held[f"x{i}"]
                if kind == "recompute":
                    run.recompute_macs += x.shape[0] * w.shape[1] * w.shape[0]
                out = torch.relu(torch.addmm(b, x, w.T))
            elif kind == "loss":
                x = held[f"x{chain.n}"]
                out = torch.softmax(x, dim=1)
                out[torch.arange(chain.batch), labels] -= 1
                out /= chain.batch
            else:
                i = int(block)
                w, _ = weights[i]
                g = held[f"g{i + 1}"] * (held[f"x{i + 1}"] > 0)
                grads[f"W{i}"], grads[f"b{i}"] = g.T @ held[f"x{i}"], g.sum(0)
                out = g @ w if i else None
            for target in writes:
                held[target] = out.contiguous()
                written[target] = written.get(target, -1) + 1
            memory = sum(tensor.numel() * tensor.element_size() for tensor in held.values())
            run.steps.append(name)
            run.memory.append(memory)
            for target in list(held):
                if last_read.get((target, written[target]), index) <= index:
                    del held[target]
    run.peak_bytes = max(run.memory)
    run.peak_at = run.steps[run.memory.index(run.peak_bytes)]
    run.grads = grads
    return run
