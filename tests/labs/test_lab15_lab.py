"""Lab 15's declaration, given helpers and grader-side checks, against the solution, hand counts, properties
and deliberately wrong or forged records (no notebook is run here; test_labs.py grades the notebooks, the
speculative-decoding judge has its own file, test_lab15_speculative.py).

Every judge here decides from what the kernel saved, which the student's code could have written itself:
each attack below is a record a student could forge, each beside the honest record it imitates."""
from __future__ import annotations

import hashlib
import io
import json
import random
from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.author.solution import solution_namespace
from grader.judge import artifacts
from util.artifacts import case_file
from util.contract import Tolerance
from util.hidden import with_files
from util.labs import get_lab
from util.labs.lab15 import judge, tasks
from util.labs.lab15.judge_reference import (
    ReferenceAllocator,
    greedy,
    paged_attention_reference,
    reference_schedule,
    speculative,
)
from util.labs.lab15.paged import OutOfBlocks, paged_inputs, random_trace, replay, trace_from, trace_problems
from util.labs.lab15.serving import (
    GPT2_SMALL_A100,
    Decision,
    Request,
    ServeConfig,
    config_from,
    percentile,
    poisson_trace,
    requests_from,
    simulate,
)
from util.labs.lab15.tokenizer import course_text, pretokenize, synthetic_text

LAB = get_lab("lab15")
EXACT = Tolerance()


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab15", ("15.1", "15.2", "15.3", "15.4", "15.5", "15.6"))


def _spec(task_id: str, index: int) -> dict:
    task = LAB.task(task_id)
    return with_files(LAB, task.cases[index].spec)


def test_declaration_adds_up_and_names_real_checks():
    assert LAB.max_points == 100
    assert [t.max_points for t in LAB.tasks] == [11, 10, 11, 7, 11, 12, 11, 11, 8, 8]   # 15.10: release 7
    assert [t.max_points for t in LAB.as_of(6).tasks] == [11, 10, 11, 11, 11, 16, 11, 11, 8]
    assert [t.max_points for t in LAB.as_of(3).tasks] == [11, 10, 15, 11, 15, 16, 11, 11]
    files = [case_file(with_files(LAB, c.spec)) for t in LAB.tasks if t.grader_check for c in t.cases]
    assert len(files) == len(set(files)) == 24   # 15.9 adds 3, 15.10 3
    for task in LAB.tasks:
        if task.grader_check:
            assert callable(artifacts.check_function(task))


# ---------------------------------------------------------------- 15.1: BPE

def test_the_course_text_is_frozen():
    """The merges depend on every byte of the text: it is a file of the lab's, never the Python version's."""
    text = course_text()
    assert (len(text), len(text.encode("utf-8"))) == (106_317, 106_398)
    assert hashlib.sha256(text.encode("utf-8")).hexdigest()[:16] == "093ab4d352476940"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80))
def test_every_character_falls_in_exactly_one_pre_token(text):
    assert "".join(pretokenize(text)) == text


def _naive_merges(text: str, n: int) -> list[tuple[bytes, bytes]]:
    """The notebook's rules, recounting every pair after each merge (the slow, obviously right way)."""
    words = Counter(word.encode("utf-8") for word in pretokenize(text))
    split = {word: [bytes([b]) for b in word] for word in words}
    merges = []
    for _ in range(n):
        counts = Counter()
        for word, tokens in split.items():
            for pair in zip(tokens, tokens[1:]):
                counts[pair] += words[word]
        if not counts:
            break
        top = max(counts.values())
        pair = min(p for p, c in counts.items() if c == top)
        merges.append(pair)
        for word, tokens in split.items():
            out, i = [], 0
            while i < len(tokens):
                if i + 1 < len(tokens) and (tokens[i], tokens[i + 1]) == pair:
                    out.append(pair[0] + pair[1])
                    i += 2
                else:
                    out.append(tokens[i])
                    i += 1
            split[word] = out
    return merges


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet="ab c\u00e9\u6771!", max_size=120), st.integers(0, 30))
def test_the_solution_trainer_equals_the_naive_one_and_round_trips(solution, text, n):
    tokenizer = solution["BPETokenizer"].train(text, n)
    assert tokenizer.merges == _naive_merges(text, n)
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text and all(0 <= i < 256 + len(tokenizer.merges) for i in ids)


