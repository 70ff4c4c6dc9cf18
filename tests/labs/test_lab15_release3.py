"""Lab 15's release 3: tasks 15.7 (a prefix cache) and 15.8 (speculative sampling), and what the release changes
for notebooks of earlier releases.

15.7's judge (``judge.check_prefix``) is tested here in this process (it reads a record, starts nothing): the
solution and the grader's reference agree call by call on every hidden trace and on traces a term secret could
draw, and the memory simulation catches each mistake the lab names (a hash that ignores the parent, a block
evicted while held) where its case says. 15.8's judge runs the student's function in a student process (this
process plays the judge, ``grader.judge.isolated.serving``) on draws from the grading secret: the solution passes
on fresh secrets, the residual mistake fails both cases, and a function that draws in another order fails the
exact case beside the distribution case it passes. The notebooks themselves are graded by ``tests/test_labs.py``
(the solution, the examples) and below (the frozen handout of release 2).
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import cloudpickle
import numpy as np
import pytest
import torch

from grader.author.solution import solution_namespace
from grader.core import releases
from grader.grade.submission import grade_submission
from grader.judge.isolated import serving
from util.contract import EXACT, Tolerance
from util.judging import secret
from util.labs import get_lab
from util.labs.lab15 import judge
from util.labs.lab15.cases import _PREFIX_OPS
from util.labs.lab15.judge_reference import ReferencePrefixCache, speculative_sampling
from util.labs.lab15.prefix import prefix_trace, replay, summary, trace_from, trace_problems
from util.labs.lab15.public_checks import HAND_PREFIX, HAND_PREFIX_COUNTS
from util.labs.lab15.speculative import CountingTarget, Uniforms, sample, uniform_stream

LAB = get_lab("lab15")
RELEASED = Path(__file__).resolve().parents[1] / "released" / "lab15_release2" / "lab15_serving.ipynb"
RELEASED_4 = Path(__file__).resolve().parents[1] / "released" / "lab15_release4" / "lab15_serving.ipynb"
RELEASED_5 = Path(__file__).resolve().parents[1] / "released" / "lab15_release5" / "lab15_serving.ipynb"


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab15", ("15.6", "15.7", "15.8"))


def _counts(steps):
    return [(s["result"], s["free"], s["cached"], s["evictions"]) for s in steps]


# ---------------------------------------------------------------- the release

def test_release_3_adds_two_tasks_whose_points_came_from_five_others():
    assert LAB.as_of(3).release == 3 and LAB.tasks_since(2) == ("15.7", "15.8", "15.9", "15.10")
    assert LAB.tasks_since(3) == ("15.9", "15.10")   # releases 4 and 7 (test_lab15_chunked.py, _swapping.py)
    for release in (1, 2):
        old = LAB.as_of(release)
        assert [t.id for t in old.tasks] == ["15.1", "15.2", "15.3", "15.4", "15.5", "15.6"]
        assert old.max_points == LAB.max_points == 100
        assert [t.max_points for t in old.tasks] == [15, 10, 20, 15, 20, 20]
        assert {t.id: [c.points for c in t.cases] for t in old.tasks if t.id != "15.2"} == {
            "15.1": [4, 4, 4], "15.3": [4, 4, 4, 4], "15.4": [4, 4, 4], "15.5": [4, 4, 4, 4], "15.6": [16]}
    assert LAB.as_of(2).task("15.6").answer_points == 1 and LAB.as_of(1).task("15.6").answer_points == 4
    assert [c.points for c in LAB.as_of(3).task("15.3").cases] == [3, 3, 3, 3]


def test_the_note_of_a_release_2_notebook_says_the_new_tasks_were_not_graded():
    built = releases.built_from({"cells": [{"cell_type": "markdown", "source": LAB.releases[1].marker}],
                                 "metadata": {}}, LAB)
    note = releases.note(LAB, built)
    assert built.release == 2 and "Release 3 (2026-12-02): Two new tasks" in note
    assert "the tasks added since (15.7, 15.8, 15.9 and 15.10) were not part of your handout and are not graded" in note


def test_a_declaration_must_keep_every_releases_total():
    from dataclasses import replace

    third = LAB.releases[2]
    short = replace(third, previous=tuple(replace(t, answer_points=t.answer_points - 1) if t.id == "15.1" else t
                                          for t in third.previous))
    with pytest.raises(ValueError, match="as of release 1 its tasks are worth 99 points"):
        replace(LAB, releases=LAB.releases[:2] + (short,) + LAB.releases[3:])


@pytest.mark.slow  # an earlier frozen release: the lab's latest frozen release keeps its marks on every run
@pytest.mark.notebook
def test_the_frozen_release_2_handout_keeps_its_marks(tmp_path):
    result = grade_submission(RELEASED, LAB, tmp_path)
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == [] and result.release == 2
    assert [t.task_id for t in result.tasks] == ["15.1", "15.2", "15.3", "15.4", "15.5", "15.6"]
    assert result.score == LAB.as_of(2).auto_points == 94  # and the 6 written points, marked by hand
    assert "were not part of your handout" in result.notes[0]


@pytest.mark.notebook
def test_the_frozen_release_4_notebook_keeps_its_marks(tmp_path):
    """Release 4's solution notebook as it was (release 5 drew 15.6's models from the secret): full marks, 15.6's
    hidden case judged on models the grader drew."""
    result = grade_submission(RELEASED_4, LAB, tmp_path)
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == [] and result.release == 4 and len(result.tasks) == 9
    assert result.score == LAB.as_of(4).auto_points == 94  # and the 6 written points, marked by hand


@pytest.mark.slow
@pytest.mark.notebook
def test_the_frozen_release_5_notebook_keeps_its_marks(tmp_path):
    """Release 5's solution notebook as it was (release 6 drew 15.8's models from the secret): full marks as release
    5 (under -m slow: the release-4 notebook above already grades an earlier release on every run)."""
    result = grade_submission(RELEASED_5, LAB, tmp_path)
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == [] and result.release == 5 and len(result.tasks) == 9
    assert result.score == LAB.as_of(5).auto_points == 94  # and the 6 written points, marked by hand


# ---------------------------------------------------------------- 15.7: the prefix cache

def test_the_hand_counts_of_the_notebook_are_the_references(solution):
    assert _counts(replay(ReferencePrefixCache(6, 4), HAND_PREFIX)) == HAND_PREFIX_COUNTS
    assert _counts(replay(solution["PrefixCache"](6, 4), HAND_PREFIX)) == HAND_PREFIX_COUNTS


@pytest.mark.parametrize("draw", range(3))
def test_the_solution_equals_the_reference_on_every_case_and_redrawn_seeds(solution, draw):
    for case in LAB.task("15.7").cases:
        spec = dict(case.spec, seed=case.spec["seed"] + 1000 * draw) if "seed" in case.spec else dict(case.spec)
        if draw and "seed" not in spec:
            continue
        num_blocks, block_size, ops = trace_from(spec)
        steps = replay(solution["PrefixCache"](num_blocks, block_size), ops)
        assert _counts(steps) == _counts(replay(ReferencePrefixCache(num_blocks, block_size), ops))
        assert judge.check_prefix(spec, json.dumps(steps).encode(), EXACT) == []
        found = summary(ops, steps, block_size)
        assert found["reused"] > 0 and found["computed"] > 0 and (found["evictions"] > 0), case.id


def test_the_cases_hold_what_their_names_promise():
    shared, chats, small, hand = LAB.task("15.7").cases
    _, size, ops = trace_from(shared.spec)
    bare = [op for op in ops if op[0] == "allocate" and len(op[2]) <= shared.spec["user_tokens"][1]]
    assert bare, "some requests ask a common question with no system prompt"
    steps = replay(ReferencePrefixCache(small.spec["num_blocks"], 4), trace_from(small.spec)[2])
    assert steps[-1]["evictions"] > 100
    steps = replay(ReferencePrefixCache(6, 4), _PREFIX_OPS)
    assert "raised" in [s["result"] for s in steps] and steps[2]["result"] == 1  # the last token's block computed
    assert max(len(op[2]) for op in trace_from(chats.spec)[2] if op[0] == "allocate") > 60


def _mutated(solution_source: str, old: str, new: str):
    from util.labs.lab15.paged import OutOfBlocks

    assert solution_source.count(old) == 1
    namespace = {"OutOfBlocks": OutOfBlocks}
    exec(solution_source.replace(old, new), namespace)
    return namespace["PrefixCache"]


@pytest.fixture(scope="module")
def prefix_source():
    """The solution's PrefixCache cell, as the build reads it (the mistakes are replacements in it)."""
    notebook = json.loads((Path(__file__).resolve().parents[2] / "solutions" / LAB.notebook).read_text("utf-8"))
    [cell] = [c for c in notebook["cells"] if "".join(c["source"]).startswith("class PrefixCache")]
    return "".join(cell["source"])


