"""Lab 15's engine with chunked prefill (task 15.9): a prompt is prefilled in chunks over several iterations,
so a long prompt no longer stalls every running decode for one long iteration.

Task 15.5's engine prefills a prompt whole, in one iteration: while a 2,000-token prompt is prefilled, every
running request waits for that long iteration before its next token. **Chunked prefill** (Sarathi-Serve, vLLM's
``enable_chunked_prefill``) spends a **token budget** per iteration (``max_tokens``, the most a chunk can be): the
running decodes first (one token each), then what is left on **chunks** of prompts. A request is **running** from
its first chunk on; while its prompt is not yet all in the cache it is **prefilling** (it decodes nothing), and the
iteration that prefills its prompt's last token yields its first token; from then on it decodes.

Task 15.9 writes the scheduler (``schedule(view) -> Chunks``); this module is the engine that carries its
decisions out (:func:`simulate_chunked`), the same in the notebook and in the grader's re-run. Memory is not what
this task is about (task 15.5 was): the cache holds every running request, so nothing is ever preempted, and the
running limit ``max_running`` is at most the budget (so the decodes always fit in it).

Time comes from task 15.5's cost model (:class:`~util.labs.lab15.serving.CostModel`, lab 10's counts of GPT-2
small): a decode is the work ``(1, context + 1)``, a chunk of ``c`` tokens after ``d`` prefilled ones ``(c, d + c)``
(its tokens attend to every key before them); every request of the batch is charged the head once, as there.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from util.labs.lab15.serving import GPT2_SMALL_A100, CostModel, Request, percentile, poisson_trace


@dataclass(frozen=True)
class ChunkConfig:
    """The server's limits: at most ``max_tokens`` tokens in one iteration (a decode counts 1, a chunk its
    tokens) and ``max_running`` running requests (prefilling or decoding); ``max_running <= max_tokens``."""

    max_tokens: int
    max_running: int


@dataclass(frozen=True)
class ChunkSeq:
    """What a scheduler sees of one request."""

    id: int
    arrival: int
    """Arrival time (ns)."""
    prompt: int
    """Prompt tokens."""
    prefilled: int
    """Prompt tokens already in the cache (0 while waiting; ``prompt`` once it decodes)."""
    generated: int
    """Tokens generated so far (0 until its prompt is all prefilled)."""

    @property
    def remaining(self) -> int:
        """Prompt tokens still to prefill: ``prompt - prefilled`` (0 for a decoding request)."""
        return self.prompt - self.prefilled


@dataclass(frozen=True)
class ChunkView:
    """What the scheduler is shown before each iteration."""

    now: int
    """The clock (ns)."""
    running: tuple[ChunkSeq, ...]
    """Running requests (prefilling or decoding), in the order they were admitted (oldest first)."""
    waiting: tuple[ChunkSeq, ...]
    """Waiting requests, in arrival order (first = next in line)."""
    config: ChunkConfig


@dataclass(frozen=True)
class Chunks:
    """A scheduler's answer for one iteration: the decoding requests to ``decode`` (one token each), and the
    ``prefill`` chunks as ``(request id, tokens)`` pairs, in the order they are given (a waiting request named
    here is admitted: it runs from this iteration on)."""

    decode: tuple[int, ...] = ()
    prefill: tuple[tuple[int, int], ...] = ()


@dataclass
class ChunkedRun:
    """What :func:`simulate_chunked` did: every iteration, every request's times, and whether it deadlocked."""

    iterations: list[dict[str, Any]] = field(default_factory=list)
    """Per iteration: ``{"start", "ns", "decode", "prefill"}`` (start time and length in ns, the decision's ids
    and ``[id, tokens]`` chunks)."""
    first_token: dict[int, int] = field(default_factory=dict)
    """Request id -> when its first token was ready (ns): the end of the iteration of its prompt's last chunk."""
    finish: dict[int, int] = field(default_factory=dict)
    """Request id -> when its last token was ready (ns)."""
    deadlock: str | None = None
    """``None``, or why the engine stopped before every request finished."""
    requests: dict[int, Request] = field(default_factory=dict)

    def ttft(self) -> dict[int, int]:
        """Request id -> its time to first token, ``first_token - arrival`` (ns), for the finished requests."""
        return {i: self.first_token[i] - self.requests[i].arrival for i in sorted(self.finish)}

    def tpot(self) -> dict[int, float]:
        """Request id -> its time per output token after the first, ``(finish - first_token) / (output - 1)``
        (ns), for the finished requests of at least 2 output tokens."""
        return {i: (self.finish[i] - self.first_token[i]) / (self.requests[i].output - 1)
                for i in sorted(self.finish) if self.requests[i].output > 1}

    def summary(self) -> dict[str, Any]:
        """The run's figures: ``iterations``, ``finished``, ``makespan_ns``, the nearest-rank percentiles
        (:func:`~util.labs.lab15.serving.percentile`) ``ttft_p50_ns``, ``ttft_p90_ns``, ``tpot_p50_ns`` and
        ``tpot_p90_ns`` over the finished requests, and ``deadlock``."""
        ttft, tpot = list(self.ttft().values()), list(self.tpot().values())
        return {"iterations": len(self.iterations), "finished": len(self.finish),
                "makespan_ns": max(self.finish.values(), default=0),
                "ttft_p50_ns": percentile(ttft, 50), "ttft_p90_ns": percentile(ttft, 90),
                "tpot_p50_ns": percentile(tpot, 50), "tpot_p90_ns": percentile(tpot, 90), "deadlock": self.deadlock}


