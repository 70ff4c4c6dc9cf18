"""Lab 15's serving engine: continuous batching of requests under a token budget and a paged KV cache,
timed by a cost model (lab 10's counts), never by a clock.

A server runs in **iterations**: each one is a single forward pass over a batch that mixes the
**decodes** of running requests (one token each) and the **prefills** of newly admitted ones (their whole
prompt). Task 15.5 writes the scheduler, the policy that picks each iteration's batch (``schedule(view) ->
Decision``); this module is the engine that carries its decisions out (:func:`simulate`), the same in the
notebook and in the grader:

* it shows the scheduler a :class:`View` (the clock, the running and waiting requests as :class:`Seq`, the
  free blocks, the :class:`ServeConfig`), and checks the :class:`Decision` it gets back is **feasible**
  (every id known, the token budget, the running limit, enough free blocks), raising ``ValueError`` when it
  is not;
* it preempts (a preempted request gives back all its blocks and goes back to the **front** of the waiting
  queue, oldest first, to be prefilled again, prompt and generated tokens together: recomputation), runs
  the decodes, then the prefills, charges the iteration's time (:class:`CostModel`) and advances the clock;
* every request in the batch gets one token at the end of the iteration; a request that has its
  ``output`` tokens leaves and frees its blocks;
* an iteration whose batch is empty while requests wait or run is a **deadlock** (nothing can change any
  more): the engine stops there and says so in :attr:`Run.deadlock`; an empty batch with nothing waiting or
  running moves the clock to the next arrival.

KV slots: a request's cache holds ``context`` tokens. A prefill of ``prefill`` tokens (prompt + tokens
generated before a preemption) writes that many slots and yields one token; a decode feeds the newest
token, writing one slot, and yields the next. So a request of prompt P and output N holds at most
P + N - 1 slots (its last token is never fed back), in ``ceil(slots / block_size)`` blocks.
"""
from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Mapping, Sequence


@dataclass(frozen=True)
class Request:
    """One request: it arrives at ``arrival`` (ns) with a prompt of ``prompt`` tokens and will have generated
    ``output`` tokens when it finishes (a scheduler does not know ``output`` in advance)."""

    id: int
    arrival: int
    prompt: int
    output: int


@dataclass(frozen=True)
class Seq:
    """What a scheduler sees of one request."""

    id: int
    arrival: int
    """Arrival time (ns)."""
    prompt: int
    """Prompt tokens."""
    generated: int
    """Tokens generated so far."""
    context: int
    """Running: tokens whose keys and values its cache holds (a decode writes one more). Waiting: 0."""
    blocks: int
    """Blocks it holds (0 while waiting)."""
    prefill: int
    """Waiting: tokens its prefill must process, ``prompt + generated``. Running: 0."""


