"""Lab 15's grader-side checks (``Task.grader_check``): every verdict decided in the grader's judge process on
what a case saved, against the grader's own computation (``judge_reference.py``), never in the student's kernel.

* 15.3 :func:`check_allocator`: the block tables, copies and free counts the course's :func:`~util.labs.lab15.
  paged.replay` recorded after every call of the hidden trace, checked by simulating the memory (every live
  sequence reads back exactly its own tokens after every call; tables change only for the sequences a call
  names; ``num_free()`` counts exactly the blocks no table holds: :func:`~util.labs.lab15.paged.trace_problems`)
  and against the grader's own allocator: the same calls raise ``OutOfBlocks``, the same appends copy, and
  the same number of blocks is free after every call (shared blocks stored once, nothing copied that is only
  read).
* 15.4 :func:`check_attention`: the saved output against the grader's float64 attention over keys and values
  it gathers itself through the case's tables.
* 15.5 :func:`check_schedule`: the engine's record of every iteration (start, length, preempted, decoded,
  admitted) against the grader's own run of the stated policy on the same requests, iteration by iteration.
* 15.6 :func:`check_speculative`: the student's ``speculative_generate`` run again in a student process
  (:mod:`util.labs.lab15.spec_harness`) on models and prompts drawn from the grading secret, screened for clear
  argmax margins at grading time (:func:`spec_setting`), against a target that lives here: the judge computes every target
  call's logits itself, counts the calls, checks each one's input (the decided tokens, then the draft's
  greedy proposals, no more than the round needs) against its own speculative decoding, and the tokens
  returned against its own greedy decoding of the target.
* 15.7 :func:`check_prefix`: the prefix cache's record of every call, by memory simulation (each slot holds a
  token in its context: :func:`~util.labs.lab15.prefix.trace_problems`) and against the grader's own cache: the
  blocks each prompt reuses, the blocks cached and the evictions after every call.
* 15.8 :func:`check_sampling`: ``speculative_sample`` run again in a student process against the judge's target,
  with uniform draws the judge draws from the grading secret (:mod:`util.judging.secret`) and serves run by run,
  on models and prompts drawn from the same secret (since release 6: :func:`sampling_models`): every call, the
  tokens and the draws used exactly the judge's own run; or, over many runs, the tokens' frequencies against the
  target's exact sampling distribution (Pearson's chi-square at :data:`DISTRIBUTION_ALPHA`), on models screened so
  that the test tells the residual from ``p`` (:func:`distribution_setting`).

The saved bytes are untrusted: JSON is read bounded, arrays without pickle, and every field is checked
before use. Feedback says what differs and where, never the grader's hidden figures.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from util.contract import Tolerance

MAX_JSON = 8 << 20
"""The largest record a judge reads (a schedule of a few thousand iterations is about 300 KB)."""
LIMIT = 3
EXTRA_CALLS = 8
"""Target calls the judge serves beyond what speculative decoding needs before it refuses more."""
START_SECONDS = 60.0
"""How long the student process may take to start and load the function (imports included)."""


def _json(data: bytes) -> Any:
    if len(data) > MAX_JSON:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


UNREADABLE = "the record saved for this case is not the one the course saves; run the notebook again from the top"


# ---------------------------------------------------------------- 15.3: the paged allocator

_HINTS = {
    "allocate": "a new sequence of n tokens takes ceil(n / block_size) blocks, and nothing else",
    "append": "append takes a block only when the sequence's last block is full, or to copy a block another "
              "sequence holds when the new token must be written into it",
    "fork": "fork shares every block of the parent: it takes none",
    "free": "a block is free again once no live sequence's table holds it, not before",
}


def check_allocator(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 15.3: the recorded replay of the case's trace, by memory simulation and against the grader's
    own allocator (module docstring)."""
    from util.labs.lab15.judge_reference import ReferenceAllocator
    from util.labs.lab15.paged import replay, trace_from, trace_problems

    steps = _json(data)
    num_blocks, block_size, ops = trace_from(spec)
    if not isinstance(steps, list):
        return [UNREADABLE]
    problems = trace_problems(ops, steps, num_blocks, block_size, LIMIT)
    if problems:
        return problems
    expected = replay(ReferenceAllocator(num_blocks, block_size), ops)
    for index, (op, found, wanted) in enumerate(zip(ops, steps, expected)):
        where = f"call {index} ({op[0]} {', '.join(map(str, op[1:]))})"
        if (found["result"] == "raised") != (wanted["result"] == "raised"):
            if found["result"] == "raised":
                return [f"{where} raised OutOfBlocks, but a correct allocator has enough free blocks for it here: "
                        f"{_HINTS[op[0]]}"]
            return [f"{where} did not raise OutOfBlocks, but it needs more blocks than a correct allocator has free "
                    "here: raise, and leave the allocator as it was"]
        if op[0] == "append" and (found["result"] is None) != (wanted["result"] is None):
            if found["result"] is None:
                return [f"{where} copied nothing, but the block the token goes into is held by another sequence: "
                        "copy it first (copy-on-write) and return (src, dst)"]
            return [f"{where} copied a block that needs no copy: copy only a block another sequence also holds, "
                    "and only when a token is written into it"]
        if found["free"] != wanted["free"]:
            holds = "fewer" if found["free"] < wanted["free"] else "more"
            return [f"after {where}, num_free() is {found['free']}; a correct paged allocator holds {holds} blocks "
                    f"here: {_HINTS[op[0]]}"]
    return []


# ---------------------------------------------------------------- 15.4: attention over a paged cache

