"""The course library the notebooks import.

Students use::

    from util import setup, submit, progress
    setup()                      # fixed seed and thread count, so numbers match the grader's
    submit("1.1", answer)        # print a titled block and export the answer for grading
    check("1.1")                 # run the task's public checks (no reference needed): passed/failed + hint
    progress("labN")             # which tasks of lab N are exported so far

Helpers shared by several labs live here once: ``util.models`` (deterministic model builders),
``util.onnx_models`` (deterministic ONNX export), ``util.display`` (result blocks).
"""
from __future__ import annotations

import random

from util.display import print_hw_result
from util.selfcheck import check
from util.submit import progress, submit

SEED = 0
THREADS = 1
"""One intra-op thread: float results then do not depend on the machine's core count."""


def setup(seed: int = SEED, threads: int = THREADS) -> str:
    """Seed every generator and fix torch's thread count; return the device to use.

    Returns ``"cuda"`` when a GPU is present, else ``"cpu"``. The graded numbers in the labs do
    not depend on the device: counts are computed on the CPU either way.
    """
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    return "cuda" if torch.cuda.is_available() else "cpu"


__all__ = ["setup", "submit", "check", "progress", "print_hw_result", "SEED", "THREADS"]
