"""The lab's models: ResNet-18 and a zoo of small graphs, each holding one pattern a pass rewrites.

Each zoo model is a seeded torch module exported with the TorchScript exporter (the course's opset
and IR version, ``util.onnx_models.OPSET`` and ``IR_VERSION``; ``do_constant_folding=False``, so nothing
is pre-computed and the graph keeps the pattern as written). Input ``x``, output ``y``. Exports are
cached in the shared ONNX cache (``util.export_cache``) keyed by this file's source and the package
versions, so the grader's judge and the hidden cases read them without importing torch (the lab's
``prepare`` fills it).

=================  ====================================================  ==========
name               pattern                                               input
=================  ====================================================  ==========
conv_bn            Conv (no bias) -> BatchNormalization (seeded stats)   2x3x8x8
layer_norm         LayerNorm written by hand: (x - mean) / sqrt(var+eps)  4x32
ln_linear          that LayerNorm -> Linear (the notebook's search)      16x64
conv_mul           Conv (with bias) * per-channel constant               2x3x8x8
conv_add           Conv (no bias) + per-channel constant                 2x3x8x8
conv_relu_gemm     Conv -> Relu -> Flatten -> Linear -> Relu             2x3x8x8
ln_first           LayerNorm by hand -> Linear, width 64                 16x64
ln_wide            the same, width 256                                   16x256
ln_narrow          the same, width 16                                    16x16
gelu_erf           Linear -> x * 0.5 * (1 + erf(x / sqrt 2))             16x64
rms_norm           RMS norm by hand: x / sqrt(mean(x^2) + eps) -> Linear  16x64
=================  ====================================================  ==========

The first three are the notebook's; the others are the grader's hidden cases.
"""
from __future__ import annotations

import hashlib
import io
import math
import warnings
from importlib import metadata
from pathlib import Path
from typing import Callable

import numpy as np

RESNET = "resnet18"
RESNET_SHAPE = (8, 3, 64, 64)
"""ResNet-18 (``util.models`` ``resnet18_bnstats``: 10 classes, seeded BN statistics) at this input."""
_FORMAT = 1
"""Bump when the export recipe changes in a way the source hash would not catch."""


def _modules() -> dict[str, Callable[[], object]]:
    """Name -> a builder of the zoo's torch module (defined in a function: importing this file needs no torch)."""
    import torch
    from torch import nn

    class HandLayerNorm(nn.Module):
        """LayerNorm over the last axis, written the way a model author might: mean, centre, variance."""

        def __init__(self, width: int, eps: float = 1e-5) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.rand(width) * 0.5 + 0.75)
            self.bias = nn.Parameter(torch.randn(width) * 0.1)
            self.eps = eps

        def forward(self, x):
            centred = x - x.mean(-1, keepdim=True)
            var = centred.pow(2).mean(-1, keepdim=True)
            return centred / torch.sqrt(var + self.eps) * self.weight + self.bias

    class HandRMSNorm(nn.Module):
        def __init__(self, width: int, eps: float = 1e-6) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.rand(width) * 0.5 + 0.75)
            self.eps = eps

        def forward(self, x):
            return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    class NormLinear(nn.Module):
        def __init__(self, norm: nn.Module, width: int, out: int = 16) -> None:
            super().__init__()
            self.ln = norm
            self.fc = nn.Linear(width, out)

        def forward(self, x):
            return self.fc(self.ln(x))

    class GeluErf(nn.Module):
        def __init__(self, width: int = 64, out: int = 16) -> None:
            super().__init__()
            self.fc = nn.Linear(width, out)

        def forward(self, x):
            h = self.fc(x)
            return h * 0.5 * (1.0 + torch.erf(h / math.sqrt(2.0)))

    class ConvThen(nn.Module):
        """A 3x3 conv followed by one elementwise op with a per-channel constant (or a BatchNorm)."""

        def __init__(self, then: str) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=then == "mul")
            self.then = then
            if then == "bn":
                self.bn = nn.BatchNorm2d(8)
            else:
                self.const = nn.Parameter(torch.rand(8, 1, 1) * 1.5 + 0.5 if then == "mul" else torch.randn(8, 1, 1))

        def forward(self, x):
            y = self.conv(x)
            if self.then == "bn":
                return self.bn(y)
            return y * self.const if self.then == "mul" else y + self.const

    class ConvReluGemm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.fc = nn.Linear(4 * 8 * 8, 10)

        def forward(self, x):
            return torch.relu(self.fc(torch.relu(self.conv(x)).flatten(1)))

    return {
        "conv_bn": lambda: ConvThen("bn"),
        "layer_norm": lambda: HandLayerNorm(32),
        "ln_linear": lambda: NormLinear(HandLayerNorm(64), 64),
        "conv_mul": lambda: ConvThen("mul"),
        "conv_add": lambda: ConvThen("add"),
        "conv_relu_gemm": ConvReluGemm,
        "ln_first": lambda: NormLinear(HandLayerNorm(64), 64),
        "ln_wide": lambda: NormLinear(HandLayerNorm(256), 256),
        "ln_narrow": lambda: NormLinear(HandLayerNorm(16), 16),
        "gelu_erf": GeluErf,
        "rms_norm": lambda: NormLinear(HandRMSNorm(64), 64),
    }


