"""The lab's public checks (``util.check("1.4")``): what ``check`` tests for each task.

Each check tests something the notebook states (a hand count, torchvision's documented parameter count, internal consistency), so it needs no reference file and reveals no hidden case.
"""
from __future__ import annotations

import math
from typing import Any

from util.checks import at_least, each, equal, first, has_keys
from util.contract import Check


def _googlenet_params() -> int:
    """GoogLeNet's parameter count as torchvision documents it (weight metadata; nothing is downloaded)."""
    from torchvision.models import GoogLeNet_Weights

    return GoogLeNet_Weights.IMAGENET1K_V1.meta["num_params"]


def _tiny_frozen():
    from torch import nn

    tiny = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    tiny[0].weight.requires_grad_(False)
    return tiny


def _mixed_dtypes():
    from torch import nn

    return nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 2).half())  # 8 x 4 bytes + 6 x 2 bytes


def _tied_linears():
    """Two Linear(3, 3) holding one weight: 9 (shared, once) + 3 + 3 = 15 parameters."""
    from torch import nn

    tied = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    tied[1].weight = tied[0].weight
    return tied


def _linear_twice():
    """The notebook's ``Twice``: a Linear(4, 4) called, a ReLU, the same Linear again."""
    from torch import nn

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.mix, self.act = nn.Linear(4, 4), nn.ReLU()

        def forward(self, x):
            return self.mix(self.act(self.mix(x)))

    return Twice()


def _conv_then_transposed():
    """A Conv2d(1, 2, 1) then a ConvTranspose2d(2, 1, 1): only the first is an nn.Conv2d."""
    from torch import nn

    return nn.Sequential(nn.Conv2d(1, 2, 1), nn.ConvTranspose2d(2, 1, 1))


def _conv_relu():
    from torch import nn

    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())


def _constant_conv():
    import torch
    from torch import nn

    conv = nn.Conv2d(1, 2, 1, bias=False)   # output channel 0 doubles the input, channel 1 negates it
    with torch.no_grad():
        conv.weight.copy_(torch.tensor([2.0, -1.0]).view(2, 1, 1, 1))
    return nn.Sequential(conv)


def _conv(*args, **kwargs):
    from torch import nn

    return nn.Conv2d(*args, **kwargs)


def _transposed(*args, **kwargs):
    from torch import nn

    return nn.ConvTranspose2d(*args, **kwargs)


def _linear(*args):
    from torch import nn

    return nn.Linear(*args)


def _macs(fn, model, shape) -> Any:
    return fn(model, shape)["total"]


def _row_bytes(row) -> str | None:
    return equal(row["bytes"], math.prod(row["shape"]) * 4, f"{row['name']}: bytes (float32: elements x 4)")


def _row_order(row) -> str | None:
    if row["min"] <= row["mean"] <= row["max"] and row["std"] >= 0:
        return None
    return f"{row['name']}: min {row['min']:g}, mean {row['mean']:g}, max {row['max']:g}, std {row['std']:g}"


def _check_constant_conv(fn) -> str | None:
    import torch

    result = fn(_constant_conv(), torch.ones(1, 1, 2, 2))
    rows = result["layers"]
    if len(rows) != 1:
        return f"{len(rows)} rows; expected 1 (one Conv2d ran)"
    row = {k: v for k, v in rows[0].items() if k != "std"}
    return first(equal(row, {"name": "0", "shape": [1, 2, 2, 2], "mean": 0.5, "min": -1.0, "max": 2.0,
                             "bytes": 32}, "the row without std"),
                 None if abs(float(rows[0]["std"]) - 1.6035675) < 1e-6 else
                 f"std is {rows[0]['std']:g}; expected 1.6036 (torch.std's unbiased default)",
                 equal(result["total_bytes"], 32, "total_bytes"))


def _check_conv_only(fn) -> str | None:
    import torch

    rows = fn(_conv_then_transposed(), torch.ones(1, 1, 2, 2))["layers"]
    return equal([row["name"] for row in rows], ["0"], "the rows' names")


