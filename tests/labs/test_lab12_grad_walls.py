"""Lab 12.1's judge against ``grad`` functions that use autograd behind the notebook's back, each beside a control.

Task 12.1 forbids autograd inside ``grad``. The notebook refuses it with saved-tensor hooks, which PyTorch keeps
per thread and which Python can take off: a ``grad`` that runs autograd in another thread, or pops the hooks
first, got full marks with the kernel's own gradients. The judge now runs the saved ``grad`` again in a student
process where autograd cannot run (``util.labs.lab12.grad_harness``: one thread, no thread or process can start,
the hooks on and no Python-level way to take them off) and compares what it returns there. Each attack below
passed before; each control plays a wrong answer straight. Judged through the grader's own judge process, in
one call with the honest solution, as whoever runs the tests (root in CI) and as an unprivileged grader.
"""
from __future__ import annotations

import os

import cloudpickle
import numpy as np
import pytest
from judged_attacks import job, notebook_namespace, verdicts

from grader.author.solution import solution_namespace
from grader.execute import confinement
from util.labs import get_lab

pytestmark = [pytest.mark.notebook,
              pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")]
SPEC = dict(get_lab("lab12").task("12.1").cases[0].spec)  # the residual MLP: a value read twice
ATTACKS = '''
import os, threading
import torch


def _autograd(gm, inputs, wrt):
    """Gradients by autograd: what the task forbids."""
    params = {name: getattr(gm, name) for name in wrt}
    for p in params.values():
        p.requires_grad_(True)
    with torch.enable_grad():
        loss = gm(*inputs.values())
        grads = torch.autograd.grad(loss, list(params.values()))
    return {name: g.detach() for name, g in zip(wrt, grads)}


def in_a_thread(gm, inputs, wrt):
    box = {}
    worker = threading.Thread(target=lambda: box.update(_autograd(gm, inputs, wrt)))
    worker.start()
    worker.join()
    return box


def hooks_popped(gm, inputs, wrt):
    torch._C._autograd._pop_saved_tensors_default_hooks()
    return _autograd(gm, inputs, wrt)


def in_a_child(gm, inputs, wrt):
    import pickle
    read, write = os.pipe()
    if os.fork() == 0:
        os.write(write, pickle.dumps({k: v.numpy() for k, v in _autograd(gm, inputs, wrt).items()}))
        os._exit(0)
    data = b""
    while chunk := os.read(read, 1 << 20):
        data += chunk
        if len(data) > 1000:
            try:
                return {k: torch.from_numpy(v) for k, v in pickle.loads(data).items()}
            except Exception:
                continue
    return {}


def zeros(gm, inputs, wrt):
    return {name: torch.zeros_like(getattr(gm, name)) for name in wrt}
'''
EXPECTED = {"honest": "pass", "autograd in a thread": "raised", "hooks popped": "raised",
            "autograd in a child process": "raised", "zeros (control)": "differs"}


def _jobs(folder):
    attacks = notebook_namespace(ATTACKS, "lab12_grad_attacks")
    honest = solution_namespace("lab12", ("12.1",))["grad"]
    functions = {"honest": honest, "autograd in a thread": attacks["in_a_thread"],
                 "hooks popped": attacks["hooks_popped"], "autograd in a child process": attacks["in_a_child"],
                 "zeros (control)": attacks["zeros"]}
    from util.labs.lab12.graphs import build_graph, feeds, parameter_names

    gm = build_graph(SPEC["graph"])
    names = parameter_names(gm)
    kernel = attacks["_autograd"](gm, feeds(SPEC["graph"], SPEC["batch"], SPEC["start"]), names)
    jobs = []
    for name, function in functions.items():
        arrays = {f"grad/{n}": kernel[n].numpy() for n in names}  # what the kernel saw: right, for every attacker
        arrays["grad_fn"] = np.frombuffer(cloudpickle.dumps(function), dtype=np.uint8)
        jobs.append(job(folder, "lab12", "12.1", name.replace(" ", "_").replace("(", "").replace(")", ""),
                        arrays, SPEC))
        jobs[-1]["spec"]["attacker"] = name
    return jobs


def _outcome(problems: list[str]) -> str:
    if not problems:
        return "pass"
    if any("grad raised" in p or "could not be loaded" in p for p in problems):
        return "raised"
    if any("differs from float64 autograd" in p for p in problems):
        return "differs"
    return "other: " + "; ".join(problems)[:300]


@pytest.mark.parametrize("as_user", [False, pytest.param(True, marks=pytest.mark.slow)],  # slow: see lab 12.5's
                         ids=["as-whoever-runs-the-tests", "unprivileged"])
def test_autograd_behind_the_notebooks_back_gains_nothing(tmp_path, as_user):
    if as_user and os.geteuid() != 0:
        pytest.skip("the unprivileged run needs a root test runner to switch users")
    jobs = _jobs(tmp_path)
    found = verdicts(jobs, tmp_path, "lab12", as_user=as_user, timeout=300)
    assert {name: _outcome(problems) for name, problems in found.items()} == EXPECTED, found


def test_what_the_harness_removes_is_this_pytorchs_way_to_take_the_hooks_off():
    """The names the harness deletes are the ones the pinned PyTorch has (a rename would leave a way open)."""
    import torch

    from util.labs.lab12 import grad_harness

    assert [name for name in grad_harness.SEALED if not hasattr(torch._C._autograd, name)] == []