@dataclass
class _State:
    request: Request
    prefilled: int = 0
    generated: int = 0

    def seq(self) -> ChunkSeq:
        r = self.request
        return ChunkSeq(r.id, r.arrival, r.prompt, self.prefilled, self.generated)


def simulate_chunked(schedule: Callable[[ChunkView], Chunks], requests: Sequence[Request], config: ChunkConfig,
                     cost: CostModel = GPT2_SMALL_A100, max_iterations: int = 100_000) -> ChunkedRun:
    """Serve ``requests`` with the scheduler ``schedule`` until every request has finished, or a deadlock.

    Before each iteration the requests that have arrived (``arrival <= now``) join the back of the waiting queue;
    ``schedule`` is shown a :class:`ChunkView` and its :class:`Chunks` carried out: each decoded request writes one
    slot and gets one token; each chunk of ``c`` tokens prefills the next ``c`` tokens of its prompt (a waiting
    request is admitted by its first chunk), and the chunk that prefills the prompt's last token yields the
    request's first token. The iteration costs ``cost.iteration_ns`` of its work, the clock advances by it, and a
    request with all its ``output`` tokens leaves. An empty batch while requests wait or run is a deadlock (the run
    stops and says so in ``ChunkedRun.deadlock``); with nothing waiting or running, the clock moves to the next
    arrival.

    Raises ``ValueError`` for an infeasible decision (a decode of a request that is not decoding, a chunk of a
    request that is neither waiting nor prefilling, a request named twice, a chunk of fewer than 1 token or more
    than its prompt's ``remaining``, more tokens than ``max_tokens``, more running requests than ``max_running``)
    and for a configuration whose ``max_running`` exceeds ``max_tokens``."""
    if not 1 <= config.max_running <= config.max_tokens:
        raise ValueError(f"{config}: max_running must be between 1 and max_tokens, so that every decode fits the budget")
    for request in requests:
        if request.output < 1 or request.prompt < 1:
            raise ValueError(f"request {request.id} has a prompt of {request.prompt} and an output of "
                             f"{request.output} tokens; both must be at least 1")
    pending = sorted(requests, key=lambda r: (r.arrival, r.id))
    states = {r.id: _State(r) for r in pending}
    if len(states) != len(pending):
        raise ValueError("two requests share an id")
    run = ChunkedRun(requests={r.id: r for r in pending})
    arrivals = [r.arrival for r in pending]
    waiting: list[int] = []
    running: list[int] = []
    now = arrived = 0
    while len(run.finish) < len(states):
        count = bisect.bisect_right(arrivals, now)
        waiting += [r.id for r in pending[arrived:count]]
        arrived = max(arrived, count)
        if len(run.iterations) >= max_iterations:
            run.deadlock = f"stopped after {max_iterations:,} iterations"
            break
        view = ChunkView(now, tuple(states[i].seq() for i in running), tuple(states[i].seq() for i in waiting),
                         config)
        decode, prefill = _checked(schedule(view), states, running, waiting, config)
        if not decode and not prefill:
            if waiting or running:
                run.deadlock = (f"at {now:,} ns the batch is empty while {len(running)} requests run and "
                                f"{len(waiting)} wait: nothing can change any more")
                run.iterations.append({"start": now, "ns": 0, "decode": [], "prefill": []})
                break
            now = pending[arrived].arrival
            continue
        work = []
        for i in decode:
            state = states[i]
            work.append((1, state.request.prompt + state.generated))
        for i, tokens in prefill:
            state = states[i]
            work.append((tokens, state.prefilled + tokens))
        ns = cost.iteration_ns(work)
        run.iterations.append({"start": now, "ns": ns, "decode": list(decode),
                               "prefill": [[i, tokens] for i, tokens in prefill]})
        now += ns
        admitted = {i for i, _ in prefill if states[i].prefilled == 0}
        if admitted:
            waiting = [i for i in waiting if i not in admitted]
            running += [i for i, _ in prefill if i in admitted]
        produced = list(decode)
        for i, tokens in prefill:
            states[i].prefilled += tokens
            if states[i].prefilled == states[i].request.prompt:
                produced.append(i)
        for i in produced:
            state = states[i]
            state.generated += 1
            run.first_token.setdefault(i, now)
            if state.generated == state.request.output:
                run.finish[i] = now
                running.remove(i)
    return run


