"""Lab 16's trained model: DigitsCNN (as a :class:`~util.labs.lab16.nets.ConvNet`) trained on the digits, and
how the lab measures accuracy.

:func:`trained_digits` trains ``build_model("digits_cnn")`` with lab 9's recipe on ``util.data.digits_split()`` (Adam, lr 3e-3,
batches of 64, 4 epochs, seeded) **in float64 on one thread** and stores it in float32: float32 training gives
other weights at two threads than at one (the sums run in another order), float64 training the same float32
weights. It is cached beside the course's exports (``build/onnx``): trained once per machine (a few seconds),
then read in milliseconds. It reaches about 99.7 % on the 360 test images.
"""
from __future__ import annotations

import hashlib
import io
from importlib import metadata
from pathlib import Path

import torch
from torch import nn

_HERE = Path(__file__).resolve().parent
_FORMAT = 1
"""Bump when the recipe changes in a way the source hash would not catch."""


def _key() -> str:
    digest = hashlib.sha256(str(_FORMAT).encode())
    for package in ("torch", "numpy", "scikit-learn"):
        digest.update(metadata.version(package).encode())
    root = _HERE.parents[1]
    for source in (_HERE / "digits.py", _HERE / "nets.py", root / "models.py", root / "data.py",
                   root / "labs" / "lab9" / "digits.py"):
        digest.update(source.read_bytes())
    return f"lab16_digits_{digest.hexdigest()[:12]}"


def _train() -> dict[str, torch.Tensor]:
    """Lab 9's recipe (:func:`util.labs.lab9.digits.train_digits_cnn`, seed 0), as a state dict."""
    from util.labs.lab9.digits import train_digits_cnn

    return {key: value.detach().clone() for key, value in train_digits_cnn(0).state_dict().items()}


def trained_digits():
    """DigitsCNN trained on the digits (float32, eval mode) as a ``ConvNet`` (DigitsCNN's names and forward),
    from the cache when it is there (see the module's help).

    >>> net = trained_digits()
    >>> sum(p.numel() for p in net.parameters())
    19258
    """
    import numpy as np

    from util import export_cache
    from util.labs.lab16.nets import ConvNet

    name = f"{_key()}.npz"
    found = export_cache.find("onnx", name)
    if found is not None:
        with np.load(found, allow_pickle=False) as arrays:
            state = {key: torch.from_numpy(arrays[key].copy()) for key in arrays.files}
    else:
        state = _train()
        buffer = io.BytesIO()
        np.savez(buffer, **{key: value.numpy() for key, value in state.items()})
        export_cache.store("onnx", name, buffer.getvalue(), stale="lab16_digits_*.npz")
    net = ConvNet()
    net.load_state_dict(state)
    return net.eval()


class one_thread:
    """``with one_thread():`` runs PyTorch on one thread (the sums in one order on every machine), then restores the
    thread count."""

    def __enter__(self) -> None:
        self.threads = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc) -> None:
        torch.set_num_threads(self.threads)


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """The fraction of ``x`` that ``model`` (put in eval mode) classifies as ``y``, without gradients, on one
    thread: one image of the 360 test images is 1/360 = 0.0028."""
    model.eval()
    with torch.no_grad(), one_thread():
        return float((model(x.to(next(model.parameters()).dtype)).argmax(1) == y).double().mean())


def teacher_logits(teacher: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``teacher``'s logits on ``x``, computed once, in float64 on one thread (eval mode, no gradients): what
    distillation reads instead of running the teacher on every batch."""
    import copy

    model = copy.deepcopy(teacher).double().eval()
    with torch.no_grad(), one_thread():
        return model(x.double())