def _verdicts(cls) -> list[list[str]]:
    out = []
    for case in LAB.task("15.7").cases:
        num_blocks, block_size, ops = trace_from(case.spec)
        try:
            steps = replay(cls(num_blocks, block_size), ops)
        except Exception as exc:  # the mistake's own crash: the case fails in the kernel
            out.append([f"raised {type(exc).__name__}"])
            continue
        out.append(judge.check_prefix(case.spec, json.dumps(steps).encode(), EXACT))
    return out


def test_a_hash_that_ignores_the_parent_reuses_a_block_after_another_prefix(prefix_source):
    cls = _mutated(prefix_source, "return hash((parent, tuple(block_tokens)))", "return hash(tuple(block_tokens))")
    found = _verdicts(cls)
    assert [bool(f) for f in found] == [True, False, False, True]
    assert "the same tokens after another prefix" in found[0][0] and "after another prefix" in found[3][0]


def test_evicting_a_held_block_is_caught_on_every_case(prefix_source):
    cls = _mutated(prefix_source, "            block = next(iter(self.evictable))\n            del self.evictable[block]\n",
                   "            block = next(iter(self.names))\n            self.evictable.pop(block, None)\n")
    found = _verdicts(cls)
    assert all(found) and all("while another live sequence still reads it" in f[0] for f in found)


