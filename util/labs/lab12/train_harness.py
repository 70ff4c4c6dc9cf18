"""The student's side of the grader's re-run of task 12.5, in a student process.

The grader does not take a training run in the student's kernel on trust. Its judge
(``judge_training.py``) asks the grader for a student process (:mod:`util.student_process`) running
:func:`serve`, hands it the student's ``train`` (pickled by value by the hidden case) and the training
images, and times the call from its own side of the socket. This module is the course's code in that
process: it warms PyTorch up (a throwaway step on another model, so the first backward's one-off cost
is not charged to the student), builds a fresh DigitsCNN from the judge's seed, calls ``train`` once
and sends back the returned model's ``state_dict``; the judge evaluates those weights itself.
"""
from __future__ import annotations

import numpy as np

from util.student_process import Channel, ChannelError

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


def serve(channel: Channel) -> None:
    """``{"function": true}`` + the pickled ``train``, then ``{"data": {"rows", "seed", "epochs"}}`` + the
    images (float32, rows x 1 x 8 x 8) and labels (int64): build and warm up, answer ``{"ready": true}``;
    then ``{"go": true}``: call ``train(model, (x, y), epochs, seed)`` and answer ``{"done": [[name,
    dtype, shape], ...]}`` + the tensors' bytes, or ``{"raised": message}``."""
    import torch

    torch.set_num_threads(1)
    try:
        _, pickled, _ = channel.receive()
        header, data, _ = channel.receive()
        rows, seed, epochs = (int(header["data"][key]) for key in ("rows", "seed", "epochs"))
        x = torch.from_numpy(np.frombuffer(data[:rows * 256], dtype=np.float32).reshape(rows, 1, 8, 8).copy())
        y = torch.from_numpy(np.frombuffer(data[rows * 256:rows * 264], dtype=np.int64).copy())
        _warm_up()
        from util.models import build_model

        model = build_model("digits_cnn", seed=seed)
        import cloudpickle

        train = cloudpickle.loads(pickled)
        channel.send({"ready": True})
        channel.receive()
    except ChannelError:
        return
    except Exception as exc:  # a function that cannot be unpickled, data that do not fit
        channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
        return
    try:
        trained = train(model, (x, y), epochs, seed)
        state = trained.state_dict()
        listed, parts = [], []
        for name, tensor in state.items():
            array = tensor.detach().cpu().contiguous().numpy()
            if array.dtype.name not in DTYPES:
                raise TypeError(f"the returned model's {name!r} is {array.dtype}; DigitsCNN holds float32 and int64")
            listed.append([name, array.dtype.name, list(array.shape)])
            parts.append(array.tobytes())
    except Exception as exc:  # the student's code may raise anything
        channel.send({"raised": f"{type(exc).__name__}: {exc}"[:300]})
        return
    channel.send({"done": listed}, data=b"".join(parts))
