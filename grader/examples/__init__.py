"""Example submissions: the solution with one realistic student mistake each.

They are *generated* from ``solutions/`` by ``python -m grader build`` (never edited by hand), so
they cannot drift from the solution: a replacement that no longer matches exactly once fails the
build. Each mistake says which checks it should fail; the expected score is derived from the lab's
declared points, and the tests assert the grader gives exactly that.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from grader.results import ANSWER

__all__ = ["ANSWER", "Mistake"]


@dataclass(frozen=True)
class Mistake:
    """One example submission: the solution notebook with a few exact text replacements."""

    name: str
    """File stem of the generated notebook, e.g. ``flops_as_macs``."""
    description: str
    """The mistake in a student's words, shown in the README and the tests."""
    replacements: tuple[tuple[str, str], ...]
    """``(old, new)`` pairs applied to code cells; each ``old`` must occur exactly once."""
    expected_failures: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Task id -> the checks that must fail (``ANSWER`` and/or case ids); every other check passes."""
