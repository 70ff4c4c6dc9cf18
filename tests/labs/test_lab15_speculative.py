"""Lab 15.6's judge against ``speculative_generate`` functions that are right, wrong, bypass the counting target
the kernel hands them, or misuse the grader's target.

The judge (``util.labs.lab15.judge.check_speculative``) runs the student's function again in a student process
the grader starts (this test process plays the judge, ``grader.judge.isolated.serving``), against a target that
lives in the judge: it computes every call's logits, counts the calls, checks each call's input against its own
speculative decoding and the tokens against its own greedy decoding. Each case here starts one student process
(PyTorch's import: a few seconds); the solution's own function is also judged when ``tests/test_labs.py``
grades the solution notebook. Since release 5 the judge draws each run's models and prompt from the grading secret
(``judge.spec_setting``, tested in ``test_lab15_lab.py``); the frozen release-4 notebook is graded in
``test_lab15_release3.py``.
"""
from __future__ import annotations

import io

import cloudpickle
import numpy as np
import pytest

from grader.author.solution import solution_namespace
from grader.core import releases
from grader.judge.isolated import serving
from util.contract import Tolerance
from util.labs import get_lab
from util.labs.lab15 import judge

LAB = get_lab("lab15")
SPEC = dict(LAB.task("15.6").cases[0].spec)

ONE_RUN = {"runs": SPEC["runs"][:1]}


@pytest.fixture(autouse=True, scope="module")
def judge_here():
    """This process is the judge: its calls get student processes from the grader's service."""
    with serving():
        yield


@pytest.fixture(scope="module")
def honest():
    return solution_namespace("lab15", ("15.6",))["speculative_generate"]


def saved(function) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, function=np.frombuffer(cloudpickle.dumps(function), dtype=np.uint8))
    return buffer.getvalue()


def verdict(function, spec=ONE_RUN) -> list[str]:
    return judge.check_speculative(spec, saved(function), Tolerance())


def test_the_solution_passes_both_runs_in_one_student_process(honest):
    assert verdict(honest, SPEC) == []


def test_plain_greedy_through_the_target_is_counted_by_the_grader():
    def plain(target, draft, prompt, n, k):
        import torch

        ids = prompt
        for _ in range(n):
            ids = torch.cat([ids, target(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
        return ids[:, prompt.shape[1]:]

    problems = verdict(plain)   # 40 calls: the grader refuses those past what the protocol needs, and says why
    assert problems[0].startswith("target call 0 checks 0 proposals; each round proposes min(k, n - tokens decided)")
    assert problems[-1].endswith("too many calls: speculative decoding calls the target once per round")


def test_bypassing_the_kernels_counting_target_gains_nothing():
    """In the kernel the target is a CountingTarget with the model behind it: code that reaches past it can
    decode uncounted and claim any count there. The grader's target has nothing behind it: the same code then
    either calls it for every token or cannot decode at all."""
    def bypass(target, draft, prompt, n, k):
        import torch

        model = getattr(target, "_model", None) or target   # uncounted in the kernel, counted by the grader
        ids = prompt
        for _ in range(n):
            ids = torch.cat([ids, model(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
        if hasattr(target, "calls"):
            target.calls = 1
        return ids[:, prompt.shape[1]:]

    problems = verdict(bypass)
    assert problems and problems[0].startswith("target call 0 checks 0 proposals")

    def draft_only(target, draft, prompt, n, k):
        import torch

        ids = prompt
        for _ in range(n):
            ids = torch.cat([ids, draft(ids)[:, -1].argmax(-1, keepdim=True)], dim=1)
        return ids[:, prompt.shape[1]:]

    problems = verdict(draft_only)
    assert problems[0] == ("the target was called 0 times; speculative decoding calls it more times on this case: one "
                           "call per round, each checking every proposal of the round and giving one token of its own")
    assert problems[1].startswith("the tokens returned differ from the grader's own greedy decoding")


def test_a_draft_token_kept_on_a_mismatch_is_caught_at_the_next_call():
    def kept(target, draft, prompt, n, k):
        import torch

        ids, decided = prompt, []
        while len(decided) < n:
            m = min(k, n - len(decided))
            proposal = ids
            for _ in range(m):
                proposal = torch.cat([proposal, draft(proposal)[:, -1].argmax(-1, keepdim=True)], dim=1)
            start = ids.shape[1]
            checked = target(proposal)[0, start - 1:].argmax(-1)
            drafted = proposal[0, start:]
            a = 0
            while a < m and drafted[a] == checked[a]:
                a += 1
            take = (drafted[:a + 1] if a < m else torch.cat([drafted, checked[m:]]))[:n - len(decided)]
            decided += take.tolist()
            ids = torch.cat([ids, take.view(1, -1)], dim=1)
        return torch.tensor([decided])

    problems = verdict(kept)
    assert problems[0].endswith("'s input does not start with the prompt and the tokens decided so far (the target "
                                "checks proposals that follow them)")


def test_malformed_calls_and_exceptions_are_reported():
    def malformed(target, draft, prompt, n, k):
        import torch

        return target(torch.full((1, 3), 10**6, dtype=torch.long))

    assert verdict(malformed) == ["run again by the grader, speculative_generate raised RuntimeError: the grader's "
                                  "target refused the call: the target takes ids of length 1 to 128 within its "
                                  "vocabulary of 512"]

    def stub(target, draft, prompt, n, k):
        raise NotImplementedError("Implement task 15.6: Greedy speculative decoding")

    assert verdict(stub) == ["run again by the grader, speculative_generate raised NotImplementedError: Implement task "
                             "15.6: Greedy speculative decoding"]
    assert judge.check_speculative(ONE_RUN, b"not an npz", Tolerance())[0].startswith("the file saved for this case")



# ---------------------------------------------------------------- release 5: the case's models from the secret

def test_release_5_changes_how_15_6_draws_its_models_and_no_points():
    """Release 5 adds no task and moves no point: as of release 4 every task and case is worth what it is as of
    release 5 (release 7 moved 15.4's and 15.6's points to 15.10)."""
    assert LAB.release >= 5 and LAB.tasks_since(4) == ("15.10",)   # release 7
    before, after = LAB.as_of(4), LAB.as_of(5)
    assert [(t.id, t.max_points, [c.points for c in t.cases]) for t in before.tasks] == \
        [(t.id, t.max_points, [c.points for c in t.cases]) for t in after.tasks]
    assert [c.id for c in before.task("15.6").cases] == [c.id for c in after.task("15.6").cases]


def test_a_release_4_notebook_is_told_what_release_5_changed():
    built = releases.built_from({"cells": [{"cell_type": "markdown", "source": LAB.releases[3].marker}],
                                 "metadata": {}}, LAB)
    assert built.release == 4 and "Release 5 (2026-12-02): Task 15.6's hidden case" in releases.note(LAB, built)


def test_release_6_draws_15_8s_models_from_the_secret_and_a_release_5_notebook_is_told():
    """Release 6 moves no point of 15.8: as of release 5 its cases are worth what they are now; a release-5 notebook
    is graded as release 5 and told what release 6 changed."""
    assert LAB.releases[5].number == 6
    assert [c.points for c in LAB.as_of(5).task("15.8").cases] == [c.points for c in LAB.task("15.8").cases] == [4, 4]
    built = releases.built_from({"cells": [{"cell_type": "markdown", "source": LAB.releases[4].marker}],
                                 "metadata": {}}, LAB)
    assert built.release == 5 and "Release 6 (2026-12-02): Task 15.8's hidden cases" in releases.note(LAB, built)
