"""Lab 14's release 4: task 14.7, what an H100's compiler makes of a tile, and what the release changes for
notebooks of earlier releases.

The compiler's figures (registers, spills, shared memory) are the course's own, compiled when the references were
written (``util.labs.lab14.compiled``: ``compiled_public.json`` for the notebook, the grader-only
``cases_compiled.json`` for the hidden cases): here the solution's shared memory equals the compiler's on every
stored configuration, a case's occupancy uses the grader's figures and never the student's prediction, the hand
counts of the handout are the solution's, and (``-m slow``) the stored figures are what Triton and ptxas make now.
The examples and the solution are graded by ``tests/test_labs.py``; the frozen handout of release 3 below.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from lab14_solution import namespace

from grader.core import releases
from grader.grade.submission import grade_submission
from util.labs import get_lab, grader_only
from util.labs.lab14 import compiled
from util.labs.lab14.cases_tiles import TILE_CONFIGS
from util.labs.lab14.public_checks import CHECKS, HAND_OCCUPANCY
from util.labs.lab14.tasks import tile_occupancy, tile_shared

LAB = get_lab("lab14")
RELEASED = Path(__file__).resolve().parents[1] / "released" / "lab14_release3" / "lab14_attention_kernels.ipynb"
HIDDEN = compiled.load(compiled.HIDDEN_FILE)
PUBLIC = compiled.load()


def _shared(ns, config) -> int:
    return ns["shared_bytes"](tuple(config["block"]), compiled.DTYPES[config["dtype"]], config["num_stages"])


def test_the_students_compiler_table_shows_none_of_the_hidden_configurations():
    """compiled_public.json goes to every student (tests/test_release.py); the hidden cases' configurations and
    the compiler's figures for them are in the grader-only cases_compiled.json only."""
    key = lambda e: json.dumps(e["config"], sort_keys=True)  # noqa: E731
    assert len(PUBLIC) == 10 and len(HIDDEN) == 5
    assert {key(e) for e in PUBLIC}.isdisjoint({key(e) for e in HIDDEN})
    assert grader_only(compiled.HIDDEN_FILE.relative_to(compiled.HERE)) and not grader_only(
        compiled.PUBLIC_FILE.relative_to(compiled.HERE))


# ---------------------------------------------------------------- the release

def test_release_4_adds_a_task_whose_points_came_from_three_others():
    assert LAB.tasks_since(3) == ("14.7", "14.8", "14.9") and LAB.tasks_since(4) == ("14.8", "14.9")  # 5's, 6's
    for release in (1, 2, 3):
        old = LAB.as_of(release)
        assert [t.id for t in old.tasks] == ["14.1", "14.2", "14.3", "14.4", "14.5", "14.6"]
        assert old.max_points == LAB.max_points == 100
        assert [t.max_points for t in old.tasks] == [12, 20, 18, 12, 22, 16]
    old, four = LAB.as_of(3), LAB.as_of(4)
    assert {t.id: [c.points for c in t.cases] for t in old.tasks if t.id in ("14.1", "14.2", "14.6")} == {
        "14.1": [2, 2, 2, 2], "14.2": [4, 4, 4, 4], "14.6": [3, 3, 3, 3]}  # each case its share, as it was
    assert {t.id: [c.points for c in t.cases] for t in four.tasks if t.id in ("14.1", "14.2", "14.6", "14.7")} == {
        "14.1": [1, 1, 1, 1], "14.2": [3, 3, 3, 3], "14.6": [2, 2, 2, 2], "14.7": [1] * 10}
    assert [t.max_points for t in four.tasks] == [8, 16, 18, 12, 22, 12, 12]


def test_the_note_of_a_release_3_notebook_says_the_new_task_was_not_graded():
    built = releases.built_from({"cells": [{"cell_type": "markdown", "source": LAB.releases[2].marker}],
                                 "metadata": {}}, LAB)
    note = releases.note(LAB, built)
    assert built.release == 3 and "Release 4 (2026-12-02): A new task: 14.7" in note
    assert "the tasks added since (14.7, 14.8 and 14.9) were not part of your handout and are not graded" in note


