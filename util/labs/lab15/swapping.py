"""Lab 15's engine with preemption by swapping (task 15.10): a preempted request's blocks can be moved to a second,
bounded pool in CPU memory and back, instead of being freed and recomputed.

Task 15.5's engine preempts by **recomputation**: the victim's blocks are freed and its prompt and generated tokens
prefilled again later. **Swapping** (vLLM's ``preemption_mode="swap"``) copies the victim's blocks to CPU memory
and back when it runs again: no token is computed twice, but every block crosses the bus twice. Which is cheaper
depends on the request: this engine states both costs, and task 15.10's scheduler chooses by them.

The engine (:func:`simulate_swapping`) is task 15.5's (:func:`~util.labs.lab15.serving.simulate`) with a CPU pool
of ``cpu_blocks`` blocks and two more lists in a decision, ``swap_out`` and ``swap_in``:

* a request swapped out gives its GPU blocks back and holds as many CPU blocks, keeping its cache (``context``):
  it joins the back of the **swapped** queue (those of one iteration in their running order) and is neither
  running nor waiting; it cannot decode while swapped out (its blocks are not in GPU memory);
* a request swapped in takes back as many GPU blocks, gives its CPU blocks back, and runs again from the next
  iteration (it joins the back of ``running``, as an admitted request does; it does not decode in the iteration
  that moves it);
* the iteration's time is the cost model's time of its work (as in 15.5; nothing if it computes nothing) plus
  ``swap_ns_per_block`` for every block moved, either way (the transfers are not overlapped with compute).

A preempted request recomputed (``preempt``) is handled as in 15.5: its blocks freed, it goes back to the front of
the waiting queue to be prefilled again, prompt and generated tokens together.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from util.labs.lab15.serving import GPT2_SMALL_A100, CostModel, Request, Run, Seq, _ids, poisson_trace


@dataclass(frozen=True)
class SwapConfig:
    """The server's limits: ``num_blocks`` GPU blocks and ``cpu_blocks`` CPU blocks of ``block_size`` slots; at
    most ``max_tokens`` tokens in one iteration and ``max_running`` running requests (as 15.5's
    :class:`~util.labs.lab15.serving.ServeConfig`); moving one block between the pools, either way, costs
    ``swap_ns_per_block`` ns."""

    num_blocks: int
    cpu_blocks: int
    block_size: int
    max_tokens: int
    max_running: int
    swap_ns_per_block: int

    def blocks(self, tokens: int) -> int:
        """Blocks that hold ``tokens`` slots: ``ceil(tokens / block_size)``."""
        return -(-tokens // self.block_size)

    def swap_ns(self, blocks: int) -> int:
        """What swapping ``blocks`` blocks out and back in costs: ``2 x blocks x swap_ns_per_block`` ns."""
        return 2 * blocks * self.swap_ns_per_block


@dataclass(frozen=True)
class SwapView:
    """What the scheduler is shown before each iteration: 15.5's view with the swapped requests (``Seq``: their
    ``context`` and ``blocks`` as they were on the GPU, the blocks now held in CPU memory), the free CPU blocks and
    the cost model."""

    now: int
    running: tuple[Seq, ...]
    """Running requests, in the order they were admitted or swapped in (oldest first)."""
    swapped: tuple[Seq, ...]
    """Swapped-out requests, oldest swapped out first."""
    waiting: tuple[Seq, ...]
    """Waiting requests, in queue order (first = next in line)."""
    free_blocks: int
    free_cpu_blocks: int
    config: SwapConfig
    cost: CostModel

    def recompute_ns(self, seq: Seq) -> int:
        """What recomputing ``seq`` costs: the cost model's time of prefilling its ``prompt + generated`` tokens
        alone, ``cost.iteration_ns([(prompt + generated, prompt + generated)])``."""
        tokens = seq.prompt + seq.generated
        return self.cost.iteration_ns([(tokens, tokens)])


@dataclass(frozen=True)
class SwapDecision:
    """A scheduler's answer for one iteration: the running requests to ``preempt`` (recomputed) and to
    ``swap_out``, the swapped ones to ``swap_in``, the running ones to ``decode`` and the waiting ones to
    ``admit`` (as 15.5's :class:`~util.labs.lab15.serving.Decision`). The engine also takes a dict of these five
    keys."""

    preempt: tuple[int, ...] = ()
    swap_out: tuple[int, ...] = ()
    swap_in: tuple[int, ...] = ()
    decode: tuple[int, ...] = ()
    admit: tuple[int, ...] = ()


@dataclass
class SwapRun(Run):
    """What :func:`simulate_swapping` did: a :class:`~util.labs.lab15.serving.Run` whose iterations also hold
    ``swap_out``, ``swap_in`` and ``moved`` (blocks moved either way), with the CPU blocks held after each
    iteration, the blocks moved and the swaps in all."""

    cpu_blocks_in_use: list[int] = field(default_factory=list)
    swaps: int = 0
    blocks_moved: int = 0

    def summary(self) -> dict[str, Any]:
        """15.5's summary with ``swaps`` (requests swapped out) and ``blocks_moved`` (either way)."""
        return {**super().summary(), "swaps": self.swaps, "blocks_moved": self.blocks_moved}


@dataclass
class _State:
    request: Request
    generated: int = 0
    context: int = 0
    blocks: int = 0

    def seq(self, where: str) -> Seq:
        r = self.request
        held = where != "waiting"
        return Seq(r.id, r.arrival, r.prompt, self.generated, self.context if held else 0,
                   self.blocks if held else 0, 0 if held else r.prompt + self.generated)


def simulate_swapping(schedule: Callable[[SwapView], SwapDecision], requests: Sequence[Request], config: SwapConfig,
                      cost: CostModel = GPT2_SMALL_A100, max_iterations: int = 100_000) -> SwapRun:
    """Serve ``requests`` with ``schedule`` until every request has finished, or a deadlock (as 15.5's
    :func:`~util.labs.lab15.serving.simulate`, with swapping: module docstring). In each iteration, in this order:
    the ``preempt`` requests give their blocks back and go to the front of the waiting queue (oldest first); the
    ``swap_out`` ones move their blocks to CPU memory and join the back of the swapped queue (in running order);
    the ``swap_in`` ones move theirs back to the GPU; each decode writes one slot (a new block when its last is
    full); each admission is prefilled into ``ceil(prefill / block_size)`` blocks. The iteration costs its work's
    time (nothing without work) plus ``swap_ns_per_block`` per block moved; every request of the batch (``decode``
    + ``admit``) gets one token at its end, the swapped-in ones join the back of ``running``, and a request with all
    its tokens leaves. An iteration that decodes, admits and swaps in nothing while requests remain is a deadlock.

    Raises ``ValueError`` for an infeasible decision: an id that is not where the list needs it (a swapped-out
    request decoded: its blocks are not in GPU memory), a request named twice, more tokens than ``max_tokens``,
    more running requests than ``max_running``, more GPU blocks than are free, more CPU blocks than are free."""
    for request in requests:
        if request.output < 1 or request.prompt < 1:
            raise ValueError(f"request {request.id} has a prompt of {request.prompt} and an output of "
                             f"{request.output} tokens; both must be at least 1")
        if request.prompt + request.output - 1 > config.max_tokens or \
                config.blocks(request.prompt + request.output - 1) > config.num_blocks:
            raise ValueError(f"request {request.id} could never run under {config}: a preempted request must fit "
                             "in one prefill and in the blocks there are")
    pending = sorted(requests, key=lambda r: (r.arrival, r.id))
    states = {r.id: _State(r) for r in pending}
    if len(states) != len(pending):
        raise ValueError("two requests share an id")
    run = SwapRun(requests={r.id: r for r in pending})
    arrivals = [r.arrival for r in pending]
    waiting: list[int] = []
    running: list[int] = []
    swapped: list[int] = []
    free, cpu_free = config.num_blocks, config.cpu_blocks
    now = arrived = 0
    while len(run.finish) < len(states):
        count = bisect.bisect_right(arrivals, now)
        waiting += [r.id for r in pending[arrived:count]]
        arrived = max(arrived, count)
        if len(run.iterations) >= max_iterations:
            run.deadlock = f"stopped after {max_iterations:,} iterations"
            break
        view = SwapView(now, tuple(states[i].seq("running") for i in running),
                        tuple(states[i].seq("swapped") for i in swapped),
                        tuple(states[i].seq("waiting") for i in waiting), free, cpu_free, config, cost)
        preempt, swap_out, swap_in, decode, admit = _checked(schedule(view), running, swapped, waiting)
        for i in preempt:
            free += states[i].blocks
            states[i].blocks, states[i].context = 0, 0
        out_blocks = sum(states[i].blocks for i in swap_out)
        if out_blocks > cpu_free:
            raise ValueError(f"at {now:,} ns swapping out {out_blocks} blocks needs {out_blocks} CPU blocks and "
                             f"{cpu_free} are free")
        free += out_blocks
        cpu_free -= out_blocks
        gone = set(preempt) | set(swap_out)
        kept = [i for i in running if i not in gone]
        waiting = [i for i in running if i in set(preempt)] + waiting
        swapped += [i for i in running if i in set(swap_out)]
        run.preemptions += len(preempt) + len(swap_out)
        run.swaps += len(swap_out)
        tokens = len(decode) + sum(states[i].request.prompt + states[i].generated for i in admit)
        if tokens > config.max_tokens:
            raise ValueError(f"at {now:,} ns the batch holds {tokens} tokens (decodes count 1, prefills their "
                             f"prompt + generated tokens); the budget is {config.max_tokens}")
        if len(kept) + len(swap_in) + len(admit) > config.max_running:
            raise ValueError(f"at {now:,} ns {len(kept) + len(swap_in) + len(admit)} requests would be running; at "
                             f"most {config.max_running} may")
        in_blocks = sum(states[i].blocks for i in swap_in)
        need = in_blocks + sum(config.blocks(states[i].context + 1) - states[i].blocks for i in decode)
        need += sum(config.blocks(states[i].request.prompt + states[i].generated) for i in admit)
        if need > free:
            raise ValueError(f"at {now:,} ns the batch needs {need} GPU blocks (swapped in, decoded, admitted) and "
                             f"{free} are free")
        if not decode and not admit and not swap_in:
            if waiting or running or swapped:
                run.deadlock = (f"at {now:,} ns the batch is empty while {len(running)} requests run, "
                                f"{len(swapped)} are swapped out and {len(waiting)} wait ({free} GPU blocks free): "
                                "nothing can change any more")
                run.iterations.append({"start": now, "ns": 0, "preempt": preempt, "swap_out": swap_out,
                                       "swap_in": [], "decode": [], "admit": [], "moved": out_blocks})
                break
            now = pending[arrived].arrival
            continue
        free -= in_blocks
        cpu_free += in_blocks
        moving = set(swap_in)
        swapped = [i for i in swapped if i not in moving]
        work = []
        for i in decode:
            state = states[i]
            free -= config.blocks(state.context + 1) - state.blocks
            state.blocks = config.blocks(state.context + 1)
            state.context += 1
            work.append((1, state.context))
        for i in admit:
            state = states[i]
            state.context = state.request.prompt + state.generated
            state.blocks = config.blocks(state.context)
            free -= state.blocks
            work.append((state.context, state.context))
        moved = out_blocks + in_blocks
        ns = (cost.iteration_ns(work) if work else 0) + moved * config.swap_ns_per_block
        run.blocks_moved += moved
        run.iterations.append({"start": now, "ns": ns, "preempt": preempt, "swap_out": swap_out,
                               "swap_in": swap_in, "decode": decode, "admit": admit, "moved": moved})
        now += ns
        if admit:
            admitted = set(admit)
            waiting = [i for i in waiting if i not in admitted]
        running = kept + list(swap_in) + list(admit)
        for i in decode + admit:
            state = states[i]
            state.generated += 1
            run.first_token.setdefault(i, now)
            if state.generated == state.request.output:
                run.finish[i] = now
                free += state.blocks
                state.blocks = 0
                running.remove(i)
        run.blocks_in_use.append(config.num_blocks - free)
        run.cpu_blocks_in_use.append(config.cpu_blocks - cpu_free)
    return run


def _checked(decision: Any, running: list[int], swapped: list[int], waiting: list[int]):
    keys = ("preempt", "swap_out", "swap_in", "decode", "admit")
    if not isinstance(decision, SwapDecision):
        if isinstance(decision, Mapping) and set(decision) == set(keys):
            decision = SwapDecision(*(decision[key] for key in keys))
        else:
            raise ValueError(f"schedule must return a SwapDecision, not a {type(decision).__name__}")
    lists = [_ids(getattr(decision, key), key) for key in keys]
    preempt, swap_out, swap_in, decode, admit = lists
    named = [i for ids in lists for i in ids]
    if len(set(named)) != len(named):
        twice = next(i for i in named if named.count(i) > 1)
        raise ValueError(f"request {twice} is named twice in one decision (preempt, swap_out, swap_in, decode, admit)")
    places = {"running": set(running), "swapped": set(swapped), "waiting": set(waiting)}
    for key, ids, place in (("preempt", preempt, "running"), ("swap_out", swap_out, "running"),
                            ("decode", decode, "running"), ("swap_in", swap_in, "swapped"),
                            ("admit", admit, "waiting")):
        stray = [i for i in ids if i not in places[place]]
        if stray:
            where = next((p for p, members in places.items() if stray[0] in members), None)
            shown = {"running": "running", "swapped": "swapped out", "waiting": "waiting"}
            why = " (its blocks are in CPU memory: swap it in first)" if where == "swapped" and key == "decode" else ""
            raise ValueError(f"request {stray[0]} is {shown[where] if where else 'not ' + shown[place]}{why}: "
                             f"{key} takes {shown[place]} requests only")
    return preempt, swap_out, swap_in, decode, admit


def swap_config_from(spec: Mapping[str, Any]) -> SwapConfig:
    """The :class:`SwapConfig` of a task-15.10 case (its ``config``)."""
    c = spec["config"]
    return SwapConfig(int(c["num_blocks"]), int(c["cpu_blocks"]), int(c["block_size"]), int(c["max_tokens"]),
                      int(c["max_running"]), int(c["swap_ns_per_block"]))


def swap_requests(seed: int, spec: Mapping[str, Any]) -> list[Request]:
    """The requests of a task-15.10 trace: the spec's own ``requests`` (``[id, arrival, prompt, output]`` lists),
    or :func:`~util.labs.lab15.serving.poisson_trace` of ``seed`` and the spec's ``count``, ``rate_per_ms``,
    ``prompt`` and ``output`` ranges."""
    if "requests" in spec:
        return [Request(*map(int, r)) for r in spec["requests"]]
    return poisson_trace(int(seed), int(spec["count"]), float(spec["rate_per_ms"]), tuple(spec["prompt"]),
                         tuple(spec["output"]))