def _tied_merges(text: str, n: int) -> tuple[list[tuple[bytes, bytes]], int]:
    """The merges of the notebook's rules, counted incrementally (only the words holding the merged pair change),
    and how many of them were chosen among equal counts."""
    words = Counter(word.encode("utf-8") for word in pretokenize(text))
    split, freq = [[bytes([b]) for b in word] for word in words], list(words.values())
    counts: Counter = Counter()
    where: dict = {}
    for i, tokens in enumerate(split):
        for pair in zip(tokens, tokens[1:]):
            counts[pair] += freq[i]
            where.setdefault(pair, set()).add(i)
    merges, ties = [], 0
    for _ in range(n):
        counts = +counts
        if not counts:
            break
        top = max(counts.values())
        tied = sorted(p for p, c in counts.items() if c == top)
        ties += len(tied) > 1
        pair = tied[0]
        merges.append(pair)
        for i in where.pop(pair):
            tokens = split[i]
            for old in zip(tokens, tokens[1:]):
                counts[old] -= freq[i]
            out, j = [], 0
            while j < len(tokens):
                if j + 1 < len(tokens) and (tokens[j], tokens[j + 1]) == pair:
                    out.append(pair[0] + pair[1])
                    j += 2
                else:
                    out.append(tokens[j])
                    j += 1
            split[i] = out
            for new in zip(out, out[1:]):
                counts[new] += freq[i]
                where.setdefault(new, set()).add(i)
    return merges, ties


def test_ties_decide_the_merges_the_notebook_says_and_most_of_the_synthetic_cases(solution):
    merges, ties = _tied_merges(course_text(), 256)
    assert solution["BPETokenizer"].train(course_text(), 256).merges == merges
    assert ties == 99                            # "99 of the 256 merges below are chosen among equal counts"
    spec = _spec("15.1", 1)
    for seed in (spec["seed"], 1, 2):           # the case's seed may be redrawn: any seed is full of ties
        text = synthetic_text(seed, spec["words"])
        merges, ties = _tied_merges(text, spec["merges"])
        assert merges == _naive_merges(text, spec["merges"]) == solution["BPETokenizer"].train(text, spec["merges"]).merges
        assert ties >= spec["merges"] // 3, (seed, ties)


def test_encoding_by_rank_differs_from_left_to_right_on_the_given_merges(solution):
    """The hidden case's merges make greedy left-to-right merging give other ids than merging by rank."""
    spec = _spec("15.1", 2)
    merges = [(bytes.fromhex(a), bytes.fromhex(b)) for a, b in spec["given"]]
    tokenizer = solution["BPETokenizer"](merges)

    def left_to_right(word: str) -> list[bytes]:
        tokens = [bytes([b]) for b in word.encode()]
        changed = True
        while changed:
            changed = False
            for i in range(len(tokens) - 1):
                if (tokens[i], tokens[i + 1]) in tokenizer.ranks:
                    tokens[i:i + 2] = [tokens[i] + tokens[i + 1]]
                    changed = True
                    break
        return tokens

    by_rank = tokenizer.encode(spec["encode"])
    other = [tokenizer.ids[t] for word in pretokenize(spec["encode"]) for t in left_to_right(word)]
    assert by_rank != other


# ---------------------------------------------------------------- 15.3: the paged allocator

@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([(16, 4), (40, 8), (9, 2)]))
def test_the_solution_and_the_reference_pass_the_memory_simulation_with_equal_counts(solution, seed, pool):
    blocks, size = pool
    ops = random_trace(seed, 120, blocks, size, max_prompt=3 * size)
    found = replay(solution["PagedAllocator"](blocks, size), ops)
    expected = replay(ReferenceAllocator(blocks, size), ops)
    assert trace_problems(ops, found, blocks, size) == [] == trace_problems(ops, expected, blocks, size)
    assert [s["free"] for s in found] == [s["free"] for s in expected]
    assert [s["result"] is None for s in found] == [s["result"] is None for s in expected]


