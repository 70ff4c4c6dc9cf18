"""Lab 14's release 5: task 14.8, FlashAttention-2's backward as one Triton kernel, and what the release changes for
notebooks of earlier releases.

Here: the closed form of the backward's traffic is what the course's counter counts for the solution's kernel on
every kind of shape the hidden cases hold (query blocks larger and smaller than key blocks, ragged, causal or not),
and the handout's hand counts are both; the two mistakes of the release do what their descriptions say (a dS
without D: dV right, dQ and dK wrong; a causal backward above the diagonal: right gradients, a full backward's
reads); the judge passes the solution and refuses a kernel that only the interpreter can run. The examples and the
solution are graded by ``tests/test_labs.py``, the mistakes' variants by ``test_lab14_variants.py``; the frozen
handout of release 4 below.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from lab14_solution import kernel, namespace, source

from grader.core import releases
from grader.grade.submission import grade_submission
from grader.judge.isolated import serving
from util.contract import Tolerance
from util.labs import get_lab
from util.labs.lab14 import judge
from util.labs.lab14.launch import run_flash_backward
from util.labs.lab14.mistakes import BACKWARD, MISTAKES
from util.labs.lab14.public_checks import CHECKS, SMALL_BACKWARD

LAB = get_lab("lab14")
RELEASED = Path(__file__).resolve().parents[1] / "released" / "lab14_release4" / "lab14_attention_kernels.ipynb"
MISTAKE = {m.name: m for m in MISTAKES}


def _backward(fn, heads: int, n: int, d: int, block: tuple[int, int], causal: bool, seed: int = 0):
    """The gradients ``fn`` computes, float64 autograd's, and the traffic counted."""
    generator = torch.Generator().manual_seed(seed)
    q, k, v, do = (torch.randn(heads, n, d, generator=generator) for _ in range(4))
    o64, *expected = judge.attention64(q, k, v, do, causal)
    scores = q.double() @ k.double().transpose(-1, -2) / math.sqrt(d)
    if causal:
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    dq, dk, dv, traffic = run_flash_backward(fn, q, k, v, o64.float(), torch.logsumexp(scores, -1).float(), do,
                                             causal, block)
    errors = [judge._error(found, wanted) for found, wanted in zip((dq, dk, dv), expected)]
    return errors, traffic


# ---------------------------------------------------------------- the release

def test_release_5_adds_the_backward_its_points_from_three_tasks_each_case_its_share():
    assert LAB.tasks_since(4) == ("14.8", "14.9") and LAB.tasks_since(5) == ("14.9",)  # 14.9: release 6's
    four = LAB.as_of(4)
    assert [t.id for t in four.tasks] == ["14.1", "14.2", "14.3", "14.4", "14.5", "14.6", "14.7"]
    assert four.max_points == LAB.max_points == 100
    assert [t.max_points for t in four.tasks] == [8, 16, 18, 12, 22, 12, 12]
    assert {t.id: (t.answer_points, [c.points for c in t.cases]) for t in four.tasks
            if t.id in ("14.2", "14.3", "14.4")} == {"14.2": (4, [3, 3, 3, 3]), "14.3": (4, [3, 4, 3, 4]),
                                                     "14.4": (3, [3, 3, 3])}  # as release 4 graded them
    assert [t.max_points for t in LAB.as_of(5).tasks] == [8, 12, 16, 8, 22, 12, 12, 10]
    assert {t.id: (t.answer_points, [c.points for c in t.cases]) for t in LAB.as_of(5).tasks
            if t.id in ("14.2", "14.3", "14.4", "14.8")} == {
        "14.2": (4, [2, 2, 2, 2]), "14.3": (2, [3, 4, 3, 4]), "14.4": (2, [2, 2, 2]), "14.8": (2, [3, 3, 2])}
    assert [c.id for c in LAB.task("14.8").cases] == list(BACKWARD)


def test_the_note_of_a_release_4_notebook_says_the_backward_was_not_graded():
    built = releases.built_from({"cells": [{"cell_type": "markdown", "source": LAB.releases[3].marker}],
                                 "metadata": {}}, LAB)
    note = releases.note(LAB, built)
    assert built.release == 4 and "Release 5 (2026-12-02): A new task: 14.8" in note
    assert "the tasks added since (14.8 and 14.9) were not part of your handout and are not graded" in note


@pytest.mark.slow  # an earlier frozen release: the lab's latest frozen release keeps its marks on every run
@pytest.mark.notebook
def test_the_frozen_release_4_handout_keeps_its_marks(tmp_path):
    result = grade_submission(RELEASED, LAB, tmp_path)
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == [] and result.release == 4
    assert [t.task_id for t in result.tasks] == ["14.1", "14.2", "14.3", "14.4", "14.5", "14.6", "14.7"]
    assert result.score == LAB.as_of(4).auto_points == 95  # and the 5 written points, marked by hand
    assert {t.task_id: t.max_score for t in result.tasks} == {"14.1": 8, "14.2": 16, "14.3": 18, "14.4": 12,
                                                              "14.5": 19, "14.6": 10, "14.7": 12}


# ---------------------------------------------------------------- 14.8: the closed form and the kernel

