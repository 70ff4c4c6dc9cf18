"""Lab 9's model: the course's DigitsCNN trained on the digits, its BatchNorms folded, and its variants.

* :func:`trained_digits_cnn`: DigitsCNN (``util.models``) trained on ``util.data.digits_split()``
  (Adam, lr 3e-3, batch 64, 4 epochs, seeded), about 99.7 % test accuracy. It is trained **in
  float64 on one thread** and stored in float32: float32 training gives other weights at 2 threads
  than at 1 (summation order), float64 training gives the same float32 weights (measured), so every
  machine gets the same bits. It is cached beside the course's ONNX exports (``build/onnx``), so it
  is trained once per machine (1.5 s), then read (a few milliseconds).
* :func:`fold_conv_bn` (given: lab 5.1's function) and :func:`fold_digits_cnn`: the BatchNorms
  folded into the convolutions before them, in float64, as :class:`FoldedDigitsCNN`.
* :func:`plant_outlier`: the folded model with one channel made ``K`` times larger and the next layer
  made ``K`` times smaller on that channel: the same function, a very different activation range.
* :func:`digits_onnx`: any of these exported to ONNX (opset 17, a dynamic batch dimension), cached.
"""
from __future__ import annotations

import copy
import hashlib
import io
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping

import torch
from torch import nn

EPOCHS = 4
BATCH = 64
LR = 3e-3
OPSET = 17
_HERE = Path(__file__).resolve().parent
_FORMAT = 1
"""Bump when the training or export recipe changes in a way the source hash would not catch."""


def _key(name: str) -> str:
    """A cache file stem that changes with the recipe (this file, the model, the data) and the package versions."""
    digest = hashlib.sha256(str(_FORMAT).encode())
    for package in ("torch", "numpy", "scikit-learn", "onnx"):
        digest.update(metadata.version(package).encode())
    root = _HERE.parents[1]
    for source in (_HERE / "digits.py", root / "models.py", root / "data.py"):
        digest.update(source.read_bytes())
    return f"lab9_{name}_{digest.hexdigest()[:12]}"


def train_digits_cnn(seed: int = 0) -> nn.Module:
    """DigitsCNN trained from scratch (float64 arithmetic, one thread), returned in float32 and eval mode.

    The weights start from ``build_model("digits_cnn", seed)``; the batches come from a
    ``torch.Generator`` seeded with ``seed``. It takes about 1.5 s; :func:`trained_digits_cnn` caches it.
    """
    from util.data import digits_split
    from util.models import build_model

    split = digits_split()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = build_model("digits_cnn", seed=seed).double().train()
        optimizer = torch.optim.Adam(model.parameters(), lr=LR)
        generator = torch.Generator().manual_seed(seed)
        x, y = split.x_train.double(), split.y_train
        for _ in range(EPOCHS):
            order = torch.randperm(len(y), generator=generator)
            for start in range(0, len(y), BATCH):
                batch = order[start:start + BATCH]
                optimizer.zero_grad()
                nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
                optimizer.step()
    finally:
        torch.set_num_threads(threads)
    return model.float().eval()


def trained_digits_cnn(seed: int = 0) -> nn.Module:
    """The trained DigitsCNN (float32, eval mode), from the cache when it is there (see the module's help).

    >>> model = trained_digits_cnn()
    >>> sum(p.numel() for p in model.parameters())
    19258
    """
    import numpy as np

    from util import export_cache
    from util.models import build_model

    name = f"{_key(f'digits_cnn_seed{seed}')}.npz"
    found = export_cache.find("onnx", name)
    model = build_model("digits_cnn", seed=seed)
    if found is not None:
        with np.load(found, allow_pickle=False) as arrays:
            state = {key: torch.from_numpy(arrays[key].copy()) for key in arrays.files}
    else:
        state = {key: value.detach().clone() for key, value in train_digits_cnn(seed).state_dict().items()}
        buffer = io.BytesIO()
        np.savez(buffer, **{key: value.numpy() for key, value in state.items()})
        export_cache.store("onnx", name, buffer.getvalue(), stale=f"lab9_digits_cnn_seed{seed}_*.npz")
    model.load_state_dict(state)
    return model.eval()


# ---------------------------------------------------------------- given: lab 5.1's fold

def fold_conv_bn(conv: nn.Conv2d, bn: nn.BatchNorm2d) -> nn.Conv2d:
    """Given (lab 5.1 has you write one): a new Conv2d computing ``bn(conv(x))`` (bn in eval mode).

    ``W'[c] = W[c] * gamma[c] / sqrt(var[c] + eps)`` and ``b'[c] = beta[c] + (b[c] - mean[c]) * gamma[c] /
    sqrt(var[c] + eps)``, computed in float64 by PyTorch's own fuser
    (``torch.nn.utils.fusion.fuse_conv_bn_eval``) on float64 copies of the two layers, then stored in
    ``conv``'s dtype; same geometry as ``conv``, always with a bias.
    """
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    folded = fuse_conv_bn_eval(copy.deepcopy(conv).double().eval(), copy.deepcopy(bn).double().eval())
    return folded.to(conv.weight.dtype).eval()


