"""Lab 16's release 3: task 16.7, pruning a residual network, and what the release changes for earlier notebooks.

The course's ``ResidualNet`` by hand (its counts, the notebook's groups), the grader's groups against the solution's
graph-traced ones on every case and on random architectures, the grader's own cut (``pruned_config``) against the
solution's network on every call, the examples' mistakes caught on every case under fresh weights, the networks
drawn from the secret, and the judge through the grader's real judge path, as root and as an unprivileged grader:
the honest function passes (timed too), an example's mistake fails saying why, a function that reaches for the
grader's own groups in its student process finds them absent, and a right network whose forward does its work
four times fails the timing (the grader's clock, not the student's). The frozen release-2 handout keeps its marks.
"""
from __future__ import annotations

import random
import sys
from pathlib import Path

import cloudpickle
import pytest
import torch
from judged_files import judge_files, save_case

from grader.author.solution import solution_namespace
from grader.core import releases
from grader.execute import confinement
from grader.grade.submission import grade_submission
from util.judging import secret
from util.labs import get_lab, grader_only
from util.labs.lab16 import judge_residual
from util.labs.lab16.costs import count_macs, count_params
from util.labs.lab16.judge_residual import calls, judge_call, networks, pruned_config, reference_groups
from util.labs.lab16.mistakes import MISTAKES
from util.labs.lab16.public_checks import RESIDUAL_GROUPS, RESIDUAL_MACS, RESIDUAL_PARAMS, _tiny_residual
from util.labs.lab16.residual import GRID, ResidualNet, build_residual, config_from_state, convolutions, masked_residual
from util.labs.lab16.residual_harness import _answer, _network

cloudpickle.register_pickle_by_value(sys.modules[__name__])   # as a notebook's functions are: by value
LAB = get_lab("lab16")
TASK = LAB.task("16.7")
RELEASED = Path(__file__).resolve().parents[1] / "released" / "lab16_release2" / "lab16_compression.ipynb"
bwrap = pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here")


def _edited(name: str, variant: int | None = None):
    mistake = next(m for m in MISTAKES if m.name == name)
    replacements = mistake.replacements if variant is None else mistake.variants[variant]

    def edit(source: str) -> str:
        for old, new in replacements:
            assert source.count(old) <= 1
            source = source.replace(old, new)
        return source

    return solution_namespace("lab16", ("16.7",), edit=edit)["prune_residual"]


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab16", ("16.7",))


def _verdicts(function, spec, seed: int) -> list[str]:
    """One case judged in this process (the harness's functions, no student process, no timing): its first problem
    or none."""
    from util.labs.lab16.judge_residual import _npz

    images = torch.randn(32, 1, 8, 8, generator=torch.Generator().manual_seed(seed))
    for index, network in enumerate(networks(spec)):
        net = current = build_residual(network["arch"], seed + index)
        for conv, keep in calls(network):
            given = current if network.get("chain") else net
            state = _npz({key: value.numpy() for key, value in given.state_dict().items()})
            try:
                reply, body = _answer(function(_network({"config": given.config()}, state), conv, keep))
            except Exception as exc:  # noqa: BLE001 - a mistake may raise anything, as the harness reports it
                reply, body = {"raised": f"{type(exc).__name__}: {exc}"}, b""
            current, found = judge_call(given, conv, keep, reply, body, images)
            if found:
                return found
    return []


# ---------------------------------------------------------------- the release

def test_release_3_adds_a_task_whose_points_came_from_four_others():
    assert LAB.release >= 3 and LAB.tasks_since(2)[:1] == ("16.7",) and "16.7" not in LAB.tasks_since(3)
    for release in (1, 2):
        old = LAB.as_of(release)
        assert [t.id for t in old.tasks] == ["16.1", "16.2", "16.3", "16.4", "16.5", "16.6"]
        assert old.max_points == LAB.max_points == 100
        assert [t.max_points for t in old.tasks] == [15, 20, 16, 16, 20, 13]
        assert {t.id: [c.points for c in t.cases] for t in old.tasks if t.id != "16.5"} == {
            "16.1": [2.5] * 4, "16.2": [5] * 3, "16.3": [3] * 4, "16.4": [3] * 4, "16.6": [5] * 2}  # as it was
    three = LAB.as_of(3)   # release 4 took points from 16.7 too (test_lab16_schedule.py)
    assert {t.id: [c.points for c in t.cases] for t in three.tasks if t.id != "16.5"} == {
        "16.1": [1.5] * 4, "16.2": [4] * 3, "16.3": [2.5] * 4, "16.4": [2] * 4, "16.6": [4] * 2, "16.7": [4] * 3}
    assert [t.max_points for t in three.tasks] == [11, 17, 14, 12, 20, 11, 15]


