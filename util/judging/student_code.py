"""Loading a student's pickled code in a student process: before anything of a case exists there, and bounded.

A function pickled by value (cloudpickle, as a hidden case saves it) runs code when it is unpickled: an object's
``__reduce__`` among the function's globals can walk the frames above it and read whatever the process already
holds. The held-out attacks read a case's spec that way (a parallel function), and carried kilobytes of answers in a
loss's pickle. So a harness loads the student's code with :func:`load` as the first thing it does with it:

* before it has received any input, spec or seed of a case (the harness asks for the code first, then the inputs);
* from a frame of its own that holds nothing but the bytes (the harness's frames above it hold no case either);
* at most ``limit`` bytes: what the code needs, not a data set (a judge sets the bound its task allows).

A judge never sends a student process the case's spec, seed or the grading secret (:mod:`util.judging.secret`),
only the values a call needs.
"""
from __future__ import annotations

from typing import Any


class TooLarge(ValueError):
    """The pickled code is over its bound; the message says by how much and what the bound is for."""


def check_size(data: bytes, limit: int, what: str = "the pickled function") -> None:
    """Raise :class:`TooLarge` when ``data`` is over ``limit`` bytes (what a judge checks before sending it)."""
    if len(data) > limit:
        raise TooLarge(f"{what} is {len(data):,} bytes pickled, over the {limit:,} bytes its code may take (it carries "
                       "data: compute what it needs from its arguments, or keep module-level tables small)")


def load(data: bytes, *, limit: int, what: str = "the pickled function") -> Any:
    """The object ``data`` unpickles to (cloudpickle), refusing more than ``limit`` bytes. Call it before the
    process holds anything of a case (see the module's docstring): its own frame holds only ``data``."""
    import cloudpickle

    check_size(data, limit, what)
    return cloudpickle.loads(data)