class FoldedDigitsCNN(nn.Module):
    """DigitsCNN with its BatchNorms folded: ``conv1`` (1 -> 16) + ReLU, ``conv2`` (16 -> 32) + ReLU,
    ``pool`` (max 2x2), ``conv3`` (32 -> 32) + ReLU, ``flatten``, ``fc`` (512 -> 10). Every conv has a bias.

    Traced by ``torch.fx`` its nodes are ``x, conv1, relu, conv2, relu_1, pool, conv3, relu_2, flatten,
    fc``; exported to ONNX its Conv and Gemm nodes are ``/conv1/Conv``, ``/conv2/Conv``, ``/conv3/Conv``
    and ``/fc/Gemm``.
    """

    def __init__(self, conv1: nn.Conv2d, conv2: nn.Conv2d, conv3: nn.Conv2d, fc: nn.Linear) -> None:
        super().__init__()
        self.conv1, self.conv2, self.conv3, self.fc = conv1, conv2, conv3, fc
        self.pool = nn.MaxPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv1(x))
        x = self.pool(torch.relu(self.conv2(x)))
        x = torch.relu(self.conv3(x))
        return self.fc(torch.flatten(x, 1))


def fold_digits_cnn(model: nn.Module) -> FoldedDigitsCNN:
    """``model`` (a DigitsCNN) with ``bn1``, ``bn2``, ``bn3`` folded into ``conv1``, ``conv2``, ``conv3``."""
    return FoldedDigitsCNN(fold_conv_bn(model.conv1, model.bn1), fold_conv_bn(model.conv2, model.bn2),
                           fold_conv_bn(model.conv3, model.bn3), copy.deepcopy(model.fc)).eval()


def plant_outlier(folded: FoldedDigitsCNN, k: float, where: str = "conv1", channel: int = 0) -> FoldedDigitsCNN:
    """A copy of ``folded`` computing the same function, with output channel ``channel`` of ``where``
    (``"conv1"``, ``"conv2"`` or ``"conv3"``) ``k`` times larger and the next layer's weights that read
    it ``k`` times smaller. ReLU and max pooling commute with a positive scale, so only rounding changes;
    the activation after ``where`` now has one channel ``k`` times wider than the others.
    """
    model = copy.deepcopy(folded)
    producer = getattr(model, where)
    consumer = {"conv1": model.conv2, "conv2": model.conv3, "conv3": model.fc}[where]
    with torch.no_grad():
        producer.weight[channel] *= k
        producer.bias[channel] *= k
        if isinstance(consumer, nn.Linear):   # flatten order: channel-major, 4 x 4 positions per channel
            positions = consumer.in_features // producer.out_channels
            consumer.weight[:, channel * positions:(channel + 1) * positions] /= k
        else:
            consumer.weight[:, channel] /= k
    return model.eval()


# ---------------------------------------------------------------- variants and their ONNX exports

def digits_model(spec: Mapping[str, Any] | None = None) -> FoldedDigitsCNN:
    """The folded trained model a spec names: ``{}`` (plain) or ``{"outlier": k, "where": "conv1"}``."""
    spec = dict(spec or {})
    folded = fold_digits_cnn(trained_digits_cnn(spec.get("seed", 0)))
    if spec.get("outlier"):
        folded = plant_outlier(folded, float(spec["outlier"]), spec.get("where", "conv1"), spec.get("channel", 0))
    return folded


def export_onnx(model: nn.Module, input_shape: tuple[int, ...] = (1, 1, 8, 8)) -> bytes:
    """``model`` exported to ONNX (opset 17, input ``input``, output ``output``, dynamic batch) as bytes."""
    import warnings

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # the TorchScript exporter's deprecation warning
        torch.onnx.export(model, (torch.zeros(input_shape),), buffer, dynamo=False, opset_version=OPSET,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    return buffer.getvalue()


def digits_onnx(spec: Mapping[str, Any] | None = None, path: str | Path | None = None) -> bytes:
    """The ONNX export of :func:`digits_model` ``(spec)``, cached in ``build/onnx``; written to ``path`` if given."""
    import json

    from util import export_cache

    spec = dict(spec or {})
    tag = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:8]
    name = f"{_key(f'digits_{tag}')}.onnx"
    found = export_cache.find("onnx", name)
    if found is not None:
        data = found.read_bytes()
    else:
        data = export_onnx(digits_model(spec))
        export_cache.store("onnx", name, data, stale=f"lab9_digits_{tag}_*.onnx")
    if path is not None:
        Path(path).write_bytes(data)
    return data