def check_attention(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 15.4: the saved output within ``tolerance.rtol`` of the grader's float64 attention, relative to
    the largest output (``max|out - ref| / max|ref|``)."""
    import numpy as np
    import torch

    from util.artifacts import read_saved_arrays
    from util.labs.lab15.judge_reference import paged_attention_reference
    from util.labs.lab15.paged import paged_inputs

    torch.set_num_threads(1)
    arrays, problems = read_saved_arrays(data, expected=["out"])
    if problems:
        return problems
    q, k_pool, v_pool, tables, lengths = paged_inputs(spec)
    reference = paged_attention_reference(q, k_pool, v_pool, tables, lengths).numpy()
    found = arrays["out"]
    if found.shape != reference.shape or not np.issubdtype(found.dtype, np.floating):
        return [f"paged_attention returned {found.dtype} of shape {list(found.shape)}; expected floats of shape "
                f"{list(reference.shape)} ([batch, n_head, head_dim])"]
    if not np.isfinite(found).all():
        return ["paged_attention's output holds NaN or infinity"]
    worst = float(np.abs(found.astype(np.float64) - reference).max() / np.abs(reference).max())
    if not worst <= tolerance.rtol:
        rows = [b for b in range(reference.shape[0])
                if np.abs(found[b] - reference[b]).max() > tolerance.rtol * np.abs(reference).max()]
        return [f"the output differs from attention over each sequence's keys and values (read through its block "
                f"table, its first `length` slots only) by {worst:.1e} of the largest output (at most "
                f"{tolerance.rtol:g}), for sequence{'s' if len(rows) > 1 else ''} {', '.join(map(str, rows[:6]))}"]
    return []


# ---------------------------------------------------------------- 15.5: the scheduler

def check_schedule(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 15.5: the recorded iterations against the grader's own run of the stated policy."""
    from util.labs.lab15.judge_reference import reference_schedule
    from util.labs.lab15.serving import config_from, requests_from, simulate

    saved = _json(data)
    if not isinstance(saved, dict) or set(saved) != {"iterations", "deadlock"} \
            or not isinstance(saved["iterations"], list):
        return [UNREADABLE]
    expected = simulate(reference_schedule, requests_from(spec), config_from(spec))
    if expected.deadlock is not None:  # pragma: no cover - the cases are checked by the lab's tests
        raise AssertionError(f"the grader's own schedule deadlocks on this case: {expected.deadlock}")
    found = saved["iterations"]
    for index, wanted in enumerate(expected.iterations):
        if index >= len(found):
            return [f"the run stopped after {len(found)} iterations"
                    + (f" ({saved['deadlock']})" if isinstance(saved["deadlock"], str) else "")
                    + "; the stated policy runs every request to the end"]
        got = found[index]
        if not isinstance(got, dict) or set(got) != set(wanted):
            return [UNREADABLE]
        if got == wanted:
            continue
        where = f"iteration {index} (at {wanted['start']:,} ns)"
        if got.get("start") != wanted["start"]:
            return [f"{where} starts at another time than under the stated policy: an earlier iteration's batch "
                    "had other requests"]
        if not got["decode"] and not got["admit"] and wanted["decode"]:
            return [f"{where}: the batch was empty while requests waited or ran, a deadlock (the engine stopped "
                    "there); under the stated policy, when a decode needs a block and none is free, the newest "
                    "running request is preempted"]
        then = "; your run then deadlocked" if isinstance(saved["deadlock"], str) else ""
        for key, verb in (("preempt", "preempted"), ("decode", "decoded"), ("admit", "admitted")):
            if got[key] != wanted[key]:
                return [f"{where}: your scheduler {verb} {_which(got[key], wanted[key])} than the stated policy: "
                        + _POLICY[key] + then]
    if len(found) > len(expected.iterations):
        return [f"the run has {len(found)} iterations; the stated policy finishes every request in fewer"]
    return []


_POLICY = {
    "preempt": "preempt only when a decode needs a block and none is free, the newest running request first "
               "(it may be the one asking)",
    "decode": "every running request that is not preempted decodes, oldest first",
    "admit": "admit only in an iteration that preempts nobody, waiting requests in queue order while the token "
             "budget, the running limit and the free blocks allow, stopping at the first that does not fit",
}


def _which(found: Any, wanted: list[int]) -> str:
    if not isinstance(found, list):
        return "other requests"
    if set(found) == set(wanted):
        return "the same requests in another order"
    if len(found) > len(wanted):
        return f"more requests ({len(found)})"
    if len(found) < len(wanted):
        return f"fewer requests ({len(found)})"
    return "other requests"


# ---------------------------------------------------------------- 15.6: speculative decoding

def _models(run: Mapping[str, Any]):
    """The target (float64), its draft and the prompt of one run given its seeds (``seed``, ``draft_seed``), as the
    notebook builds them."""
    from util.labs.lab10.gpt import GPTConfig, prompt_ids, seeded_gpt
    from util.labs.lab15.speculative import draft_of

    cfg = GPTConfig.from_dict(run["config"])
    target = seeded_gpt(cfg, int(run["seed"])).double().eval()
    draft = draft_of(target, float(run["sigma"]), int(run["draft_seed"]))
    prompt = prompt_ids(cfg, int(run["prompt"]), int(run["seed"]))[0].tolist()
    return cfg, target, draft, prompt


SPEC_MARGIN = 1e-3
"""Least gap between the chosen and the second logit of every argmax a graded run takes (the target's greedy
decoding and speculative decoding, the draft's proposals included): two correct float64 implementations differ
by about 1e-14 (3.7e-14 measured), so equal tokens mean equal computations."""
SPEC_DRAWS = 16
"""Models and prompts drawn (from the grading secret) for one run before the screen stops: about 9 in 10 draws
have :data:`SPEC_MARGIN` at every step and reject a proposal before the last round (53 of 60 measured, 30 secrets
for each of the case's two runs), so all 16 failing has a chance near 1e-15; then the draw with the largest margin
among those that decode alike and reject early is kept."""


def _rejects_early(expected: Mapping[str, Any]) -> bool:
    """Whether some round before the last keeps fewer than all its proposals (so a kept draft token is caught by
    the next call's input)."""
    calls, starts = expected["calls"], expected["starts"]
    return any(starts[i + 1] - starts[i] < len(calls[i]) - starts[i] + 1 for i in range(len(calls) - 1))


def spec_setting(run: Mapping[str, Any], number: int):
    """``(cfg, target, draft, prompt, expected, truth)`` of run ``number`` of a task-15.6 case, whose spec names
    only the models' shapes, the draft's noise, the prompt's length, ``n`` and ``k``: the target's and the draft's
    seeds are drawn from the grading secret (:mod:`util.judging.secret`: no notebook can know the models or the
    prompt), at most :data:`SPEC_DRAWS` times, and the first draw kept whose every argmax wins by
    :data:`SPEC_MARGIN` and whose speculative decoding rejects a proposal before its last round; ``expected`` is
    the grader's speculative decoding (:func:`~util.labs.lab15.judge_reference.speculative`), ``truth`` its greedy
    decoding of the target."""
    from util.judging import secret
    from util.labs.lab15.judge_reference import greedy, speculative

    key = json.dumps(dict(run), sort_keys=True)
    n, k = int(run["n"]), int(run["k"])
    best, best_margin = None, -1.0
    for draw in range(SPEC_DRAWS):
        seeds = {"seed": secret.seed("lab15", "15.6 target", key, number, draw, bits=31),
                 "draft_seed": secret.seed("lab15", "15.6 draft", key, number, draw, bits=31)}
        cfg, target, draft, prompt = _models({**run, **seeds})
        expected = speculative(target, draft, prompt, n, k)
        truth, gap = greedy(target, prompt, n)
        margin = min(gap, expected["gap"]) if truth == expected["tokens"] and _rejects_early(expected) else -1.0
        if margin > best_margin:
            best, best_margin = (cfg, target, draft, prompt, expected, truth), margin
        if margin >= SPEC_MARGIN:
            break
    if best is None:  # pragma: no cover - 16 draws that all decode otherwise greedily: a chance far below 1e-15
        raise AssertionError("no drawn model decodes the same tokens greedily and speculatively")
    return best


def check_speculative(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 15.6: ``speculative_generate`` run again against the judge's own target (module docstring), every run
    of the case in one student process."""
    import torch

    from util.artifacts import read_saved_arrays
    from util.student_process import ChannelError, StudentProcess

    arrays, problems = read_saved_arrays(data, expected=["function"])
    if problems:
        return problems
    torch.set_num_threads(1)
    runs = list(spec["runs"])
    try:
        with StudentProcess.start("util.labs.lab15.spec_harness:serve", max_data=1 << 20,
                                  seconds=START_SECONDS + 60 * len(runs)) as student:
            student.send({"function": True}, data=arrays["function"].tobytes())
            for number, run in enumerate(runs):
                found = _judged_run(student, run, number)
                if found:
                    where = f"run {number + 1} of {len(runs)}" if len(runs) > 1 else ""
                    return [f"{where}: {problem}" if where else problem for problem in found][:LIMIT]
    except ChannelError as exc:
        return [f"the grader could not run speculative_generate again ({exc})"]
    return []


def _judged_run(student, run: Mapping[str, Any], number: int) -> list[str]:
    """One run on models drawn from the secret (:func:`spec_setting`): the draft's weights and the prompt sent,
    every target call served and checked, the tokens judged."""
    import numpy as np
    import torch

    cfg, target, draft, prompt, expected, truth = spec_setting(run, number)
    n, k = int(run["n"]), int(run["k"])
    state = draft.state_dict()
    names = [[name, list(tensor.shape)] for name, tensor in state.items()]
    weights = b"".join(tensor.detach().double().contiguous().numpy().tobytes() for tensor in state.values())
    student.send({"draft": {"config": cfg.to_dict(), "names": names}}, data=weights)
    student.send({"run": {"prompt": prompt, "n": n, "k": k}})
    calls: list[list[int]] = []
    while True:
        reply, body = student.receive(timeout=START_SECONDS)
        if "target" in reply:
            length = reply["target"]
            ids = np.frombuffer(body, dtype=np.int64) if len(body) % 8 == 0 else np.zeros(0, np.int64)
            if type(length) is not int or not 1 <= length <= cfg.n_positions or ids.size != length \
                    or ids.min() < 0 or ids.max() >= cfg.vocab:
                student.send({"refused": f"the target takes ids of length 1 to {cfg.n_positions} within its "
                                         f"vocabulary of {cfg.vocab}"})
                continue
            calls.append(ids.tolist())
            if len(calls) > len(expected["calls"]) + 4 * EXTRA_CALLS:   # refused, and calling on regardless
                return _call_problems(calls, expected) + ["the target was called again and again after the grader "
                                                          "refused: speculative decoding calls it once per round"]
            if len(calls) > len(expected["calls"]) + EXTRA_CALLS:
                student.send({"refused": "too many calls: speculative decoding calls the target once per round"})
                continue
            with torch.no_grad():
                logits = target(torch.from_numpy(ids.copy()).view(1, -1))[0].numpy()
            student.send({"logits": [length, cfg.vocab]}, data=logits.astype(np.float64).tobytes())
        elif "tokens" in reply:
            tokens = reply["tokens"]
            break
        else:
            raised = f"run again by the grader, speculative_generate raised {str(reply.get('raised'))[:250]}"
            return (_call_problems(calls, expected) if calls else []) + [raised]
    problems = _call_problems(calls, expected)
    if not (isinstance(tokens, list) and all(type(t) is int for t in tokens)) or tokens != truth:
        problems.append("the tokens returned differ from the grader's own greedy decoding of the target (the "
                        "target's argmax at every step): keep every proposal up to the first the target disagrees "
                        "with, then the target's token")
    return problems


def _call_problems(calls: list[list[int]], expected: Mapping[str, Any]) -> list[str]:
    """Each target call the student's code made against the one the grader's speculative decoding makes."""
    for index, (found, call, start) in enumerate(zip(calls, expected["calls"], expected["starts"])):
        if found == call:
            continue
        where = f"target call {index}"
        if found[:start] != call[:start]:
            return [f"{where}'s input does not start with the prompt and the tokens decided so far (the target "
                    "checks proposals that follow them)"]
        if len(found) != len(call):
            return [f"{where} checks {len(found) - start} proposals; each round proposes min(k, n - tokens decided) "
                    "draft tokens, and one target call checks them all"]
        return [f"{where} checks other proposals than the draft's greedy continuation of the tokens decided so far "
                "(the draft's argmax, one token at a time)"]
    if len(calls) != len(expected["calls"]):
        fewer = "fewer" if len(calls) > len(expected["calls"]) else "more"
        return [f"the target was called {len(calls)} times; speculative decoding calls it {fewer} times on this "
                "case: one call per round, each checking every proposal of the round and giving one token of its own"]
    return []


# ---------------------------------------------------------------- 15.7: the prefix cache

_PREFIX_HINTS = {
    "result": "a prompt reuses every cached block of its longest cached prefix of full blocks (the last token "
              "always computed), each block looked up by a name chained from its parent's name and its own tokens",
    "cached": "every full block is named and cached once its last slot is written (by a prompt or an append), "
              "unless the cache already holds a block of that name; a freed block stays cached until evicted",
    "evictions": "a new block is an empty free block when there is one; only when none is left is the least "
                 "recently used free cached block evicted (a freed sequence's blocks count as used last block "
                 "first), never a block a sequence holds",
}


def check_prefix(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 15.7: the recorded replay of the case's requests, by memory simulation (no block handed out while a
    sequence holds it, no cached block served after it was written again, no block reused after another prefix:
    :func:`~util.labs.lab15.prefix.trace_problems`) and against the grader's own cache: the blocks each prompt
    reuses, the blocks cached and the evictions after every call, exactly."""
    from util.labs.lab15.judge_reference import ReferencePrefixCache
    from util.labs.lab15.prefix import replay, trace_from, trace_problems

    steps = _json(data)
    num_blocks, block_size, ops = trace_from(spec)
    if not isinstance(steps, list):
        return [UNREADABLE]
    problems = trace_problems(ops, steps, num_blocks, block_size, LIMIT)
    if problems:
        return problems
    expected = replay(ReferencePrefixCache(num_blocks, block_size), ops)
    for index, (op, found, wanted) in enumerate(zip(ops, steps, expected)):
        where = f"call {index} ({op[0]} {op[1]}{f', {len(op[2])} tokens' if op[0] == 'allocate' else ''})"
        if (found["result"] == "raised") != (wanted["result"] == "raised"):
            return [f"{where} {'raised' if found['result'] == 'raised' else 'did not raise'} OutOfBlocks, unlike a "
                    "correct prefix cache here: " + _PREFIX_HINTS["evictions"]]
        if found["result"] != wanted["result"]:
            more = "more" if found["result"] > wanted["result"] else "fewer"
            return [f"{where} reused {found['result']} blocks, {more} than a correct prefix cache: "
                    + _PREFIX_HINTS["result"]]
        for key in ("cached", "evictions"):
            if found[key] != wanted[key]:
                more = "more" if found[key] > wanted[key] else "fewer"
                return [f"after {where}, {'num_cached()' if key == 'cached' else 'evictions()'} is {found[key]}, "
                        f"{more} than a correct prefix cache's: " + _PREFIX_HINTS[key]]
    return []


# ---------------------------------------------------------------- 15.8: speculative sampling

DISTRIBUTION_ALPHA = 1e-6
"""The significance of task 15.8's distribution test: a correct implementation fails it once in a million
gradings; the chi-square of the mistakes the lab knows is far beyond it."""
MIN_EXPECTED = 5.0
"""Cells of the chi-square test expecting fewer runs than this are pooled into one."""


def _draws(spec: Mapping[str, Any], *names: Any):
    """The uniform draws of one run, from the grading secret (never the spec alone): a stream no student code can
    predict, the same for the judge's own run and the student's within one grading."""
    from util.judging import secret

    return secret.generator("lab15", "15.8 draws", json.dumps(dict(spec), sort_keys=True), *names)


def sampling_models(run: Mapping[str, Any], *names: Any):
    """``(cfg, target, draft, prompt)`` of one task-15.8 run whose spec names only the models' shapes, the draft's
    noise and the prompt's length (since release 6): the target's and the draft's seeds are drawn from the grading
    secret for ``names`` (:mod:`util.judging.secret`), so no code that reads the case can rebuild the models or the
    prompt; within one grading the judge's reference and the student's run see the same models."""
    from util.judging import secret

    key = json.dumps(dict(run), sort_keys=True)
    return _models({**run, "seed": secret.seed("lab15", "15.8 target", key, *names, bits=31),
                    "draft_seed": secret.seed("lab15", "15.8 draft", key, *names, bits=31)})


DISTRIBUTION_DRAWS = 24
"""Models drawn (from the grading secret) for the distribution case before the screen stops: about 4 in 10 draws of
the case's shapes give :data:`DISTRIBUTION_MISS` (17 of 40 measured), so all 24 failing has a chance near 2e-6; then
the draw with the smallest chance of missing is kept."""
DISTRIBUTION_MISS = 1e-6
"""The largest chance a kept draw gives the test of missing the nearest plausible wrong distribution (a rejection
resampled from ``p`` instead of the residual): a draft close to the target, or a target near uniform, makes the two
distributions too alike for the case's runs to tell apart, and such a draw is not kept."""


def residual_power(p, q, samples: int) -> tuple[float, float]:
    """``(noncentrality, miss)`` of the first generated position's chi-square test (pooled as :func:`_distribution`
    pools) against a sampler that resamples a rejected round's token from ``p`` instead of ``max(0, p - q)``: its
    first token follows ``min(p, q) + (1 - sum(min(p, q))) p``; ``miss`` is the chance that ``samples`` runs of it
    pass the test at :data:`DISTRIBUTION_ALPHA` (the noncentral chi-square's approximation)."""
    import numpy as np
    from scipy.stats import chi2, ncx2

    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    overlap = np.minimum(p, q)
    mistaken = (overlap + (1 - overlap.sum()) * p) * samples
    expected = p * samples
    small = expected < MIN_EXPECTED
    found = np.append(mistaken[~small], mistaken[small].sum())
    wanted = np.append(expected[~small], expected[small].sum())
    if wanted[-1] == 0:
        found, wanted = found[:-1], wanted[:-1]
    noncentrality = float(((found - wanted) ** 2 / wanted).sum())
    freedom = len(wanted) - 1
    return noncentrality, float(ncx2.cdf(chi2.isf(DISTRIBUTION_ALPHA, freedom), freedom, noncentrality))


def distribution_setting(spec: Mapping[str, Any]):
    """``(cfg, target, draft, prompt, truth)`` of a task-15.8 distribution case: models drawn from the grading secret
    (:func:`sampling_models`), at most :data:`DISTRIBUTION_DRAWS` times, the first kept whose test misses the
    residual mistake with a chance below :data:`DISTRIBUTION_MISS` (:func:`residual_power`), else the draw least
    likely to miss it; ``truth`` is the target's exact sampling distribution of each position
    (:func:`_exact_marginals`)."""
    import torch

    run = spec["distribution"]
    n, samples = int(run["n"]), int(spec["samples"])
    best, best_miss = None, 2.0
    for draw in range(DISTRIBUTION_DRAWS):
        cfg, target, draft, prompt = sampling_models(run, "distribution", draw)
        truth = _exact_marginals(target, prompt, n)
        with torch.no_grad():
            q = torch.softmax(draft(torch.tensor([prompt]))[0, -1].double(), -1).numpy()
        miss = residual_power(truth[0], q, samples)[1]
        if miss < best_miss:
            best, best_miss = (cfg, target, draft, prompt, truth), miss
        if miss < DISTRIBUTION_MISS:
            break
    return best


def _send_draft(student, cfg, draft) -> None:
    state = draft.state_dict()
    names = [[name, list(tensor.shape)] for name, tensor in state.items()]
    weights = b"".join(tensor.detach().double().contiguous().numpy().tobytes() for tensor in state.values())
    student.send({"draft": {"config": cfg.to_dict(), "names": names}}, data=weights)


def _serve_sampled(student, cfg, target, prompt: list[int], n: int, k: int, values, calls_allowed: int,
                   logits_cache: dict | None = None) -> tuple[list[list[int]], Any, Any]:
    """One run of ``speculative_sample``: the draws sent, every target call served (refused past
    ``calls_allowed``), until the tokens or an error come back. Returns ``(calls, tokens or None, reply)``."""
    import numpy as np
    import torch

    student.send({"run": {"prompt": prompt, "n": n, "k": k, "draws": len(values)}},
                 data=np.asarray(values, dtype=np.float64).tobytes())
    calls: list[list[int]] = []
    while True:
        reply, body = student.receive(timeout=START_SECONDS)
        if "target" in reply:
            length = reply["target"]
            ids = np.frombuffer(body, dtype=np.int64) if len(body) % 8 == 0 else np.zeros(0, np.int64)
            if type(length) is not int or not 1 <= length <= cfg.n_positions or ids.size != length \
                    or ids.min() < 0 or ids.max() >= cfg.vocab:
                student.send({"refused": f"the target takes ids of length 1 to {cfg.n_positions} within its "
                                         f"vocabulary of {cfg.vocab}"})
                continue
            calls.append(ids.tolist())
            if len(calls) > calls_allowed:
                student.send({"refused": "too many calls: speculative sampling calls the target once per round"})
                if len(calls) > calls_allowed + 4 * EXTRA_CALLS:
                    return calls, None, {"raised": "the target was called again and again after the grader refused"}
                continue
            key = tuple(calls[-1])
            logits = logits_cache.get(key) if logits_cache is not None else None
            if logits is None:
                with torch.no_grad():
                    logits = target(torch.from_numpy(ids.copy()).view(1, -1))[0].numpy().astype(np.float64).tobytes()
                if logits_cache is not None:
                    logits_cache[key] = logits
            student.send({"logits": [length, cfg.vocab]}, data=logits)
        elif "tokens" in reply:
            tokens = reply["tokens"]
            ok = isinstance(tokens, list) and all(type(t) is int for t in tokens)
            return calls, tokens if ok else None, reply
        else:
            return calls, None, reply


def check_sampling(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 15.8: ``speculative_sample`` run again in a student process against the judge's own target, with
    uniform draws the judge draws from the grading secret and serves run by run. A case of ``runs``: every target
    call's input, the tokens and the draws used must be exactly the judge's own run on the same draws
    (:func:`~util.labs.lab15.judge_reference.speculative_sampling`). A case of ``distribution``: ``samples``
    runs on fresh draws, and each generated position's token frequencies must pass Pearson's chi-square test
    against the target's own sampling distribution at that position (computed exactly by the judge) at
    significance :data:`DISTRIBUTION_ALPHA` (cells expecting fewer than :data:`MIN_EXPECTED` pooled)."""
    import torch

    from util.artifacts import read_saved_arrays
    from util.student_process import ChannelError, StudentProcess

    arrays, problems = read_saved_arrays(data, expected=["function"])
    if problems:
        return problems
    torch.set_num_threads(1)
    try:
        with StudentProcess.start("util.labs.lab15.spec_harness:serve", max_data=1 << 20,
                                  seconds=START_SECONDS + 120) as student:
            student.send({"function": True}, data=arrays["function"].tobytes())
            if "distribution" in spec:
                return _distribution(student, spec)[:LIMIT]
            for number, run in enumerate(spec["runs"]):
                found = _sampled_run(student, spec, number, run)
                if found:
                    where = f"run {number + 1} of {len(spec['runs'])}: "
                    return [where + problem for problem in found][:LIMIT]
    except ChannelError as exc:
        return [f"the grader could not run speculative_sample again ({exc})"]
    return []


def _sampled_run(student, spec: Mapping[str, Any], number: int, run: Mapping[str, Any]) -> list[str]:
    from util.labs.lab15.judge_reference import speculative_sampling
    from util.labs.lab15.speculative import Uniforms

    cfg, target, draft, prompt = sampling_models(run, "run", number)
    n, k = int(run["n"]), int(run["k"])
    values = _draws(spec, "run", number).random(n * (2 * k + 1) + 8).tolist()
    expected = speculative_sampling(target, draft, prompt, n, k, Uniforms(values))
    _send_draft(student, cfg, draft)
    calls, tokens, reply = _serve_sampled(student, cfg, target, prompt, n, k, values,
                                          len(expected["calls"]) + EXTRA_CALLS)
    problems = _sampled_calls(calls, expected)
    if tokens is None:
        return problems + [f"run again by the grader, speculative_sample raised {str(reply.get('raised'))[:250]}"]
    if tokens != expected["tokens"]:
        problems.append("the tokens differ from the grader's own speculative sampling on the same uniform draws: "
                        "accept proposal i when u < p(x) / q(x), else sample the round's token from max(0, p - q) "
                        "with sample(), and draw in the stated order")
    elif reply.get("used") != expected["used"]:
        problems.append(f"the run took {reply.get('used')} uniform draws, the stated order takes {expected['used']}: "
                        "one per proposal, one per acceptance test (stopping at the first rejection), one for the "
                        "round's own token")
    return problems


def _sampled_calls(calls: list[list[int]], expected: Mapping[str, Any]) -> list[str]:
    for index, (found, call, start) in enumerate(zip(calls, expected["calls"], expected["starts"])):
        if found == call:
            continue
        where = f"target call {index}"
        if found[:start] != call[:start]:
            return [f"{where}'s input does not start with the prompt and the tokens decided so far, as the grader's "
                    "own run on the same draws has them"]
        if len(found) != len(call):
            return [f"{where} checks {len(found) - start} proposals; each round proposes min(k, n - tokens decided)"]
        return [f"{where} checks other proposals than the draft samples with the draws served: proposal i is "
                "sample(softmax(draft logits), u), one draw each, before the target call"]
    if len(calls) != len(expected["calls"]):
        return [f"the target was called {len(calls)} times; on the same draws speculative sampling calls it "
                f"{len(expected['calls'])} times: once per round"]
    return []


def _distribution(student, spec: Mapping[str, Any]) -> list[str]:
    """The chi-square test of each generated position (:func:`check_sampling`)."""
    import numpy as np
    from scipy.stats import chi2

    run = spec["distribution"]
    cfg, target, draft, prompt, truth = distribution_setting(spec)
    n, k, samples = int(run["n"]), int(run["k"]), int(spec["samples"])
    _send_draft(student, cfg, draft)
    stream = _draws(spec, "distribution")
    cache: dict = {}
    found = np.zeros((n, cfg.vocab), dtype=np.int64)
    for _ in range(samples):
        values = stream.random(n * (2 * k + 1) + 8).tolist()
        calls, tokens, reply = _serve_sampled(student, cfg, target, prompt, n, k, values, n + EXTRA_CALLS, cache)
        if tokens is None:
            return [f"run again by the grader, speculative_sample raised {str(reply.get('raised'))[:250]}"]
        if len(tokens) != n or not all(0 <= t < cfg.vocab for t in tokens):
            return [f"speculative_sample returned {len(tokens)} tokens; {n} tokens of the vocabulary were asked for"]
        for position, token in enumerate(tokens):
            found[position, token] += 1
    for position in range(n):
        expected = truth[position] * samples
        small = expected < MIN_EXPECTED
        observed = np.append(found[position][~small], found[position][small].sum())
        wanted = np.append(expected[~small], expected[small].sum())
        if wanted[-1] == 0:
            observed, wanted = observed[:-1], wanted[:-1]
        statistic = float(((observed - wanted) ** 2 / wanted).sum())
        p_value = float(chi2.sf(statistic, len(wanted) - 1))
        if not p_value >= DISTRIBUTION_ALPHA:
            worst = int(np.argmax(np.abs(found[position] - expected)))
            return [f"over {samples:,} runs on fresh draws, the tokens at generated position {position} do not follow "
                    f"the target's own sampling distribution (chi-square {statistic:.0f} on {len(wanted) - 1} degrees "
                    f"of freedom, p = {p_value:.1e} < {DISTRIBUTION_ALPHA:g}; token {worst} came "
                    f"{int(found[position, worst])} times, the target's distribution expects {expected[worst]:.0f}): "
                    "after a rejection the token is sampled from max(0, p - q), not from p or q"]
    return []


def _exact_marginals(target, prompt: list[int], n: int):
    """The target's own sampling distribution of each of the ``n`` generated positions (temperature 1), summed
    exactly over every sequence before it (a small vocabulary: ``vocab ** (n - 1)`` forward passes at most)."""
    import numpy as np
    import torch

    paths = {(): 1.0}
    out = []
    for _ in range(n):
        marginal = None
        nxt: dict = {}
        for path, weight in paths.items():
            with torch.no_grad():
                p = torch.softmax(target(torch.tensor([list(prompt) + list(path)]))[0, -1].double(), -1).numpy()
            marginal = weight * p if marginal is None else marginal + weight * p
            for token, probability in enumerate(p):
                nxt[path + (token,)] = weight * float(probability)
        out.append(marginal)
        paths = nxt
    return np.array(out)


# ---------------------------------------------------------------- 15.9: chunked prefill

CHUNK_RECORD = 8 << 20
"""The largest record of one trace the judge takes back from the student process."""
CHUNK_SECONDS = 60.0
"""How long the student process may take for one trace (a few thousand iterations take well under a second)."""

_CHUNK_POLICY = {
    "decode": "every running request whose prompt is all prefilled decodes, oldest admitted first, before any chunk "
              "(decodes first: a chunk never takes a decode's place in the budget)",
    "prefill": "what is left of the budget goes to chunks: first the running requests still prefilling, oldest "
               "admitted first, then the waiting ones in queue order while the running limit allows; each chunk is "
               "what is left of its prompt or of the budget, whichever is smaller",
}


def chunk_traces(spec: Mapping[str, Any]) -> list[tuple[Any, list]]:
    """The ``(config, requests)`` traces of a task-15.9 case: its own ``requests``, or ``traces`` Poisson streams of
    its ranges whose seeds are drawn from the grading secret (:mod:`util.judging.secret`), never from the spec
    alone, so no trace can be known before grading."""
    from util.judging import secret
    from util.labs.lab15.chunked import chunk_config_from, chunked_requests

    config = chunk_config_from(spec)
    if "requests" in spec:
        return [(config, chunked_requests(0, spec))]
    key = json.dumps(dict(spec), sort_keys=True)
    return [(config, chunked_requests(secret.seed("lab15", "15.9 trace", key, number), spec))
            for number in range(int(spec["traces"]))]


def check_chunked(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 15.9: the student's ``schedule_chunked`` run again in a student process
    (:mod:`util.labs.lab15.chunk_harness`) on traces the judge draws from the grading secret
    (:func:`chunk_traces`); every iteration of each trace's record (start, length, decodes, chunks) must equal the
    judge's own run of the stated policy (:func:`~util.labs.lab15.judge_reference.reference_chunked`)."""
    from util.artifacts import read_saved_arrays
    from util.labs.lab15.chunked import simulate_chunked
    from util.labs.lab15.judge_reference import reference_chunked
    from util.student_process import ChannelError, StudentProcess

    arrays, problems = read_saved_arrays(data, expected=["function"])
    if problems:
        return problems
    traces = chunk_traces(spec)
    try:
        with StudentProcess.start("util.labs.lab15.chunk_harness:serve", max_data=CHUNK_RECORD,
                                  seconds=START_SECONDS + CHUNK_SECONDS * len(traces)) as student:
            student.send({"function": True}, data=arrays["function"].tobytes())
            for number, (config, requests) in enumerate(traces):
                expected = simulate_chunked(reference_chunked, requests, config)
                if expected.deadlock is not None:  # pragma: no cover - the lab's tests screen the cases
                    raise AssertionError(f"the grader's own chunked schedule deadlocks: {expected.deadlock}")
                student.send({"limits": [config.max_tokens, config.max_running],
                              "arrivals": [[r.id, r.arrival, r.prompt, r.output] for r in requests]})
                reply, body = student.receive(timeout=START_SECONDS + CHUNK_SECONDS)
                found = _chunk_problems(reply, body, expected.iterations)
                if found:
                    where = f"trace {number + 1} of {len(traces)} ({len(requests)} requests): " if len(traces) > 1 else ""
                    return [where + problem for problem in found][:LIMIT]
    except ChannelError as exc:
        return [f"the grader could not run schedule_chunked again ({exc})"]
    return []


def _chunk_problems(reply: Mapping[str, Any], body: bytes, expected: list[dict]) -> list[str]:
    if "record" not in reply:
        return [f"run again by the grader on a trace of its own, the engine raised {str(reply.get('raised'))[:300]}"]
    saved = _json(body)
    if not isinstance(saved, dict) or not isinstance(saved.get("iterations"), list):
        return [UNREADABLE]
    found = saved["iterations"]
    deadlock = saved.get("deadlock")
    for index, wanted in enumerate(expected):
        if index >= len(found):
            return [f"the run stopped after {len(found)} iterations"
                    + (f" ({deadlock[:200]})" if isinstance(deadlock, str) else "")
                    + "; the stated policy runs every request to the end"]
        got = found[index]
        if got == wanted:
            continue
        if not isinstance(got, dict) or set(got) != set(wanted):
            return [UNREADABLE]
        where = f"iteration {index} (at {wanted['start']:,} ns)"
        if got["start"] != wanted["start"]:
            return [f"{where} starts at another time than under the stated policy: an earlier iteration's batch "
                    "had other requests or other chunks"]
        for key, verb in (("decode", "decoded"), ("prefill", "gave chunks to")):
            if got[key] != wanted[key]:
                return [f"{where}: your scheduler {verb} {_chunk_which(key, got[key], wanted[key])} than the "
                        f"stated policy: " + _CHUNK_POLICY[key]]
        return [f"{where} took another time than under the stated policy"]  # pragma: no cover - same work
    if len(found) > len(expected):
        return [f"the run has {len(found)} iterations; the stated policy finishes every request in fewer"]
    return []


def _chunk_which(key: str, found: Any, wanted: list) -> str:
    if key == "decode":
        return _which(found, wanted)
    if not isinstance(found, list) or not all(isinstance(p, list) and len(p) == 2 for p in found):
        return "other chunks"
    ids, wanted_ids = [p[0] for p in found], [p[0] for p in wanted]
    if ids == wanted_ids:
        return "chunks of other sizes to the same requests"
    if sorted(map(str, ids)) == sorted(map(str, wanted_ids)):
        return "chunks to the same requests in another order"
    return f"chunks to other requests ({len(found)} chunks where the policy gives {len(wanted)})"


# ---------------------------------------------------------------- 15.10: preemption by swapping

_SWAP_POLICY = {
    "preempt": "a victim (the newest running request, when a decode finds no free block) is recomputed only when "
               "swapping it is not cheaper, 2 x its blocks x swap_ns_per_block >= view.recompute_ns(victim), or the "
               "free CPU blocks cannot hold its blocks",
    "swap_out": "a victim is swapped out when moving its blocks out and back in costs less than recomputing it, "
                "config.swap_ns(blocks) < view.recompute_ns(victim), and the free CPU blocks (less those of the "
                "victims swapped out before it in this iteration) hold its blocks",
    "swap_in": "in an iteration that preempts nobody, the swapped requests come back oldest swapped out first, "
               "while the running limit and the free GPU blocks allow, stopping at the first that does not fit",
    "decode": "every running request decodes, oldest first, taking a block when its last one is full; when none is "
              "free, the newest running request is preempted (swapped out or recomputed), possibly the one asking",
    "admit": "waiting requests are admitted (as in 15.5) only in an iteration that preempts nobody and leaves no "
             "request swapped out",
}
SWAP_KEYS = ("preempt", "swap_out", "swap_in", "decode", "admit")


def swap_traces(spec: Mapping[str, Any]) -> list[tuple[Any, list]]:
    """The ``(config, requests)`` traces of a task-15.10 case: its own ``requests``, or ``traces`` Poisson streams of
    its ranges whose seeds are drawn from the grading secret (:mod:`util.judging.secret`), never from the spec
    alone, so no trace can be known before grading."""
    from util.judging import secret
    from util.labs.lab15.swapping import swap_config_from, swap_requests

    config = swap_config_from(spec)
    if "requests" in spec:
        return [(config, swap_requests(0, spec))]
    key = json.dumps(dict(spec), sort_keys=True)
    return [(config, swap_requests(secret.seed("lab15", "15.10 trace", key, number), spec))
            for number in range(int(spec["traces"]))]


def replayed_problems(iterations: list, requests: list, config) -> list[str]:
    """The memory simulated by the judge: a record's decisions carried out again, in order, by the course's engine
    here (:func:`~util.labs.lab15.swapping.simulate_swapping`), which refuses a GPU or CPU pool over capacity, a
    block read (decoded) while swapped out, an id in the wrong place, the budget or the running limit exceeded;
    ``[]`` when every recorded decision is feasible."""
    from util.labs.lab15.swapping import SwapDecision, simulate_swapping

    script = list(iterations)
    position = [0]

    def scripted(view):
        if position[0] < len(script) and isinstance(script[position[0]], dict) \
                and script[position[0]].get("start") == view.now:
            step = script[position[0]]
            position[0] += 1
            return SwapDecision(*(tuple(step.get(key, ())) for key in SWAP_KEYS))
        return SwapDecision()

    try:
        simulate_swapping(scripted, requests, config, max_iterations=len(script) + 1)
    except (ValueError, TypeError) as exc:
        return [f"iteration {max(position[0] - 1, 0)} of the record cannot be carried out: {str(exc)[:300]}"]
    return []


def check_swapping(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 15.10: the student's ``schedule_swapping`` run again in a student process
    (:mod:`util.labs.lab15.swap_harness`) on traces the judge draws from the grading secret (:func:`swap_traces`);
    each record's decisions are carried out again by the judge's engine (:func:`replayed_problems`: no pool over
    capacity, no block read while swapped out) and every iteration (start, length, the requests recomputed,
    swapped out, swapped in, decoded and admitted, the blocks moved) must equal the judge's own run of the stated
    policy (:func:`~util.labs.lab15.judge_reference.reference_swapping`)."""
    from util.artifacts import read_saved_arrays
    from util.labs.lab15.judge_reference import reference_swapping
    from util.labs.lab15.swapping import simulate_swapping
    from util.student_process import ChannelError, StudentProcess

    arrays, problems = read_saved_arrays(data, expected=["function"])
    if problems:
        return problems
    traces = swap_traces(spec)
    try:
        with StudentProcess.start("util.labs.lab15.swap_harness:serve", max_data=CHUNK_RECORD,
                                  seconds=START_SECONDS + CHUNK_SECONDS * len(traces)) as student:
            student.send({"function": True}, data=arrays["function"].tobytes())
            for number, (config, requests) in enumerate(traces):
                expected = simulate_swapping(reference_swapping, requests, config)
                if expected.deadlock is not None:  # pragma: no cover - the lab's tests screen the cases
                    raise AssertionError(f"the grader's own swapping schedule deadlocks: {expected.deadlock}")
                student.send({"limits": [config.num_blocks, config.cpu_blocks, config.block_size, config.max_tokens,
                                         config.max_running, config.swap_ns_per_block],
                              "arrivals": [[r.id, r.arrival, r.prompt, r.output] for r in requests]})
                reply, body = student.receive(timeout=START_SECONDS + CHUNK_SECONDS)
                found = _swap_problems(reply, body, expected.iterations, requests, config)
                if found:
                    where = f"trace {number + 1} of {len(traces)} ({len(requests)} requests): " if len(traces) > 1 else ""
                    return [where + problem for problem in found][:LIMIT]
    except ChannelError as exc:
        return [f"the grader could not run schedule_swapping again ({exc})"]
    return []


def _swap_problems(reply: Mapping[str, Any], body: bytes, expected: list[dict], requests: list, config) -> list[str]:
    if "record" not in reply:
        return [f"run again by the grader on a trace of its own, the engine raised {str(reply.get('raised'))[:300]}"]
    saved = _json(body)
    if not isinstance(saved, dict) or not isinstance(saved.get("iterations"), list):
        return [UNREADABLE]
    found = saved["iterations"]
    deadlock = saved.get("deadlock")
    for index, wanted in enumerate(expected):
        if index >= len(found):
            return [f"the run stopped after {len(found)} iterations"
                    + (f" ({deadlock[:200]})" if isinstance(deadlock, str) else "")
                    + "; the stated policy runs every request to the end"]
        got = found[index]
        if got == wanted:
            continue
        if not isinstance(got, dict) or set(got) != set(wanted):
            return [UNREADABLE]
        replayed = replayed_problems(found[:index + 1], requests, config)
        if replayed:
            return replayed
        where = f"iteration {index} (at {wanted['start']:,} ns)"
        if got["start"] != wanted["start"]:
            return [f"{where} starts at another time than under the stated policy: an earlier iteration moved other "
                    "blocks or had another batch"]
        for key, verb in (("swap_out", "swapped out"), ("preempt", "recomputed"), ("swap_in", "swapped in"),
                          ("decode", "decoded"), ("admit", "admitted")):
            if got[key] != wanted[key]:
                return [f"{where}: your scheduler {verb} {_which(got[key], wanted[key])} than the stated policy: "
                        + _SWAP_POLICY[key]]
        return [f"{where} took another time or moved other blocks than under the stated policy"]
    if len(found) > len(expected):
        return [f"the run has {len(found)} iterations; the stated policy finishes every request in fewer"]
    return []
