"""Lab 14's release 6: task 14.9, choosing a launch configuration with a model that sees occupancy, and what the
release changes for notebooks of earlier releases.

The candidates' compiler figures are the course's own, compiled when the references were written
(``util.labs.lab14.choice``: ``launch_public.json`` for the notebook, the grader-only ``cases_launch.json`` for the
hidden cases): here the hidden cases are what their names say under the model (a spilling candidate that would be
fastest if spills were ignored, a candidate that fits no SM, no tie for the fastest), the handout's hand counts are
the solution's, the public checks catch the release's mistake, a case hands ``choose_launch`` copies of the grader's
figures and records only typed values, and (``-m slow``) the stored figures are what Triton and ptxas make now.
The examples and the solution are graded by ``tests/test_labs.py``, the mistake's variants by
``test_lab14_variants.py``; the frozen handout of release 5 below.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from lab14_solution import namespace

from grader.core import releases
from grader.grade.submission import grade_submission
from util.labs import get_lab, grader_only
from util.labs.lab14 import choice
from util.labs.lab14.cases_launch import LAUNCH_CASES
from util.labs.lab14.compiled import H100_LIMITS, config_name, load
from util.labs.lab14.machines import H100_FP16
from util.labs.lab14.mistakes import LAUNCH, MISTAKES
from util.labs.lab14.public_checks import CHECKS, HAND_LAUNCH
from util.labs.lab14.tasks import launch_choice

LAB = get_lab("lab14")
RELEASED = Path(__file__).resolve().parents[1] / "released" / "lab14_release5" / "lab14_attention_kernels.ipynb"
MISTAKE = {m.name: m for m in MISTAKES}
PUBLIC = load(choice.PUBLIC_FILE)
HIDDEN = load(choice.HIDDEN_FILE)
SPILLS = MISTAKE["chooser_ignores_spills"].replacements


def _key(config) -> str:
    return json.dumps(dict(config), sort_keys=True)


# ---------------------------------------------------------------- the release

def test_release_6_adds_the_chooser_its_points_from_three_tasks_each_case_its_share():
    assert LAB.release == 6 and LAB.tasks_since(5) == ("14.9",) and LAB.tasks_since(6) == ()
    five = LAB.as_of(5)
    assert [t.id for t in five.tasks] == ["14.1", "14.2", "14.3", "14.4", "14.5", "14.6", "14.7", "14.8"]
    assert five.max_points == LAB.max_points == 100
    assert [t.max_points for t in five.tasks] == [8, 12, 16, 8, 22, 12, 12, 10]  # release 5's, as it graded them
    assert {t.id: (t.answer_points, [c.points for c in t.cases]) for t in five.tasks
            if t.id in ("14.1", "14.2", "14.6")} == {"14.1": (4, [1, 1, 1, 1]), "14.2": (4, [2, 2, 2, 2]),
                                                     "14.6": (2, [2, 2, 2, 2])}
    assert [t.max_points for t in LAB.tasks] == [6, 8, 16, 8, 22, 8, 12, 10, 10]
    assert {t.id: (t.answer_points, [c.points for c in t.cases]) for t in LAB.tasks
            if t.id in ("14.1", "14.2", "14.6", "14.9")} == {
        "14.1": (2, [1, 1, 1, 1]), "14.2": (4, [1, 1, 1, 1]), "14.6": (2, [1, 1, 1, 1]), "14.9": (2, [2, 2, 2])}
    assert [q.id for q in LAB.task("14.9").written] == ["14.Q3"] and LAB.task("14.9").written[0].points == 2
    assert [c.id for c in LAB.task("14.9").cases] == list(LAUNCH) == [c["id"] for c in LAUNCH_CASES]
    assert [t.max_points for t in LAB.as_of(3).tasks] == [12, 20, 18, 12, 22, 16]  # releases 1-3 unchanged


def test_the_note_of_a_release_5_notebook_says_the_chooser_was_not_graded():
    built = releases.built_from({"cells": [{"cell_type": "markdown", "source": LAB.releases[4].marker}],
                                 "metadata": {}}, LAB)
    note = releases.note(LAB, built)
    assert built.release == 5 and "Release 6 (2026-12-02): A new task: 14.9" in note
    assert "the task added since (14.9) was not part of your handout and is not graded" in note


@pytest.mark.notebook
def test_the_frozen_release_5_handout_keeps_its_marks(tmp_path):
    result = grade_submission(RELEASED, LAB, tmp_path)
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == [] and result.release == 5
    assert [t.task_id for t in result.tasks] == ["14.1", "14.2", "14.3", "14.4", "14.5", "14.6", "14.7", "14.8"]
    assert result.score == LAB.as_of(5).auto_points == 95  # and the 5 written points, marked by hand
    assert {t.task_id: t.max_score for t in result.tasks} == {"14.1": 8, "14.2": 12, "14.3": 16, "14.4": 8,
                                                              "14.5": 19, "14.6": 10, "14.7": 12, "14.8": 10}
    assert "was not part of your handout" in result.notes[0]


# ---------------------------------------------------------------- 14.9: the stored figures and the cases

def test_the_stored_tables_hold_each_candidate_once_the_hidden_one_grader_only():
    assert [row["config"] for row in PUBLIC] == [dict(c) for c in choice.PUBLIC_CANDIDATES]
    wanted = {_key(c) for case in LAUNCH_CASES for c in case["candidates"]}
    assert sorted(_key(row["config"]) for row in HIDDEN) == sorted(wanted)  # every candidate once, nothing else
    for row in PUBLIC + HIDDEN:
        figures = row["compiled"]
        assert sorted(figures) == ["registers", "shared", "spills"]
        assert 0 < figures["registers"] <= 255 and figures["spills"] >= 0 and figures["shared"] > 0
        assert (figures["spills"] > 0) <= (figures["registers"] == 255)  # it spills only when 255 are not enough
    assert grader_only(choice.HIDDEN_FILE.relative_to(choice.HERE)) and grader_only(Path("cases_launch.py"))
    assert not grader_only(choice.PUBLIC_FILE.relative_to(choice.HERE))
    stored = {_key(r["config"]): r["compiled"] for r in HIDDEN}
    for case, spec in zip(LAUNCH_CASES, (c.spec for c in LAB.task("14.9").cases)):
        assert spec["candidates"] == [{"config": c, "compiled": stored[_key(c)]} for c in case["candidates"]]
        assert sorted(spec) == ["candidates", "k", "m", "machine", "n"] and spec["machine"] == H100_FP16


def _solution_times(spec, replacements=()):
    ns = namespace(replacements)
    return ns["choose_launch"](spec["m"], spec["n"], spec["k"], spec["candidates"], spec["machine"])


def test_each_hidden_case_is_decided_by_what_its_name_says():
    """Case 1 and 2: ignoring spills would choose a candidate that spills (256 x 256 x 32; the 128 x 256 x 64 at 4
    warps); case 3's only spilling candidate fits no SM either, and a 128 x 128 tile at 16 warps beats the
    128 x 256 tile that moves fewer bytes. The fastest is never tied, and every case chooses another tile."""
    chosen, naive = [], []
    for case in LAB.task("14.9").cases:
        right, wrong = _solution_times(case.spec), _solution_times(case.spec, SPILLS)
        allowed = sorted(t for t in right["times"] if t is not None)
        assert allowed[0] < allowed[1] * (1 - 1e-6), case.id  # no tie for the fastest
        chosen.append(config_name(right["config"]))
        naive.append(config_name(wrong["config"]))
        rows = case.spec["candidates"]
        assert [t is None for t in right["times"]] == [
            bool(r["compiled"]["spills"]) or r["compiled"]["shared"] > H100_LIMITS["shared_per_block"] for r in rows]
    assert chosen == ["128x128x32 fp16, 4 stages, 4 warps", "64x64x32 fp16, 3 stages, 4 warps",
                      "128x128x32 fp16, 3 stages, 8 warps"]
    assert naive == ["256x256x32 fp16, 3 stages, 8 warps", "128x256x64 fp16, 2 stages, 4 warps", chosen[2]]
    third = LAB.task("14.9").cases[2].spec
    bytes_of = {config_name(r["config"]): choice.tile_traffic(third["m"], third["n"], third["k"], r["config"])
                for r in third["candidates"]}
    assert bytes_of["128x256x32 fp16, 3 stages, 8 warps"] < bytes_of[chosen[2]]  # fewer bytes, half the warps


def test_the_model_is_the_roofline_scaled_by_the_warps_an_sm_holds():
    ns = namespace()
    m, n, k = choice.PUBLIC_SHAPE
    for row in PUBLIC:
        seconds = ns["launch_seconds"](m, n, k, row["config"], row["compiled"], H100_FP16)
        figures = row["compiled"]
        warps = ns["occupancy"](figures["registers"], figures["shared"], row["config"]["num_warps"])["warps"]
        if figures["spills"] or not warps:
            assert seconds is None
            continue
        roofline = max(2 * m * n * k / H100_FP16["flops"],
                       choice.tile_traffic(m, n, k, row["config"]) / H100_FP16["bandwidth"])
        assert math.isclose(seconds, roofline / min(1, warps / choice.FULL_WARPS), rel_tol=1e-12), row["config"]


def test_the_hand_counts_of_the_handout_are_the_solutions_and_the_checks_catch_the_mistake():
    ns = namespace()
    for row, expected in HAND_LAUNCH:
        found = ns["launch_seconds"](4096, 4096, 4096, row["config"], row["compiled"], H100_FP16)
        assert (found is None and expected is None) or math.isclose(found, expected, rel_tol=1e-12), row
    assert HAND_LAUNCH[1][1] == 2 * 1_644_167_168 / 3.35e12  # 8 warps: half the throughput
    hand, rules, answer = CHECKS["14.9"]
    solution = ns["choose_launch"]
    public = solution(*choice.PUBLIC_SHAPE, PUBLIC, H100_FP16)
    assert hand.test(solution) is None and rules.test(solution) is None and answer.test(public) is None
    assert config_name(public["config"]) == "128x128x64 fp16, 1 stage, 8 warps"  # the first of three ties
    assert public["seconds"] == public["times"][2] == public["times"][3] == public["times"][4]
    wrong = namespace(SPILLS)["choose_launch"]
    assert "None" in hand.test(wrong) and "spills" in rules.test(wrong)
    assert "spill" in answer.test(wrong(*choice.PUBLIC_SHAPE, PUBLIC, H100_FP16))
    less_or_equal = namespace((("seconds < times[best]", "seconds <= times[best]"),))["choose_launch"]
    assert "tie" in rules.test(less_or_equal)


def test_a_case_gives_copies_of_the_graders_figures_and_records_typed_values():
    """A chooser that sets every spill to 0 in the rows it receives passes nothing on to the next call (each call
    gets copies); what a case records is checked for its types."""
    task = LAB.task("14.9")
    honest = namespace()["choose_launch"]

    def forging(m, n, k, candidates, machine):
        for row in candidates:
            row["compiled"]["spills"] = 0
        return honest(m, n, k, candidates, machine)

    first = task.run_case(forging, task.cases[0].spec)
    assert first["config"]["block"] == [256, 256, 32]  # its own call is its own business...
    assert task.run_case(honest, task.cases[0].spec)["config"]["block"] == [128, 128, 32]  # ...the next is not
    assert task.cases[0].spec["candidates"][3]["compiled"]["spills"] == 1732
    good = {"config": dict(PUBLIC[0]["config"]), "seconds": 1e-3, "times": [1e-3, None]}
    assert launch_choice(good, 2) == good
    with pytest.raises(TypeError, match="seconds is a str"):
        launch_choice(dict(good, seconds="fast"), 2)
    with pytest.raises(ValueError, match="times must be a list of 3"):
        launch_choice(good, 3)
    with pytest.raises(ValueError, match="keys config, seconds, times"):
        launch_choice({"config": good["config"]}, 2)
    with pytest.raises(RuntimeError, match="no compiler figures"):
        task.run_case(honest, dict(task.cases[0].spec, candidates=[{"config": PUBLIC[0]["config"], "compiled": None}]))


def test_the_plot_marks_the_excluded_candidates():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from util.labs.lab14.plots import plot_launch

    ns = namespace()
    answer = ns["choose_launch"](*choice.PUBLIC_SHAPE, PUBLIC, H100_FP16)
    ax = plot_launch(PUBLIC, answer["times"], ns["occupancy"])
    texts = [t.get_text() for t in ax.texts]
    assert sum(t.startswith("excluded") for t in texts) == 2 and "16 warps" in texts
    assert len(ax.patches) == len(PUBLIC)
    green = [round(p.get_x() + p.get_width() / 2) for p in ax.patches
             if tuple(p.get_facecolor()[:3]) == matplotlib.colors.to_rgb("tab:green")]
    assert green == [2]  # the chosen one alone: the first of three tied 128 x 128 x 64 tiles
    plt.close(ax.figure)


@pytest.mark.slow
def test_the_stored_candidates_are_what_triton_and_ptxas_make_now():
    """Recompiled here (a process that never set TRITON_INTERPRET): the spilling 128 x 256 x 64 at 4 warps, the
    4-warp 128 x 128 x 32 of the first case and its spilling 256 x 256 x 32 give exactly the stored figures."""
    import os
    import subprocess
    import sys

    stored = {_key(r["config"]): r for r in PUBLIC + HIDDEN}
    chosen = [stored[_key(c)] for c in (LAUNCH_CASES[1]["candidates"][2], LAUNCH_CASES[0]["candidates"][2],
                                        LAUNCH_CASES[0]["candidates"][3])]
    script = ("import json, sys\nfrom util.labs.lab14.compiled import compile_tile\n"
              "print(json.dumps([compile_tile(c) for c in json.loads(sys.argv[1])]))")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", script, json.dumps([row["config"] for row in chosen])],
                          capture_output=True, text=True, timeout=300, env=env, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [row["compiled"] for row in chosen]
