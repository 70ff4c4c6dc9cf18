"""Lab 15's release 4: task 15.9, chunked prefill.

The engine's rules (what a decision may be, when a request gets its first token, TTFT and TPOT), the grader's
policy against the notebook's hand-worked table, the solution equal to the grader's policy on every case under
fresh grading secrets (and the example's mistake different on each), the traces drawn from the secret, and the
judge through the grader's real judge path, as root and as an unprivileged grader: the honest scheduler passes,
the one that starves decodes fails, and a scheduler that reaches for the grader's own policy in its student process
finds it absent (beside an honest control that plays the same policy straight). The attack kit
(``tests/test_attack_kit.py -m slow``) attacks 15.9 by its ``judged=("function",)``.
"""
from __future__ import annotations

import sys

import cloudpickle
import pytest
from judged_files import judge_files, save_case

from grader.author.solution import solution_namespace
from grader.execute import confinement
from util.judging import secret
from util.labs import get_lab
from util.labs.lab15 import judge
from util.labs.lab15.chunked import ChunkConfig, Chunks, chunked_requests, simulate_chunked
from util.labs.lab15.judge_reference import reference_chunked
from util.labs.lab15.mistakes import MISTAKES
from util.labs.lab15.public_checks import HAND_CHUNK_REQUESTS, HAND_CHUNKS
from util.labs.lab15.serving import GPT2_SMALL_A100, Request

cloudpickle.register_pickle_by_value(sys.modules[__name__])   # as a notebook's functions are: by value
LAB = get_lab("lab15")
TASK = LAB.task("15.9")
bwrap = pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here")


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab15", ("15.9",))


@pytest.fixture(scope="module")
def starving():
    """The solution with the example ``chunk_starves_decodes`` applied."""
    mistake = next(m for m in MISTAKES if m.name == "chunk_starves_decodes")

    def edit(source: str) -> str:
        for old, new in mistake.replacements:
            source = source.replace(old, new)
        return source

    return solution_namespace("lab15", ("15.9",), edit=edit)["schedule_chunked"]


def _pairs(run):
    return [(it["decode"], it["prefill"]) for it in run.iterations]


# ---------------------------------------------------------------- the release and the engine

def test_release_4_adds_chunked_prefill_and_every_release_keeps_its_points():
    assert LAB.tasks_since(3) == ("15.9", "15.10") and LAB.tasks_since(4) == ("15.10",) and TASK.judged == ("function",)
    assert LAB.max_points == LAB.as_of(3).max_points == LAB.as_of(2).max_points == 100
    assert [c.points for c in LAB.task("15.3").cases] == [2, 2, 2, 2] == [c.points for c in LAB.task("15.5").cases]
    assert [c.points for c in LAB.as_of(3).task("15.3").cases] == [3, 3, 3, 3]
    assert [c.points for c in LAB.as_of(2).task("15.5").cases] == [4, 4, 4, 4]
    assert TASK.max_points == 8 and "15.9" not in [t.id for t in LAB.as_of(3).tasks]


def test_the_notebooks_table_is_the_grader_policy(solution):
    requests = chunked_requests(0, {"requests": HAND_CHUNK_REQUESTS})
    for schedule in (reference_chunked, solution["schedule_chunked"]):
        run = simulate_chunked(schedule, requests, ChunkConfig(8, 3))
        assert _pairs(run) == HAND_CHUNKS and run.deadlock is None
    # first tokens at the end of the iteration of each prompt's last chunk; TPOT over the tokens after the first
    assert [run.first_token[i] for i in range(4)] == [run.iterations[k]["start"] + run.iterations[k]["ns"]
                                                      for k in (0, 0, 2, 3)]
    assert run.tpot()[0] == (run.finish[0] - run.first_token[0]) / 3
    assert run.summary()["ttft_p50_ns"] == run.first_token[1]


def test_an_iteration_costs_its_chunks_and_decodes():
    run = simulate_chunked(reference_chunked, [Request(0, 0, 5, 3), Request(1, 0, 9, 1)], ChunkConfig(6, 2))
    first, second = run.iterations[:2]
    assert first["prefill"] == [[0, 5], [1, 1]] and second == {**second, "decode": [0], "prefill": [[1, 5]]}
    assert first["ns"] == GPT2_SMALL_A100.iteration_ns([(5, 5), (1, 1)])
    assert second["ns"] == GPT2_SMALL_A100.iteration_ns([(1, 6), (5, 6)])   # the chunk after 1 prefilled token


