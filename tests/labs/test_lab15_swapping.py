"""Lab 15's release 7: task 15.10, preemption by swapping.

The engine's rules (what a decision may be, what an iteration costs with blocks moved, the GPU and CPU pools, no
decode while swapped out), the grader's policy against the notebook's hand-worked table, the solution equal to the
grader's policy on every case under fresh grading secrets (and the example's mistake and its variant different on
the cases it names), the traces drawn from the secret, the judge's own replay of a record (a forged record over the
CPU pool or reading a swapped-out block is named), and the judge through the grader's real judge path as an
unprivileged grader (the honest scheduler passes, the mistake fails). The attack kit (``tests/test_attack_kit.py -m
slow``) attacks 15.10 by its ``judged=("function",)``.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import cloudpickle
import pytest
from judged_files import judge_files, save_case

from grader.author.solution import solution_namespace
from grader.core import releases
from grader.execute import confinement
from util.judging import secret
from util.labs import get_lab
from util.labs.lab15 import judge
from util.labs.lab15.judge_reference import reference_swapping
from util.labs.lab15.mistakes import MISTAKES
from util.labs.lab15.public_checks import HAND_SWAP_CONFIG, HAND_SWAP_REQUESTS, HAND_SWAPS
from util.labs.lab15.serving import GPT2_SMALL_A100, Request
from util.labs.lab15.swapping import SwapConfig, SwapDecision, simulate_swapping, swap_config_from, swap_requests

cloudpickle.register_pickle_by_value(sys.modules[__name__])   # as a notebook's functions are: by value
LAB = get_lab("lab15")
TASK = LAB.task("15.10")
KEYS = ("preempt", "swap_out", "swap_in", "decode", "admit")
RELEASED_6 = Path(__file__).resolve().parents[1] / "released" / "lab15_release6" / "lab15_serving.ipynb"
MISTAKE = next(m for m in MISTAKES if m.name == "swaps_when_recomputing_is_cheaper")
bwrap = pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here")


def _edited(replacements):
    def edit(source: str) -> str:
        for old, new in replacements:
            source = source.replace(old, new)
        return source

    return solution_namespace("lab15", ("15.10",), edit=edit)["schedule_swapping"]


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab15", ("15.10",))


@pytest.fixture(scope="module")
def mistaken():
    """The solution with the example ``swaps_when_recomputing_is_cheaper`` applied, and its variant."""
    return [_edited(MISTAKE.replacements), _edited(MISTAKE.variants[0])]


def _table(run):
    return [[it[key] for key in KEYS] for it in run.iterations]


# ---------------------------------------------------------------- the release and the engine

def test_release_7_adds_swapping_with_points_from_15_4_and_15_6():
    assert LAB.release == 7 and LAB.tasks_since(6) == ("15.10",) and TASK.judged == ("function",)
    assert LAB.max_points == LAB.as_of(6).max_points == LAB.as_of(3).max_points == 100
    assert TASK.max_points == 8 and [c.points for c in TASK.cases] == [2, 2, 2]
    assert [c.points for c in LAB.task("15.4").cases] == [2, 2, 2] and LAB.task("15.4").answer_points == 1
    assert [c.points for c in LAB.as_of(6).task("15.4").cases] == [3, 3, 3]
    assert [c.points for c in LAB.task("15.6").cases] == [8] and [c.points for c in LAB.as_of(6).task("15.6").cases] \
        == [12]
    assert "15.10" not in [t.id for t in LAB.as_of(6).tasks]
    built = releases.built_from({"cells": [{"cell_type": "markdown", "source": LAB.releases[5].marker}],
                                 "metadata": {}}, LAB)
    note = releases.note(LAB, built)
    assert built.release == 6 and "Release 7 (2026-12-02): A new task, 15.10" in note


def test_the_notebooks_table_is_the_grader_policy(solution):
    requests = swap_requests(0, {"requests": HAND_SWAP_REQUESTS})
    config = swap_config_from({"config": HAND_SWAP_CONFIG})
    for schedule in (reference_swapping, solution["schedule_swapping"]):
        run = simulate_swapping(schedule, requests, config)
        assert _table(run) == HAND_SWAPS and run.deadlock is None
    # the swap's 2 x 60 us against ~156 us of recompute; 3 blocks' 360 us are not cheaper
    assert config.swap_ns(1) == 120_000 < GPT2_SMALL_A100.iteration_ns([(4, 4)]) < config.swap_ns(3)
    moved = [it["moved"] for it in run.iterations]
    assert moved == [0, 1, 0, 1, 0] and run.blocks_moved == 2 and run.swaps == 1 and run.preemptions == 2
    assert run.cpu_blocks_in_use == [0, 1, 1, 0, 0] and run.blocks_in_use[1] == 5
    assert run.summary()["swaps"] == 1 and len(run.finish) == 3


def test_an_iteration_costs_its_work_and_every_block_moved():
    requests = swap_requests(0, {"requests": HAND_SWAP_REQUESTS})
    run = simulate_swapping(reference_swapping, requests, swap_config_from({"config": HAND_SWAP_CONFIG}))
    first, second, third, fourth = run.iterations[:4]
    assert second["ns"] == GPT2_SMALL_A100.iteration_ns([(1, 8), (1, 9)]) + 60_000     # 0 and 1 decode, 2 moves out
    assert fourth["ns"] == GPT2_SMALL_A100.iteration_ns([(10, 10)]) + 60_000   # 1 prefilled again (8 + 2), 2 moves in
    assert third["start"] == second["start"] + second["ns"]


    def scripted(view):
        if view.waiting:
            return SwapDecision(admit=tuple(seq.id for seq in view.waiting))
        if len(view.running) == 2:
            return SwapDecision(swap_out=(1,), decode=(0,))
        if view.swapped:
            return SwapDecision(swap_in=(1,))
        return SwapDecision(decode=tuple(seq.id for seq in view.running))

    run = simulate_swapping(scripted, [Request(0, 0, 3, 2), Request(1, 0, 3, 2)], SwapConfig(4, 4, 4, 8, 2, 1_000))
    # admitted; 1 swapped out beside 0's last decode; swapped in alone (no work: only its block's 1 us); decoded
    assert [it["ns"] for it in run.iterations] == [GPT2_SMALL_A100.iteration_ns([(3, 3), (3, 3)]),
                                                   GPT2_SMALL_A100.iteration_ns([(1, 4)]) + 1_000, 1_000,
                                                   GPT2_SMALL_A100.iteration_ns([(1, 4)])]
    assert [it["moved"] for it in run.iterations] == [0, 1, 1, 0] and run.cpu_blocks_in_use == [0, 1, 0, 0]
    assert run.finish[1] == run.iterations[-1]["start"] + run.iterations[-1]["ns"] and run.deadlock is None


@pytest.mark.parametrize(("decision", "message"), [
    (SwapDecision(decode=(2,)), "request 2 is swapped out .its blocks are in CPU memory"),
    (SwapDecision(swap_out=(0, 1)), "needs 5 CPU blocks and 1 are free"),
    (SwapDecision(swap_in=(0,)), "request 0 is running: swap_in takes swapped out requests only"),
    (SwapDecision(admit=(2,)), "request 2 is swapped out: admit takes waiting requests only"),
    (SwapDecision(preempt=(0,), swap_out=(0,)), "named twice"),
    (SwapDecision(decode=(0, 1)), "needs 1 GPU blocks"),
    ({"preempt": [], "swap_out": [], "swap_in": [2, 9], "decode": [], "admit": []}, "request 9 is not swapped out"),
    (SwapDecision(swap_in=(2,), decode=(0, 1)), "needs 2 GPU blocks"),
    ([0], "schedule must return a SwapDecision"),
])
def test_the_engine_refuses_an_infeasible_decision(decision, message):
    """After the example's iteration 1 (2 swapped out, 0 and 1 running with 5 blocks, the CPU block taken)."""
    requests = swap_requests(0, {"requests": HAND_SWAP_REQUESTS})
    config = swap_config_from({"config": {**HAND_SWAP_CONFIG, "cpu_blocks": 2}})
    calls = []

    def schedule(view):
        calls.append(view)
        if len(calls) <= 2:
            return reference_swapping(view)
        assert view.swapped[0].id == 2 and view.free_blocks == 0 and view.free_cpu_blocks == 1
        return decision

    with pytest.raises(ValueError, match=message):
        simulate_swapping(schedule, requests, config)


