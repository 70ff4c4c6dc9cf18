"""Lab 15.7's and 15.8's judges through the grader's real judge path, as root and as an unprivileged grader: each
attack beside an honest control that plays the same case straight.

* 15.7: a record edited after the replay to hide an eviction (counts a student could forge beside an honest
  cache) fails; the honest record passes.
* 15.8: a function that samples the round's token from the target's ``p`` after a rejection fails the exact case
  on the judge's draws; the honest function passes. (The attack kit, ``tests/test_attack_kit.py -m slow``, attacks
  15.8 by its ``judged=("function",)``: a function that searches every frame and object for the grading secret
  or the case's spec finds neither; a function in another draw order is in ``test_lab15_release3.py``.)
"""
from __future__ import annotations

import json
import sys

import cloudpickle
import pytest
from judged_files import judge_files, save_case

from grader.author.solution import solution_namespace
from grader.execute import confinement
from util.labs import get_lab

pytestmark = pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here")
cloudpickle.register_pickle_by_value(sys.modules[__name__])   # as a notebook's functions are: by value
LAB = get_lab("lab15")
PREFIX_CASE = LAB.task("15.7").cases[2].id
EXACT_CASE = LAB.task("15.8").cases[0].id


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab15", ("15.6", "15.7", "15.8"))


@pytest.mark.parametrize("as_user", [False, True], ids=["root", "user"])
def test_a_forged_prefix_record_fails_beside_the_honest_one(solution, tmp_path, as_user):
    spec, honest, _ = save_case("lab15", "15.7", PREFIX_CASE, solution["PrefixCache"], tmp_path)
    steps = json.loads(honest)
    first = next(i for i, s in enumerate(steps) if s["evictions"])
    for step in steps[first:]:
        step["evictions"] -= 1
    found = judge_files("lab15", {"honest": ("15.7", spec, honest), "forged": ("15.7", spec,
                                                                              json.dumps(steps).encode())},
                        tmp_path, as_user=as_user)
    assert found["honest"] == []
    assert found["forged"] and "evictions() is" in found["forged"][0]


def _one_run(spec):
    return {"runs": spec["runs"][:1]}


def from_p(target, draft, prompt, n, k, draws):
    """Speculative sampling with the round's token sampled from p after a rejection (the residual mistake)."""
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


@pytest.mark.parametrize("as_user", [False, True], ids=["root", "user"])
def test_speculative_sampling_the_residual_mistake_fails_beside_the_honest_function(solution, tmp_path, as_user):
    spec = _one_run(dict(LAB.task("15.8").cases[0].spec))
    _, honest, _ = save_case("lab15", "15.8", EXACT_CASE, solution["speculative_sample"], tmp_path, spec=spec)
    _, mistaken, _ = save_case("lab15", "15.8", EXACT_CASE, from_p, tmp_path, spec=spec)
    found = judge_files("lab15", {"honest": ("15.8", spec, honest), "from_p": ("15.8", spec, mistaken)}, tmp_path,
                        as_user=as_user)
    assert found["honest"] == []
    assert any("differ from the grader's own speculative sampling" in problem for problem in found["from_p"])
