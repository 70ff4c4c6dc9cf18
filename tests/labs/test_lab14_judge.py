"""Lab 14's judges against submissions that read them: each attack beside an honest control.

This process plays the judge (``grader.judge.isolated.serving``): the judges start their student processes from
it, sandboxed as in grading, and keep them for the module (one per kind, as for one notebook's cases). What is
held to account:

* a kernel's traffic is the grader's count in a process where nothing of the student's runs but kernel bodies
  that pass the rules: a kernel that names the counter, the interpreter, a module or a helper is never run, and
  the harness refuses it too if the judge did not;
* a ragged edge without masks is refused, not counted, and an extra pass over the data is counted;
* an attention that builds the score matrix raises the peak memory the grader reads beyond what it allows,
  whatever memory it asks for (the heap or a shared mapping), and lifting a limit gains nothing;
* a kernel is compiled by Triton's own compiler before it is counted;
* the inputs the grader evaluates on come from the grading secret, not from what the notebook sees (the case's
  seed). The held-out attacks are in ``test_lab14_attacks.py``.
"""
from __future__ import annotations

import io
from pathlib import Path

import cloudpickle
import numpy as np
import pytest
import torch
from lab14_solution import namespace, source

from grader.judge.isolated import serving
from util.contract import Tolerance
from util.labs import get_lab
from util.labs.lab14 import judge

LAB = get_lab("lab14")
TILED = LAB.task("14.2").tolerance


def _spec(task: str, words: str) -> dict:
    return dict(next(c.spec for c in LAB.task(task).cases if words in c.id))


@pytest.fixture(autouse=True, scope="module")
def judge_here():
    """This process is the judge; its student processes serve every test of the module, then end."""
    with serving():
        yield
    for state in (judge._students, judge._answered, judge._owing, judge._compiled, judge._baseline):
        state.clear()


def _saved(cls) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, function=np.frombuffer(cloudpickle.dumps(cls), dtype=np.uint8))
    return buffer.getvalue()


SOFTMAX_HEAD = "def softmax_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):\n"
SOFTMAX_BODY = """    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=float("-inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride_y + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)
"""
REACHING = {
    "the interpreter's builder": "    interpreter_builder.create_masked_load = None\n",
    "the counter's module": "    tl.core.builtin = None\n",
    "a tensor's handle": "    row = tl.program_id(0).handle\n",
    "a dunder": "    row = tl.program_id(0).__class__\n",
    "an import": "    import os\n",
    "a builtin that reaches anything": "    __import__('os').system('true')\n",
    "a helper function": "    helper(x_ptr)\n",
    "a lambda": "    f = lambda: 0\n",
    "an atomic": "    tl.atomic_add(x_ptr, 1.0)\n",
}


def test_a_kernel_that_reaches_past_the_language_is_never_run_and_an_honest_one_is_counted():
    spec = _spec("14.4", "12 rows of 777")
    honest = "@triton.jit\n" + SOFTMAX_HEAD + SOFTMAX_BODY
    assert judge.check_softmax(spec, honest.encode(), Tolerance()) == []
    for what, line in REACHING.items():
        problems = judge.check_softmax(spec, ("@triton.jit\n" + SOFTMAX_HEAD + line + SOFTMAX_BODY).encode(),
                                       Tolerance())
        assert problems and problems[0].startswith("the grader does not run softmax_kernel: "), (what, problems)


def test_the_kernel_process_refuses_a_forbidden_source_itself():
    """Defence in depth: a source sent past the judge's own reading is refused by the harness, not run."""
    reply, _, problem = judge._ask("kernels", {"kernel": "softmax", "source": SOFTMAX_HEAD + REACHING["an import"]
                                               + SOFTMAX_BODY, "shape": {"rows": 1, "cols": 4}},
                                   torch.zeros(1, 4).numpy().tobytes())
    assert problem == "" and reply["refused"][0] == "an import is not allowed in a graded kernel (line 2)"


def test_a_second_read_of_the_row_is_counted_by_the_grader():
    spec = _spec("14.4", "8 rows")
    twice = SOFTMAX_BODY.replace("    e = tl.exp(x - tl.max(x, axis=0))\n",
                                 "    top = tl.max(x, axis=0)\n"
                                 "    x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=0.0)\n"
                                 "    e = tl.exp(x - top)\n")
    problems = judge.check_softmax(spec, (SOFTMAX_HEAD + twice).encode(), Tolerance())
    assert problems == ["the kernel loaded 16,384 bytes from X; the closed form is 8,192 (2 times the closed form)"]


def test_a_ragged_edge_without_masks_is_refused_and_with_masks_passes():
    spec = _spec("14.3", "every edge ragged")
    assert judge.check_matmul(spec, source("matmul").encode(), Tolerance()) == []
    unmasked = source("matmul").replace(",\n                    mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)",
                                        ")").replace(",\n                    mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)",
                                                     ")")
    [problem] = judge.check_matmul(spec, unmasked.encode(), Tolerance())
    assert problem.startswith("run by the grader, matmul_kernel raised OutOfBounds: program (0, 0, 0) tried to load ")