def test_an_empty_batch_with_work_left_is_a_deadlock():
    run = simulate_swapping(lambda view: SwapDecision(), [Request(0, 5, 3, 2)], SwapConfig(4, 1, 4, 8, 1, 10))
    assert run.deadlock and "nothing can change" in run.deadlock and run.iterations[-1]["start"] == 5


# ---------------------------------------------------------------- the cases, the secret and the mistake

def test_the_solution_is_the_policy_and_the_mistake_is_not_where_it_says(solution, mistaken):
    """On a fresh secret, every case: the grader's policy finishes with swaps and recomputes both, the solution is
    it iteration by iteration, and the mistake and its variant differ on exactly the cases the example names."""
    secret.renew()
    named = set(MISTAKE.expected_failures["15.10"][1:])
    for case in TASK.cases:
        for config, requests in judge.swap_traces(case.spec):
            expected = simulate_swapping(reference_swapping, requests, config)
            assert expected.deadlock is None and len(expected.finish) == len(requests)
            assert expected.swaps > 0 and expected.preemptions > expected.swaps, case.id
            assert simulate_swapping(solution["schedule_swapping"], requests, config).iterations == expected.iterations
            for wrong in mistaken:
                differs = simulate_swapping(wrong, requests, config).iterations != expected.iterations
                assert differs or case.id not in named, case.id
        assert max(simulate_swapping(reference_swapping, r, c).cpu_blocks_in_use[-1] for c, r in
                   judge.swap_traces(case.spec)) == 0    # every swapped request came back


