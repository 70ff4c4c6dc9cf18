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

from util import moved as _moved
from util.display import print_hw_result
from util.seeding import SEED, THREADS, setup
from util.selfcheck import check
from util.submit import progress, submit

_moved.install()  # a name a released handout imports resolves after it moves (util/moved.py)

__all__ = ["setup", "submit", "check", "progress", "print_hw_result", "SEED", "THREADS"]