def test_the_flash_judge_passes_the_solution_on_a_ragged_causal_case():
    assert judge.check_flash(_spec("14.5", "ragged diagonal"), source("flash").encode(), Tolerance()) == []


def test_an_attention_that_builds_the_score_matrix_cannot_run_in_the_memory_allowed():
    spec = _spec("14.2", "memory budget")
    assert judge.check_attention(spec, _saved(namespace()["FlashAttention"]), TILED) == []

    def naive(lift: bool, shared: bool):
        class Naive(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q, k, v, causal=False, block=32):
                import mmap
                import resource

                if lift:
                    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
                n = q.shape[-2]
                if shared:  # a shared mapping is not private data, but it is address space
                    scores = torch.frombuffer(mmap.mmap(-1, 4 * n * n), dtype=torch.float32).view(1, n, n)
                    torch.matmul(q, k.transpose(-1, -2), out=scores)
                else:
                    scores = q @ k.transpose(-1, -2)
                p = torch.softmax(scores / q.shape[-1] ** 0.5, -1)
                ctx.save_for_backward(p, v)
                return p @ v

            @staticmethod
            def backward(ctx, do):
                p, v = ctx.saved_tensors
                return None, None, p.transpose(-1, -2) @ do, None, None
        return Naive

    for lift, shared in ((False, False), (False, True), (True, False)):
        problems = judge.check_attention(spec, _saved(naive(lift, shared)), TILED)
        assert len(problems) == 1, (lift, shared, problems)
        assert problems[0].startswith("run by the grader at N = 2,048, FlashAttention used more memory than it is "
                                      "allowed: its memory grew by "), problems


def test_the_inputs_the_grader_draws_follow_from_the_grading_secret_and_the_spec():
    from util.judging import secret

    spec = _spec("14.5", "blocks of 32")
    [first] = judge.inputs(spec, [[4, 8]])
    assert torch.equal(first, judge.inputs(spec, [[4, 8]])[0])  # the same within a grading: references agree
    for seed in (spec["seed"], 0):
        assert not torch.equal(first, torch.randn(4, 8, generator=torch.Generator().manual_seed(seed)))
    assert not torch.equal(first, judge.inputs({**spec, "seed": spec["seed"] + 1}, [[4, 8]])[0])
    kept = secret.current()
    try:
        secret.renew()
        assert not torch.equal(first, judge.inputs(spec, [[4, 8]])[0])  # another grading, another draw
    finally:
        secret.install(kept)
    assert "SALT" not in vars(judge) and "hashlib.sha256(SALT" not in Path(judge.__file__).read_text()


def test_a_kernel_that_leaves_values_for_other_programs_is_refused_by_the_gpu_compiler_too():
    """Defence in depth: the compiling process refuses what the rules refuse, and Triton's compiler itself refuses
    an attribute assigned on a pointer (the rules checked first here, so the compiler is asked directly)."""
    body = SOFTMAX_BODY.replace("    e = tl.exp", "    x_ptr.to = x\n    e = tl.exp")
    reply, _, problem = judge._ask("compiler", {"kernel": "softmax", "source": SOFTMAX_HEAD + body,
                                                "constexprs": {"BLOCK": 256}})
    assert problem == "" and reply["refused"][0].startswith("assigning to an attribute is not allowed (line 5)")
    reply, _, problem = judge._ask("compiler", {"kernel": "softmax", "source": SOFTMAX_HEAD + SOFTMAX_BODY,
                                                "constexprs": {"BLOCK": 256}})
    assert problem == "" and reply["compiled"]["stages"] == ["ttir", "ttgir", "llir", "ptx"], reply
    assert reply["compiled"]["ptx_bytes"] > 1000


def test_the_closed_forms_by_hand():
    assert judge.matmul_traffic(100, 72, 90, (32, 32, 32)) == ({"a": 108_000, "b": 103_680, "c": 0},
                                                               {"a": 0, "b": 0, "c": 28_800})
    assert judge.key_rows(40, (16, 16), False) == 120 and judge.key_rows(40, (16, 16), True) == 16 + 32 + 40
    assert judge.key_rows(200, (64, 32), True) == 64 + 128 + 192 + 200
    assert judge.softmax_traffic(3, 5) == ({"x": 60, "y": 0}, {"x": 0, "y": 60})


def test_a_kernel_that_never_ends_fails_its_case_and_the_next_case_gets_a_fresh_process(monkeypatch):
    spec = _spec("14.4", "12 rows of 777")
    judge.check_softmax(spec, source("softmax").encode(), Tolerance())  # the process has answered once: warm
    monkeypatch.setattr(judge, "RUN_SECONDS", 2.0)
    endless = SOFTMAX_HEAD + "    k = 0\n    while k < n_cols:\n        k = k * 1\n" + SOFTMAX_BODY  # compiles
    assert judge.check_softmax(spec, endless.encode(), Tolerance()) == [
        "your code did not finish within 2 s when the grader ran it (the course's takes about a second)"]
    monkeypatch.setattr(judge, "RUN_SECONDS", 30.0)
    assert judge.check_softmax(spec, source("softmax").encode(), Tolerance()) == []
