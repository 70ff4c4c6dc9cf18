"""Task 16.5's training run: the small student (:func:`~util.labs.lab16.nets.small_student`) trained on the
digits with a distillation loss, by the course's own loop, which the notebook and the grader share.

* **Data**: the 1,437 training images of ``util.data.digits_split()``; only ``labels`` of them keep their label
  (a subset drawn from ``seed``), the others get :data:`UNLABELED` (-100, ``F.cross_entropy``'s
  ``ignore_index``). The teacher's logits on every image are computed once, in float64
  (:func:`~util.labs.lab16.digits.teacher_logits`).
* **Loop** (:func:`train_student`): the student built from ``seed``, in float64 on one thread; Adam with
  learning rate 2e-2; batches of 128 in a new order each epoch (a ``torch.Generator`` seeded with ``seed + 1``, or
  ``order_seed``);
  10 epochs (120 batches). For each batch the loop asks ``gradient(student_logits, teacher_logits, labels)`` for the gradient
  of the loss with respect to the student's logits and back-propagates it through the student. In the notebook
  that gradient comes from your loss function through autograd (:func:`loss_gradient`); the grader runs the same
  loop with your function in a process of its own (the task's text says how).
* The trained student is returned in float32, in eval mode.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import torch

UNLABELED = -100
"""The label of an image whose label the student may not use (``F.cross_entropy`` ignores it by default)."""
EPOCHS = 10
BATCH = 128
LR = 2e-2

MAX_PICKLE = 16 << 10
"""Largest pickled ``distillation_loss`` the grader accepts, in bytes (a loss of a few lines pickles to about
1.2 KiB; data and weights do not fit, and would not help: the grader's process sends your function logits only)."""

Gradient = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def labeled_subset(n: int, labels: int, seed: int) -> torch.Tensor:
    """The indices of the ``labels`` training images (of ``n``) that keep their label: the first ``labels`` of a
    permutation drawn from ``seed``."""
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:labels]


def distillation_data(x: torch.Tensor, y: torch.Tensor, teacher_logits: torch.Tensor, labels: int,
                      seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(images, teacher logits, labels)`` in float64 / float64 / int64, every label but those of
    :func:`labeled_subset` replaced by :data:`UNLABELED`."""
    kept = torch.full_like(y, UNLABELED)
    subset = labeled_subset(len(y), labels, seed)
    kept[subset] = y[subset]
    return x.double(), teacher_logits.double(), kept


def loss_gradient(loss_fn: Callable, T: float, alpha: float) -> Gradient:
    """A ``gradient`` for :func:`train_student` from ``loss_fn(student_logits, teacher_logits, labels, T, alpha)``:
    the gradient of its (scalar) result with respect to the student's logits, by autograd."""
    def gradient(student_logits: torch.Tensor, teacher: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits = student_logits.detach().clone().requires_grad_(True)
        loss = loss_fn(logits, teacher, labels, T, alpha)
        (grad,) = torch.autograd.grad(loss, logits)
        return grad
    return gradient


def train_student(gradient: Gradient, x: torch.Tensor, teacher: torch.Tensor, labels: torch.Tensor, seed: int,
                  epochs: int = EPOCHS, order_seed: int | None = None) -> torch.nn.Module:
    """The course's distillation loop: the student built from ``seed`` (``small_student``), in float64 on one thread,
    trained on ``(x, teacher, labels)`` with Adam (learning rate 2e-2) for ``epochs`` epochs of batches of 128 in an
    order drawn from ``order_seed`` (default ``seed + 1``; the grader draws both from a secret of its own). For each
    batch it calls ``gradient(student_logits, teacher_logits, labels)`` (the logits detached) and back-propagates what
    it returns, the gradient of the loss with respect to those logits, through the student (``loss_gradient`` makes
    such a function from a loss). Returns the student in float32 and eval mode. What ``gradient`` returns that is not
    a finite tensor of the logits' shape raises ``ValueError``."""
    from util.labs.lab16.nets import small_student

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = small_student(seed).double().train()
        optimizer = torch.optim.Adam(model.parameters(), lr=LR)
        order_generator = torch.Generator().manual_seed(seed + 1 if order_seed is None else order_seed)
        for _ in range(epochs):
            order = torch.randperm(len(labels), generator=order_generator)
            for start in range(0, len(labels), BATCH):
                batch = order[start:start + BATCH]
                logits = model(x[batch])
                grad = gradient(logits.detach(), teacher[batch], labels[batch])
                if not isinstance(grad, torch.Tensor) or grad.shape != logits.shape or not torch.isfinite(grad).all():
                    raise ValueError("the loss's gradient with respect to the student's logits is not a finite "
                                     f"tensor of shape {list(logits.shape)}")
                optimizer.zero_grad()
                logits.backward(grad.to(logits.dtype))
                optimizer.step()
    finally:
        torch.set_num_threads(threads)
    return model.float().eval()


def value_inputs(spec: Mapping[str, Any]):
    """Logits of ``spec["rows"]`` images (the student's and the teacher's, float32, ``spec["scale"]`` times normal
    draws) and their labels (int64), ``spec["labeled"]`` of them kept and the others :data:`UNLABELED`, all drawn
    from ``spec["seed"]``: an input for ``distillation_loss`` on which a value can be worked out."""
    import torch

    generator = torch.Generator().manual_seed(int(spec["seed"]))
    rows, classes = int(spec["rows"]), int(spec.get("classes", 10))
    student = torch.randn(rows, classes, generator=generator) * float(spec["scale"])
    teacher = torch.randn(rows, classes, generator=generator) * float(spec["scale"])
    labels = torch.randint(0, classes, (rows,), generator=generator)
    hidden = torch.randperm(rows, generator=generator)[:rows - int(spec["labeled"])]
    labels[hidden] = UNLABELED
    return student, teacher, labels
