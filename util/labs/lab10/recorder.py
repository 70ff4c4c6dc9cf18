"""What a decoding run fed the model, step by step, recorded by forward hooks on the model's own modules.

Whether a "cached" decoding really fed each token to the model once, or recomputed the whole sequence at
every step, shows in what the model's modules were given. Here, hooks on the model record it, for you to
look at in the notebook:

* ``model.wte`` (the token embedding) starts a **step** each time it is called; its ids are recorded;
* ``model.wpe`` records the positions it was given (in the step it belongs to), flattened: a step's positions
  are ``past .. past + L - 1`` (``past``: the cache's length), given as ``[L]`` (broadcast over the batch, as
  ``TinyGPT.forward`` does) or as ``[B, L]`` (the same positions in every row); the grader compares the set;
* every ``nn.Linear`` (``q``, ``k``, ``v``, ``o``, ``fc``, ``proj`` of each block, and ``head``) records how
  many rows (tokens times batch) it processed in each step.

So a cached forward must use the model's modules: ``model.wte(ids)``, ``model.wpe(positions)``,
``block.attn.project(...)``, ``block.attn.merge(...)``, ``block.mlp(...)``, ``model.head(...)``.

The grader does not take these records from a notebook (code beside the hooks could remove them or rewrite
what they hold): it replays ``generate`` on a model whose modules it computes itself and records the same
things in its own process (``util.labs.lab10.decode_harness``).

>>> with StepRecorder(model) as steps:            # doctest: +SKIP
...     tokens, cache = generate(model, prompt, 10)
>>> steps.lengths()                               # doctest: +SKIP
[8, 1, 1, 1, 1, 1, 1, 1, 1, 1]
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn


class StepRecorder:
    """A context manager that records, per step, the ids, positions and Linear rows a model was fed."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.linears = [name for name, module in model.named_modules() if isinstance(module, nn.Linear)]
        """The Linear modules watched, in the model's order (the columns of :meth:`rows`)."""
        self.ids: list[list[int]] = []
        self.positions: list[list[int]] = []
        self.linear_rows: list[list[int]] = []
        self.stray_rows = 0
        """Rows processed by a Linear before any call of ``model.wte`` (outside every step)."""
        self._handles: list[Any] = []

    # ------------------------------------------------------------------ hooks
    def _on_wte(self, module: nn.Module, args: tuple, output: Any) -> None:
        ids = args[0]
        self.ids.append([int(i) for i in torch.as_tensor(ids).reshape(-1).tolist()])
        self.positions.append([])
        self.linear_rows.append([0] * len(self.linears))

    def _on_wpe(self, module: nn.Module, args: tuple, output: Any) -> None:
        if self.positions:
            self.positions[-1].extend(int(p) for p in torch.as_tensor(args[0]).reshape(-1).tolist())

    def _linear_hook(self, column: int):
        def hook(module: nn.Module, args: tuple, output: Any) -> None:
            rows = int(args[0].numel() // args[0].shape[-1])
            if self.linear_rows:
                self.linear_rows[-1][column] += rows
            else:
                self.stray_rows += rows
        return hook

    def __enter__(self) -> "StepRecorder":
        modules = dict(self.model.named_modules())
        self._handles.append(self.model.wte.register_forward_hook(self._on_wte))
        self._handles.append(self.model.wpe.register_forward_hook(self._on_wpe))
        for column, name in enumerate(self.linears):
            self._handles.append(modules[name].register_forward_hook(self._linear_hook(column)))
        return self

    def __exit__(self, *exc: Any) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    # ------------------------------------------------------------------ results
    def lengths(self) -> list[int]:
        """Tokens fed to ``model.wte`` in each step (times the batch)."""
        return [len(step) for step in self.ids]

    def arrays(self) -> dict[str, np.ndarray]:
        """The records as flat integer arrays (what a hidden case saves for the grader)."""
        return {
            "fed_ids": np.array([i for step in self.ids for i in step], dtype=np.int64),
            "step_lengths": np.array(self.lengths(), dtype=np.int64),
            "positions": np.array([p for step in self.positions for p in step], dtype=np.int64),
            "position_counts": np.array([len(step) for step in self.positions], dtype=np.int64),
            "linear_rows": np.array(self.linear_rows, dtype=np.int64).reshape(len(self.linear_rows),
                                                                             len(self.linears)),
            "stray_rows": np.array(self.stray_rows, dtype=np.int64),
        }