def test_random_traces_never_run_out_and_exercise_every_call():
    kinds = Counter()
    for seed in range(20):
        ops = random_trace(seed, 300, 40, 8, max_prompt=40)
        assert all(s["result"] != "raised" for s in replay(ReferenceAllocator(40, 8), ops))
        kinds.update(op[0] for op in ops)
    assert min(kinds.values()) > 200 and kinds["append"] > kinds["allocate"]


def _record(cls, spec):
    blocks, size, ops = trace_from(spec)
    return replay(cls(blocks, size), ops)


def test_the_allocator_judge_accepts_the_solution_on_every_case(solution):
    for case in LAB.task("15.3").cases:
        steps = _record(solution["PagedAllocator"], case.spec)
        assert judge.check_allocator(case.spec, json.dumps(steps).encode(), EXACT) == [], case.id


def test_the_hidden_traces_raise_copy_and_free_while_shared():
    for case in LAB.task("15.3").cases:
        steps = _record(ReferenceAllocator, case.spec)
        raised = sum(s["result"] == "raised" for s in steps)
        copies = sum(isinstance(s["result"], list) for s in steps)
        assert copies >= 3 or "running out" in case.id, case.id
        assert (raised == 6) == ("running out" in case.id), case.id


def test_a_free_that_ignores_forks_is_caught_by_the_memory_simulation(solution):
    class FreeWhileForked(solution["PagedAllocator"]):
        def free(self, seq):
            for block in self.tables.pop(seq):
                self.refs[block] = 0
                self.free_blocks.append(block)
            del self.lengths[seq]

    spec = LAB.task("15.3").cases[0].spec
    [problem] = judge.check_allocator(spec, json.dumps(_record(FreeWhileForked, spec)).encode(), EXACT)
    assert "num_free() is" in problem and "counted free, or one was freed twice" in problem


def test_a_copy_on_read_is_caught(solution):
    class CowOnRead(solution["PagedAllocator"]):
        def block_table(self, seq):
            self._own_last(seq)
            return list(self.tables[seq])

    spec = LAB.task("15.3").cases[1].spec
    [problem] = judge.check_allocator(spec, json.dumps(_record(CowOnRead, spec)).encode(), EXACT)
    assert problem == ("after call 1 (fork 5, 6): sequence 5's block 1 (its tokens 4 to 7) was replaced by block 2 "
                       "with no copy returned: a table changes only by append, at the block its new token goes into, "
                       "and a copy-on-write returns (src, dst)")


def test_forged_records_fail_beside_the_honest_one(solution):
    """The record is written in the kernel, beside the student's code: a forged one must still describe a
    correct allocation, which is the task. Each forgery imitates the honest record of the same trace."""
    spec = LAB.task("15.3").cases[0].spec
    honest = _record(solution["PagedAllocator"], spec)
    assert judge.check_allocator(spec, json.dumps(honest).encode(), EXACT) == []

    claims = json.loads(json.dumps(honest))        # the right counts, tables that share nothing: no copy told
    for step in claims[1:4]:
        step["tables"] = {k: [b + 8 * int(k) for b in v] if k != "0" else v for k, v in step["tables"].items()}
    assert "no longer holds it" in judge.check_allocator(spec, json.dumps(claims).encode(), EXACT)[0]

    lazy = json.loads(json.dumps(honest))          # right tables, the ideal count claimed after a leak
    lazy[3]["free"] += 1
    assert "a block in use is counted free" in judge.check_allocator(spec, json.dumps(lazy).encode(), EXACT)[0]

    greedy_copy = json.loads(json.dumps(honest))   # a copy reported for an append that needs none
    index = next(i for i, op in enumerate(trace_from(spec)[2]) if op[0] == "append" and honest[i]["result"] is None
                 and trace_from(spec)[2][i - 1][0] == "append")
    greedy_copy[index]["result"] = [0, 15]
    assert judge.check_allocator(spec, json.dumps(greedy_copy).encode(), EXACT) != []

    for data in (b"\xff", b"{}", json.dumps(honest[:-1]).encode(), json.dumps([{"result": None}] * 18).encode(),
                 b"[" * 100_000):
        assert judge.check_allocator(spec, data, EXACT), data[:20]