@dataclass(frozen=True)
class ServeConfig:
    """The server's limits: ``num_blocks`` blocks of ``block_size`` slots; at most ``max_tokens`` tokens in one
    iteration (a decode counts 1, a prefill its ``prefill``) and ``max_running`` running requests."""

    num_blocks: int
    block_size: int
    max_tokens: int
    max_running: int

    def blocks(self, tokens: int) -> int:
        """Blocks that hold ``tokens`` slots: ``ceil(tokens / block_size)``."""
        return -(-tokens // self.block_size)


@dataclass(frozen=True)
class View:
    """What the scheduler is shown before each iteration."""

    now: int
    """The clock (ns)."""
    running: tuple[Seq, ...]
    """Running requests, in the order they were admitted (oldest first)."""
    waiting: tuple[Seq, ...]
    """Waiting requests, in queue order (first = next in line)."""
    free_blocks: int
    config: ServeConfig


@dataclass(frozen=True)
class Decision:
    """A scheduler's answer for one iteration: the running requests to ``preempt`` (their blocks are freed
    first), those to ``decode`` (one token each) and the waiting ones to ``admit`` (prefilled in this
    iteration, in this order). The batch is ``decode`` + ``admit``. (The engine also takes a dict with these
    three keys.)"""

    preempt: tuple[int, ...] = ()
    decode: tuple[int, ...] = ()
    admit: tuple[int, ...] = ()


@dataclass(frozen=True)
class CostModel:
    """The time of one iteration from lab 10's counts, for a model of these sizes on a machine of
    ``macs_per_ns`` multiply-accumulates and ``bytes_per_ns`` bytes per nanosecond (a roofline):

    ``time = max(ceil(MACs / macs_per_ns), ceil(bytes / bytes_per_ns))`` ns, where, over the requests of
    the batch, each processing ``new`` tokens with ``context`` tokens in its cache after them,

    * ``MACs = sum(new * macs_per_token + head_macs + new * context * attention_macs_per_pair)``: the
      Linears for every new token, the head for the last one only (generation reads one row of logits),
      ``QK^T`` and ``AV`` over every key in full (lab 10's convention);
    * ``bytes = weight_bytes + sum(context) * kv_bytes_per_token``: the weights read once per iteration,
      whatever the batch, and each request's cache read and written.

    :data:`GPT2_SMALL_A100` holds GPT-2 small's counts in float16 on an A100-like machine."""

    weight_bytes: int
    macs_per_token: int
    head_macs: int
    attention_macs_per_pair: int
    kv_bytes_per_token: int
    macs_per_ns: int
    bytes_per_ns: int

    def macs(self, work: Sequence[tuple[int, int]]) -> int:
        """MACs of one iteration; ``work`` lists ``(new, context)`` per request of the batch."""
        return sum(new * self.macs_per_token + self.head_macs + new * context * self.attention_macs_per_pair
                   for new, context in work)

    def bytes(self, work: Sequence[tuple[int, int]]) -> int:
        """Bytes moved by one iteration (weights once, every request's cache)."""
        return self.weight_bytes + sum(context for _, context in work) * self.kv_bytes_per_token

    def iteration_ns(self, work: Sequence[tuple[int, int]]) -> int:
        """The iteration's time in ns (an integer: the roofline's larger side, rounded up)."""
        return max(-(-self.macs(work) // self.macs_per_ns), -(-self.bytes(work) // self.bytes_per_ns))


GPT2_SMALL_A100 = CostModel(
    weight_bytes=2 * 124_439_808,                 # its parameters in float16 (lab 10.1)
    macs_per_token=12 * (4 * 768 * 768 + 2 * 768 * 3072),   # q, k, v, o, fc, proj of 12 layers (lab 10.2)
    head_macs=768 * 50257,                        # the tied head, for one position
    attention_macs_per_pair=12 * 2 * 768,         # QK^T and AV: n_head * head_dim = 768 per layer, twice
    kv_bytes_per_token=2 * 12 * 12 * 64 * 2,      # k and v, 12 layers, 12 heads of 64, float16 (lab 10.3)
    macs_per_ns=156_000,                          # 312 TFLOP/s of float16: 156 TMAC/s
    bytes_per_ns=1_600,                           # 1.6 TB/s
)
"""GPT-2 small (124,439,808 parameters) in float16 on an A100-like GPU: a decode step alone costs the
weights' 248.9 MB at 1.6 TB/s, about 156 us, while its compute is about 0.8 us per request: batching
decodes is nearly free until the batch is in the hundreds."""


@dataclass
class Run:
    """What :func:`simulate` did: every iteration, every request's times, and whether it deadlocked."""

    iterations: list[dict[str, Any]] = field(default_factory=list)
    """Per iteration: ``{"start", "ns", "preempt", "decode", "admit"}`` (start time and length in ns, the
    decision's ids)."""
    first_token: dict[int, int] = field(default_factory=dict)
    """Request id -> when its first token was ready (ns)."""
    finish: dict[int, int] = field(default_factory=dict)
    """Request id -> when its last token was ready (ns)."""
    preemptions: int = 0
    deadlock: str | None = None
    """``None``, or why the engine stopped before every request finished."""
    blocks_in_use: list[int] = field(default_factory=list)
    """Blocks held after each iteration."""
    reserved_blocks: list[int] = field(default_factory=list)
    """Blocks a contiguous cache would hold after each iteration: every running request reserving
    ``prompt + output - 1`` slots (its longest cache) from the moment it is admitted."""
    requests: dict[int, Request] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The run's figures (integers in ns, throughput in tokens per second): ``iterations``,
        ``preemptions``, ``makespan_ns`` (the last token's time), ``throughput`` (generated tokens over the
        makespan), ``ttft_p50_ns``, ``ttft_p90_ns`` (time to first token: first token - arrival),
        ``latency_p50_ns``, ``latency_p99_ns`` (last token - arrival), the nearest-rank percentile
        (:func:`percentile`) over the finished requests, and ``deadlock``."""
        finished = sorted(self.finish)
        tokens = sum(self.requests[i].output for i in finished)
        makespan = max(self.finish.values(), default=0)
        ttft = [self.first_token[i] - self.requests[i].arrival for i in finished]
        latency = [self.finish[i] - self.requests[i].arrival for i in finished]
        return {"iterations": len(self.iterations), "preemptions": self.preemptions, "finished": len(finished),
                "makespan_ns": makespan, "throughput": tokens / makespan * 1e9 if makespan else 0.0,
                "ttft_p50_ns": percentile(ttft, 50), "ttft_p90_ns": percentile(ttft, 90),
                "latency_p50_ns": percentile(latency, 50), "latency_p99_ns": percentile(latency, 99),
                "deadlock": self.deadlock}


def percentile(values: Sequence[int], p: float) -> int | None:
    """The nearest-rank ``p``-th percentile: the smallest value with at least ``p`` % of the values at or
    below it (``sorted(values)[ceil(p / 100 * n) - 1]``), always one of the values; ``None`` for none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = math.ceil(Fraction(str(p)) * len(ordered) / 100)
    return ordered[min(max(rank, 1), len(ordered)) - 1]


@dataclass
class _State:
    request: Request
    generated: int = 0
    context: int = 0
    blocks: int = 0
    shown: tuple[bool, int, int, int] | None = None
    seq: Seq | None = None


def simulate(schedule: Callable[[View], Decision], requests: Sequence[Request], config: ServeConfig,
             cost: CostModel = GPT2_SMALL_A100, max_iterations: int = 100_000) -> Run:
    """Serve ``requests`` with the scheduler ``schedule`` until every request has finished, or a deadlock;
    returns the :class:`Run` (every iteration's decision and length, every request's times).

    Before each iteration it moves the requests that have arrived (``arrival <= now``) to the back of the
    waiting queue, shows ``schedule`` a :class:`View` and carries out the :class:`Decision`: the preempted
    requests give back all their blocks and go back to the front of the queue (oldest first), to be prefilled
    again (prompt and generated tokens); each decoded request writes one slot (a new block when
    ``ceil((context + 1) / block_size)`` exceeds the blocks it holds); each admitted one is prefilled into
    ``ceil(prefill / block_size)`` blocks. The iteration costs ``cost.iteration_ns`` of its work (``(1,
    context + 1)`` per decode, ``(prefill, prefill)`` per admission), the clock advances by it, and every
    request in the batch gets one token at its end; a request with all its ``output`` tokens leaves and frees
    its blocks. An empty batch while requests wait or run is a deadlock: the run stops and says so in
    ``Run.deadlock``; an empty batch with nothing waiting or running moves the clock to the next arrival.

    Raises ``ValueError`` for an infeasible decision (an id that is not running or waiting, a request both
    preempted and decoded, more tokens than ``max_tokens``, more running requests than ``max_running``, more
    new blocks than are free) and for a request that could never run (``prompt + output - 1`` tokens, its
    longest cache and its longest prefill after a preemption, over ``max_tokens`` or over the blocks there
    are)."""
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
    run = Run(requests={r.id: r for r in pending})
    waiting: list[int] = []
    shown_waiting: tuple[Seq, ...] | None = None
    running: list[int] = []
    free = config.num_blocks
    now = 0
    arrived = 0
    arrivals = [r.arrival for r in pending]
    longest = {r.id: config.blocks(r.prompt + r.output - 1) for r in pending}
    reserved = 0  # what a contiguous cache would hold for the running requests (Run.reserved_blocks)
    while len(run.finish) < len(states):
        count = bisect.bisect_right(arrivals, now)
        if count > arrived:
            waiting += [r.id for r in pending[arrived:count]]
            shown_waiting = None
        arrived = max(arrived, count)
        if len(run.iterations) >= max_iterations:
            run.deadlock = f"stopped after {max_iterations:,} iterations"
            break
        if shown_waiting is None:
            shown_waiting = tuple(_seq(states[i], False) for i in waiting)
        view = View(now, tuple(_seq(states[i], True) for i in running), shown_waiting, free, config)
        decision = schedule(view)
        preempt, decode, admit = _checked(decision, running, waiting)
        for i in preempt:
            free += states[i].blocks
            states[i].blocks, states[i].context = 0, 0
            reserved -= longest[i]
        run.preemptions += len(preempt)
        gone = set(preempt)
        kept = [i for i in running if i not in gone]
        preempted = [i for i in running if i in gone]
        if preempted:
            waiting = preempted + waiting
            shown_waiting = None
        tokens = len(decode) + sum(states[i].request.prompt + states[i].generated for i in admit)
        if tokens > config.max_tokens:
            raise ValueError(f"at {now:,} ns the batch holds {tokens} tokens (decodes count 1, prefills their "
                             f"prompt + generated tokens); the budget is {config.max_tokens}")
        if len(kept) + len(admit) > config.max_running:
            raise ValueError(f"at {now:,} ns {len(kept) + len(admit)} requests would be running; at most "
                             f"{config.max_running} may")
        need = sum(config.blocks(states[i].context + 1) - states[i].blocks for i in decode)
        need += sum(config.blocks(states[i].request.prompt + states[i].generated) for i in admit)
        if need > free:
            raise ValueError(f"at {now:,} ns the batch needs {need} new blocks and {free} are free: preempt, or "
                             "admit fewer")
        if not decode and not admit:
            if waiting or running:
                run.deadlock = (f"at {now:,} ns the batch is empty while {len(running)} requests run and "
                                f"{len(waiting)} wait ({free} blocks free): nothing can change any more")
                run.iterations.append({"start": now, "ns": 0, "preempt": list(preempt), "decode": [], "admit": []})
                break
            if arrived < len(pending):
                now = pending[arrived].arrival
                continue
            break  # pragma: no cover - every request finished
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
        ns = cost.iteration_ns(work)
        run.iterations.append({"start": now, "ns": ns, "preempt": list(preempt), "decode": list(decode),
                               "admit": list(admit)})
        now += ns
        if admit:
            admitted = set(admit)
            waiting = [i for i in waiting if i not in admitted]
            shown_waiting = None
            reserved += sum(longest[i] for i in admit)
        running = kept + list(admit)
        for i in list(decode) + list(admit):
            state = states[i]
            state.generated += 1
            run.first_token.setdefault(i, now)
            if state.generated == state.request.output:
                run.finish[i] = now
                free += state.blocks
                state.blocks = 0
                running.remove(i)
                reserved -= longest[i]
        run.blocks_in_use.append(config.num_blocks - free)
        run.reserved_blocks.append(reserved)
    return run


def _seq(state: _State, running: bool) -> Seq:
    """The :class:`Seq` the scheduler sees of ``state`` (made again only when it changed: a long queue costs
    nothing per iteration)."""
    key = (running, state.generated, state.context, state.blocks)
    if state.shown != key:
        r = state.request
        state.seq = Seq(r.id, r.arrival, r.prompt, state.generated, state.context if running else 0,
                        state.blocks if running else 0, 0 if running else r.prompt + state.generated)
        state.shown = key
    return state.seq


def _checked(decision: Any, running: list[int], waiting: list[int]) -> tuple[list[int], list[int], list[int]]:
    if not isinstance(decision, Decision):
        if isinstance(decision, Mapping) and set(decision) == {"preempt", "decode", "admit"}:
            decision = Decision(*(decision[key] for key in ("preempt", "decode", "admit")))
        else:
            raise ValueError(f"schedule must return a Decision, not a {type(decision).__name__}")
    preempt, decode, admit = (_ids(decision.preempt, "preempt"), _ids(decision.decode, "decode"),
                              _ids(decision.admit, "admit"))
    if preempt or decode:
        runs = set(running)
        stray = [i for i in preempt + decode if i not in runs]
        if stray:
            raise ValueError(f"request {stray[0]} is not running: only running requests are preempted or decoded")
        both = set(preempt) & set(decode)
        if both:
            raise ValueError(f"request {min(both)} is both preempted and decoded")
    if admit:
        waits = set(waiting)
        stray = [i for i in admit if i not in waits]
        if stray:
            raise ValueError(f"request {stray[0]} is not waiting (a request preempted in this iteration waits from "
                             "the next one): only waiting requests are admitted")
    return preempt, decode, admit


def _ids(values: Any, what: str) -> list[int]:
    if not isinstance(values, (list, tuple)):
        raise ValueError(f"Decision.{what} must be a tuple of request ids (ints), not {values!r}")
    out = list(values)
    if any(type(v) is not int for v in out):
        raise ValueError(f"Decision.{what} must be a tuple of request ids (ints), not {values!r}")
    if len(set(out)) != len(out):
        raise ValueError(f"Decision.{what} names a request twice: {out}")
    return out


def poisson_trace(seed: int, count: int, rate_per_ms: float, prompt: tuple[int, int],
                  output: tuple[int, int]) -> list[Request]:
    """``count`` requests arriving as a Poisson process of ``rate_per_ms`` requests per millisecond (arrival
    times in whole ns), prompts and outputs drawn uniformly from the inclusive ranges, all from
    ``random.Random(seed)``; ids 0, 1, ... in arrival order."""
    generator = random.Random(seed)
    now, out = 0.0, []
    for i in range(count):
        now += generator.expovariate(rate_per_ms) * 1e6
        out.append(Request(i, int(now), generator.randint(*prompt), generator.randint(*output)))
    return out


def requests_from(spec: dict) -> list[Request]:
    """The requests a task-15.5 case describes: ``spec["requests"]`` (lists ``[id, arrival, prompt, output]``),
    or :func:`poisson_trace` of its ``seed``, ``count``, ``rate_per_ms``, ``prompt`` and ``output``."""
    if "requests" in spec:
        return [Request(*map(int, r)) for r in spec["requests"]]
    return poisson_trace(int(spec["seed"]), int(spec["count"]), float(spec["rate_per_ms"]), tuple(spec["prompt"]),
                         tuple(spec["output"]))


def config_from(spec: dict) -> ServeConfig:
    """The :class:`ServeConfig` of a task-15.5 case."""
    c = spec["config"]
    return ServeConfig(int(c["num_blocks"]), int(c["block_size"]), int(c["max_tokens"]), int(c["max_running"]))