def test_the_note_of_a_release_2_notebook_says_the_new_task_was_not_graded():
    built = releases.built_from({"cells": [{"cell_type": "markdown", "source": LAB.releases[1].marker}],
                                 "metadata": {}}, LAB)
    note = releases.note(LAB, built)
    assert built.release == 2 and "Release 3 (2026-12-02): A new task, 16.7" in note
    assert "the tasks added since (16.7, 16.8 and 16.9) were not part of your handout and are not graded" in note


@pytest.mark.slow  # an earlier frozen release: the lab's latest frozen release keeps its marks on every run
@pytest.mark.notebook
def test_the_frozen_release_2_handout_keeps_its_marks(tmp_path):
    result = grade_submission(RELEASED, LAB, tmp_path)
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == [] and result.release == 2
    assert [t.task_id for t in result.tasks] == ["16.1", "16.2", "16.3", "16.4", "16.5", "16.6"]
    assert result.score == LAB.as_of(2).auto_points == 95  # and the 5 written points, marked by hand
    assert {t.task_id: t.max_score for t in result.tasks} == {"16.1": 15, "16.2": 20, "16.3": 13, "16.4": 16,
                                                              "16.5": 18, "16.6": 13}
    assert "were not part of your handout" in result.notes[0]   # 16.7 and, since releases 4 and 5, 16.8 and 16.9


# ---------------------------------------------------------------- the network and its groups

def test_the_notebooks_network_by_hand():
    net = build_residual(seed=0)
    stem, block1 = 16 * 9 + 2 * 16, 2 * (16 * 16 * 9 + 2 * 16)
    block2 = 24 * 16 * 9 + 2 * 24 + 32 * 24 * 9 + 2 * 32 + 32 * 16 + 2 * 32
    block3 = 16 * 32 * 9 + 2 * 16 + 16 * 32 + 2 * 16
    assert count_params(net) == stem + block1 + block2 + block3 + 32 * 10 + 10 == RESIDUAL_PARAMS["dense"]
    assert count_macs(net) == 64 * (16 * 9 + 2 * 16 * 16 * 9) + 16 * (24 * 16 * 9 + 32 * 24 * 9 + 32 * 16
                                                                       + 16 * 32 * 9 + 16 * 32) + 320 \
        == RESIDUAL_MACS["dense"]
    assert reference_groups(net.config()) == RESIDUAL_GROUPS
    assert convolutions(net.config()) == ["stem", "block1.conv1", "block1.conv2", "block2.conv1", "block2.conv2",
                                          "block2.short", "block3.left", "block3.right"]
    weights = torch.cat([m.weight.detach().flatten() for m in net.modules() if isinstance(m, torch.nn.Conv2d)])
    assert torch.equal(weights * GRID, torch.round(weights * GRID))   # importances exact in float32
    assert torch.equal(build_residual(seed=0).block2.short.weight, net.block2.short.weight)
    with pytest.raises(ValueError, match="may not follow a concat"):
        ResidualNet(blocks=[["concat", 4, 4], ["basic", 4]])


def _random_arch(rng: random.Random) -> dict:
    blocks, previous = [], None
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(["down", "concat"] if previous == "concat" else ["basic", "down", "concat"])
        blocks.append([kind, *(rng.randint(2, 9) for _ in range(1 if kind == "basic" else 2))])
        previous = kind
    return {"stem": rng.randint(2, 9), "blocks": blocks}


def test_the_solutions_traced_groups_are_the_architectures_on_every_case_and_at_random(solution):
    rng = random.Random(0)
    archs = [dict(n["arch"]) for c in TASK.cases for n in networks(c.spec)] + [_random_arch(rng) for _ in range(40)]
    for arch in archs:
        net = build_residual(arch, seed=1)
        groups = solution["channel_groups"](net)
        assert groups == reference_groups(net.config()), arch
        assert sorted(name for g in groups for name in g) == sorted(convolutions(net.config()))


def test_the_solution_cuts_as_the_grader_counts_and_masks_at_random(solution):
    rng = random.Random(1)
    for _ in range(25):
        net = build_residual(_random_arch(rng), seed=rng.randrange(1000))
        conv = rng.choice(convolutions(net.config()))
        keep = rng.randint(1, net.get_submodule(conv).out_channels)
        group, smaller = solution["prune_residual"](net, conv, keep)
        config = pruned_config(net.config(), group, keep)
        shapes = {key: tuple(value.shape) for key, value in smaller.state_dict().items()}
        assert config_from_state(shapes, net.config()["blocks"]) == config
        assert (count_params(smaller), count_macs(smaller)) == (count_params(ResidualNet(**config)),
                                                                count_macs(ResidualNet(**config).eval()))
        x = torch.randn(8, 1, 8, 8)
        with torch.no_grad():
            found, wanted = smaller(x), masked_residual(net, group, keep)(x)
        assert float((found - wanted).abs().max()) <= 1e-5 * float(wanted.abs().max())


