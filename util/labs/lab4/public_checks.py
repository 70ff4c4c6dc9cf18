"""Lab 4's public checks (``util.check("4.3")``): facts lab 1 established about the same GoogLeNet,
torchvision's documented parameter count, and consistency inside each answer. ``CHECKS[task id]`` is
attached to each task's ``checks=`` in ``tasks.py``. The C++ analyzer is judged on its
exported answers only (it is rebuilt by the notebook); the Python export also on a small model.
"""
from __future__ import annotations

import math
from typing import Any

from util.checks import each, equal, first
from util.contract import Check

GOOGLENET_MACS_224 = 1_498_376_192
"""Lab 1's count of GoogLeNet at 1x3x224x224 under the course's convention (= FlopCounterMode / 2)."""
GOOGLENET_LEAF_LAYERS = 130
"""Leaf modules GoogLeNet runs (lab 1, task 1.3)."""


def _googlenet_params() -> int:
    from torchvision.models import GoogLeNet_Weights

    return GoogLeNet_Weights.IMAGENET1K_V1.meta["num_params"]


def _export_check(fn) -> str | None:
    """Export a small conv net with the student's function; the file must load and compute the same."""
    import tempfile
    import warnings
    from pathlib import Path

    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5)).eval()
    with tempfile.TemporaryDirectory(prefix="selfcheck-") as folder:
        path = Path(folder) / "small.pt"
        fn(model, (1, 3, 8, 8), str(path))
        if not path.exists():
            return "export_torchscript(model, (1, 3, 8, 8), path) saved nothing at path"
        with warnings.catch_warnings():  # "torch.jit.load is deprecated": it is what libtorch reads
            warnings.simplefilter("ignore", FutureWarning)
            loaded = torch.jit.load(str(path), map_location="cpu")
        x = torch.randn(2, 3, 8, 8)
        with torch.no_grad():
            worst = float((loaded(x) - model(x)).abs().max())
    return None if worst <= 1e-5 else f"the loaded module differs from the model by up to {worst:.2g}"


def _small_net(name: str):
    """A small net for the analyzer's checks (grouped conv, BatchNorm, nested Sequential, Linear, ...)."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    if name == "weights":    # conv 8x2x3x3 + 8, BatchNorm 8 + 8 (its running statistics are buffers)
        return nn.Sequential(nn.Conv2d(4, 8, 3, padding=1, groups=2), nn.BatchNorm2d(8)).eval()
    if name == "tied":       # two Linear(3, 3) holding one weight: 9 + 3 + 3 parameters in 3 tensors
        tied = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3)).eval()
        tied[1].weight = tied[0].weight
        return tied
    if name == "activations":
        return nn.Sequential(nn.Sequential(nn.Conv2d(4, 8, 3, padding=1, groups=2), nn.ReLU())).eval()
    if name == "transposed":  # 1x8x4x4 -> 1x4x8x8
        return nn.Sequential(nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1, groups=2)).eval()
    return nn.Sequential(nn.Conv2d(4, 8, 3, padding=1, groups=2), nn.Flatten(), nn.Linear(512, 10)).eval()


def _analyze_small(analyzer, part: str, net: str | None = None, shape: tuple[int, ...] = (1, 4, 8, 8)) -> Any:
    """``part`` of the analyzer's report on the small net ``net`` (default: the one named like the part)."""
    import tempfile
    import warnings
    from pathlib import Path

    import torch

    net = net or part
    with tempfile.TemporaryDirectory(prefix="selfcheck-") as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        path = Path(folder) / f"small_{net}.pt"
        with torch.no_grad():
            torch.jit.trace(_small_net(net), torch.zeros(shape)).save(str(path))
        return analyzer(path, list(shape), part)


def _row_bytes(row: dict) -> str | None:
    return equal(row["bytes"], math.prod(row["shape"]) * row["element_size"],
                 f"{row['name']}: bytes (elements x element_size)")


def _macs_consistent(answer: Any) -> str | None:
    return first(equal(sum(answer["by_kind"].values()), answer["total"], "the sum of by_kind"),
                 equal(sum(row["macs"] for row in answer["nodes"]), answer["total"], "the sum of the nodes' macs"))