@pytest.mark.slow  # an earlier frozen release: the lab's latest frozen release keeps its marks on every run
@pytest.mark.notebook
def test_the_frozen_release_3_handout_keeps_its_marks(tmp_path):
    result = grade_submission(RELEASED, LAB, tmp_path)
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == [] and result.release == 3
    assert [t.task_id for t in result.tasks] == ["14.1", "14.2", "14.3", "14.4", "14.5", "14.6"]
    assert result.score == LAB.as_of(3).auto_points == 95  # and the 5 written points, marked by hand
    assert {t.task_id: t.max_score for t in result.tasks} == {"14.1": 12, "14.2": 20, "14.3": 18, "14.4": 12,
                                                              "14.5": 19, "14.6": 14}
    assert "were not part of your handout" in result.notes[0]


# ---------------------------------------------------------------- 14.7: the compiler's figures

def test_the_stored_tables_hold_every_configuration_once_with_whole_figures():
    assert [row["config"] for row in HIDDEN] == [dict(c) for c in TILE_CONFIGS]
    assert [row["config"] for row in PUBLIC] == [dict(c) for c in compiled.PUBLIC_CONFIGS]
    assert not {json.dumps(r["config"], sort_keys=True) for r in HIDDEN} & {
        json.dumps(r["config"], sort_keys=True) for r in PUBLIC}  # the hidden configurations are not shown
    for row in HIDDEN + PUBLIC:
        figures = row["compiled"]
        assert sorted(figures) == ["registers", "shared", "spills"]
        assert 0 < figures["registers"] <= 255 and figures["spills"] >= 0 and figures["shared"] > 0
    cases = LAB.task("14.7").cases
    assert [{k: c.spec[k] for k in ("registers", "shared")} for c in cases[5:]] == [
        {k: row["compiled"][k] for k in ("registers", "shared")} for row in HIDDEN]
    assert [sorted(c.spec) for c in cases] == [["block", "dtype", "num_stages", "part"]] * 5 + [
        ["num_warps", "part", "registers", "shared"]] * 5  # no case receives its own expected value
    assert any(row["compiled"]["spills"] for row in HIDDEN)  # a tile that spills...
    assert any(row["compiled"]["shared"] > compiled.H100_LIMITS["shared_per_block"] for row in HIDDEN)  # ...and fits no SM


def test_the_solutions_shared_memory_is_the_compilers_on_every_stored_configuration():
    ns = namespace()
    for row in HIDDEN + PUBLIC:
        assert _shared(ns, row["config"]) == row["compiled"]["shared"], compiled.config_name(row["config"])


def test_forgetting_the_stages_is_right_only_at_one_stage():
    ns = namespace((("    return num_stages * (block_m * block_k + block_k * block_n) * dtype_bytes",
                     "    return (block_m * block_k + block_k * block_n) * dtype_bytes"),))
    right = [row["config"]["num_stages"] == 1 for row in PUBLIC if _shared(ns, row["config"]) == row["compiled"]["shared"]]
    assert right == [True]  # the one 1-stage configuration of the table, and nothing else


def test_the_hand_counts_of_the_handout_are_the_solutions():
    ns = namespace()
    for arguments, expected in HAND_OCCUPANCY:
        assert ns["occupancy"](*arguments) == expected, arguments
    [hand, *_] = CHECKS["14.7"]
    assert hand.test(ns["occupancy"]) is None
    unrounded = namespace((('    per_warp = -(-registers * limits["warp"] // unit) * unit',
                            '    per_warp = registers * limits["warp"]'),))
    assert "expected 5" in hand.test(unrounded["occupancy"])  # 84 registers: 6 blocks without the rounding


