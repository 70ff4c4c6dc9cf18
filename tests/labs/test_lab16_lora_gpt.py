"""Lab 16's release 5: task 16.9, LoRA on TinyGPT's attention, the lab's one student process, and what the release
changes for earlier notebooks.

The grader's memory convention by hand (a frozen model keeps nothing for backward; an adapter on the first block
keeps the frozen blocks after it), the judge's answer checks in this process on every case under fresh draws (the
solution passes; every example's mistake, in each of its spellings, fails saying why; forged answers fail), the models
drawn from the secret, the judge through the grader's real judge path (16.7's and 16.9's cases in one student
process, reused only within a grading, by its harness and age), the release's points (release 4's cases keep their
shares) and the frozen release-4 handout's marks.
"""
from __future__ import annotations

import io
from pathlib import Path

import cloudpickle
import numpy as np
import pytest
import torch

from grader.author.solution import solution_namespace
from grader.core import releases
from grader.grade.submission import grade_submission
from util.judging import secret
from util.labs import get_lab, grader_only
from util.labs.lab10.gpt import GPTConfig, seeded_gpt
from util.labs.lab16 import judge_kept
from util.labs.lab16.judge_lora_gpt import (
    expected_memory,
    judge_reply,
    prepare,
    reference_adapted,
    saved_bytes,
    setting,
)
from util.labs.lab16.lora_harness import answer
from util.labs.lab16.mistakes import MISTAKES
from util.labs.lab16.public_checks import GPT_PARAMS, _tiny_gpt

LAB = get_lab("lab16")
TASK = LAB.task("16.9")
RELEASED = Path(__file__).resolve().parents[1] / "released" / "lab16_release4" / "lab16_compression.ipynb"
GPT_MISTAKES = ("lora_on_every_projection", "lora_memory_without_frozen_activations", "lora_merged_without_scaling")


def _edited(name: str, variant: int | None = None):
    mistake = next(m for m in MISTAKES if m.name == name)
    replacements = mistake.replacements if variant is None else mistake.variants[variant]

    def edit(source: str) -> str:
        for old, new in replacements:
            assert source.count(old) <= 1
            source = source.replace(old, new)
        return source

    return solution_namespace("lab16", ("16.6", "16.9"), edit=edit, allow_errors=True)["lora_gpt"]


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab16", ("16.6", "16.9"))


def _judged(function, spec) -> list[str]:
    """One case judged in this process: the harness's answer (no student process) checked by the judge."""
    case = prepare(spec)
    try:
        reply, body = answer(function, case["request"], case["data"])
    except Exception as exc:  # noqa: BLE001 - a mistake may raise anything, as the harness reports it
        reply, body = {"raised": f"{type(exc).__name__}: {exc}"}, b""
    return judge_reply(spec, case, reply, body)


# ---------------------------------------------------------------- the convention by hand

def test_a_frozen_model_keeps_nothing_and_an_adapter_keeps_the_frozen_blocks_after_it():
    cfg = GPTConfig(vocab=16, n_positions=8, d_model=8, n_layer=2, n_head=2)
    model = seeded_gpt(cfg, 0).double().requires_grad_(False)
    assert saved_bytes(model, 2, 4) == 0          # nothing requires a gradient: autograd saves nothing
    a, b = torch.ones(2, 8, dtype=torch.float64), torch.ones(8, 2, dtype=torch.float64)
    first = saved_bytes(reference_adapted(model, {"blocks.0.attn.q": (a, b)}, 2, 4.0), 2, 4)
    last = saved_bytes(reference_adapted(model, {"blocks.1.attn.q": (a, b)}, 2, 4.0), 2, 4)
    assert first > last > 0                       # block 0's adapter keeps block 1's activations too
    adapted = reference_adapted(model, {"blocks.0.attn.q": (a, b)}, 2, 4.0)
    memory = expected_memory(adapted, 2, 4)
    params = sum(p.numel() for p in model.parameters())
    assert memory == {"weights": 8 * (params + 32), "grads": 8 * 32, "optimizer_state": 16 * 32,
                      "activations": first, "total": 8 * (params + 32) + 24 * 32 + first}


def test_the_public_checks_pass_the_solution_and_state_tinygpts_count(solution):
    assert sum(p.numel() for p in seeded_gpt().parameters()) == GPT_PARAMS
    assert _tiny_gpt(solution["lora_gpt"]) is None
    assert "the trainable parameters" in _tiny_gpt(_edited("lora_on_every_projection"))
    assert solution["trainable_gpt"] == 2048 and solution["gpt_difference"] <= 1e-12
    memory, full = solution["memory_gpt"], solution["memory_gpt_full"]
    assert memory["grads"] == 8 * 2048 and full["grads"] == 8 * GPT_PARAMS
    assert full["activations"] > memory["activations"] > full["activations"] // 2   # freezing keeps most of them


# ---------------------------------------------------------------- the judge's checks

