"""Lab 15, serving a language model: the one declaration of its tasks.

Students train a byte-level BPE tokenizer on text the course ships (15.1), count what the tokens cost in
KV-cache bytes and what contiguous and paged caches waste (15.2), write a paged KV-cache allocator with
copy-on-write (15.3), attention over a paged cache (15.4), a continuous-batching scheduler under a token
budget and a cost model (15.5), greedy speculative decoding with a draft model (15.6), and, since release 3, a
prefix cache (15.7), speculative sampling (15.8) and chunked prefill (15.9).

What a correct answer must satisfy is decided by the grader in its judge process (``judge.py``) on what the
cases saved, with its own computation (``judge_reference.py``): the allocator's recorded block tables by a
simulation of the memory and against the grader's own counts; the attention's output against its float64
attention over keys and values it gathers itself; the scheduler's recorded iterations against its own run of
the stated policy; speculative decoding run again in a student process against a target that lives in the
judge, which counts and checks every call and compares the tokens with its own greedy decoding (on models and
prompts it draws from the grading secret, since release 5). Nothing is
timed: costs are counts (target calls, blocks, lab 10's MACs and bytes under a stated cost model). The prefix
cache's record is checked as the allocator's (memory simulated, each slot a token in its context) against the
grader's own cache; speculative sampling runs in a student process on uniform draws the judge draws from the
grading secret and serves, on models it draws from the same secret (since release 6), its tokens exactly the
judge's own run's and their distribution tested (chi-square);
the chunked-prefill scheduler runs in a student process on traces the judge draws from the grading secret, every
iteration compared with the judge's own run of the stated policy.
"""
from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Callable, Mapping

from util.contract import Lab, Release, Task, Tolerance, Written
from util.labs.lab15.public_checks import CHECKS

LAB_NAME = "lab15"
JUDGE = "util.labs.lab15.judge"
RATIO = Tolerance(rtol=1e-9)
"""Ratios of exact integers (bytes per token, tokens per second): only the last bits of a float may differ."""
ATTENTION = Tolerance(rtol=1e-6)
"""Attention over a paged cache against the grader's float64 attention, relative to the largest output:
float64 work lands near 1e-16, float32 near 1e-7; reading one slot of garbage costs far more than 1e-6."""


def _text(value: Any) -> str:
    """A case's text: a file's bytes (UTF-8) or the text itself."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8")
    return str(value)


def _merges_json(merges: Any) -> list[list[str]]:
    if not isinstance(merges, (list, tuple)) or not all(
            isinstance(m, (list, tuple)) and len(m) == 2 and all(isinstance(x, (bytes, bytearray)) for x in m)
            for m in merges):
        raise TypeError("tokenizer.merges must be a list of (bytes, bytes) pairs, in the order they were learned")
    return [[bytes(a).hex(), bytes(b).hex()] for a, b in merges]


def _ids(ids: Any) -> list[int]:
    if not isinstance(ids, (list, tuple)) or not all(type(i) is int for i in ids):
        raise TypeError("encode must return a list of ints (token ids)")
    return list(ids)


def _bpe(cls: Callable, spec: Mapping[str, Any]) -> Any:
    """Train on the case's text (a file, or :func:`~util.labs.lab15.tokenizer.synthetic_text` of its seed) or
    build from given merges (hex pairs), then encode and decode a text."""
    from util.labs.lab15.tokenizer import synthetic_text

    if "given" in spec:
        tokenizer = cls([(bytes.fromhex(a), bytes.fromhex(b)) for a, b in spec["given"]])
    else:
        text = synthetic_text(int(spec["seed"]), int(spec["words"])) if "seed" in spec else _text(spec["text"])
        tokenizer = cls.train(text, int(spec["merges"]))
    text = _text(spec["encode"])
    ids = _ids(tokenizer.encode(text))
    return {"merges": _merges_json(tokenizer.merges), "ids": ids, "roundtrip": tokenizer.decode(ids) == text}


def _dtype(name: str):
    import torch

    return getattr(torch, name)


def _footprint(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab10.gpt import GPTConfig

    found = fn(GPTConfig.from_dict(spec["config"]), list(spec["lengths"]), list(spec["reserved"]),
               int(spec["block_size"]), _dtype(spec["dtype"]), shared=int(spec.get("shared", 0)))
    keys = ("bytes_per_token", "needed", "contiguous", "paged")
    if not isinstance(found, Mapping) or sorted(found) != sorted(keys):
        raise TypeError(f"footprint must return a dict with the keys {', '.join(keys)}")
    return dict(found)


def _allocator(cls: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's allocator replayed on the trace here (the course's recorder); the record is saved for the
    judge, which simulates the memory and counts blocks itself."""
    from util.artifacts import save_file
    from util.labs.lab15.paged import replay, trace_from

    num_blocks, block_size, ops = trace_from(spec)
    steps = replay(cls(num_blocks, block_size), ops)
    saved = save_file(json.dumps(steps).encode(), spec, LAB_NAME, ".json")
    return {"free": [s["free"] for s in steps], "copies": sum(isinstance(s["result"], list) for s in steps),
            "raised": sum(s["result"] == "raised" for s in steps), **saved}


