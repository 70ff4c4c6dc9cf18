"""Lab 16.5's judge against distillation losses that are wrong, slow, forge, or reach for what they must not.

The judge (``util.labs.lab16.judge_distill``) trains the small student itself and asks a student process the grader
starts for each batch's gradient of the student's loss; this test process plays the judge
(``grader.judge.isolated.serving``). Each attack sits beside an honest control that takes the same path. Each
re-run starts one student process (PyTorch's import: a few seconds); the solution notebook's own loss is judged when
``tests/test_labs.py`` grades it.
"""
from __future__ import annotations

import io
import re

import cloudpickle
import numpy as np
import pytest

from grader.execute import confinement
from grader.judge.isolated import serving
from util.contract import Tolerance
from util.labs import get_lab
from util.labs.lab16 import judge_distill
from util.labs.lab16.distill import MAX_PICKLE

LAB = get_lab("lab16")
SPEC = dict(LAB.task("16.5").cases[-1].spec)
LOSS = '''
import torch.nn.functional as F


def distillation_loss(student_logits, teacher_logits, labels, T, alpha):
    soft = F.kl_div(F.log_softmax(student_logits / T, dim=1), F.softmax(teacher_logits / T, dim=1),
                    reduction="batchmean")
    labeled = labels != -100
    hard = F.cross_entropy(student_logits[labeled], labels[labeled]) if labeled.any() else student_logits.sum() * 0
    return alpha * T * T * soft + (1 - alpha) * hard
'''
"""The course's loss, as a notebook cell defines it."""


@pytest.fixture(autouse=True, scope="module")
def judge_here():
    """This process is the judge: its calls get student processes from the grader's service."""
    with serving():
        yield


def cell(source: str, name: str = "distillation_loss"):
    """``name`` as a notebook cell of ``source`` defines it (in ``__main__``, so cloudpickle saves it by value)."""
    namespace = {"__name__": "__main__"}
    exec(compile(source, "<notebook cell>", "exec"), namespace)
    return namespace[name]


def saved(fn) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, loss=np.frombuffer(cloudpickle.dumps(fn), dtype=np.uint8))
    return buffer.getvalue()


def verdict(fn, **spec) -> list[str]:
    return judge_distill.check_distillation({**SPEC, **spec}, saved(fn), Tolerance())


def test_the_course_loss_trains_the_student_and_the_labels_alone_do_not(monkeypatch):
    """The control, then a loss that ignores the teacher: the case is one another way provably gets wrong. The
    judge's run is the notebook's loop on the grading secret's draws: over one epoch (before float64's last bits,
    amplified by Adam, move a run's accuracy by an image or more) its student's weights are those the loop here
    trains from the same draws, and far from those of the case's public seed."""
    from util.data import digits_split
    from util.labs.lab16 import distill
    from util.labs.lab16.digits import teacher_logits, trained_digits

    loss = cell(LOSS)
    found, measures, problem = judge_distill.retrain({**SPEC, "cpu_seconds": 1.0}, cloudpickle.dumps(loss))
    assert problem == "" and found >= SPEC["min_accuracy"] and measures["cpu_seconds"] < 1.0, measures

    trained = []
    loop = distill.train_student
    monkeypatch.setattr(distill, "train_student", lambda *args, **kw: trained.append(loop(*args, **kw)) or trained[-1])
    short = {**SPEC, "epochs": 1}
    found, measures, problem = judge_distill.retrain(short, cloudpickle.dumps(loss))
    assert problem == "" and len(trained) == 1
    split, seeds = digits_split(), judge_distill.draws(short)  # the grading secret's draws (this process is the judge)
    assert seeds["init"] != SPEC["seed"] and len(set(seeds.values())) == 3
    x, teacher, labels = distill.distillation_data(split.x_train, split.y_train,
                                                   teacher_logits(trained_digits(), split.x_train),
                                                   SPEC["labels"], seeds["labels"])
    gradient = distill.loss_gradient(loss, SPEC["T"], SPEC["alpha"])

    def gap(seed: int) -> float:
        here = loop(gradient, x, teacher, labels, seed, 1, order_seed=seeds["order"])
        return max(float((a - b).detach().abs().max()) for a, b in zip(here.parameters(), trained[0].parameters()))

    assert gap(seeds["init"]) < 1e-4
    assert gap(int(SPEC["seed"])) > 1e-2
    labels_only = cell(LOSS + "\n\ndef labels_only(s, t, y, T, alpha):\n    return distillation_loss(s, t, y, T, 0.0)\n",
                       "labels_only")
    [problem] = verdict(labels_only)
    reached = re.search(r"the student reaches (\d+\.\d)% test accuracy; at least 94\.5% is needed$", problem)
    assert reached and float(reached.group(1)) < 93.0, problem  # 80-91% on the secret's draws of labelled images