def test_a_case_computes_occupancy_from_the_graders_figures_never_the_students():
    """A student whose shared memory is wrong loses the shared-memory cases only: the occupancy cases give the
    compiler's shared memory, so their occupancy is right; and what a case records is checked for types."""
    task = LAB.task("14.7")
    honest = namespace()
    wrong = namespace((("    return num_stages * (block_m * block_k + block_k * block_n) * dtype_bytes",
                        "    return 1"),))
    for case in task.cases:
        mine, theirs = task.run_case(honest["occupancy"], case.spec), task.run_case(wrong["occupancy"], case.spec)
        if case.spec["part"] == "shared":
            assert theirs == {"shared": 1} != mine
        else:
            assert theirs == mine and sorted(mine) == ["blocks", "limited_by", "warps"]
    assert [task.run_case(honest["occupancy"], c.spec)["shared"] for c in task.cases[:5]] == [
        row["compiled"]["shared"] for row in HIDDEN]  # the references the shared-memory cases are compared with
    with pytest.raises(TypeError, match="blocks is a float"):
        tile_occupancy({"blocks": 2.0, "warps": 8, "limited_by": ["shared"]})
    with pytest.raises(ValueError, match="limited_by is"):
        tile_occupancy({"blocks": 2, "warps": 8, "limited_by": ["memory"]})
    with pytest.raises(TypeError, match="shared_bytes's answer is a float"):
        tile_shared(1024.0)
    with pytest.raises(RuntimeError, match="no compiler figures"):
        task.run_case(honest["occupancy"], dict(task.cases[5].spec, registers=None, shared=None))


@pytest.mark.slow
def test_the_stored_figures_are_what_triton_and_ptxas_make_now():
    """Recompiled here (a process that never set TRITON_INTERPRET): the spilling hidden configuration, a small one,
    and the table's one-stage tile give exactly the stored registers, spills and shared memory."""
    import subprocess
    import sys

    chosen = [HIDDEN[3], HIDDEN[4], PUBLIC[2]]
    script = ("import json, sys\nfrom util.labs.lab14.compiled import compile_tile\n"
              "print(json.dumps([compile_tile(c) for c in json.loads(sys.argv[1])]))")
    env = {k: v for k, v in __import__("os").environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", script, json.dumps([row["config"] for row in chosen])],
                          capture_output=True, text=True, timeout=300, env=env, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [row["compiled"] for row in chosen]


FRAME_SEARCH = '''    import gc
    import sys
    frame, seen = sys._getframe(1), []
    while frame is not None:  # every caller's locals, then every dict the collector tracks
        seen += [v for v in frame.f_locals.values() if isinstance(v, dict)]
        frame = frame.f_back
    seen += [o for o in gc.get_objects() if isinstance(o, dict) and o.get("part") == "shared"]
    found = [v["compiled"]["shared"] if isinstance(v.get("compiled"), dict) else v["shared"] for v in seen
             if "shared" in v or isinstance(v.get("compiled"), dict)]
    return found[0] if found else 0'''


def test_a_shared_memory_case_gives_the_kernel_nothing_of_its_expected_value():
    """Attack beside its control: ``shared_bytes`` that looks for the compiler's figure in its callers' frames and
    in every dict it can reach, as a case runs it, finds none (its case's spec is the configuration alone) and
    fails every shared-memory case; the honest function, run the same way, passes them."""
    task = LAB.task("14.7")
    honest = namespace()
    attack = namespace((("    block_m, block_n, block_k = block\n"
                         "    return num_stages * (block_m * block_k + block_k * block_n) * dtype_bytes",
                         FRAME_SEARCH),))
    shared_cases = [c for c in task.cases if c.spec["part"] == "shared"]
    expected = [row["compiled"]["shared"] for row in HIDDEN]
    assert [task.run_case(honest["occupancy"], c.spec)["shared"] for c in shared_cases] == expected
    got = [task.run_case(attack["occupancy"], c.spec)["shared"] for c in shared_cases]
    assert not set(got) & set(expected), got