def test_out_of_blocks_leaves_the_allocator_as_it_was(solution):
    allocator = solution["PagedAllocator"](3, 4)
    allocator.allocate(0, 9)
    with pytest.raises(OutOfBlocks):
        allocator.allocate(1, 1)
    assert allocator.num_free() == 0 and allocator.block_table(0) == [0, 1, 2]
    spec = {"num_blocks": 3, "block_size": 4, "ops": [["allocate", 0, 9], ["allocate", 1, 1], ["free", 0]]}
    record = _record(solution["PagedAllocator"], spec)
    forged = json.loads(json.dumps(record))
    forged[1]["tables"] = {"0": [0, 1]}            # 'raised', but a block was given back on the way
    assert judge.check_allocator(spec, json.dumps(forged).encode(), EXACT)[0].endswith(
        "a call that raises must leave the allocator as it was")
    wrongly = json.loads(json.dumps(record))
    wrongly[2]["result"] = "raised"
    wrongly[2]["tables"], wrongly[2]["free"] = record[1]["tables"], record[1]["free"]
    assert "free raised OutOfBlocks" in judge.check_allocator(spec, json.dumps(wrongly).encode(), EXACT)[0]


# ---------------------------------------------------------------- 15.4: paged attention

def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def test_the_attention_judge_accepts_the_solution_and_float32_work(solution):
    for case in LAB.task("15.4").cases:
        q, k, v, tables, lengths = paged_inputs(case.spec)
        out = solution["paged_attention"](q, k, v, tables, lengths)
        assert judge.check_attention(case.spec, _npz(out=out.numpy()), tasks.ATTENTION) == [], case.id
        single = solution["paged_attention"](q.float(), k.float(), v.float(), tables, lengths)
        assert judge.check_attention(case.spec, _npz(out=single.numpy()), tasks.ATTENTION) == [], case.id


def test_the_attention_judge_refuses_garbage_and_hostile_files(solution):
    spec = LAB.task("15.4").cases[0].spec
    q, k, v, tables, lengths = paged_inputs(spec)
    whole = [len(t) * spec["block_size"] for t in tables]          # every slot of every block read
    wrong = paged_attention_reference(q, k, v, tables, whole).numpy()
    [problem] = judge.check_attention(spec, _npz(out=wrong), tasks.ATTENTION)
    assert problem.startswith("the output differs from attention over each sequence's keys and values")
    right = paged_attention_reference(q, k, v, tables, lengths).numpy()
    assert judge.check_attention(spec, _npz(out=right[:, :2]), tasks.ATTENTION)[0].startswith("paged_attention returned")
    assert judge.check_attention(spec, _npz(out=np.full_like(right, np.nan)), tasks.ATTENTION) == [
        "paged_attention's output holds NaN or infinity"]
    assert "the grader expected exactly" in judge.check_attention(spec, _npz(o=right), tasks.ATTENTION)[0]


def test_garbage_makes_every_hidden_case_fail_an_unmasked_attention():
    for case in LAB.task("15.4").cases:
        q, k, v, tables, lengths = paged_inputs(case.spec)
        right = paged_attention_reference(q, k, v, tables, lengths)
        whole = paged_attention_reference(q, k, v, tables, [len(t) * case.spec["block_size"] for t in tables])
        assert float((right - whole).abs().max() / right.abs().max()) > 1e-2, case.id


# ---------------------------------------------------------------- 15.5: the scheduler

