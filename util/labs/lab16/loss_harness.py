"""The student's side of the grader's re-run of task 16.5, in a student process.

The grader does not take a distillation run in the student's kernel on trust, nor does it let the student's code
near the model it trains or the images it evaluates on. Its judge (``judge_distill.py``) trains the small student
itself, with the course's loop (:func:`util.labs.lab16.distill.train_student`), and asks this process, started
for it by the grader (:mod:`util.student_process`) with the digits' files unreadable, for one thing per batch: the
gradient of the student's ``distillation_loss`` with respect to the student's logits, given the logits, the
teacher's logits and the labels. This module is the course's code in that process: it imports PyTorch and warms
it up, says it is ready (only then does the judge start its clock), receives the pickled function and loads it
(:func:`util.judging.student_code.load`, bounded, before anything of the case exists here), then answers one
request per batch until the judge says stop. A request holds what one call needs and nothing else: the batch's
logits, the teacher's logits and the labels (the rows in an order the judge draws from its secret), ``T`` and
``alpha``; never a seed, an index or an image.
"""
from __future__ import annotations

import numpy as np

from util.student_process import Channel, ChannelError


def _warm_up() -> None:
    """The operations a distillation loss uses, once, on throwaway tensors (PyTorch's one-off costs)."""
    import torch
    import torch.nn.functional as F

    logits = torch.zeros(4, 10, dtype=torch.float64, requires_grad=True)
    teacher = torch.zeros(4, 10, dtype=torch.float64)
    loss = F.kl_div(F.log_softmax(logits / 2, 1), F.softmax(teacher / 2, 1), reduction="batchmean") \
        + F.cross_entropy(logits, torch.tensor([0, 1, -100, 3]))
    torch.autograd.grad(loss, logits)


def _tensors(header: dict, data: bytes):
    import torch

    rows, classes = int(header["rows"]), int(header["classes"])
    size = rows * classes * 8
    logits = np.frombuffer(data[:size], dtype=np.float64).reshape(rows, classes)
    teacher = np.frombuffer(data[size:2 * size], dtype=np.float64).reshape(rows, classes)
    labels = np.frombuffer(data[2 * size:2 * size + rows * 8], dtype=np.int64)
    return (torch.from_numpy(logits.copy()).requires_grad_(True), torch.from_numpy(teacher.copy()),
            torch.from_numpy(labels.copy()))


def serve(channel: Channel) -> None:
    """``{"ready": true, "readable": [files of the digits this process can read]}`` once warm; then ``{"function": true}`` + the pickled loss: ``{"loaded": true}``; then,
    per batch, ``{"rows", "classes", "T", "alpha"}`` + the logits, the teacher's logits (float64) and the labels
    (int64): ``{"loss": float}`` + the gradient (float64, the logits' shape); ``{"stop": true}`` ends it. Anything
    the function raises: ``{"raised": message}``, and the process ends."""
    import torch

    torch.set_num_threads(1)
    try:
        _warm_up()
        from util.data import readable
        from util.judging import student_code
        from util.labs.lab16.distill import MAX_PICKLE

        channel.send({"ready": True, "readable": readable(("digits",))})  # nothing, or the judge stops
        _, pickled, _ = channel.receive()
    except ChannelError:
        return
    try:
        loss_fn = student_code.load(pickled, limit=MAX_PICKLE)  # the first student code: inside the judge's window
        channel.send({"loaded": True})
        while True:
            header, data, _ = channel.receive()
            if header.get("stop"):
                return
            logits, teacher, labels = _tensors(header, data)
            loss = loss_fn(logits, teacher, labels, float(header["T"]), float(header["alpha"]))
            if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or not loss.requires_grad:
                raise TypeError("distillation_loss must return a one-element tensor computed from student_logits "
                                f"(autograd must reach it); it returned {type(loss).__name__}")
            (grad,) = torch.autograd.grad(loss.reshape(()), logits)
            channel.send({"loss": float(loss.detach())},
                         data=grad.detach().to(torch.float64).contiguous().numpy().tobytes())
    except ChannelError:
        return
    except Exception as exc:  # the student's code may raise anything
        try:
            channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
        except ChannelError:
            pass
