"""The error a search maximises, and the random baseline the grader compares a search with (task 6.3).

An :class:`ErrorFunction` hides a model: called on an input ``x`` it returns the relative error
(``runtime.relmax``) of the model's EXTENDED output against its DISABLE_ALL output. It counts its
calls and refuses to run past its budget, as TracNe's fuzzers have a fixed number of evaluations.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from util.labs.lab6 import runtime
from util.onnx_session import session

BASELINE_INPUTS = 20
"""The grader's baseline is the median error of this many uniform random inputs."""
RATIO = 100
"""A search passes when its input's error is at least this many times the baseline."""


class BudgetExceeded(RuntimeError):
    """The search called the error function more often than its budget allows."""


class ErrorFunction:
    """``error_fn(x) -> float``: how far EXTENDED is from DISABLE_ALL on input ``x`` (``runtime.relmax``).

    ``x`` must be a float32-convertible array of ``shape`` with every value in ``[low, high]``
    (``ValueError`` otherwise). After ``budget`` calls it raises :class:`BudgetExceeded`.
    ``calls`` says how many calls were made so far.
    """

    def __init__(self, model: Any, shape: tuple[int, ...], low: float, high: float, budget: int,
                 input_name: str = "x") -> None:
        self._unopt = session(model, "DISABLE_ALL")
        self._opt = session(model, "EXTENDED")
        self.shape, self.low, self.high, self.budget = tuple(shape), float(low), float(high), int(budget)
        self.input_name = input_name
        self.calls = 0

    def __call__(self, x: Any) -> float:
        if self.calls >= self.budget:
            raise BudgetExceeded(f"the error function was called more than its budget of {self.budget} times; "
                                 "keep count of your calls")
        x = self.validate(x)
        self.calls += 1
        feeds = {self.input_name: x}
        return runtime.relmax(self._opt.run(None, feeds)[0], self._unopt.run(None, feeds)[0])

    def validate(self, x: Any) -> np.ndarray:
        """``x`` as float32, or ``ValueError`` saying what is wrong with its shape or range."""
        array = np.asarray(x, dtype=np.float32)
        if array.shape != self.shape:
            raise ValueError(f"x has shape {list(array.shape)}; expected {list(self.shape)}")
        if not np.all(np.isfinite(array)) or array.min() < self.low or array.max() > self.high:
            raise ValueError(f"x has values outside [{self.low:g}, {self.high:g}] (from {array.min():g} "
                             f"to {array.max():g}); clip it into the range")
        return array


def baseline(error_fn: ErrorFunction, seed: int, count: int = BASELINE_INPUTS) -> float:
    """Median error of ``count`` inputs drawn uniformly from ``[low, high]`` (``numpy`` generator ``seed``)."""
    rng = np.random.default_rng(seed)
    return float(np.median([error_fn(rng.uniform(error_fn.low, error_fn.high, error_fn.shape))
                            for _ in range(count)]))