def test_the_closed_form_by_hand_is_the_handouts():
    assert judge.query_rows(40, (32, 16), False) == 120 and judge.query_rows(40, (32, 16), True) == 40 + 40 + 8
    assert judge.query_rows(72, (16, 32), True) == 72 + 40 + 8  # key blocks at 0, 32, 64: their own query block
    for causal, (loaded, stored) in SMALL_BACKWARD.items():
        assert judge.backward_traffic(1, 40, 16, (32, 16), causal) == (loaded, stored)
    loaded, stored = judge.backward_traffic(2, 90, 16, (32, 16), True)
    assert stored == {"q": 0, "k": 0, "v": 0, "o": 0, "do": 0, "lse": 0, "dq": 11_520, "dk": 11_520, "dv": 11_520}
    assert loaded["k"] == 4 * 2 * 16 * (90 + judge.key_rows(90, (32, 16), True)) and loaded["dq"] == 0


@pytest.mark.parametrize("heads, n, d, block, causal", [
    (1, 40, 16, (32, 16), False), (1, 40, 16, (32, 16), True), (2, 50, 16, (16, 32), True),
    (1, 48, 32, (16, 16), True), (1, 33, 16, (16, 32), False)])
def test_the_solution_moves_exactly_the_closed_form_and_matches_float64(heads, n, d, block, causal):
    errors, traffic = _backward(kernel("backward"), heads, n, d, block, causal)
    assert max(errors) <= judge.KERNEL_RTOL
    assert (traffic.loaded, traffic.stored) == judge.backward_traffic(heads, n, d, block, causal)


def test_the_public_checks_pass_the_solution_and_name_what_is_wrong():
    rules, small, answer = CHECKS["14.8"]
    assert rules.test(kernel("backward")) is None and small.test(kernel("backward")) is None
    without = namespace(MISTAKE["backward_without_delta"].replacements)["flash_backward_kernel"]
    assert small.test(without).startswith("full attention: dQ differs from float64 autograd by ")
    above = namespace(MISTAKE["causal_backward_above_the_diagonal"].replacements)["flash_backward_kernel"]
    assert small.test(above).startswith("causal attention: bytes loaded")
    assert answer.test({"loaded_bytes": [1, 2, 3], "causal_loaded_bytes": [1, 2, 3], "stored_bytes": 98_304,
                        "correct": True, "causal_correct": True}).startswith("causal_loaded_bytes [1, 2, 3] is not")


def test_without_d_dv_is_right_and_dq_dk_are_not():
    without = namespace(MISTAKE["backward_without_delta"].replacements)["flash_backward_kernel"]
    (dq, dk, dv), traffic = _backward(without, 1, 40, 16, (32, 16), False)
    assert dv <= judge.KERNEL_RTOL and dq > 0.01 and dk > 0.01
    assert (traffic.loaded, traffic.stored) == judge.backward_traffic(1, 40, 16, (32, 16), False)  # same bytes


def test_a_causal_backward_above_the_diagonal_is_right_and_reads_as_a_full_one():
    for replacements, reread in ((MISTAKE["causal_backward_above_the_diagonal"].replacements, ("q", "do", "o", "lse")),
                                 (MISTAKE["causal_backward_above_the_diagonal"].variants[0], ("k", "v"))):
        above = namespace(tuple(replacements))["flash_backward_kernel"]
        errors, traffic = _backward(above, 1, 72, 16, (16, 32), True)
        full, _ = judge.backward_traffic(1, 72, 16, (16, 32), False)
        causal, _ = judge.backward_traffic(1, 72, 16, (16, 32), True)
        assert max(errors) <= judge.KERNEL_RTOL
        assert {name: traffic.loaded[name] for name in reread} == {name: full[name] for name in reread}
        assert all(full[name] > causal[name] for name in reread)


# ---------------------------------------------------------------- 14.8: the judge

@pytest.fixture(scope="module")
def judging():
    """This process is the judge; its student processes serve the module's tests, then end."""
    with serving():
        yield
    for state in (judge._students, judge._answered, judge._owing, judge._compiled, judge._baseline):
        state.clear()


LOOSE_ACCUMULATOR = ("        dq = tl.zeros((BLOCK_M, D), dtype=tl.float32)\n", "        dq = 0.0\n")
"""dQ started as a float and grown into a block in the loop: the interpreter broadcasts it, Triton's compiler refuses
a loop-carried value that changes its type (a GPU kernel's values have one shape)."""
LISTED = ("        dq = tl.zeros((BLOCK_M, D), dtype=tl.float32)\n", "        held = [q]\n"
          "        dq = tl.zeros((BLOCK_M, D), dtype=tl.float32)\n")


def test_the_judge_passes_the_solution_and_refuses_what_only_the_interpreter_runs(judging):
    spec = dict(next(c.spec for c in LAB.task("14.8").cases if c.id == BACKWARD[2]))
    honest = source("backward")
    assert judge.check_backward(spec, honest.encode(), Tolerance()) == []
    loose = honest.replace(*LOOSE_ACCUMULATOR)
    assert loose != honest
    errors, _ = _backward(namespace((LOOSE_ACCUMULATOR,))["flash_backward_kernel"], 1, 72, 32, (16, 32), True)
    assert max(errors) <= judge.KERNEL_RTOL  # the interpreter runs it, and right
    [problem] = judge.check_backward(spec, loose.encode(), Tolerance())
    assert problem.startswith("the grader does not count flash_backward_kernel: Triton's compiler refused it for a "
                              "GPU (D=32, BLOCK_M=16, BLOCK_N=32, CAUSAL=True)"), problem
    problems = judge.check_backward(spec, honest.replace(*LISTED).encode(), Tolerance())
    assert problems[0].startswith("the grader does not run flash_backward_kernel: a Python list is allowed only as "
                                  "a call's argument"), problems