def test_lru_by_the_first_freed_block_and_a_forged_record_fail_beside_the_honest_one(solution):
    case = LAB.task("15.7").cases[2]
    num_blocks, block_size, ops = trace_from(case.spec)
    honest = replay(solution["PrefixCache"](num_blocks, block_size), ops)
    assert judge.check_prefix(case.spec, json.dumps(honest).encode(), EXACT) == []
    forged = json.loads(json.dumps(honest))
    index = next(i for i, s in enumerate(forged) if s["evictions"])
    for step in forged[index:]:
        step["evictions"] -= 1
    [problem] = judge.check_prefix(case.spec, json.dumps(forged).encode(), EXACT)
    assert "evictions() is" in problem and "fewer than a correct prefix cache's" in problem

    class FirstBlockFirst(solution["PrefixCache"]):  # frees its blocks first to last: another LRU order
        def free(self, seq):
            table = self.tables[seq]
            self.tables[seq] = table[::-1]
            super().free(seq)

    found = replay(FirstBlockFirst(num_blocks, block_size), ops)
    assert trace_problems(ops, found, num_blocks, block_size) == []
    assert judge.check_prefix(case.spec, json.dumps(found).encode(), EXACT) != []


def test_traces_never_run_out_of_blocks():
    for seed in range(20):
        ops = prefix_trace(seed, 30, 48, 4, questions=3, aligned=True)
        assert "raised" not in [s["result"] for s in replay(ReferencePrefixCache(48, 4), ops)]


# ---------------------------------------------------------------- 15.8: speculative sampling

def test_sample_is_the_inverse_cumulative_distribution():
    weights = torch.tensor([0.0, 2.0, 1.0, 1.0], dtype=torch.float64)
    assert [sample(weights, u) for u in (0.0, 0.49, 0.5, 0.74, 0.75, 0.999)] == [1, 1, 2, 2, 3, 3]
    with pytest.raises(ValueError):
        sample(torch.zeros(3), 0.5)
    draws = Uniforms([0.25, 0.5])
    assert (draws(), draws(), draws.used) == (0.25, 0.5, 2)
    with pytest.raises(RuntimeError, match="used up"):
        draws()
    assert uniform_stream(3, 4)() == float(np.random.default_rng(3).random(4)[0])