def _checked(decision: Any, states: Mapping[int, _State], running: list[int], waiting: list[int],
             config: ChunkConfig) -> tuple[list[int], list[tuple[int, int]]]:
    if isinstance(decision, Mapping) and set(decision) == {"decode", "prefill"}:
        decision = Chunks(decision["decode"], decision["prefill"])
    if not isinstance(decision, Chunks):
        raise ValueError(f"schedule must return Chunks(decode, prefill), not a {type(decision).__name__}")
    if not isinstance(decision.decode, (list, tuple)) or any(type(i) is not int for i in decision.decode):
        raise ValueError(f"Chunks.decode must be a tuple of request ids (ints), not {decision.decode!r}")
    decode = list(decision.decode)
    prefill: list[tuple[int, int]] = []
    if not isinstance(decision.prefill, (list, tuple)):
        raise ValueError(f"Chunks.prefill must be a tuple of (request id, tokens) pairs, not {decision.prefill!r}")
    for pair in decision.prefill:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 or any(type(x) is not int for x in pair):
            raise ValueError(f"Chunks.prefill must hold (request id, tokens) pairs of ints, not {pair!r}")
        prefill.append((pair[0], pair[1]))
    named = decode + [i for i, _ in prefill]
    if len(set(named)) != len(named):
        raise ValueError(f"a request is named twice in one iteration: decode {decode}, prefill {prefill}")
    runs, waits = set(running), set(waiting)
    for i in decode:
        if i not in runs or states[i].prefilled < states[i].request.prompt:
            raise ValueError(f"request {i} is not decoding: only a running request whose prompt is all prefilled "
                             "decodes")
    for i, tokens in prefill:
        if i in runs:
            if states[i].prefilled == states[i].request.prompt:
                raise ValueError(f"request {i} is decoding: its prompt is all prefilled, so it gets no chunk")
        elif i not in waits:
            raise ValueError(f"request {i} is neither waiting nor prefilling: no chunk can be given to it")
        remaining = states[i].request.prompt - states[i].prefilled
        if not 1 <= tokens <= remaining:
            raise ValueError(f"request {i}'s chunk is {tokens} tokens; a chunk holds 1 to {remaining} tokens "
                             "(what is left of its prompt)")
    total = len(decode) + sum(tokens for _, tokens in prefill)
    if total > config.max_tokens:
        raise ValueError(f"the batch holds {total} tokens (decodes count 1, chunks their tokens); the budget is "
                         f"{config.max_tokens}")
    admitted = sum(1 for i, _ in prefill if i in waits)
    if len(running) + admitted > config.max_running:
        raise ValueError(f"{len(running) + admitted} requests would run; at most {config.max_running} may")
    return decode, prefill


def chunked_requests(seed: int, spec: Mapping[str, Any]) -> list[Request]:
    """The requests of a task-15.9 trace: :func:`~util.labs.lab15.serving.poisson_trace` of ``seed`` and the
    spec's ``count``, ``rate_per_ms``, ``prompt`` and ``output`` ranges, or the spec's own ``requests``
    (``[id, arrival, prompt, output]`` lists)."""
    if "requests" in spec:
        return [Request(*map(int, r)) for r in spec["requests"]]
    return poisson_trace(int(seed), int(spec["count"]), float(spec["rate_per_ms"]), tuple(spec["prompt"]),
                         tuple(spec["output"]))


def chunk_config_from(spec: Mapping[str, Any]) -> ChunkConfig:
    """The :class:`ChunkConfig` of a task-15.9 case (its ``config``: ``max_tokens``, ``max_running``)."""
    return ChunkConfig(int(spec["config"]["max_tokens"]), int(spec["config"]["max_running"]))