def test_the_hand_check_passes_the_solution_and_fails_each_mistake(solution):
    assert _tiny_residual(solution["prune_residual"]) is None
    assert "expected ['block1.conv2', 'stem']" in _tiny_residual(_edited("residual_pruned_on_one_side"))


@pytest.mark.parametrize("draw", range(3))
def test_the_solution_passes_every_case_and_each_mistake_fails_every_case(solution, draw):
    """On weights drawn anew (as every grading draws them), in every way the mistakes' declarations allow."""
    mistakes = {(name, variant): _edited(name, variant) for name in ("residual_pruned_on_one_side",
                                                                      "group_ranked_by_first_layer")
                for variant in (None, 0)}
    for case in TASK.cases:
        seed = 1000 * draw + len(case.id)
        assert _verdicts(solution["prune_residual"], case.spec, seed) == [], case.id
        for (name, variant), function in mistakes.items():
            found = _verdicts(function, case.spec, seed)
            assert found, (name, variant, case.id)
            if name == "group_ranked_by_first_layer":
                assert "summed over the" in found[0], found
            else:
                assert "named the group" in found[0] or "raised" in found[0], found


def test_the_networks_come_from_the_secret_not_the_spec():
    spec = TASK.cases[0].spec
    before = judge_residual.weights_seed(spec)
    assert before == judge_residual.weights_seed(spec) != judge_residual.weights_seed(TASK.cases[1].spec)
    secret.renew()
    assert judge_residual.weights_seed(spec) != before
    assert grader_only(Path("judge_residual.py")) and not grader_only(Path("residual.py"))
    assert not grader_only(Path("residual_harness.py"))


# ---------------------------------------------------------------- the judge, through the real judge path

def reaching_for_the_groups(model, conv, keep):
    """A function that asks for the grader's own groups (grader-only): in the student process it must find nothing."""
    from util.labs.lab16.judge_residual import reference_groups as graders

    return graders(model.config()), model


def slowed(solution_function):
    """``prune_residual`` that returns the right network with a forward that runs it four times: its tensors pass
    every structural check, and the grader's clock (wall and CPU) sees the work."""

    def prune(model, conv, keep):
        group, network = solution_function(model, conv, keep)
        plain = type(network).forward
        network.forward = lambda x: [plain(network, x) for _ in range(4)][-1]
        return group, network

    return prune


def test_unstructured_zeros_keep_every_shape_and_count_and_the_timer_warms_up():
    from util.labs.lab16.residual import best_latency, unstructured_like

    net = build_residual({"stem": 8, "blocks": [["basic", 8]]}, seed=2)
    sparse = unstructured_like(net, 500)
    weights = [m.weight for m in sparse.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    assert count_params(sparse) == count_params(net) and count_macs(sparse) == count_macs(net)
    assert sum(int((w == 0).sum()) for w in weights) == count_params(net) - 500
    calls = []

    class Counted(torch.nn.Module):
        def forward(self, x):
            calls.append(1)
            return x

    assert best_latency(Counted(), torch.zeros(1), rounds=3, calls=4) >= 0 and len(calls) == 1 + 3 * 4


@bwrap
@pytest.mark.parametrize("as_user", [False, True], ids=["root", "user"])
def test_the_judge_prunes_with_the_function_in_a_student_process_and_times_it(solution, tmp_path, as_user):
    case = TASK.cases[2].id   # the timed case
    functions = {"honest": solution["prune_residual"], "one_side": _edited("residual_pruned_on_one_side"),
                 "reaching": reaching_for_the_groups, "slowed": slowed(solution["prune_residual"])}
    saved = {name: ("16.7", *save_case("lab16", "16.7", case, function, tmp_path)[:2])
             for name, function in functions.items()}
    found = judge_files("lab16", saved, tmp_path, as_user=as_user)
    assert found["honest"] == []
    assert found["one_side"] and "named the group" in found["one_side"][0]
    assert found["reaching"] and "raised" in found["reaching"][0] and "judge_residual" in found["reaching"][0]
    assert found["slowed"] and "as fast as the dense one" in found["slowed"][0], found["slowed"]