def test_the_solution_is_the_reference_on_the_same_draws(solution):
    secret.install(b"\x07" * 32)
    try:
        for number, run in enumerate(LAB.task("15.8").cases[0].spec["runs"]):
            cfg, target, draft, prompt = judge.sampling_models(run, "run", number)
            values = np.random.default_rng(7).random(400).tolist()
            expected = speculative_sampling(target, draft, prompt, run["n"], run["k"], Uniforms(values))
            counted, draws = CountingTarget(target), Uniforms(values)
            tokens = solution["speculative_sample"](counted, draft, torch.tensor([prompt]), run["n"], run["k"], draws)
            assert tokens[0].tolist() == expected["tokens"] and draws.used == expected["used"]
            assert counted.inputs == expected["calls"] and 0 < expected["accepted"] < run["n"]
    finally:
        secret.renew()


def test_the_cases_name_no_seed_and_a_fresh_secret_draws_other_models():
    """Release 6: 15.8's cases give shapes, noise and lengths only; under two secrets the judge draws other weights
    and another prompt for both cases, and under one secret the same (its reference and the student's run see one
    setting)."""
    exact, distribution = (dict(c.spec) for c in LAB.task("15.8").cases)
    assert all(not {"seed", "draft_seed"} & set(run) for run in exact["runs"] + [distribution["distribution"]])
    torch.set_num_threads(1)
    drawn = []
    for value in (b"\x01" * 32, b"\x02" * 32, b"\x01" * 32):
        secret.install(value)
        drawn.append((judge.sampling_models(exact["runs"][0], "run", 0), judge.distribution_setting(distribution)))
    secret.renew()
    (first, first_d), (second, second_d), (again, again_d) = drawn
    assert first[3] != second[3] and len(first[3]) == exact["runs"][0]["prompt"] == 8
    assert not torch.equal(first[1].head.weight, second[1].head.weight)
    assert not torch.equal(first_d[1].head.weight, second_d[1].head.weight)
    assert torch.equal(first[1].head.weight, again[1].head.weight) and first[3] == again[3]
    assert torch.equal(first[2].head.weight, again[2].head.weight)
    assert torch.equal(first_d[1].head.weight, again_d[1].head.weight) and (first_d[4] == again_d[4]).all()
    assert not torch.equal(first[2].head.weight, first[1].head.weight)       # the draft: the target with noise
    other = judge.sampling_models(exact["runs"][0], "run", 1)                # another run, other models
    assert not torch.equal(other[1].head.weight, first[1].head.weight)


def _first_token_power(setting, samples):
    cfg, target, draft, prompt, truth = setting
    with torch.no_grad():
        q = torch.softmax(draft(torch.tensor([prompt]))[0, -1].double(), -1).numpy()
    return truth[0], q, judge.residual_power(truth[0], q, samples)


@pytest.mark.parametrize("value", [bytes([i]) * 32 for i in (3, 4, 5)])
def test_every_kept_distribution_draw_tells_the_residual_from_p(value):
    """What the screen keeps, on three secrets: the exact distribution sums to one and equals the target's softmax
    (n = 1), and the chi-square the residual mistake expects over the case's runs is far beyond the threshold (a
    chance below 1e-6 of missing it)."""
    spec = dict(LAB.task("15.8").cases[1].spec)
    torch.set_num_threads(1)
    secret.install(value)
    try:
        setting = judge.distribution_setting(spec)
    finally:
        secret.renew()
    p, q, (noncentrality, miss) = _first_token_power(setting, spec["samples"])
    with torch.no_grad():
        softmax = torch.softmax(setting[1](torch.tensor([setting[3]]))[0, -1].double(), -1).numpy()
    assert np.allclose(p, softmax, rtol=0, atol=1e-15) and abs(p.sum() - 1) < 1e-12
    assert miss < judge.DISTRIBUTION_MISS and noncentrality > 100
    overlap = np.minimum(p, q)
    mistaken = overlap + (1 - overlap.sum()) * p                              # a rejection resampled from p
    assert spec["samples"] * ((mistaken - p) ** 2 / p).sum() >= noncentrality * 0.9  # pooling only lowers it


