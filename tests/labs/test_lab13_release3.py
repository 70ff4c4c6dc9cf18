"""Lab 13's release 3: tasks 13.8 (overlapped data parallelism) and 13.9 (ZeRO in mixed precision), the grader's
hold that makes overlap observable from outside the student's code, 13.5's tolerance that allows for the
parameter's own rounding, and what the release changes for notebooks of earlier releases.

The examples and the solution are graded by ``tests/test_labs.py``; the hostile functions against 13.8's judge
are in ``test_lab13_judge_walls.py``; the frozen handout of release 2 below.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from grader.author.solution import solution_namespace
from grader.core import releases
from grader.grade.submission import grade_submission
from util.labs import get_lab
from util.labs.lab13 import hold, judge, judge_reference
from util.labs.lab13.nets import batch, build_mlp
from util.labs.lab13.ranks import RankError, run_ranks

LAB = get_lab("lab13")
RELEASED = Path(__file__).resolve().parents[1] / "released" / "lab13_release2" / "lab13_parallelism.ipynb"


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab13", ("13.3", "13.4", "13.8", "13.9"))


# ---------------------------------------------------------------- the release

def test_release_3_adds_two_tasks_whose_points_came_from_six_exported_answers():
    assert LAB.release == 3 and LAB.tasks_since(2) == ("13.8", "13.9") and LAB.tasks_since(3) == ()
    for release in (1, 2):
        old = LAB.as_of(release)
        assert [t.id for t in old.tasks] == ["13.1", "13.2", "13.3", "13.4", "13.5", "13.6", "13.7"]
        assert [t.max_points for t in old.tasks] == [20, 10, 20, 10, 10, 15, 15] and old.max_points == 100
    assert [t.max_points for t in LAB.tasks] == [19, 8, 16, 10, 8, 11, 11, 12, 5] and LAB.max_points == 100
    old = {t.id: t for t in LAB.as_of(2).tasks}
    for task in LAB.tasks[:7]:  # every hidden case keeps its points; only the exported answers gave
        assert [c.points for c in task.cases] == [c.points for c in old[task.id].cases], task.id
    assert {t.id: old[t.id].answer_points - t.answer_points for t in LAB.tasks[:7]} == {
        "13.1": 1, "13.2": 2, "13.3": 4, "13.4": 0, "13.5": 2, "13.6": 4, "13.7": 4}
    assert [c.points for c in LAB.task("13.8").cases] == [1, 1, 1, 2] * 2


def test_the_note_of_a_release_2_notebook_says_the_new_tasks_were_not_graded():
    built = releases.built_from({"cells": [{"cell_type": "markdown", "source": LAB.releases[1].marker}],
                                 "metadata": {}}, LAB)
    note = releases.note(LAB, built)
    assert built.release == 2 and "Release 3 (2026-12-02): Two new tasks. 13.8" in note
    assert "(13.8 and 13.9) were not part of your handout and are not graded" in note


@pytest.mark.notebook
def test_the_frozen_release_2_handout_keeps_its_marks(tmp_path):
    result = grade_submission(RELEASED, LAB, tmp_path)
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == [] and result.release == 2
    assert [t.task_id for t in result.tasks] == ["13.1", "13.2", "13.3", "13.4", "13.5", "13.6", "13.7"]
    assert result.score == LAB.as_of(2).auto_points == 95  # and the 5 written points, marked by hand
    assert {t.task_id: t.max_score for t in result.tasks} == {"13.1": 17, "13.2": 10, "13.3": 20, "13.4": 8,
                                                              "13.5": 10, "13.6": 15, "13.7": 15}


# ---------------------------------------------------------------- 13.8: the hold

def test_the_hold_waits_for_the_buckets_that_close_before_the_first_layer():
    # MLP 16-24-12-6 in gradient-ready order: b2 24, W2 288, b1 48, W1 1,152, b0 96, W0 1,536 bytes
    model = build_mlp([16, 24, 12, 6])
    assert judge_reference.ready_sizes(model) == [24, 288, 48, 1152, 96, 1536]
    assert judge_reference.hold_floor(model, 300, 2) == (24 + 288 + 48 + 1152) // 2  # buckets [0, 1] and [2, 3]
    assert judge_reference.hold_floor(model, 300, 4) == 3 * 1512 // 4
    assert judge_reference.hold_floor(model, 1_000, 3) == 2 * 1512 // 3  # one bucket [0, 1, 2, 3]
    assert judge_reference.hold_floor(model, 2_000, 2) == 0  # the first bucket holds the first layer too
    held = hold.held_model(build_mlp([16, 24, 12, 6]), 756)
    assert [type(m).__name__ for m in held] == ["Linear", "Hold", "ReLU", "Linear", "ReLU", "Linear"]
    assert len(list(held.parameters())) == 6  # the hold has none
    assert hold.held_model(model, 0) is model  # nothing to wait for
    for case in LAB.task("13.8").cases:  # every graded run has buckets to wait for, and shards of equal size
        spec = case.spec
        assert judge_reference.hold_floor(build_mlp(spec["widths"]), spec["cap_bytes"], spec["world"]) > 0
        assert spec["rows"] % spec["world"] == 0  # the mean of the ranks' mean losses is the batch's mean
        name, header, _, _ = judge.inputs(spec)
        assert name == "overlapped_ddp" and (header["hold"] > 0) == (spec["check"] == "overlap")


def test_only_a_step_that_overlaps_gets_past_the_hold(solution, monkeypatch):
    """The solution's overlapped step finishes with the hold in its model; 13.3's step (all-reduces after the
    backward pass) is held until the hold gives up, and says so."""
    monkeypatch.setattr(hold, "SECONDS", 1.0)
    widths, cap = [16, 24, 12, 6], 300
    x, y = batch(widths, 8, seed=3)

    def step(fn):
        def on_rank(rank, world):
            rows = torch.tensor_split(torch.arange(8), world)[rank]
            floor = judge_reference.hold_floor(build_mlp(widths, 0), cap, world)
            return fn(hold.held_model(build_mlp(widths, 0), floor), x[rows], y[rows], rank, world, cap)
        return on_rank

    run = run_ranks(step(solution["overlapped_ddp"]), 2, timeout=20)
    assert run.results[0]["buckets"] == [[0, 1], [2, 3], [4, 5]]
    assert [m["bytes"] for m in run.messages[1] if m["op"] == "all_reduce"] == [312, 1200, 1632]
    one = build_mlp(widths, 0)
    torch.nn.functional.cross_entropy(one(x), y).backward()
    for found, p in zip(run.results[1]["grads"], one.parameters()):
        assert np.allclose(found, p.grad.numpy(), rtol=1e-5, atol=1e-7)
    with pytest.raises(RankError, match="the grader held the backward pass of the first layer .* after 1 s, 0 had"):
        run_ranks(step(solution["ddp_gradients"]), 2, timeout=20)


# ---------------------------------------------------------------- 13.9 and 13.5

def test_mixed_precision_zero_is_the_papers_accounting(solution):
    """The ZeRO paper's per-rank bytes (section 3.1, K = 12) on sizes that divide: 16 P, 4 P + 12 P / N,
    2 P + 14 P / N, 16 P / N; uneven shards add up to the unsharded bytes."""
    for numel, world in ((1_557_611_200, 8), (7_000, 7), (12, 4)):
        totals = [solution["zero_mixed_memory"](numel, world, stage)[0]["total"] for stage in range(4)]
        assert totals == [16 * numel, 4 * numel + 12 * numel // world, 2 * numel + 14 * numel // world,
                          16 * numel // world]
    for numel, world in ((10_007, 4), (546, 5), (3, 5)):
        rows = solution["zero_mixed_memory"](numel, world, 3)
        assert sum(r["total"] for r in rows) == 16 * numel
        assert sum(r["optimizer_state"] for r in solution["zero_mixed_memory"](numel, world, 1)) == 12 * numel
    # GPT-2 XL fits 12 GiB per rank from stage 1 on in mixed precision, from stage 2 on in float32 (13.4)
    budget = 12 << 30
    mixed = [solution["zero_mixed_memory"](1_557_611_200, 8, s)[0]["total"] <= budget for s in range(4)]
    fp32 = [solution["zero_memory"](1_557_611_200, 8, s)[0]["total"] <= budget for s in range(4)]
    assert mixed == [False, True, True, True] and fp32 == [False, False, True, True]


def test_a_correct_adam_step_on_large_parameters_passes_the_tolerance_of_release_3():
    """float32 storage of p - lr x update rounds by up to 6e-8 |p|: on parameters near 1e4 with lr 1e-4 that is
    far more than 1e-4 of the step, so release 2's bound on the step alone failed a correct step."""
    rng = np.random.default_rng(0)
    full = {"params": (1e4 * rng.standard_normal(1_000)).astype(np.float32),
            "grads": rng.standard_normal(1_000).astype(np.float32),
            "exp_avg": np.zeros(1_000, np.float32), "exp_avg_sq": np.zeros(1_000, np.float32)}
    expected, _, _ = judge.adam64(full, 1, 1e-4)
    p, g = torch.from_numpy(full["params"]), torch.from_numpy(full["grads"])
    m, v = 0.1 * g, 0.001 * g * g
    found = (p - 1e-4 * (m / 0.1) / ((v / 0.001).sqrt() + 1e-8)).numpy()  # a correct float32 step
    moved = expected - full["params"]
    old = np.abs(found.astype(np.float64) - full["params"] - moved).max() / np.abs(moved).max()
    assert old > judge.ADAM_RTOL  # release 2's rule: failed
    assert judge.adam_error(found, full["params"], expected) <= 1.0  # release 3's: passes
    assert judge.adam_error(found + 2e-2, full["params"], expected) > 1.0  # and a step 2e-2 off still fails
