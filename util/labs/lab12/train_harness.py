"""The student's side of the grader's re-run of task 12.5, in a student process.

The grader does not take a training run in the student's kernel on trust. Its judge
(``judge_training.py``) asks the grader for a student process (:mod:`util.student_process`) running
:func:`serve`, with the digits and the models the course trained on them withheld (unreadable there).
This module is the course's code in that process. It first warms PyTorch up (a throwaway step on another
model, so the first backward's one-off cost is not charged to the student) and says it is ready: no
student code has run yet. Only then does the judge start its clock and send the student's ``train``
(pickled by value by the hidden case) and the training images; everything of the student's happens
after that, inside the judge's measurement: unpickling the function (which can run code: it is loaded before the
images and the seed are received, so nothing of the case is there to find), the imports it makes, building a
fresh DigitsCNN from the judge's seed (drawn from the grading secret), and ``train(model, (x, y), epochs, seed)``.
It sends back the returned model's ``state_dict``; the judge evaluates those weights itself.
"""
from __future__ import annotations

import numpy as np

from util.student_process import Channel, ChannelError

MAX_CARRIED = 16 << 10
"""Bytes the pickled ``train`` may have: its code, the functions it calls and the values it reads from the
notebook (the solution's is about 2 KB). DigitsCNN's weights are 77 KB in float32 (19 KB at 8 bits): a model
trained in the notebook cannot ride along whole."""
WITHHELD = ("digits", "digits_models")
"""What the judge withholds from this process (``judge_training.WITHHELD``); checked here before any student code."""
DTYPES = ("float32", "int64")
"""The dtypes a DigitsCNN ``state_dict`` holds (parameters and BatchNorm statistics, its counters)."""


def _warm_up() -> None:
    """One Adam step of a throwaway DigitsCNN: PyTorch's kernels, autograd and the optimizer loaded."""
    import torch
    import torch.nn.functional as F

    from util.models import build_model

    model = build_model("digits_cnn", seed=999).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss = F.cross_entropy(model(torch.zeros(64, 1, 8, 8)), torch.zeros(64, dtype=torch.int64))
    loss.backward()
    optimizer.step()


def _weights(trained) -> tuple[list, bytes]:
    """``[[name, dtype, shape], ...]`` and the bytes of ``trained.state_dict()``'s tensors."""
    listed, parts = [], []
    for name, tensor in trained.state_dict().items():
        array = tensor.detach().cpu().contiguous().numpy()
        if array.dtype.name not in DTYPES:
            raise TypeError(f"the returned model's {name!r} is {array.dtype}; DigitsCNN holds float32 and int64")
        listed.append([name, array.dtype.name, list(array.shape)])
        parts.append(array.tobytes())
    return listed, b"".join(parts)


def serve(channel: Channel) -> None:
    """Warm up and answer ``{"ready": true, "readable": [files of the withheld data this process can read]}``; then
    ``{"function": true}`` + the pickled ``train``, loaded at once (bounded, :func:`util.judging.student_code.load`:
    nothing of the case is here yet for code run by unpickling to find); then ``{"data": {"rows", "seed",
    "epochs"}}`` + the images (float32, rows x 1 x 8 x 8) and labels (int64): build the model, call ``train(model,
    (x, y), epochs, seed)`` and answer ``{"done": [[name, dtype, shape], ...]}`` + the tensors' bytes, or
    ``{"raised": message}``."""
    import torch

    from util.data import readable
    from util.judging import student_code
    from util.models import build_model

    torch.set_num_threads(1)
    _warm_up()
    try:
        # the judge's clock starts after this: nothing of the student's has run; "readable": what of the withheld
        # data this process can still read (nothing, or the judge stops: it evaluates on those images)
        channel.send({"ready": True, "readable": readable(WITHHELD)})
        _, pickled, _ = channel.receive()
    except ChannelError:
        return
    try:
        train = student_code.load(pickled, limit=MAX_CARRIED, what="train, pickled with what it reads,")
    except Exception as exc:  # the student's code may raise anything (unpickling it included)
        channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
        return
    try:
        header, data, _ = channel.receive()
        rows, seed, epochs = (int(header["data"][key]) for key in ("rows", "seed", "epochs"))
    except (ChannelError, KeyError, TypeError, ValueError):
        return
    try:
        x = torch.from_numpy(np.frombuffer(data[:rows * 256], dtype=np.float32).reshape(rows, 1, 8, 8).copy())
        y = torch.from_numpy(np.frombuffer(data[rows * 256:rows * 264], dtype=np.int64).copy())
        model = build_model("digits_cnn", seed=seed)
        trained = train(model, (x, y), epochs, seed)
        listed, weights = _weights(trained)
    except Exception as exc:  # the student's code may raise anything
        channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
        return
    channel.send({"done": listed}, data=weights)