def test_the_distribution_screen_stops_after_its_bound_and_keeps_the_least_likely_miss(monkeypatch):
    """A chance no draw reaches: exactly :data:`judge.DISTRIBUTION_DRAWS` settings are drawn (never more), and the
    kept one is the draw whose test is least likely to miss the residual mistake."""
    spec = dict(LAB.task("15.8").cases[1].spec)
    drawn = []
    real = judge.sampling_models

    def counting(run, *names):
        drawn.append(names)
        return real(run, *names)

    torch.set_num_threads(1)
    monkeypatch.setattr(judge, "sampling_models", counting)
    monkeypatch.setattr(judge, "DISTRIBUTION_MISS", 0.0)
    kept = judge.distribution_setting(spec)
    assert len(drawn) == judge.DISTRIBUTION_DRAWS == 24 and len(set(drawn)) == 24

    def setting(names):
        cfg, target, draft, prompt = real(spec["distribution"], *names)
        return cfg, target, draft, prompt, judge._exact_marginals(target, prompt, 1)

    misses = [_first_token_power(setting(names), spec["samples"])[2][1] for names in drawn]
    assert _first_token_power(kept, spec["samples"])[2][1] == min(misses)
    assert max(misses) > 1e-6         # some draws would miss the mistake: the screen is needed


@pytest.fixture(scope="module")
def judged():
    with serving():
        yield


def _saved(function) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, function=np.frombuffer(cloudpickle.dumps(function), dtype=np.uint8))
    return buffer.getvalue()


@pytest.mark.slow
def test_the_sampling_judge_gives_the_solution_full_marks_on_two_more_fresh_secrets(solution, judged):
    """Both cases on two fresh secrets (other models, prompts and draws each time; the default run judges one)."""
    for _ in range(2):
        secret.renew()
        for case in LAB.task("15.8").cases:
            assert judge.check_sampling(dict(case.spec), _saved(solution["speculative_sample"]), Tolerance()) == []


def test_the_sampling_judge_passes_the_solution_on_a_fresh_secret_and_fails_the_residual_mistake(solution, judged):
    exact, distribution = (dict(c.spec) for c in LAB.task("15.8").cases)
    one_run = {"runs": exact["runs"][:1]}
    secret.renew()
    assert judge.check_sampling(exact, _saved(solution["speculative_sample"]), Tolerance()) == []
    assert judge.check_sampling(distribution, _saved(solution["speculative_sample"]), Tolerance()) == []

    def from_p(target, draft, prompt, n, k, draws):
        import torch

        from util.labs.lab15.speculative import sample

        ids, decided = prompt, []
        while len(decided) < n:
            m = min(k, n - len(decided))
            proposal, qs = ids, []
            for _ in range(m):
                q = torch.softmax(draft(proposal)[0, -1].double(), dim=-1)
                qs.append(q)
                proposal = torch.cat([proposal, torch.tensor([[sample(q, draws())]])], dim=1)
            start = ids.shape[1]
            p = torch.softmax(target(proposal)[0, start - 1:].double(), dim=-1)
            drafted = proposal[0, start:].tolist()
            a = 0
            while a < m and draws() < p[a, drafted[a]] / qs[a][drafted[a]]:
                a += 1
            take = (drafted[:a] + [sample(p[a], draws())])[:n - len(decided)]
            decided += take
            ids = torch.cat([ids, torch.tensor([take])], dim=1)
        return torch.tensor([decided])

    problems = judge.check_sampling(one_run, _saved(from_p), Tolerance())
    assert "differ from the grader's own speculative sampling on the same uniform draws" in problems[-1]
    [problem] = judge.check_sampling(distribution, _saved(from_p), Tolerance())
    assert "do not follow the target's own sampling distribution" in problem and "max(0, p - q)" in problem


def test_correct_sampling_in_another_draw_order_passes_only_the_distribution(judged):
    def own_order(target, draft, prompt, n, k, draws):  # one draw per token of plain sampling from the target
        import torch

        from util.labs.lab15.speculative import sample

        ids = prompt
        for _ in range(n):
            p = torch.softmax(target(ids)[0, -1].double(), dim=-1)
            ids = torch.cat([ids, torch.tensor([[sample(p, draws())]])], dim=1)
        return ids[:, prompt.shape[1]:]

    exact, distribution = (dict(c.spec) for c in LAB.task("15.8").cases)
    assert judge.check_sampling(distribution, _saved(own_order), Tolerance()) == []
    assert judge.check_sampling({"runs": exact["runs"][:1]}, _saved(own_order), Tolerance()) != []
