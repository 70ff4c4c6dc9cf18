"""Pipeline schedules replayed: when each stage runs what, the bubble, and the activations each stage holds.

A model cut into ``p`` stages (one per device) runs a batch as ``m`` micro-batches. A schedule gives each stage
the **order** of its operations: ``"F3"`` is the forward pass of micro-batch 3 on that stage, ``"B3"`` its
backward pass. :func:`replay` times an order the way a pipeline runs it, under the lab's time model:

* a forward takes :data:`FORWARD` = 1 time unit, a backward :data:`BACKWARD` = 2 (it computes two gradients);
* a stage runs one operation at a time, in its order, each as early as it can;
* ``F i`` on stage ``s`` needs ``F i`` on stage ``s - 1`` finished (its input activation); ``B i`` on stage
  ``s`` needs ``B i`` on stage ``s + 1`` finished (the gradient of its output) and ``F i`` on stage ``s``
  (what it saved); the last stage's ``B i`` needs only its own ``F i``. Sending between stages is free.

A stage **holds** micro-batch ``i``'s activations from the start of its ``F i`` to the end of its ``B i``
(one that ends as another starts frees its memory first). The **bubble fraction** is the share of the
``p x makespan`` stage-time units in which stages sit idle: ``1 - busy / (p * makespan)``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

FORWARD = 1
"""Time units of one stage's forward pass of one micro-batch."""
BACKWARD = 2
"""Time units of one stage's backward pass of one micro-batch."""
_OP = re.compile(r"([FB])(\d+)")


@dataclass(frozen=True)
class Slot:
    """One operation as replayed."""

    stage: int
    op: str
    """``"F"`` or ``"B"``."""
    micro: int
    """The micro-batch."""
    start: int
    end: int


@dataclass
class Timeline:
    """A replayed schedule (:func:`replay`)."""

    stages: int
    microbatches: int
    slots: list[Slot] = field(default_factory=list)
    makespan: int = 0
    """When the last operation ends."""
    bubble: float = 0.0
    """``1 - busy / (stages * makespan)``."""
    peak: list[int] = field(default_factory=list)
    """Per stage, the most micro-batches whose activations it holds at once."""

    def summary(self) -> dict:
        return {"makespan": self.makespan, "bubble": self.bubble, "peak": list(self.peak)}


def parse(orders: Sequence[Sequence[str]], microbatches: int | None = None) -> list[list[tuple[str, int]]]:
    """``orders`` as ``[[("F", 0), ...], ...]``, checked: every stage runs ``F i`` and ``B i`` exactly once for
    each micro-batch ``i`` in ``range(m)`` (``m`` from the orders when not given). Raises ``ValueError``
    saying which stage's order is wrong."""
    if not isinstance(orders, (list, tuple)) or not orders:
        raise ValueError(f"a schedule is a list of stages' orders (lists of 'F3', 'B3', ...); got {str(orders)[:80]}")
    parsed = []
    for stage, order in enumerate(orders):
        if not isinstance(order, (list, tuple)):
            raise ValueError(f"stage {stage}'s order is a {type(order).__name__}; expected a list like ['F0', 'F1', "
                             "'B0', ...]")
        ops = []
        for item in order:
            match = _OP.fullmatch(item) if isinstance(item, str) else None
            if match is None:
                raise ValueError(f"stage {stage}'s order holds {str(item)[:20]!r}; each operation is 'F<i>' or 'B<i>'")
            ops.append((match.group(1), int(match.group(2))))
        parsed.append(ops)
    if microbatches is None:
        microbatches = 1 + max((i for ops in parsed for _, i in ops), default=-1)
    expected = sorted((kind, i) for kind in "FB" for i in range(microbatches))
    for stage, ops in enumerate(parsed):
        if sorted(ops) != expected:
            missing = sorted(set(expected) - set(ops))
            extra = sorted(op for op in set(ops) if ops.count(op) > 1 or op not in expected)
            raise ValueError(f"stage {stage} must run F and B of micro-batches 0..{microbatches - 1} once each; "
                             f"missing {[k + str(i) for k, i in missing][:6]}, repeated or unknown "
                             f"{[k + str(i) for k, i in extra][:6]}")
    return parsed


def replay(orders: Sequence[Sequence[str]], microbatches: int | None = None) -> Timeline:
    """Time ``orders`` (one list per stage, stage 0 first; ``"F3"``: the forward of micro-batch 3, ``"B3"`` its
    backward) and return the :class:`Timeline`: ``slots`` (each operation's stage, start and end),
    ``makespan``, ``bubble`` (``1 - busy / (stages x makespan)``) and ``peak`` (per stage, the most micro-batches
    whose activations it holds at once).

    The time model: a forward takes 1 unit, a backward 2; a stage runs one operation at a time, in its order,
    each as early as it can; ``F i`` on stage ``s`` waits for ``F i`` on stage ``s - 1``, ``B i`` for ``B i`` on
    stage ``s + 1`` and for this stage's ``F i``. A stage holds micro-batch ``i`` from the start of its ``F i``
    to the end of its ``B i`` (a backward that ends as a forward starts frees its memory first).

    Raises ``ValueError`` for an order that is not a schedule (an operation missing or repeated) or that can
    never finish (a stage waiting for an operation that waits for it)."""
    parsed = parse(orders, microbatches)
    stages = len(parsed)
    micro = len(parsed[0]) // 2
    end: dict[tuple[int, str, int], int] = {}
    free = [0] * stages
    position = [0] * stages
    slots: list[Slot] = []
    while any(position[s] < len(parsed[s]) for s in range(stages)):
        progressed = False
        for s in range(stages):
            while position[s] < len(parsed[s]):
                kind, i = parsed[s][position[s]]
                needs = [(s - 1, "F", i)] if kind == "F" and s > 0 else []
                if kind == "B":
                    needs = [(s, "F", i)] + ([(s + 1, "B", i)] if s < stages - 1 else [])
                if any(need not in end for need in needs):
                    break
                start = max([free[s]] + [end[need] for need in needs])
                finish = start + (FORWARD if kind == "F" else BACKWARD)
                end[(s, kind, i)] = finish
                free[s] = finish
                slots.append(Slot(s, kind, i, start, finish))
                position[s] += 1
                progressed = True
        if not progressed:
            waiting = [f"stage {s} at {parsed[s][position[s]][0]}{parsed[s][position[s]][1]}" for s in range(stages)
                       if position[s] < len(parsed[s])]
            raise ValueError("the schedule never finishes: " + ", ".join(waiting[:4]) + " each wait for an operation "
                             "that comes later in its stage's order (a B before its own F, or before the next "
                             "stage's B of the same micro-batch)")
    makespan = max(slot.end for slot in slots)
    busy = sum(slot.end - slot.start for slot in slots)
    peak = []
    for s in range(stages):
        events = []
        for slot in slots:
            if slot.stage == s:
                events.append((slot.start, 1) if slot.op == "F" else (slot.end, -1))
        held = top = 0
        for _, change in sorted(events):  # at one time, -1 sorts first: a finished B frees before an F starts
            held += change
            top = max(top, held)
        peak.append(top)
    slots.sort(key=lambda slot: (slot.stage, slot.start))
    return Timeline(stages, micro, slots, makespan, 1 - busy / (stages * makespan), peak)
