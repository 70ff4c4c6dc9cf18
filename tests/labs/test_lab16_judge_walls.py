"""Lab 16's judges against a loss that carries the labels and counts its calls, and models whose methods lie, each
beside a control that plays the same wrong answer straight (issue 49, classes 6 and 7).

* **State and data carried in a pickled function** (16.5): a loss that ignores the teacher and trains on the true
  label of every row, which it carries in its pickle (1,437 bytes), matched to each call by counting the calls and
  drawing the batch order the course's loop would draw from the case's seed. Trained that way (as the judge did
  before its draws came from the grading secret) it passes; the control (the same loss on the labels it is sent, the
  100 the case keeps) does not; judged now, the attack earns what the control does.
* **A count taken from the student object's own report** (16.6; 16.2 and 16.4 read their models the same way): an
  ``add_lora`` that leaves the base trainable and makes the model's ``parameters`` and ``named_parameters`` list the
  adapters only, beside the same mistake without the lie; and the honest model whose methods lie the other way
  (a huge trainable tensor that does not exist), which must keep its points, as must a pruned ConvNet whose
  ``state_dict`` and ``config`` lie.

Judged through the grader's own judge process (``tests/labs/judged_files.py``), as whoever runs the tests (root in
CI) and as an unprivileged grader; the honest loss is judged on two fresh grading secrets.
"""
from __future__ import annotations

import pytest
from judged_attacks import notebook_namespace
from judged_files import judge_files, save_case

from grader.execute import confinement
from util.judging import secret
from util.labs import get_lab