def test_work_done_while_unpickling_is_measured():
    """Code that runs when the function is loaded (an object in its globals whose unpickling spins, then starts a
    thread that keeps computing, outside the interpreter's lock, while the judge trains) is inside the grader's
    window, and its CPU is counted: the control above, on the same budget, passes. The spin alone (1.5 s) is over
    the budget, so the verdict does not hang on how much CPU the thread got on a loaded machine."""
    attack = LOSS + '''
import threading
import time

import numpy


def _spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    block = numpy.ones((300, 300))
    threading.Thread(target=lambda: [block @ block for _ in iter(int, 1)], daemon=True).start()
    return seconds


class _Burn:
    def __reduce__(self):
        return (_spin, (1.5,))


_BURN = _Burn()


def loaded_with_work(s, t, y, T, alpha):
    _BURN
    return distillation_loss(s, t, y, T, alpha)
'''
    problems = verdict(cell(attack, "loaded_with_work"), cpu_seconds=1.0)
    assert any(p.startswith("distillation_loss used ") and p.endswith("at most 1 s") for p in problems), problems


def test_the_loss_can_read_neither_the_digits_nor_anything_of_the_model():
    if not confinement.available():
        pytest.skip("bubblewrap is not usable here; .ci/run installs it")
    probe = '''
def distillation_loss(s, t, y, T, alpha):
    import gc
    import importlib.util
    import pathlib
    import torch

    root = pathlib.Path(importlib.util.find_spec("sklearn.datasets").origin).parent
    sizes = []
    for path in (root / "data" / "digits.csv.gz", root / "descr" / "digits.rst"):
        try:
            sizes.append(len(open(path, "rb").read()))
        except OSError:
            sizes.append(-1)
    objects = gc.get_objects()
    modules = sum(isinstance(o, torch.nn.Module) for o in objects)
    images = sum(isinstance(o, torch.Tensor) and o.dim() == 4 for o in objects)
    raise RuntimeError(f"digits {sizes} modules {modules} images {images}")
'''
    from util.data import digits_files

    assert len(digits_files()) == 2 and all(p.stat().st_size > 1000 for p in digits_files())  # readable here
    [problem] = verdict(cell(probe))
    assert problem.endswith("digits [-1, -1] modules 0 images 0"), problem


def test_a_forged_reply_earns_only_what_its_gradients_do():
    """The loss can find the harness's channel and answer first, with a claim of its own and a zero gradient:
    the judge reads gradients only, and evaluates the student it trained itself."""
    forger = '''
def distillation_loss(s, t, y, T, alpha):
    import gc
    from util.student_process import Channel

    channel = next(o for o in gc.get_objects() if isinstance(o, Channel))
    channel.send({"loss": 0.0, "accuracy": 1.0, "passed": True}, data=bytes(8 * s.numel()))
    return (s * 0).sum()
'''
    [problem] = verdict(cell(forger))  # zero gradients, or replies out of step with the batches: no student either way
    assert ("the student reaches" in problem and "at least 94.5% is needed" in problem) or \
        problem.endswith("the student process answered something other than a gradient of the logits' shape")


def test_an_oversized_function_is_refused_before_anything_runs():
    heavy = cell("WEIGHTS = bytes(range(256)) * 400\n\n\ndef distillation_loss(s, t, y, T, alpha):\n"
                 "    return (s * WEIGHTS[0]).sum()\n")
    [problem] = verdict(heavy)
    assert problem.startswith("distillation_loss pickles to 10") and f"at most {MAX_PICKLE:,}" in problem
    assert len(cloudpickle.dumps(cell(LOSS))) < MAX_PICKLE // 8


def test_a_loss_that_raises_gives_nan_or_hangs_is_reported(monkeypatch):
    stub = cell('def distillation_loss(s, t, y, T, alpha):\n    raise NotImplementedError("Implement task 16.5")\n')
    assert verdict(stub) == ["trained again by the grader: distillation_loss raised NotImplementedError: Implement "
                             "task 16.5"]
    nan = cell("def distillation_loss(s, t, y, T, alpha):\n    return (s * float('nan')).sum()\n")
    [problem] = verdict(nan)
    assert "the loss's gradient with respect to the student's logits is not a finite tensor" in problem
    monkeypatch.setattr(judge_distill, "STEP_SECONDS", 1.0)
    slow = cell("import time\n\n\ndef distillation_loss(s, t, y, T, alpha):\n    time.sleep(3)\n    return s.sum()\n")
    [problem] = verdict(slow)
    assert problem.startswith("trained again by the grader: distillation_loss did not answer") and "at most 1 s" in problem
