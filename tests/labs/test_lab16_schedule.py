"""Lab 16's release 4: task 16.8, a pruning schedule, and what the release changes for earlier notebooks.

The cubic schedule by hand and the grader's formula against it; the judge's value cases against the solution, the
example's mistake and forged files; the grader's re-run (its own masks and loop, an order drawn from the secret) on
the course's schedule and on one that prunes all at once; the course's loop holding its masks; the release's points
(release 3's cases keep their shares); the frozen release-3 handout keeps its marks. The margins of the re-run over
several orders are measured under ``-m slow`` (and by ``benchmarks/bench_lab16_grading.py --schedule-seeds``).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from grader.author.solution import solution_namespace
from grader.core import releases
from grader.grade.submission import grade_submission
from util.contract import Tolerance
from util.judging import secret
from util.labs import get_lab, grader_only
from util.labs.lab16.judge_schedule import check_schedule, global_masks, order_seed, reference_schedule
from util.labs.lab16.mistakes import MISTAKES
from util.labs.lab16.schedule import prune_gradually

LAB = get_lab("lab16")
TASK = LAB.task("16.8")
VALUE_CASES = TASK.cases[:3]
RERUN = TASK.cases[3]
RELEASED = Path(__file__).resolve().parents[1] / "released" / "lab16_release3" / "lab16_compression.ipynb"


def _edited(variant: int | None = None):
    mistake = next(m for m in MISTAKES if m.name == "schedule_all_at_once")
    replacements = mistake.replacements if variant is None else mistake.variants[variant]

    def edit(source: str) -> str:
        for old, new in replacements:
            source = source.replace(old, new)
        return source

    return solution_namespace("lab16", ("16.8",), edit=edit, allow_errors=True)["cubic_schedule"]


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab16", ("16.8",), allow_errors=True)["cubic_schedule"]


def _saved(schedule) -> bytes:
    return json.dumps({"schedule": schedule}).encode()


def _judged(function, case) -> list[str]:
    spec = case.spec
    return check_schedule(spec, _saved(function(spec["final"], spec["steps"], spec["initial"])), Tolerance())


# ---------------------------------------------------------------- the schedule

def test_the_cubic_schedule_by_hand():
    assert reference_schedule(0.8, 4) == pytest.approx([0.8 * 37 / 64, 0.8 * 7 / 8, 0.8 * 63 / 64, 0.8], abs=1e-15)
    assert reference_schedule(0.9, 2, 0.5) == pytest.approx([0.85, 0.9], abs=1e-15)
    assert reference_schedule(0.95, 1) == [0.95]
    steps = reference_schedule(0.95, 8)
    assert steps[-1] == 0.95 and all(a < b for a, b in zip(steps, steps[1:]))
    assert steps[0] - 0 > steps[-1] - steps[-2]   # most is pruned early


def test_the_value_cases_pass_the_solution_and_fail_every_schedule_that_prunes_all_at_once(solution):
    for case in VALUE_CASES:
        assert _judged(solution, case) == [], case.id
        for variant in (None, 0, 1):
            found = _judged(_edited(variant), case)
            assert found and "differs from the cubic schedule's" in found[0], (case.id, variant)
    spec = VALUE_CASES[0].spec
    shifted = [s + 2e-9 for s in reference_schedule(spec["final"], spec["steps"])]
    assert "after step 1" in check_schedule(spec, _saved(shifted), Tolerance())[0]


@pytest.mark.parametrize("saved, says", [
    (b"not json", "not what the course saves"),
    (_saved([0.5] * 3), "must return a list of 10"),
    (_saved([0.5] * 9 + [float("nan")]), "a number from 0 to 1"),
    (_saved([0.5] * 9 + [True]), "a number from 0 to 1"),
    (_saved([0.5] * 9 + [1.5]), "a number from 0 to 1"),
    (json.dumps({"schedule": "0.9"}).encode(), "must return a list"),
])
def test_a_forged_or_malformed_schedule_fails_saying_why(saved, says):
    found = check_schedule(VALUE_CASES[0].spec, saved, Tolerance())
    assert found and says in found[0]


def test_the_kernel_refuses_what_is_not_a_list_of_numbers():
    from util.labs.lab16.tasks import _schedule

    with pytest.raises(TypeError):
        _schedule(lambda final, steps, initial: 0.9, VALUE_CASES[0].spec)
    with pytest.raises(TypeError):
        _schedule(lambda final, steps, initial: ["0.9"] * steps, VALUE_CASES[0].spec)


# ---------------------------------------------------------------- the re-run

def test_the_loop_holds_its_masks_and_prunes_exactly_the_schedules_counts():
    from util.data import digits_split
    from util.labs.lab16.digits import trained_digits
    from util.labs.lab16.prune import prunable

    split = digits_split()
    model = trained_digits()
    before = {name: weight.detach().clone() for name, weight in prunable(model).items()}
    after = prune_gradually(model, [0.5, 0.9], global_masks, split.x_train, split.y_train, batches=2, seed=3)
    assert all(torch.equal(before[name], weight) for name, weight in prunable(model).items())   # left as it was
    total = sum(w.numel() for w in before.values())
    for net, sparsity in zip(after, (0.5, 0.9)):
        assert sum(int((w == 0).sum()) for w in prunable(net).values()) == round(sparsity * total)
    with pytest.raises(ValueError, match="torch.bool"):
        prune_gradually(model, [0.5], lambda net, s: {"fc.weight": torch.ones(3)}, split.x_train, split.y_train, 1)


def test_the_grader_prunes_again_with_its_own_order_and_one_cut_at_the_end_fails(solution):
    assert "seed" not in RERUN.spec and grader_only(Path("judge_schedule.py"))
    before = order_seed(RERUN.spec)
    assert before == order_seed(RERUN.spec) != order_seed(VALUE_CASES[0].spec)
    secret.renew()
    assert order_seed(RERUN.spec) != before
    assert _judged(solution, RERUN) == []
    found = _judged(_edited(), RERUN)
    assert len(found) == 1 and "reaches" in found[0] and "at least 80.0% is needed" in found[0], found
    short = check_schedule(RERUN.spec, _saved(reference_schedule(0.95, 8)[:-1] + [0.9]), Tolerance())
    assert short and "weights zero; the stated sparsity prunes exactly 18,134" in short[0]


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_the_floor_separates_the_schedule_from_one_cut_on_every_order(seed):
    from util.data import digits_split
    from util.labs.lab16.digits import accuracy, trained_digits

    split, model = digits_split(), trained_digits()
    floor = RERUN.spec["min_accuracy"]

    def reached(schedule):
        net = prune_gradually(model, schedule, global_masks, split.x_train, split.y_train, 8, seed=seed)[-1]
        return accuracy(net, split.x_test, split.y_test)

    assert reached(reference_schedule(0.95, 8)) >= floor + 0.03
    assert reached([0.0] * 7 + [0.95]) < floor - 0.2
    assert reached([0.95]) < floor - 0.1


# ---------------------------------------------------------------- the release

def test_release_4_adds_a_task_whose_points_came_from_four_others_and_release_3_keeps_its_shares():
    assert LAB.release >= 4 and LAB.tasks_since(3)[:1] == ("16.8",) and "16.8" not in LAB.tasks_since(4)
    three = LAB.as_of(3)
    assert [t.id for t in three.tasks] == ["16.1", "16.2", "16.3", "16.4", "16.5", "16.6", "16.7"]
    assert three.max_points == LAB.max_points == 100 and three.auto_points == LAB.auto_points == 95
    assert {t.id: [c.points for c in t.cases] for t in three.tasks} == {
        "16.1": [1.5] * 4, "16.2": [4] * 3, "16.3": [2.5] * 4, "16.4": [2] * 4, "16.5": [2, 2, 2, 10],
        "16.6": [4] * 2, "16.7": [4] * 3}   # as release 3 graded them
    assert [t.max_points for t in three.tasks] == [11, 17, 14, 12, 20, 11, 15]
    four = LAB.as_of(4)   # release 5 took points from 16.8 too (test_lab16_lora_gpt.py)
    assert {t.id: [c.points for c in t.cases] for t in four.tasks} == {
        "16.1": [1.5] * 4, "16.2": [3] * 3, "16.3": [2] * 4, "16.4": [2] * 4, "16.5": [1.5, 1.5, 1.5, 7.5],
        "16.6": [4] * 2, "16.7": [3] * 3, "16.8": [2, 2, 2, 4]}
    assert [t.max_points for t in four.tasks] == [11, 14, 12, 12, 16, 11, 12, 12]


def test_the_note_of_a_release_3_notebook_says_the_new_task_was_not_graded():
    built = releases.built_from({"cells": [{"cell_type": "markdown", "source": LAB.releases[2].marker}],
                                 "metadata": {}}, LAB)
    note = releases.note(LAB, built)
    assert built.release == 3 and "Release 4 (2026-12-02): A new task, 16.8" in note
    assert "the tasks added since (16.8 and 16.9) were not part of your handout and are not graded" in note


@pytest.mark.slow  # an earlier frozen release: the lab's latest frozen release keeps its marks on every run
@pytest.mark.notebook
def test_the_frozen_release_3_handout_keeps_its_marks(tmp_path):
    result = grade_submission(RELEASED, LAB, tmp_path)
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == [] and result.release == 3
    assert [t.task_id for t in result.tasks] == ["16.1", "16.2", "16.3", "16.4", "16.5", "16.6", "16.7"]
    assert result.score == LAB.as_of(3).auto_points == 95  # and the 5 written points, marked by hand
    assert {t.task_id: t.max_score for t in result.tasks} == {"16.1": 11, "16.2": 17, "16.3": 11, "16.4": 12,
                                                              "16.5": 18, "16.6": 11, "16.7": 15}
    assert "were not part of your handout" in result.notes[0]