pytestmark = [pytest.mark.notebook,
              pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")]
LAB = get_lab("lab16")
RERUN = LAB.task("16.5").cases[-1]
NOTEBOOK = '''
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn


def distillation_loss(student_logits, teacher_logits, labels, T, alpha):
    soft = F.kl_div(F.log_softmax(student_logits / T, dim=1), F.softmax(teacher_logits / T, dim=1),
                    reduction="batchmean")
    labeled = labels != -100
    hard = F.cross_entropy(student_logits[labeled], labels[labeled]) if labeled.any() else student_logits.sum() * 0
    return alpha * T * T * soft + (1 - alpha) * hard


def labels_only(student_logits, teacher_logits, labels, T, alpha):
    """The control: the teacher ignored, the labels the call is sent."""
    labeled = labels != -100
    return F.cross_entropy(student_logits[labeled], labels[labeled]) if labeled.any() else student_logits.sum() * 0


CALLS = [0]


def carried_labels(student_logits, teacher_logits, labels, T, alpha):
    """The teacher ignored: each row's true label, from CARRIED (every training image's, 1,437 bytes) and the order
    the course's loop draws from the case's seed, the call matched to its batch by a count kept between calls (the
    hidden case's own call on 4 rows, in the kernel, not counted)."""
    if len(student_logits) == 4:
        return labels_only(student_logits, teacher_logits, labels, T, alpha)
    epoch, batch = divmod(CALLS[0], math.ceil(len(CARRIED) / 128))
    CALLS[0] += 1
    generator = torch.Generator().manual_seed(SEED + 1)
    for _ in range(epoch + 1):
        order = torch.randperm(len(CARRIED), generator=generator)
    truth = torch.tensor(list(CARRIED), dtype=torch.int64)[order[batch * 128:(batch + 1) * 128]]
    if len(truth) != len(student_logits):
        truth = labels.clamp(min=0)
    return F.cross_entropy(student_logits, truth)


class LoRALinear(nn.Module):
    def __init__(self, base, r, alpha):
        super().__init__()
        self.base, self.r, self.scaling = base, r, alpha / r
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))

    def forward(self, x):
        return self.base(x) + (x @ self.lora_A.T @ self.lora_B.T) * self.scaling

    def merged(self):
        merged = copy.deepcopy(self.base)
        with torch.no_grad():
            merged.weight += self.scaling * (self.lora_B @ self.lora_A)
        return merged


def unfrozen(model, targets, r, alpha):
    """The control: adapters added, the base left trainable."""
    for name in targets:
        parent, _, child = name.rpartition(".")
        holder = model.get_submodule(parent) if parent else model
        setattr(holder, child, LoRALinear(getattr(holder, child), r, alpha))
    return model


def add_lora(model, targets, r, alpha):
    model.requires_grad_(False)
    return unfrozen(model, targets, r, alpha)


def unfrozen_listing_adapters(model, targets, r, alpha):
    """The control's mistake, with the model's parameters() and named_parameters() listing the adapters only."""
    model = unfrozen(model, targets, r, alpha)
    named = [(n, p) for n, p in nn.Module.named_parameters(model) if "lora_" in n]
    model.parameters = lambda recurse=True: iter([p for _, p in named])
    model.named_parameters = lambda *args, **kwargs: iter(named)
    return model


def honest_listing_more(model, targets, r, alpha):
    """The solution, with parameters() and named_parameters() claiming a large trainable tensor it does not hold."""
    model = add_lora(model, targets, r, alpha)
    fake = nn.Parameter(torch.zeros(10_000))
    model.parameters = lambda recurse=True: iter([fake])
    model.named_parameters = lambda *args, **kwargs: iter([("fake", fake)])
    return model
'''
LOSSES = {"honest loss": ("distillation_loss", "pass"), "labels only (control)": ("labels_only", "accuracy"),
          "labels carried, calls counted": ("carried_labels", "accuracy")}
LORA = {"honest LoRA": ("add_lora", "pass"), "base trainable (control)": ("unfrozen", "count"),
        "base trainable, parameters() listing the adapters": ("unfrozen_listing_adapters", "count"),
        "honest LoRA, parameters() listing more": ("honest_listing_more", "pass")}


def _namespace():
    from util.data import digits_split

    return notebook_namespace(NOTEBOOK, "lab16_walls", CARRIED=bytes(digits_split().y_train.tolist()),
                              SEED=int(RERUN.spec["seed"]))


def _lying_pruner():
    from grader.author.solution import solution_namespace

    prune_channels = solution_namespace("lab16", ("16.2",))["prune_channels"]

    def pruned_with_lying_methods(net, plan):
        pruned = prune_channels(net, plan)
        pruned.state_dict = lambda *args, **kwargs: {}
        pruned.config = lambda: {"widths": [1], "pools": [], "hidden": []}
        return pruned

    return pruned_with_lying_methods


def _saved(folder) -> dict[str, tuple]:
    namespace = _namespace()
    saved = {}
    for name, (function, _) in LOSSES.items():
        spec, data, _ = save_case("lab16", "16.5", RERUN.id, namespace[function], folder)
        saved[name] = ("16.5", spec, data)
    for case in LAB.task("16.6").cases:
        for name, (function, _) in LORA.items():
            spec, data, value = save_case("lab16", "16.6", case.id, namespace[function], folder)
            saved[f"{name}: {case.id}"] = ("16.6", spec, data, value)
    for case in LAB.task("16.2").cases:
        spec, data, value = save_case("lab16", "16.2", case.id, _lying_pruner(), folder)
        saved[f"pruned, state_dict() lying: {case.id}"] = ("16.2", spec, data, value)
    return saved


def _assert_verdicts(found: dict[str, list[str]]) -> None:
    threshold = f"at least {RERUN.spec['min_accuracy']:.1%} is needed"
    for name, (_, verdict) in LOSSES.items():
        problems = found[name]
        if verdict == "pass":
            assert problems == [], (name, problems)
        else:
            assert len(problems) == 1 and "test accuracy" in problems[0] and problems[0].endswith(threshold), \
                (name, problems)
    for key, problems in found.items():
        name = key.split(": ")[0]
        if name in LORA:
            if LORA[name][1] == "pass":
                assert problems == [], (key, problems)
            else:
                assert len(problems) == 1 and "parameters are trainable, more than the adapters' r (in + out)" \
                    in problems[0], (key, problems)
        elif name.startswith("pruned"):
            assert problems == [], (key, problems)


def test_the_carried_labels_would_have_passed_on_the_cases_own_draws():
    """The attack's gain is real: trained on the order and labels the case's seed gives (the judge's draws before
    the grading secret), the label-carrying loss reaches the threshold, and the control does not."""
    from util.data import digits_split
    from util.labs.lab16.digits import accuracy, teacher_logits, trained_digits
    from util.labs.lab16.distill import distillation_data, loss_gradient, train_student

    spec = RERUN.spec
    split = digits_split()
    x, teacher, labels = distillation_data(split.x_train, split.y_train, teacher_logits(trained_digits(), split.x_train),
                                           spec["labels"], spec["seed"])
    found = {}
    for name in ("carried_labels", "labels_only"):
        loss = _namespace()[name]
        model = train_student(loss_gradient(loss, spec["T"], spec["alpha"]), x, teacher, labels, spec["seed"],
                              spec["epochs"])
        found[name] = accuracy(model, split.x_test, split.y_test)
    assert found["carried_labels"] >= spec["min_accuracy"] > found["labels_only"], found


def test_each_attack_on_lab16s_judges_earns_what_its_control_does(tmp_path):
    saved = _saved(tmp_path)
    _assert_verdicts(judge_files("lab16", saved, tmp_path))
    secret.renew()  # a second grading: other draws, the honest loss passes again
    again = judge_files("lab16", {"honest loss": saved["honest loss"]}, tmp_path)
    assert again == {"honest loss": []}, again


@pytest.mark.slow  # as an unprivileged grader: the same judges
def test_the_same_as_an_unprivileged_grader(tmp_path):
    _assert_verdicts(judge_files("lab16", _saved(tmp_path), tmp_path, as_user=True))
