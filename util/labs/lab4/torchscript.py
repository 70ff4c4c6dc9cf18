"""Deterministic TorchScript exports for this lab (its C++ analyzer reads them).

Every model is built by :func:`util.models.build_model` (torchvision definitions, ``weights=None``,
seed 0, eval mode) or is the small :class:`TinyAddmm`, then *traced* (``torch.jit.trace``) on a
zero input: a traced graph has no control flow, keeps the module hierarchy (one
``prim::CallMethod`` per submodule call) and records the operators that really ran
(``aten::_convolution``, ``aten::linear``, ...). Exports are cached by model, input shape and the
versions and sources that shape them, so a second call costs nothing. Nothing is downloaded.
"""
from __future__ import annotations

import hashlib
import warnings
from importlib import metadata
from pathlib import Path

import torch
from torch import nn

from util import SEED, export_cache
from util.models import TinyGrouped, build_model

CACHE_ENV = export_cache.KINDS["torchscript"]
"""Set this variable to keep the export cache somewhere other than ``<repo>/build/torchscript``."""
_FORMAT = 1
"""Bump when the export recipe changes in a way the source hash would not catch."""


class TinyAddmm(nn.Module):
    """A small model with what torchvision's models lack, for the hidden cases of Lab 4.

    :class:`util.models.TinyGrouped` (grouped, depthwise and dilated convolutions, a Linear on a
    3-D tensor) nested one level down, then a functional ``torch.addmm`` with a parameter that
    belongs to the model itself (not to a leaf), and one ReLU module called twice.
    Input: ``N x 4 x H x W``; output ``N x 6``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.block = TinyGrouped()
        self.act = nn.ReLU()
        self.proj = nn.Parameter(torch.randn(10, 6) * 0.1)
        self.bias = nn.Parameter(torch.zeros(6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.act(self.block(x))
        return self.act(torch.addmm(self.bias, y, self.proj))


def build(name: str) -> nn.Module:
    """The eager model called ``name``: any of :data:`util.models.BUILDERS`, or ``"tiny_addmm"``."""
    if name == "tiny_addmm":
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(SEED)
            return TinyAddmm().eval()
    return build_model(name)


def trace(model: nn.Module, input_shape: tuple[int, ...] | list[int]) -> torch.jit.ScriptModule:
    """``torch.jit.trace`` of ``model`` on a zero input, without gradients and without the warning
    that tracing is deprecated (it works in the pinned torch and is what libtorch loads)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, message=".*jit.trace.*")
        with torch.no_grad():
            return torch.jit.trace(model.eval(), torch.zeros(tuple(input_shape)))


def _cache_key(name: str, shape: tuple[int, ...]) -> str:
    digest = hashlib.sha256()
    for part in [metadata.version("torch"), metadata.version("torchvision"), str(_FORMAT)]:
        digest.update(part.encode())
    here = Path(__file__).resolve()
    for source in (here.parents[2] / "models.py", here):  # util/models.py and this file
        digest.update(source.read_bytes())
    return f"{name}_{'x'.join(map(str, shape))}_{digest.hexdigest()[:12]}"


def export(name: str, input_shape: tuple[int, ...] | list[int] = (1, 3, 224, 224)) -> Path:
    """The path of model ``name`` traced at ``input_shape`` and saved as TorchScript (cached).

    >>> export("googlenet")          # GoogLeNet, aux_logits=False, seed 0: 6,624,904 parameters
    PosixPath('.../build/torchscript/googlenet_1x3x224x224_....pt')
    """
    shape = tuple(int(d) for d in input_shape)
    file_name = f"{_cache_key(name, shape)}.pt"
    path = export_cache.find("torchscript", file_name)
    if path is None:
        traced = trace(build(name), shape)
        path = export_cache.store("torchscript", file_name, lambda tmp: traced.save(str(tmp)))
    return path


def describe(path: str | Path, model: nn.Module, input_shape: tuple[int, ...] | list[int]) -> dict:
    """What the grader checks about a saved TorchScript file: it loads, it is a traced copy of
    ``model`` (same parameters, same leaf modules) and it computes what ``model`` computes.

    Returns ``{"parameters", "leaf_modules", "output_shape", "matches_eager"}``; ``matches_eager``
    is whether the loaded module's output on a fixed random input equals the eager model's within
    1e-5 (both on one thread). A file that does not load raises ``ValueError`` saying why.
    """
    from util.models import example_input

    try:
        with warnings.catch_warnings():   # "torch.jit.load is deprecated": it is what libtorch reads
            warnings.filterwarnings("ignore", category=FutureWarning, message=".*jit.load.*")
            loaded = torch.jit.load(str(path), map_location="cpu")
    except Exception as exc:
        raise ValueError(f"{path} is not a TorchScript file torch.jit.load can read ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}); save it with "
                         "torch.jit.trace(...).save(path), not torch.save") from None
    loaded.eval()
    x = example_input(input_shape)
    with torch.no_grad():
        ours, theirs = model.eval()(x), loaded(x)
    if not isinstance(theirs, torch.Tensor):
        raise ValueError(f"the loaded module returns a {type(theirs).__name__}, not a tensor: trace the model "
                         "(torch.jit.trace) rather than scripting it")
    return {
        "parameters": sum(p.numel() for p in loaded.parameters()),
        "leaf_modules": sum(1 for module in loaded.modules() if not list(module.children())),
        "output_shape": list(theirs.shape),
        "matches_eager": bool(theirs.shape == ours.shape and torch.allclose(theirs, ours, rtol=0, atol=1e-5)),
    }