def test_the_small_cpu_pool_bounds_the_swaps():
    """Case 2: its CPU pool decides: with room for every victim the same trace swaps more and recomputes less."""
    case = TASK.cases[1]
    for config, requests in judge.swap_traces(case.spec):
        run = simulate_swapping(reference_swapping, requests, config)
        roomy = simulate_swapping(reference_swapping, requests, SwapConfig(**{**config.__dict__, "cpu_blocks": 1000}))
        assert max(run.cpu_blocks_in_use) <= config.cpu_blocks == 8 < max(roomy.cpu_blocks_in_use)
        assert run.swaps < roomy.swaps and run.preemptions - run.swaps > roomy.preemptions - roomy.swaps


def test_the_traces_come_from_the_secret_not_the_spec():
    spec = TASK.cases[0].spec
    before = [[(r.arrival, r.prompt, r.output) for r in requests] for _, requests in judge.swap_traces(spec)]
    assert before == [[(r.arrival, r.prompt, r.output) for r in requests] for _, requests in judge.swap_traces(spec)]
    assert len(before) == spec["traces"] == len({tuple(t) for t in before})
    secret.renew()
    after = [[(r.arrival, r.prompt, r.output) for r in requests] for _, requests in judge.swap_traces(spec)]
    assert not set(map(tuple, after)) & set(map(tuple, before))


def test_the_judges_replay_names_a_forged_record_over_the_cpu_pool_or_reading_a_swapped_block():
    requests = swap_requests(0, {"requests": HAND_SWAP_REQUESTS})
    config = swap_config_from({"config": HAND_SWAP_CONFIG})
    honest = simulate_swapping(reference_swapping, requests, config).iterations
    assert judge.replayed_problems(honest, requests, config) == []
    over = [dict(it) for it in honest]
    over[1] = {**over[1], "swap_out": [1, 2], "decode": [0]}          # 4 blocks into a pool of 1
    [problem] = judge.replayed_problems(over, requests, config)
    assert problem.startswith("iteration 1 of the record") and "CPU blocks" in problem
    reading = [dict(it) for it in honest]
    reading[2] = {**reading[2], "preempt": [], "decode": [0, 2]}       # 2 is in CPU memory
    [problem] = judge.replayed_problems(reading, requests, config)
    assert "iteration 2" in problem and "swapped out" in problem


def test_the_judge_says_where_a_record_differs():
    requests = swap_requests(0, {"requests": HAND_SWAP_REQUESTS})
    config = swap_config_from({"config": HAND_SWAP_CONFIG})
    expected = simulate_swapping(reference_swapping, requests, config).iterations
    always = SwapConfig(**{**config.__dict__, "swap_ns_per_block": 1})     # a record where 1 is swapped too
    found = simulate_swapping(reference_swapping, requests, always).iterations
    body = json.dumps({"iterations": found, "deadlock": None}).encode()
    [problem] = judge._swap_problems({"record": len(body)}, body, expected, requests, config)
    assert problem.startswith("iteration 1 (at ") and "took another time or moved other blocks" in problem
    assert judge._swap_problems({"raised": "ValueError: x"}, b"", expected, requests, config)[0].startswith(
        "run again by the grader")
    assert judge._swap_problems({"record": 3}, b"{}x", expected, requests, config) == [judge.UNREADABLE]


@pytest.mark.slow
@pytest.mark.notebook
def test_the_frozen_release_6_notebook_keeps_its_marks(tmp_path):
    """Release 6's solution notebook as it was (before 15.10): full marks as release 6, 15.4 and 15.6 worth what
    they were (under -m slow: the release-4 notebook already grades an earlier release on every run)."""
    from grader.grade.submission import grade_submission

    result = grade_submission(RELEASED_6, LAB, tmp_path)
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == [] and result.release == 6 and len(result.tasks) == 9
    assert result.score == LAB.as_of(6).auto_points == 94  # and the 6 written points, marked by hand


# ---------------------------------------------------------------- the judge, through the real judge path

@bwrap
def test_the_judge_replays_the_scheduler_in_a_student_process(solution, mistaken, tmp_path):
    case = TASK.cases[2].id
    saved = {name: ("15.10", *save_case("lab15", "15.10", case, function, tmp_path)[:2])
             for name, function in (("honest", solution["schedule_swapping"]), ("always", mistaken[0]))}
    found = judge_files("lab15", saved, tmp_path, as_user=True)
    assert found["honest"] == []
    assert found["always"] and "swapped out" in found["always"][0] and "recompute_ns" in found["always"][0]