@pytest.mark.parametrize("draw", range(2))
def test_the_solution_passes_every_case_and_each_mistake_fails_every_case(solution, draw):
    """On models drawn anew (as every grading draws them), in every spelling the mistakes' declarations give."""
    secret.renew()
    says = {"lora_on_every_projection": "parameters are trainable, more than",
            "lora_memory_without_frozen_activations": "memory['activations']",
            "lora_merged_without_scaling": "merged() does not hold"}
    mistakes = {(name, variant): _edited(name, variant) for name in GPT_MISTAKES
                for variant in (None, *range(len(next(m for m in MISTAKES if m.name == name).variants)))}
    for case in TASK.cases:
        assert _judged(solution["lora_gpt"], case.spec) == [], case.id
        for (name, variant), function in mistakes.items():
            found = _judged(function, case.spec)
            assert found and says[name] in found[0], (name, variant, case.id, found)


def test_forged_answers_fail_saying_why(solution):
    spec = TASK.cases[1].spec
    honest = solution["lora_gpt"]

    def lying_count(model, r, alpha, batch, length):
        found = honest(model, r, alpha, batch, length)
        return {**found, "trainable": found["trainable"] - 1}

    def base_changed(model, r, alpha, batch, length):
        found = honest(model, r, alpha, batch, length)
        with torch.no_grad():
            found["model"].blocks[0].mlp.fc.bias.add_(1e-3)
        return found

    def float32_adapters(model, r, alpha, batch, length):
        found = honest(model, r, alpha, batch, length)
        for block in found["model"].blocks:
            for name in ("q", "v"):
                adapter = getattr(block.attn, name)
                adapter.lora_A.data = adapter.lora_A.data.float()
                adapter.lora_B.data = adapter.lora_B.data.float()
        return found

    def thawed(model, r, alpha, batch, length):
        found = honest(model, r, alpha, batch, length)
        found["model"].ln_f.weight.requires_grad_(True)
        return found

    assert "returned trainable=" in _judged(lying_count, spec)[0]
    assert "no longer holds the base model's blocks.0.mlp.fc.bias" in _judged(base_changed, spec)[0]
    assert "raised" in _judged(float32_adapters, spec)[0] or _judged(float32_adapters, spec)
    assert "more than the adapters'" in _judged(thawed, spec)[0]
    assert "raised TypeError" in _judged(lambda model, r, alpha, batch, length: model, spec)[0]


def test_the_models_come_from_the_secret_not_the_spec():
    spec = TASK.cases[0].spec
    before = setting(spec)
    assert before == setting(spec) != setting(TASK.cases[1].spec)
    secret.renew()
    assert setting(spec) != before
    assert all(key not in case.spec for case in TASK.cases for key in ("seed", "r", "alpha", "config"))
    assert grader_only(Path("judge_lora_gpt.py")) and grader_only(Path("judge_kept.py"))
    assert not grader_only(Path("lora_harness.py"))


# ---------------------------------------------------------------- the lab's one student process

class _Process:
    """A stand-in for a student process: what it was sent, and whether it was closed."""

    started = 0

    def __init__(self, *args, **kwargs) -> None:
        _Process.started += 1
        self.sent, self.closed, self.exit = [], False, None

    @classmethod
    def start(cls, *args, **kwargs):
        return cls()

    def send(self, header, data=b""):
        self.sent.append(header)

    def close(self):
        self.closed = True

    def stats(self):
        return {"exit": self.exit}


def test_the_kept_process_serves_only_its_grading_while_young_and_loads_each_function_once(monkeypatch):
    import util.student_process

    monkeypatch.setattr(util.student_process, "StudentProcess", _Process)
    monkeypatch.setattr(judge_kept, "_KEPT", {})
    judge_kept.prestart(0)
    first = judge_kept._KEPT["student"]
    assert first.sent == []                                           # started early, no function loaded
    assert judge_kept.student("prune_residual", b"16.7", 10, 0) is first
    judge_kept.keep(first)
    assert judge_kept.student("prune_residual", b"16.7", 10, 0) is first and len(first.sent) == 1   # loaded once
    judge_kept.keep(first)
    assert judge_kept.student("lora_gpt", b"16.9", 10, 0) is first
    assert first.sent == [{"function": "prune_residual"}, {"function": "lora_gpt"}]
    judge_kept.keep(first)
    other = judge_kept.student("prune_residual", b"another function", 10, 0)   # another function under that name
    assert other is not first and first.closed
    judge_kept.keep(other)
    secret.renew()                                                    # another grading
    third = judge_kept.student("prune_residual", b"another function", 10, 0)
    assert third is not other and other.closed
    judge_kept.keep(third)
    judge_kept._KEPT["started"] -= judge_kept.REUSE_SECONDS           # too old
    fourth = judge_kept.student("prune_residual", b"another function", 10, 0)
    assert fourth is not third and third.closed
    judge_kept.drop(fourth)                                           # a failing case: the next starts afresh
    fifth = judge_kept.student("lora_gpt", b"16.9", 10, 0)
    assert fourth.closed and fifth is not fourth
    judge_kept.keep(fifth)
    fifth.exit = -9                                                   # ended between cases (its lifetime, a close)
    sixth = judge_kept.student("lora_gpt", b"16.9", 10, 0)
    assert sixth is not fifth and fifth.closed and sixth.exit is None