def test_the_notebooks_hand_example_and_the_cost_model():
    run = simulate(reference_schedule, [Request(0, 0, 7, 6), Request(1, 0, 6, 5)], ServeConfig(4, 4, 16, 4))
    assert [(it["preempt"], it["decode"], it["admit"]) for it in run.iterations] == [
        ([], [], [0, 1]), ([], [0, 1], []), ([1], [0], []), ([], [0], []), ([], [0], []), ([], [0], []),
        ([], [], [1]), ([], [1], []), ([], [1], [])]
    assert run.preemptions == 1 and run.deadlock is None
    assert GPT2_SMALL_A100.iteration_ns([(1, 512)]) == -(-(248_879_616 + 512 * 36_864) // 1_600)
    assert GPT2_SMALL_A100.iteration_ns([(512, 512)]) == -(-GPT2_SMALL_A100.macs([(512, 512)]) // 156_000)


def test_percentiles_are_nearest_rank():
    assert [percentile(list(range(1, 11)), p) for p in (50, 90, 99, 100, 1)] == [5, 9, 10, 10, 1]
    assert percentile([7], 50) == 7 and percentile([], 50) is None


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(15, 120), st.integers(1, 16))
def test_the_policy_never_deadlocks_and_never_overcommits(seed, blocks, running):
    requests = poisson_trace(seed, 15, 3.0, (4, 60), (2, 60))
    config = ServeConfig(blocks, 8, 128, running)
    run = simulate(reference_schedule, requests, config)
    assert run.deadlock is None and len(run.finish) == 15
    assert max(run.blocks_in_use) <= blocks


def test_the_engine_refuses_infeasible_decisions():
    requests = [Request(0, 0, 7, 6), Request(1, 0, 6, 5)]
    config = ServeConfig(4, 4, 16, 4)
    with pytest.raises(ValueError, match="the budget is 12"):
        simulate(lambda view: Decision(admit=tuple(s.id for s in view.waiting)), requests, ServeConfig(4, 4, 12, 4))
    with pytest.raises(ValueError, match="needs 1 new blocks and 0 are free"):
        simulate(lambda view: Decision(decode=tuple(s.id for s in view.running), admit=() if view.running else (0, 1)),
                 requests, config)
    with pytest.raises(ValueError, match="is not waiting"):
        simulate(lambda view: Decision(admit=(5,)), requests, config)
    with pytest.raises(ValueError, match="must return a Decision"):
        simulate(lambda view: [0, 1], requests, config)
    with pytest.raises(ValueError, match="could never run"):
        simulate(reference_schedule, [Request(0, 0, 20, 5)], config)


def test_the_hidden_request_streams_have_what_their_names_promise():
    for case in LAB.task("15.5").cases:
        run = simulate(reference_schedule, requests_from(case.spec), config_from(case.spec))
        assert run.deadlock is None, case.id
        assert (run.preemptions > 0) == ("pressure" in case.id or "long outputs" in case.id), (case.id, run.preemptions)


def _schedule_record(fn, spec) -> bytes:
    run = simulate(fn, requests_from(spec), config_from(spec))
    return json.dumps({"iterations": run.iterations, "deadlock": run.deadlock}).encode()


def test_the_schedule_judge_on_the_solution_a_deadlock_and_forgeries(solution):
    for case in LAB.task("15.5").cases:
        assert judge.check_schedule(case.spec, _schedule_record(solution["schedule"], case.spec), EXACT) == [], case.id

    def never_preempts(view):   # a decode without a free block waits for one (the example never_preempts)
        config, free, decode, admit = view.config, view.free_blocks, [], []
        for seq in view.running:
            need = config.blocks(seq.context + 1) - seq.blocks
            if need <= free:
                free -= need
                decode.append(seq.id)
        tokens = count = len(view.running)
        for seq in view.waiting:
            if tokens + seq.prefill > config.max_tokens or count + 1 > config.max_running \
                    or config.blocks(seq.prefill) > free:
                break
            admit.append(seq.id)
            tokens, count, free = tokens + seq.prefill, count + 1, free - config.blocks(seq.prefill)
        return Decision(decode=tuple(decode), admit=tuple(admit))

    spec = LAB.task("15.5").cases[1].spec
    record = _schedule_record(never_preempts, spec)
    assert json.loads(record)["deadlock"].endswith("nothing can change any more")
    [problem] = judge.check_schedule(spec, record, EXACT)
    assert "your scheduler preempted fewer requests (0) than the stated policy" in problem
    assert "your run then deadlocked" in problem

    honest = json.loads(_schedule_record(reference_schedule, spec))
    shortened = dict(honest, iterations=honest["iterations"][:10])   # forged: stops early, claims no deadlock
    assert "the run stopped after 10 iterations" in judge.check_schedule(spec, json.dumps(shortened).encode(), EXACT)[0]
    skipped = json.loads(json.dumps(honest))                         # forged: an admission moved a step later
    first = next(i for i, it in enumerate(skipped["iterations"]) if it["admit"])
    skipped["iterations"][first]["admit"] = []
    assert "admitted fewer requests (0)" in judge.check_schedule(spec, json.dumps(skipped).encode(), EXACT)[0]
    for data in (b"", b"[]", json.dumps({"iterations": "x", "deadlock": None}).encode(),
                 json.dumps({"iterations": [1], "deadlock": None}).encode()):
        assert judge.check_schedule(spec, data, EXACT) == [judge.UNREADABLE]


# ---------------------------------------------------------------- 15.6: the references it is judged against

def test_every_public_decoding_has_clear_margins_in_float64():
    """Screened at authoring time: every argmax the notebook's and the public checks' runs take (target and draft)
    wins by at least 1e-3; two correct float64 implementations differ by about 1e-14 (the design measured 3.7e-14),
    so equal tokens mean equal computations. The hidden case's runs are screened at grading time (below)."""
    from util.labs.lab10.gpt import TINY, prompt_ids, seeded_gpt
    from util.labs.lab15.public_checks import SMALL

    runs = [{"config": TINY.to_dict(), "seed": 21, "sigma": s, "draft_seed": 210, "prompt": 8, "n": 40, "k": 4}
            for s in (0.002, 0.005, 0.01, 0.02, 0.05)]
    runs += [{"config": SMALL, "seed": 3, "sigma": 0.05, "draft_seed": 4, "prompt": 3, "n": 20, "k": 3}]
    torch.set_num_threads(1)
    for run in runs:
        cfg, target, draft, prompt = judge._models(run)
        found = speculative(target, draft, prompt, run["n"], run["k"])
        tokens, gap = greedy(target, prompt, run["n"])
        assert found["tokens"] == tokens and min(found["gap"], gap) >= 1e-3, (run, found["gap"], gap)
    _, gap = greedy(seeded_gpt(TINY, 11).double(), prompt_ids(TINY, 8, 11)[0].tolist(), 40)   # 15.4's decoding
    assert gap >= 1e-3


def test_the_hidden_case_names_no_seed_and_two_secrets_draw_other_models():
    """15.6's case gives shapes, noise, lengths, n and k only; each grading draws the models and the prompt from its
    secret, so the same case under two secrets runs on other weights and another prompt, and under one secret the
    judge draws the same (its reference and the student's run see one setting)."""
    from util.judging import secret

    runs = LAB.task("15.6").cases[0].spec["runs"]
    assert all(not {"seed", "draft_seed"} & set(run) for run in runs)
    torch.set_num_threads(1)
    settings_ = []
    for value in (b"\x01" * 32, b"\x02" * 32, b"\x01" * 32):
        secret.install(value)
        settings_.append(judge.spec_setting(runs[0], 0))
    secret.renew()
    first, second, again = settings_
    assert first[3] != second[3] and len(first[3]) == runs[0]["prompt"]
    assert not torch.equal(first[1].head.weight, second[1].head.weight)
    assert torch.equal(first[1].head.weight, again[1].head.weight) and first[5] == again[5]
    assert not torch.equal(first[2].head.weight, first[1].head.weight)      # the draft: the target with noise


@pytest.mark.parametrize("value", [bytes([i]) * 32 for i in (3, 4, 5)])
def test_every_kept_draw_has_clear_margins_and_rejects_before_its_last_round(value):
    """What the screen keeps, on three secrets and both runs: greedy and speculative decoding agree, every argmax
    wins by :data:`judge.SPEC_MARGIN`, and some round before the last rejects a proposal (a draft token kept on a
    mismatch shows at the next call)."""
    from util.judging import secret

    torch.set_num_threads(1)
    secret.install(value)
    try:
        for number, run in enumerate(LAB.task("15.6").cases[0].spec["runs"]):
            cfg, target, draft, prompt, expected, truth = judge.spec_setting(run, number)
            tokens, gap = greedy(target, prompt, run["n"])
            assert tokens == truth == expected["tokens"] and len(truth) == run["n"]
            assert min(gap, expected["gap"]) >= judge.SPEC_MARGIN
            assert judge._rejects_early(expected)
    finally:
        secret.renew()


def test_the_margin_screen_stops_after_its_bound_and_keeps_the_widest_margin(monkeypatch):
    """A margin no draw reaches: the screen draws exactly :data:`judge.SPEC_DRAWS` settings (never loops on), then
    keeps the one with the largest margin among those that decode the same tokens both ways and reject early."""
    from util.labs.lab15.public_checks import SMALL

    drawn = []
    real = judge._models

    def counting(run):
        drawn.append(dict(run))
        return real(run)

    torch.set_num_threads(1)
    monkeypatch.setattr(judge, "_models", counting)
    monkeypatch.setattr(judge, "SPEC_MARGIN", float("inf"))
    run = {"config": SMALL, "sigma": 0.05, "prompt": 3, "n": 12, "k": 3}
    kept = judge.spec_setting(run, 0)
    assert len(drawn) == judge.SPEC_DRAWS == 16 and len({(d["seed"], d["draft_seed"]) for d in drawn}) == 16
    margins = []
    for setting in drawn:
        _, target, draft, prompt = real(setting)
        expected = speculative(target, draft, prompt, 12, 3)
        tokens, gap = greedy(target, prompt, 12)
        if tokens == expected["tokens"] and judge._rejects_early(expected):
            margins.append((min(gap, expected["gap"]), prompt))
    widest = max(margins, key=lambda pair: pair[0])
    assert kept[3] == widest[1] and kept[5] == kept[4]["tokens"]
    assert min(greedy(kept[1], kept[3], 12)[1], kept[4]["gap"]) == widest[0] > 0


def test_the_reference_counts_calls_as_the_notebook_states():
    """A perfect draft, n = 7, k = 4: the first call keeps 4 proposals and the target's bonus, the second keeps
    its 2 proposals and drops the bonus past n."""
    from util.labs.lab15.public_checks import SMALL

    run = {"config": SMALL, "seed": 3, "sigma": 0.0, "draft_seed": 4, "prompt": 3, "n": 7, "k": 4}
    _, target, _, prompt = judge._models(run)
    perfect = speculative(target, target, prompt, 7, 4)
    assert len(perfect["calls"]) == 2 and perfect["accepted"] == 4 + 2 and perfect["starts"] == [3, 8]


def test_random_seeds_for_the_attention_cases_do_not_matter():
    """The 15.4 cases declare their seed redrawable: any seed gives pools whose garbage an unmasked read sees."""
    generator = random.Random(0)
    for case in LAB.task("15.4").cases:
        for _ in range(3):
            spec = {**case.spec, "seed": generator.randrange(100_000)}
            q, k, v, tables, lengths = paged_inputs(spec)
            right = paged_attention_reference(q, k, v, tables, lengths)
            whole = paged_attention_reference(q, k, v, tables, [len(t) * spec["block_size"] for t in tables])
            assert float((right - whole).abs().max() / right.abs().max()) > 1e-2


def test_seeds_a_term_redraws_still_make_the_cases_their_names_promise():
    """``Case.seeds`` are redrawn from a term's secret (``util.hidden.term_spec``): every redrawn case stays valid
    and keeps its point (memory pressure still preempts, a random trace still copies, garbage still shows)."""
    from util.hidden import term_spec

    for secret in (b"spring", b"autumn"):
        for task in LAB.tasks:
            for case in task.cases:
                if not case.seeds:
                    continue
                spec = term_spec("lab15", task.id, case, secret)
                assert spec != dict(case.spec), case.id
                if task.id == "15.3":
                    steps = _record(ReferenceAllocator, spec)
                    assert sum(isinstance(s["result"], list) for s in steps) >= 1 and \
                        all(s["result"] != "raised" for s in steps), case.id
                elif task.id == "15.5":
                    run = simulate(reference_schedule, requests_from(spec), config_from(spec))
                    assert run.deadlock is None, case.id
                    assert (run.preemptions > 0) == ("pressure" in case.id or "long outputs" in case.id), case.id


def test_a_record_that_raises_where_it_should_not_is_refused_not_crashed_on(solution):
    """A forged record may claim OutOfBlocks for an allocation, then go on as if the sequence existed: the
    memory simulation says so (and the judge compares the raise with its own allocator) instead of failing."""
    spec = LAB.task("15.3").cases[0].spec
    forged = _record(solution["PagedAllocator"], spec)
    forged[0] = {"result": "raised", "free": 16, "tables": {}}
    problems = judge.check_allocator(spec, json.dumps(forged).encode(), EXACT)
    assert problems and "an earlier call failed to create" in problems[0]