SHAPES = {"conv_bn": (2, 3, 8, 8), "layer_norm": (4, 32), "ln_linear": (16, 64), "conv_mul": (2, 3, 8, 8),
          "conv_add": (2, 3, 8, 8), "conv_relu_gemm": (2, 3, 8, 8), "ln_first": (16, 64), "ln_wide": (16, 256),
          "ln_narrow": (16, 16), "gelu_erf": (16, 64), "rms_norm": (16, 64), RESNET: RESNET_SHAPE}
"""Input shape of every model, by name."""
SEEDS = {name: i for i, name in enumerate(SHAPES)}
"""The torch seed each zoo module is initialised with (``ln_first`` and ``ln_linear`` differ only here)."""


def input_name(name: str) -> str:
    """The graph input's name: ``input`` for ResNet-18, ``x`` for the zoo."""
    return "input" if name == RESNET else "x"


def feeds(name: str, seed: int) -> dict[str, np.ndarray]:
    """``{input: standard normal float32 of the model's shape}``, from ``numpy.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    return {input_name(name): rng.standard_normal(SHAPES[name]).astype(np.float32)}


def _cache_key(name: str) -> str:
    """File stem that changes whenever anything that shapes the exported bytes changes."""
    from util.onnx_models import IR_VERSION, OPSET

    digest = hashlib.sha256()
    for part in [metadata.version("torch"), metadata.version("onnx"), str(_FORMAT), str(OPSET), str(IR_VERSION)]:
        digest.update(part.encode())
    digest.update(Path(__file__).read_bytes())
    return f"lab6zoo_{name}_{digest.hexdigest()[:12]}"


def _export(name: str) -> bytes:
    import onnx
    import torch

    from util.models import seed_bn
    from util.onnx_models import IR_VERSION, OPSET

    build, shape = _modules()[name], SHAPES[name]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEEDS[name])
        module = build()
    seed_bn(module, seed=1)          # conv_bn's statistics; a no-op for modules without BatchNorm
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # the TorchScript exporter's DeprecationWarning
        torch.onnx.export(module.eval(), (torch.zeros(shape),), buffer, dynamo=False, opset_version=OPSET,
                          input_names=["x"], output_names=["y"], do_constant_folding=False,
                          keep_initializers_as_inputs=True)
    proto = onnx.load_from_string(buffer.getvalue())
    weights = {init.name for init in proto.graph.initializer}
    inputs = [value for value in proto.graph.input if value.name not in weights]
    del proto.graph.input[:]
    proto.graph.input.extend(inputs)
    proto.ir_version = IR_VERSION
    return onnx.shape_inference.infer_shapes(proto, strict_mode=True).SerializeToString()


def load(name: str):
    """The ONNX model ``name`` (``onnx.ModelProto``): ``"resnet18"`` or a zoo name (see the table above).

    >>> [node.op_type for node in load("conv_bn").graph.node]
    ['Conv', 'BatchNormalization']
    """
    import onnx

    from util import export_cache

    if name == RESNET:
        from util.onnx_models import export_torchvision

        return export_torchvision("resnet18_bnstats", input_shape=RESNET_SHAPE)
    if name not in SHAPES:
        raise KeyError(f"unknown model {name!r}; choose one of {', '.join(SHAPES)}")
    file_name = f"{_cache_key(name)}.onnx"
    found = export_cache.find("onnx", file_name)
    if found is not None:
        return onnx.load_from_string(found.read_bytes())
    data = _export(name)
    export_cache.store("onnx", file_name, data, stale=f"lab6zoo_{name}_*.onnx")
    return onnx.load_from_string(data)


def prepare() -> None:
    """Fill the export cache with every model of the lab (the grader calls it before grading)."""
    for name in SHAPES:
        load(name)