@pytest.mark.parametrize(("decision", "message"), [
    (Chunks((), ((0, 7),)), "a chunk holds 1 to 5 tokens"),
    (Chunks((0,), ()), "request 0 is not decoding"),
    (Chunks((), ((0, 5), (1, 5), (2, 1))), "the budget is 8"),
    (Chunks((), ((0, 2), (1, 2), (2, 2))), "at most 2 may"),
    (Chunks((), ((0, 1), (0, 1))), "named twice"),
    (Chunks((), ((9, 1),)), "neither waiting nor prefilling"),
    ({"decode": [], "prefill": [[0, 0]]}, "a chunk holds 1 to 5 tokens"),
    ([0], "schedule must return Chunks"),
])
def test_the_engine_refuses_an_infeasible_decision(decision, message):
    requests = [Request(0, 0, 5, 2), Request(1, 0, 6, 2), Request(2, 0, 3, 2)]
    with pytest.raises(ValueError, match=message):
        simulate_chunked(lambda view: decision, requests, ChunkConfig(8, 2))


def test_an_empty_batch_with_work_left_is_a_deadlock():
    run = simulate_chunked(lambda view: Chunks(), [Request(0, 5, 3, 2)], ChunkConfig(4, 1))
    assert run.deadlock and "nothing can change" in run.deadlock and run.iterations[-1]["start"] == 5


# ---------------------------------------------------------------- the cases, the secret and the mistake

@pytest.mark.parametrize("draw", range(2))
def test_the_solution_is_the_policy_and_the_mistake_is_not_on_every_case(solution, starving, draw):
    if draw:
        secret.renew()
    for case in TASK.cases:
        for config, requests in judge.chunk_traces(case.spec):
            expected = simulate_chunked(reference_chunked, requests, config)
            assert expected.deadlock is None and len(expected.finish) == len(requests)
            assert simulate_chunked(solution["schedule_chunked"], requests, config).iterations == expected.iterations
            assert simulate_chunked(starving, requests, config).iterations != expected.iterations, case.id


def test_the_traces_come_from_the_secret_not_the_spec():
    spec = TASK.cases[0].spec
    before = [[(r.arrival, r.prompt, r.output) for r in requests] for _, requests in judge.chunk_traces(spec)]
    assert before == [[(r.arrival, r.prompt, r.output) for r in requests] for _, requests in judge.chunk_traces(spec)]
    assert len(before) == spec["traces"] == len({tuple(t) for t in before})
    secret.renew()
    after = [[(r.arrival, r.prompt, r.output) for r in requests] for _, requests in judge.chunk_traces(spec)]
    assert not set(map(tuple, after)) & set(map(tuple, before))


# ---------------------------------------------------------------- the judge, through the real judge path

def reaching_for_the_policy(view):
    """A scheduler that asks for the grader's own policy (grader-only) and, in the kernel's absence of it, plays
    its own: in the grader's student process it must find nothing to import."""
    from util.labs.lab15.judge_reference import reference_chunked as graders

    return graders(view)


def playing_straight(view):
    """The honest control of :func:`reaching_for_the_policy`: the same policy, written here."""
    decode = [seq.id for seq in view.running if seq.remaining == 0]
    budget = view.config.max_tokens - len(decode)
    prefill = []
    for seq in view.running:
        if budget and seq.remaining:
            prefill.append((seq.id, min(seq.remaining, budget)))
            budget -= prefill[-1][1]
    count = len(view.running)
    for seq in view.waiting:
        if budget == 0 or count == view.config.max_running:
            break
        prefill.append((seq.id, min(seq.prompt, budget)))
        budget -= prefill[-1][1]
        count += 1
    return Chunks(tuple(decode), tuple(prefill))


@bwrap
@pytest.mark.parametrize("as_user", [False, True], ids=["root", "user"])
def test_the_judge_replays_the_scheduler_in_a_student_process(solution, starving, tmp_path, as_user):
    case = TASK.cases[1].id
    saved = {name: ("15.9", *save_case("lab15", "15.9", case, function, tmp_path)[:2])
             for name, function in (("honest", solution["schedule_chunked"]), ("starving", starving),
                                    ("reaching", reaching_for_the_policy), ("straight", playing_straight))}
    found = judge_files("lab15", saved, tmp_path, as_user=as_user)
    assert found["honest"] == [] and found["straight"] == []
    assert found["starving"] and "decoded" in found["starving"][0] and "decodes first" in found["starving"][0]
    assert found["reaching"] and "the engine raised" in found["reaching"][0]
    assert "judge_reference" in found["reaching"][0]