CHECKS: dict[str, tuple[Check, ...]] = {
    "4.0": (
        Check("the saved file is GoogLeNet: documented parameter count, 130 leaf modules, output 1x1000, "
              "same output as the eager model",
              lambda a: equal(a, {"parameters": _googlenet_params(), "leaf_modules": GOOGLENET_LEAF_LAYERS,
                                  "output_shape": [1, 1000], "matches_eager": True}, "the description"),
              "trace the model in eval mode on a zero input and save the traced module (not torch.save)"),
        Check("export_torchscript on a small conv net: the file loads and computes the same", _export_check,
              "trace (not script) on an input of input_shape, then save with the traced module's own save "
              "method: torch.save pickles Python objects that torch.jit.load cannot read", calls_function=True),
    ),
    "4.1": (
        Check("parameters = GoogLeNet's documented count; bytes = 4 x parameters (float32)",
              lambda a: first(equal(a["parameters"], _googlenet_params(), "parameters"),
                              equal(a["bytes"], 4 * a["parameters"], "bytes")),
              "count the module's parameters (not buffers), each numel() x element_size()"),
        Check("analyzer on Conv2d(4, 8, 3, groups=2) + BatchNorm2d(8): 4 tensors, 168 parameters, 672 bytes",
              lambda fn: equal(_analyze_small(fn, "weights"), {"tensors": 4, "parameters": 168, "bytes": 672},
                               "the weights"),
              "conv 8 x (4 / 2) x 3 x 3 + 8 bias, BatchNorm 8 weight + 8 bias; running_mean, running_var and "
              "num_batches_tracked are buffers", calls_function=True),
        Check("analyzer on two Linear(3, 3) that share one weight: 3 tensors, 15 parameters, 60 bytes",
              lambda fn: equal(_analyze_small(fn, "weights", "tied", (1, 3)),
                               {"tensors": 3, "parameters": 15, "bytes": 60}, "the weights"),
              "named_parameters() lists the shared weight under both modules; it is one tensor, stored once: "
              "count each TensorImpl once (9 + 3 + 3 = 15 parameters)", calls_function=True),
    ),
    "4.2": (
        Check("each row's bytes = elements x element_size",
              lambda a: each(a["layers"], _row_bytes, "layers"), "bytes = numel() * element_size()"),
        Check("total_bytes = the sum of the rows",
              lambda a: equal(sum(r["bytes"] for r in a["layers"]), a["total_bytes"], "the sum of bytes"),
              "add up every row"),
        Check("the first row is conv1.conv, a Conv2d with output 1x64x112x112",
              lambda a: equal({k: a["layers"][0][k] for k in ("name", "type", "shape")},
                              {"name": "conv1.conv", "type": "Conv2d", "shape": [1, 64, 112, 112]}, "the first row"),
              "name rows by the module path, as in lab 1"),
        Check("analyzer on a nested Sequential(Sequential(Conv2d(4, 8, 3, padding=1, groups=2), ReLU)) at 1x4x8x8",
              lambda fn: equal([{k: r[k] for k in ("name", "type", "shape", "bytes")}
                                for r in _analyze_small(fn, "activations")["layers"]],
                               [{"name": "0.0", "type": "Conv2d", "shape": [1, 8, 8, 8], "bytes": 2048},
                                {"name": "0.1", "type": "ReLU", "shape": [1, 8, 8, 8], "bytes": 2048}], "the rows"),
              "one row per leaf-module call, however deep it is nested, named by its full path", calls_function=True),
    ),
    "4.3": (
        Check("total = the sum of by_kind = the sum of the nodes", _macs_consistent,
              "count each graph node once, into its kind"),
        Check("total = lab 1's count for GoogLeNet at 1x3x224x224 (FlopCounterMode / 2)",
              lambda a: equal(a["total"], GOOGLENET_MACS_224, "total"),
              "convolution: output elements x (C_in / groups) x kernel elements; linear: output elements x "
              "in_features; nothing else counts"),
        Check("analyzer on Conv2d(4, 8, 3, padding=1, groups=2) + Linear(512, 10) at 1x4x8x8: 9,216 + 5,120 MACs",
              lambda fn: equal(_analyze_small(fn, "macs")["total"], 9216 + 5120, "total"),
              "the grouped conv sees C_in / groups = 2 channels: 512 x 2 x 9 = 9,216 (lab 1's hand count)",
              calls_function=True),
        Check("analyzer on ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1, groups=2) at 1x8x4x4: "
              "2,304 MACs",
              lambda fn: equal(_analyze_small(fn, "macs", "transposed", (1, 8, 4, 4))["total"], 2304, "total"),
              "aten::_convolution with transposed = true: each INPUT element meets C_out / groups x kernel "
              "weights, 128 x 2 x 9 = 2,304 (lab 1's hand count)", calls_function=True),
    ),
}