CHECKS_1_1 = (
    Check("trainable + non_trainable = total",
          lambda a: equal(a["trainable"] + a["non_trainable"], a["total"], "trainable + non_trainable"),
          "every parameter either trains (requires_grad) or not"),
    Check("total = GoogLeNet's documented parameter count",
          lambda a: equal(a["total"], _googlenet_params(), "total"),
          "torchvision documents 6,624,904 parameters for GoogLeNet without auxiliary heads; count "
          "parameters only (model.parameters()), not buffers"),
    Check("the frozen stem is non-trainable",
          lambda a: at_least(a["non_trainable"], 1, "non_trainable"),
          "conv1, conv2 and conv3 were frozen with requires_grad_(False): test p.requires_grad"),
    Check("count_parameters on Linear(3, 2) + BatchNorm1d(2) with the Linear weight frozen",
          lambda f: equal(f(_tiny_frozen()), {"total": 12, "trainable": 6, "non_trainable": 6}, "the result"),
          "the hand count in the notebook: 6 + 2 + 2 + 2 = 12 parameters; BatchNorm's running statistics "
          "are buffers", calls_function=True),
    Check("count_parameters on two Linear(3, 3) that share one weight",
          lambda f: equal(f(_tied_linears()), {"total": 15, "trainable": 15, "non_trainable": 0}, "the result"),
          "a shared tensor is one parameter: 9 + 3 + 3 = 15; model.parameters() yields each tensor once",
          calls_function=True),
)
CHECKS_1_2 = (
    Check("float32 bytes = 4 x GoogLeNet's documented parameter count",
          lambda a: equal(a["float32"], 4 * _googlenet_params(), "float32 bytes"),
          "bytes = elements x element_size(); buffers are not weights"),
    Check("float16 and bfloat16 take half the float32 bytes",
          lambda a: first(equal(2 * a["float16"], a["float32"], "2 x float16 bytes"),
                          equal(2 * a["bfloat16"], a["float32"], "2 x bfloat16 bytes")),
          "both 16-bit formats store 2 bytes per element: ask each tensor for element_size()"),
    Check("weight_bytes on a float32 Linear(3, 2) followed by a float16 Linear(2, 2)",
          lambda f: equal(f(_mixed_dtypes()), 8 * 4 + 6 * 2, "the result"),
          "each tensor in its own dtype: 8 float32 elements x 4 bytes + 6 float16 elements x 2 bytes = 44",
          calls_function=True),
    Check("weight_bytes on two Linear(3, 3) that share one weight",
          lambda f: equal(f(_tied_linears()), 15 * 4, "the result"),
          "a shared tensor is stored once: 15 float32 parameters x 4 bytes = 60", calls_function=True),
)
CHECKS_1_3 = (
    Check("every row has name, type, output_shape, params",
          lambda a: each(a, lambda r: has_keys(r, ("name", "type", "output_shape", "params"), "the row"), "row"),
          "one dict per leaf layer, exactly these keys"),
    Check("the params column adds up to GoogLeNet's documented parameter count",
          lambda a: equal(sum(r["params"] for r in a), _googlenet_params(), "the sum of params"),
          "keep leaf layers only (layer.is_leaf_layer): containers repeat their children's parameters"),
    Check("the first row is conv1.conv, a Conv2d with output 1x64x112x112 and 9,408 parameters",
          lambda a: equal(a[0], {"name": "conv1.conv", "type": "Conv2d", "output_shape": [1, 64, 112, 112],
                                 "params": 9408}, "the first row"),
          "use the dotted name from model.named_modules(), not torchinfo's attribute name"),
    Check("130 rows: GoogLeNet runs 130 leaf layers, each once",
          lambda a: equal(len(a), 130, "the number of rows"),
          "one row per call of a leaf layer (layer.is_leaf_layer); containers get no row"),
    Check("layer_table on Conv2d(3, 4, 3) + ReLU at 1x3x8x8",
          lambda f: equal(f(_conv_relu(), (1, 3, 8, 8)),
                          [{"name": "0", "type": "Conv2d", "output_shape": [1, 4, 6, 6], "params": 112},
                           {"name": "1", "type": "ReLU", "output_shape": [1, 4, 6, 6], "params": 0}], "the result"),
          "a 3x3 kernel without padding shrinks 8 to 6; the conv holds 4 x 3 x 3 x 3 weights + 4 biases",
          calls_function=True),
    Check("layer_table on a Linear(4, 4) called twice with a ReLU in between, at 1x4",
          lambda f: equal(f(_linear_twice(), (1, 4)),
                          [{"name": "mix", "type": "Linear", "output_shape": [1, 4], "params": 20},
                           {"name": "act", "type": "ReLU", "output_shape": [1, 4], "params": 0},
                           {"name": "mix", "type": "Linear", "output_shape": [1, 4], "params": 20}], "the result"),
          "one row per call, in call order: a module that runs twice has two rows with the same name, "
          "each with the parameters it holds", calls_function=True),
)
CHECKS_1_4 = (
    Check("own: total = the sum of by_type",
          lambda a: equal(sum(a["own"]["by_type"].values()), a["own"]["total"], "the sum of own by_type"),
          "count each module call once, into its type"),
    Check("own total = FlopCounterMode / 2 (the notebook's table)",
          lambda a: equal(a["own"]["total"], a["tools"]["flop_counter_mode"], "your total"),
          "under the course's convention only conv and linear matrix products count: no bias, BN, pooling"),
    Check("count_macs on Conv2d(3, 8, 3, padding=1) at 1x3x8x8",
          lambda f: equal(_macs(f, _conv(3, 8, 3, padding=1), (1, 3, 8, 8)), 13824, "the total"),
          "8 x 8 x 8 output elements, each a dot product over 3 x 3 x 3 inputs: 13,824 MACs "
          "(MACs, not FLOPs: do not multiply by 2)", calls_function=True),
    Check("count_macs on Conv2d(4, 8, 3, padding=1, groups=2) at 1x4x8x8",
          lambda f: equal(_macs(f, _conv(4, 8, 3, padding=1, groups=2), (1, 4, 8, 8)), 9216, "the total"),
          "each output sees only C_in / groups = 2 channels: 512 x 2 x 9 = 9,216", calls_function=True),
    Check("count_macs on Linear(4, 5) applied to a 2x3x4 input",
          lambda f: equal(f(_linear(4, 5), (2, 3, 4)), {"total": 120, "by_type": {"Linear": 120}}, "the result"),
          "output elements (2 x 3 x 5) x in_features (4); leading dimensions multiply the count",
          calls_function=True),
    Check("count_macs on ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1, groups=2) at 1x8x4x4",
          lambda f: equal(f(_transposed(8, 4, 3, stride=2, padding=1, output_padding=1, groups=2), (1, 8, 4, 4)),
                          {"total": 2304, "by_type": {"ConvTranspose2d": 2304}}, "the result"),
          "a transposed convolution multiplies each INPUT element by C_out / groups x kernel weights: "
          "128 x 2 x 9 = 2,304 (per output element it would be 256 x 18, twice too many)", calls_function=True),
)
CHECKS_1_5 = (
    Check("one row per Conv2d that ran (GoogLeNet runs 57)",
          lambda a: equal(len(a["layers"]), 57, "the number of rows"),
          "hook every nn.Conv2d (named_modules()), record each output once"),
    Check("each row's bytes = elements x 4 (float32)",
          lambda a: each(a["layers"], _row_bytes, "layers"),
          "bytes = out.numel() * out.element_size()"),
    Check("total_bytes = the sum of the rows' bytes",
          lambda a: equal(sum(r["bytes"] for r in a["layers"]), a["total_bytes"], "the sum of bytes"),
          "total_bytes adds up every row"),
    Check("min <= mean <= max and std >= 0 in every row",
          lambda a: each(a["layers"], _row_order, "layers"),
          "compute each statistic on the whole output tensor"),
    Check("conv_activation_summary on a 1x1 conv with weights 2 and -1, on a 1x1x2x2 input of ones",
          _check_constant_conv,
          "outputs 2, 2, 2, 2, -1, -1, -1, -1: mean 0.5, std 1.6036 (unbiased, torch's default), min -1, "
          "max 2, 8 float32 elements = 32 bytes", calls_function=True),
    Check("conv_activation_summary on Conv2d(1, 2, 1) then ConvTranspose2d(2, 1, 1): one row, named 0",
          _check_conv_only,
          "only nn.Conv2d modules count: a ConvTranspose2d is not an nn.Conv2d", calls_function=True),
)


CHECKS: dict[str, tuple[Check, ...]] = {"1.1": CHECKS_1_1, "1.2": CHECKS_1_2, "1.3": CHECKS_1_3, "1.4": CHECKS_1_4, "1.5": CHECKS_1_5}
"""Task id -> its public checks (attached with ``checks=`` in ``tasks.py``)."""