def test_the_judge_runs_both_tasks_in_one_student_process_through_the_real_judge_path(solution, tmp_path):
    from judged_files import judge_files, save_case

    residual = solution_namespace("lab16", ("16.7",))["prune_residual"]
    saved = {"16.7": ("16.7", *save_case("lab16", "16.7", LAB.task("16.7").cases[0].id, residual, tmp_path)[:2])}
    for index, case in enumerate(TASK.cases):
        saved[f"16.9 {index}"] = ("16.9", *save_case("lab16", "16.9", case.id, solution["lora_gpt"], tmp_path)[:2])
    saved["16.9 mistake"] = ("16.9", *save_case("lab16", "16.9", TASK.cases[0].id,
                                                _edited("lora_merged_without_scaling"), tmp_path)[:2])
    found = judge_files("lab16", saved, tmp_path)
    assert all(found[name] == [] for name in saved if name != "16.9 mistake"), found
    assert found["16.9 mistake"] and "merged() does not hold" in found["16.9 mistake"][0]


def test_the_function_is_pickled_by_value_for_the_judge(solution, tmp_path, monkeypatch):
    from util.labs.lab16.tasks import _lora_gpt

    monkeypatch.setenv("COURSE_OUTPUT_DIR", str(tmp_path))
    spec = TASK.cases[0].spec
    _lora_gpt(solution["lora_gpt"], spec)
    [path] = list(tmp_path.rglob("*.npz"))
    with np.load(io.BytesIO(path.read_bytes()), allow_pickle=False) as saved:
        function = cloudpickle.loads(saved["function"].tobytes())
    assert _judged(function, spec) == []


# ---------------------------------------------------------------- the release

def test_release_5_adds_a_task_whose_points_came_from_five_others_and_release_4_keeps_its_shares():
    assert LAB.release == 5 and LAB.tasks_since(4) == ("16.9",) and LAB.tasks_since(5) == ()
    four = LAB.as_of(4)
    assert [t.id for t in four.tasks] == ["16.1", "16.2", "16.3", "16.4", "16.5", "16.6", "16.7", "16.8"]
    assert four.max_points == LAB.max_points == 100 and four.auto_points == LAB.auto_points == 95
    assert {t.id: [c.points for c in t.cases] for t in four.tasks} == {
        "16.1": [1.5] * 4, "16.2": [3] * 3, "16.3": [2] * 4, "16.4": [2] * 4, "16.5": [1.5, 1.5, 1.5, 7.5],
        "16.6": [4] * 2, "16.7": [3] * 3, "16.8": [2, 2, 2, 4]}   # as release 4 graded them
    assert [t.max_points for t in four.tasks] == [11, 14, 12, 12, 16, 11, 12, 12]
    assert {t.id: [c.points for c in t.cases] for t in LAB.tasks} == {
        "16.1": [1.0] * 4, "16.2": [3] * 3, "16.3": [1.5] * 4, "16.4": [1.5] * 4, "16.5": [1.5, 1.5, 1.5, 7.5],
        "16.6": [3] * 2, "16.7": [3] * 3, "16.8": [1.6, 1.6, 1.6, 3.2], "16.9": [2, 3, 3]}
    assert [t.max_points for t in LAB.tasks] == [9, 14, 10, 10, 16, 9, 12, 10, 10]


def test_the_note_of_a_release_4_notebook_says_the_new_task_was_not_graded():
    built = releases.built_from({"cells": [{"cell_type": "markdown", "source": LAB.releases[3].marker}],
                                 "metadata": {}}, LAB)
    note = releases.note(LAB, built)
    assert built.release == 4 and "Release 5 (2026-12-03): A new task, 16.9" in note
    assert "the task added since (16.9) was not part of your handout and is not graded" in note


@pytest.mark.notebook
def test_the_frozen_release_4_handout_keeps_its_marks(tmp_path):
    result = grade_submission(RELEASED, LAB, tmp_path)
    failing = [(t.task_id, c.name, c.message) for t in result.tasks for c in t.checks if c.status != "passed"]
    assert failing == [] and result.release == 4
    assert [t.task_id for t in result.tasks] == ["16.1", "16.2", "16.3", "16.4", "16.5", "16.6", "16.7", "16.8"]
    assert result.score == LAB.as_of(4).auto_points == 95  # and the 5 written points, marked by hand
    assert {t.task_id: t.max_score for t in result.tasks} == {"16.1": 11, "16.2": 14, "16.3": 9, "16.4": 12,
                                                              "16.5": 14, "16.6": 11, "16.7": 12, "16.8": 12}
    assert "was not part of your handout" in result.notes[0]