def _attention(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's attention on the case's pools (float64); the output is saved for the judge."""
    import torch

    from util.artifacts import save_arrays
    from util.labs.lab15.paged import paged_inputs

    q, k_pool, v_pool, tables, lengths = paged_inputs(spec)
    out = fn(q.clone(), k_pool.clone(), v_pool.clone(), [list(t) for t in tables], list(lengths))
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"paged_attention must return a tensor [batch, n_head, head_dim], not {type(out).__name__}")
    return {"shape": list(out.shape), **save_arrays({"out": out.detach().double()}, spec, LAB_NAME)}


def _schedule(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The course's engine run with the student's scheduler; every iteration is saved for the judge."""
    from util.artifacts import save_file
    from util.labs.lab15.serving import config_from, requests_from, simulate

    run = simulate(fn, requests_from(spec), config_from(spec))
    saved = save_file(json.dumps({"iterations": run.iterations, "deadlock": run.deadlock}).encode(), spec,
                      LAB_NAME, ".json")
    return {**run.summary(), **saved}


def _speculative(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's speculative decoding pickled by value and saved: the grader runs it in a student process
    against a target it serves and counts, on models and prompts it draws itself from the grading secret (nothing
    is run here; until release 5 it also ran here on models of seeds the case named)."""
    import cloudpickle
    import numpy as np

    from util.artifacts import save_arrays

    return save_arrays({"function": np.frombuffer(cloudpickle.dumps(fn), dtype=np.uint8)}, spec, LAB_NAME)


def _prefix(cls: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's prefix cache replayed on the case's requests here (the course's recorder); the record is saved
    for the judge, which simulates the memory and counts blocks with its own cache."""
    from util.artifacts import save_file
    from util.labs.lab15.prefix import replay, summary, trace_from

    num_blocks, block_size, ops = trace_from(spec)
    steps = replay(cls(num_blocks, block_size), ops)
    saved = save_file(json.dumps(steps).encode(), spec, LAB_NAME, ".json")
    return {**summary(ops, steps, block_size), **saved}


def _chunked(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's chunked-prefill scheduler pickled by value and saved: the grader runs it in a student process
    on traces it draws itself from the grading secret (nothing is run here)."""
    import cloudpickle
    import numpy as np

    from util.artifacts import save_arrays

    return save_arrays({"function": np.frombuffer(cloudpickle.dumps(fn), dtype=np.uint8)}, spec, LAB_NAME)


def _swapping(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's swapping scheduler pickled by value and saved: the grader runs it in a student process on
    traces it draws itself from the grading secret (nothing is run here)."""
    import cloudpickle
    import numpy as np

    from util.artifacts import save_arrays

    return save_arrays({"function": np.frombuffer(cloudpickle.dumps(fn), dtype=np.uint8)}, spec, LAB_NAME)


def _sampling(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's speculative sampling pickled by value and saved: the grader runs it in a student process
    against a target it serves and counts, with uniform draws it draws itself (nothing is run here)."""
    import cloudpickle
    import numpy as np

    from util.artifacts import save_arrays

    return save_arrays({"function": np.frombuffer(cloudpickle.dumps(fn), dtype=np.uint8)}, spec, LAB_NAME)


WRITTEN = {
    "15.2": (Written("15.Q1", "For the 8 requests your paged cache held 1.11 times the bytes their tokens need, a "
                     "contiguous one 2.03 times; for 4 samples of one 40-token prompt the paged cache held less "
                     "than their tokens need (0.79 times). Why does a paged cache waste less than a contiguous "
                     "one, what is the most it wastes per sequence, and how can it hold fewer bytes than the "
                     "tokens it serves?",
                     3, words=(30, 200), since=2),),
    "15.6": (Written("15.Q2", "Your speculative decoding needed 15 target calls for 40 tokens with a draft of noise "
                     "0.01, and 31 with noise 0.05, where the cost model made it slower than plain greedy "
                     "decoding. Why does one target call that checks k proposals cost about as much as one "
                     "decode step, how many tokens does a call give, and when does speculative decoding pay?",
                     3, words=(30, 200), since=2),),
}
"""The lab's questions answered in words, marked by hand against ``rubrics.py`` (release 2): their
points came out of their task's exported answer."""


TASKS = (
    Task(
        id="15.1", title="A BPE tokenizer", answer_points=2,
        answer="{'first_merges', 'merges', 'tokens', 'bytes_per_token', 'roundtrip', 'unseen'} of "
               "BPETokenizer.train(course_text(), 256)",
        keys=("first_merges", "merges", "tokens", "bytes_per_token", "roundtrip", "unseen"), tolerance=RATIO,
        function="BPETokenizer", run_case=_bpe, checks=CHECKS["15.1"],
        hidden_points=9,
    ),
    Task(
        id="15.2", title="KV bytes per request in contiguous and paged caches", answer_points=1, written=WRITTEN["15.2"],
        answer="{'kv_bytes_byte_level', 'kv_bytes_bpe', 'footprint', 'footprint_shared'} (bytes)",
        keys=("kv_bytes_byte_level", "kv_bytes_bpe", "footprint", "footprint_shared"),
        function="footprint", run_case=_footprint, checks=CHECKS["15.2"],
        hidden_points=6,
    ),
    Task(
        id="15.3", title="A paged KV-cache allocator", answer_points=3,
        answer="{'free', 'copies', 'raised', 'peak_blocks'} of the notebook's parallel-sampling trace",
        keys=("free", "copies", "raised", "peak_blocks"),
        function="PagedAllocator", run_case=_allocator, grader_check=f"{JUDGE}:check_allocator",
        checks=CHECKS["15.3"],
        hidden_points=8,
    ),
    Task(
        id="15.4", title="Attention over a paged cache", answer_points=1,
        answer="{'tokens', 'equal_to_uncached', 'blocks', 'logits_close'} of TinyGPT decoded with a paged cache",
        keys=("tokens", "equal_to_uncached", "blocks", "logits_close"), tolerance=ATTENTION,
        function="paged_attention", run_case=_attention, grader_check=f"{JUDGE}:check_attention",
        checks=CHECKS["15.4"],
        hidden_points=6,
    ),
    Task(
        id="15.5", title="A continuous-batching scheduler", answer_points=3,
        answer="{'summary': run.summary() of the notebook's trace, 'throughput_by_max_running': {str(b): tokens/s}}",
        keys=("summary", "throughput_by_max_running"), tolerance=RATIO,
        function="schedule", run_case=_schedule, grader_check=f"{JUDGE}:check_schedule", checks=CHECKS["15.5"],
        hidden_points=8,
    ),
    Task(
        id="15.6", title="Greedy speculative decoding", answer_points=1, written=WRITTEN["15.6"],
        answer="{'tokens', 'target_calls', 'accepted', 'calls_by_sigma'} of the notebook's runs",
        keys=("tokens", "target_calls", "accepted", "calls_by_sigma"),
        function="speculative_generate", run_case=_speculative, grader_check=f"{JUDGE}:check_speculative", judged=("function",),
        checks=CHECKS["15.6"],
        hidden_points=8,
    ),
    Task(
        id="15.7", title="A prefix cache", answer_points=3, since=3,
        answer="{'reused', 'computed', 'hit_rate', 'evictions', 'hit_rate_by_blocks'} of the notebook's request trace",
        keys=("reused", "computed", "hit_rate", "evictions", "hit_rate_by_blocks"), tolerance=RATIO,
        function="PrefixCache", run_case=_prefix, grader_check=f"{JUDGE}:check_prefix", checks=CHECKS["15.7"],
        hidden_points=8,
    ),
    Task(
        id="15.8", title="Speculative sampling", answer_points=3, since=3,
        answer="{'tokens', 'target_calls', 'accepted', 'draws', 'first_token_tv', 'tokens_per_call'} of the notebook's "
               "sampled runs",
        keys=("tokens", "target_calls", "accepted", "draws", "first_token_tv", "tokens_per_call"), tolerance=RATIO,
        function="speculative_sample", run_case=_sampling, grader_check=f"{JUDGE}:check_sampling",
        judged=("function",), checks=CHECKS["15.8"],
        hidden_points=8,
    ),
    Task(
        id="15.9", title="Chunked prefill", answer_points=2, since=4,
        answer="{'summary': the notebook's chunked run.summary(), 'ttft_p50_by_budget', 'tpot_p50_by_budget': "
               "{str(max_tokens): ns}}",
        keys=("summary", "ttft_p50_by_budget", "tpot_p50_by_budget"), tolerance=RATIO,
        function="schedule_chunked", run_case=_chunked, grader_check=f"{JUDGE}:check_chunked",
        judged=("function",), checks=CHECKS["15.9"],
        hidden_points=6,
    ),
    Task(
        id="15.10", title="Preemption by swapping", answer_points=2, since=7,
        answer="{'summary': the notebook's swapping run.summary(), 'throughput_by_prompt': {'swap' | 'recompute': "
               "{str(prompt): tokens/s}}}",
        keys=("summary", "throughput_by_prompt"), tolerance=RATIO,
        function="schedule_swapping", run_case=_swapping, grader_check=f"{JUDGE}:check_swapping",
        judged=("function",), checks=CHECKS["15.10"],
        hidden_points=6,
    ),
)
"""The tasks of the current release (7), in notebook order."""

BEFORE_3 = {"15.1": (3, 12), "15.3": (4, 16), "15.4": (3, 12), "15.5": (4, 16), "15.6": (1, 16)}
"""Task id -> (answer points, hidden points) as releases 1 and 2 declared them: release 3's tasks 15.7 and 15.8 took
their points from these tasks, each hidden case keeping its share (``Lab.with_cases``)."""

BEFORE_4 = {"15.3": (3, 12), "15.5": (3, 12)}
"""Task id -> (answer points, hidden points) as release 3 declared them: release 4's task 15.9 took its points from
these tasks, each hidden case keeping its share."""

BEFORE_7 = {"15.4": (2, 9), "15.6": (1, 12)}
"""Task id -> (answer points, hidden points) as releases 4 to 6 declared them: release 7's task 15.10 took its points
from these tasks (15.4's answer 1 point and each hidden case 1; 15.6's case 4)."""

LAB = Lab(
    name=LAB_NAME,
    title="Serving a language model",
    notebook="lab15_serving.ipynb",
    judge_timeout=180,  # 15.6 starts a student process: up to 60 s to start, then the decoding
    packages=("torch", "numpy", "cloudpickle"),
    releases=(
        Release(1, "2026-11-26", "The first release: a BPE tokenizer, KV bytes in contiguous and paged caches, a paged "
                "KV-cache allocator with copy-on-write, attention over a paged cache, a continuous-batching "
                "scheduler and greedy speculative decoding."),
        Release(2, "2026-11-26", "Tasks 15.2 and 15.6 ask written questions, Q1 (3 points) and Q2 (3 points), marked by "
                "hand: why a paged KV cache wastes less memory than a contiguous one, and when speculative "
                "decoding pays; their points came from the two tasks' exported answers.",
                marker="(written, 3 points of task 15.2, marked by hand)"),
        Release(3, "2026-12-02", "Two new tasks: 15.7, a prefix cache (full blocks named by a hash chained from "
                "their parent's, reused by every request that shares their prefix, evicted least recently used first), "
                "and 15.8, speculative sampling (accept a drafted token with probability min(1, p / q), else sample "
                "from max(0, p - q)), graded on uniform draws the grader serves and on the distribution of the tokens. "
                "Their 22 points come from tasks 15.1 (4), 15.3 (5), 15.4 (4), 15.5 (5) and 15.6 (4); a notebook of "
                "an earlier release is graded as it was. The handout also states what earlier ones left open: the "
                "order of preemptions in one iteration (15.5), the shape of each step's logits and who allocates a "
                "table's blocks (15.4), the acceptance rate and the positions the target checks (15.6).",
                marker="A prefix cache names each full block by a hash of its parent's name and its own tokens",
                previous=tuple(replace(task, answer_points=BEFORE_3[task.id][0], hidden_points=BEFORE_3[task.id][1])
                               for task in TASKS if task.id in BEFORE_3)),
        Release(4, "2026-12-02", "A new task, 15.9: chunked prefill (each iteration spends a token budget on every "
                "running decode first, then on chunks of prompts), graded on request streams the grader draws afresh "
                "at each grading and replays with the scheduler in a process of its own, every iteration compared "
                "with its own run of the stated policy. Its 8 points come from tasks 15.3 (4) and 15.5 (4), each "
                "hidden case of theirs now worth 2 points instead of 3; a notebook of an earlier release is graded as "
                "it was.",
                marker="cuts prompts into chunks: every",
                previous=tuple(replace(task, hidden_points=BEFORE_4[task.id][1], answer_points=BEFORE_4[task.id][0])
                               for task in TASKS if task.id in BEFORE_4)),
        Release(5, "2026-12-02", "Task 15.6's hidden case runs on models and prompts the grader draws at every "
                "grading from a secret of its own, kept only with clear argmax margins; what it checks and is worth "
                "is unchanged.",
                marker="The runs' models and prompts are drawn by the grader at every grading"),
        Release(6, "2026-12-02", "Task 15.8's hidden cases run on models and prompts the grader draws at every "
                "grading from its secret, the distribution case's over 1,000 runs (not 400) and only where its test "
                "tells the residual from p; what they check and are worth is unchanged.",
                marker="distribution case keeps a draw only where its 1,000 runs would tell"),
        Release(7, "2026-12-02", "A new task, 15.10: preemption by swapping (a victim's blocks moved to a CPU pool "
                "and back when that costs less than recomputing it, by the stated cost model), graded on request "
                "streams the grader draws at every grading and replays with the scheduler in a process of its own. "
                "Its 8 points come from tasks 15.4 (4) and 15.6 (4); a notebook of an earlier release is graded as it "
                "was.",
                marker="(vLLM's `preemption_mode=\"swap\"`)",
                previous=tuple(replace(task, answer_points=BEFORE_7[task.id][0], hidden_points=BEFORE_7[task.id][1])
                               for task in TASKS if task.id in BEFORE_7)),
    ),
    tasks=TASKS,
)
