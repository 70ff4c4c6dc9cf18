"""Lab 5's own models and seeded inputs: the small nets its hidden cases use and the pairs they fold or merge.

Everything here is built from fixed integer seeds, in the kernel (the cases) and again in the grader
(the judge), so both sides see the same weights. The notebook uses only ResNet-18 with seeded
BatchNorm statistics (``util.models.build_model("resnet18_bnstats")``); these nets are the inputs it
never shows.
"""
from __future__ import annotations

from typing import Any, Mapping

import torch
import torch.nn.functional as F
from torch import nn

from util.models import build_model, seed_bn


class TinyShared(nn.Module):
    """Three BatchNorms; only one may fold.

    ``bn1`` follows ``conv1`` (a conv with a bias): folds. ``conv2``'s output feeds ``bn2`` *and*
    the skip connection: folding ``bn2`` into ``conv2`` would change what the skip reads, so it must
    stay. ``bn3`` follows a pooling layer, not a convolution. Input: ``N x 3 x H x W``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=True)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=True)
        self.bn2 = nn.BatchNorm2d(8)
        self.pool = nn.AvgPool2d(2)
        self.bn3 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        y = self.conv2(x)
        x = torch.relu(self.bn2(y) + y)            # a breakpoint; y also feeds the skip
        x = self.bn3(self.pool(x))
        return self.fc(x.mean((2, 3)))


class TinyRes(nn.Module):
    """``relu(add(a, b))`` written five ways, and two look-alikes that are not breakpoints.

    Input: ``N x 4 x H x W``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(4, 4, 3, padding=1) for _ in range(8))
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.convs
        y = c[0](x)
        y += x
        x = self.act(y)                                   # nn.ReLU on `+=` (traced as operator.add)
        x = F.relu(torch.add(c[1](x), x), inplace=True)   # F.relu on torch.add
        x = torch.relu(c[2](x).add(x))                    # torch.relu on Tensor.add
        x = (c[3](x) + x).relu()                          # Tensor.relu on +
        x = self.act(c[4](x) + c[5](x))                   # two branches, no identity
        x = F.relu(c[6](x) + 1.0)                         # adds a constant: not a breakpoint
        return torch.relu(c[7](x) - x)                    # a subtraction: not a breakpoint


def cancel_bias(conv: nn.Conv2d, bn: nn.BatchNorm2d, seed: int) -> None:
    """Set ``bn``'s shift (in place) so that it re-centres ``conv``'s output, as a trained BatchNorm after a biased
    conv often does: the folded bias ``beta + (b - mean) * gamma / sqrt(var + eps)`` is then about 1e-5, a hundred
    thousandth of its two terms (computed in float64, from the seed's U(-1e-5, 1e-5)).

    A fold computed in float32 rounds each term to about 1e-8 and leaves that much error in a result of 1e-5: a
    relative error near 1e-3, where a fold computed in float64 (and stored in float32) is off by 1e-7."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        scale = bn.weight.double() / torch.sqrt(bn.running_var.double() + bn.eps)
        own = conv.bias.double() if conv.bias is not None else torch.zeros_like(scale)
        rest = (torch.rand(bn.num_features, generator=gen, dtype=torch.float64) * 2 - 1) * 1e-5
        bn.bias.copy_(rest - (own - bn.running_mean.double()) * scale)


def cancel_folds(model: nn.Module, seed: int) -> nn.Module:
    """:func:`cancel_bias` on every Conv -> BatchNorm pair of ``model`` that folds (the conv's output read by the
    BatchNorm alone, as ``torch.fx.experimental.optimization.fuse`` decides), in place; returns ``model``."""
    import torch.fx as fx

    traced = fx.symbolic_trace(model)
    modules = dict(model.named_modules())
    for node in traced.graph.nodes:
        source = node.args[0] if node.op == "call_module" and node.args else None
        if (isinstance(modules.get(node.target), nn.BatchNorm2d) and isinstance(source, fx.Node)
                and source.op == "call_module" and isinstance(modules.get(source.target), nn.Conv2d)
                and len(source.users) == 1 and modules[node.target].affine):
            cancel_bias(modules[source.target], modules[node.target], seed)
            seed += 1
    return model


LAB_MODELS = {"tiny_shared": TinyShared, "tiny_res": TinyRes}
TORCHVISION_MODELS = ("mobilenet_v3_small", "densenet121", "resnet34")


def build(name: str, seed: int = 0, bn_seed: int = 1, cancel: bool = False) -> nn.Module:
    """Model ``name`` in eval mode: weights from ``seed``, BatchNorm statistics from ``bn_seed``.

    ``resnet18_bnstats`` comes from :func:`util.models.build_model`; the torchvision models of the
    hidden cases (default heads, ``weights=None``) and this module's nets get the same treatment.
    ``cancel``: every BatchNorm that folds cancels its conv's bias (:func:`cancel_folds`).
    """
    if name == "resnet18_bnstats":
        return build_model(name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if name in LAB_MODELS:
            model = LAB_MODELS[name]()
        elif name in TORCHVISION_MODELS:
            import torchvision.models as tvm
            model = getattr(tvm, name)(weights=None)
        else:
            raise KeyError(f"unknown model {name!r}; lab 5 builds resnet18_bnstats, "
                           + ", ".join((*LAB_MODELS, *TORCHVISION_MODELS)))
    seed_bn(model, seed=bn_seed)
    if cancel:
        cancel_folds(model, seed=bn_seed)
    return model.eval()


def seeded_input(shape, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A standard-normal tensor of ``shape`` from its own generator (the same in the kernel and the grader)."""
    return torch.randn(tuple(shape), generator=torch.Generator().manual_seed(seed), dtype=dtype)


def conv_bn_pair(spec: Mapping[str, Any]) -> tuple[nn.Conv2d, nn.BatchNorm2d]:
    """``(conv, bn)`` of a 5.1 case: ``Conv2d(**spec["conv"])``, ``BatchNorm2d(out, **spec["bn"])``, seeded.

    A conv bias, when there is one, is drawn from U(-0.5, 0.5) (PyTorch's default is tiny), so a fold
    that ignores it is visibly wrong. With ``spec["cancel"]`` the BatchNorm's shift cancels it
    (:func:`cancel_bias`): only a fold computed in float64 keeps the small bias that is left.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec["seed"])
        conv = nn.Conv2d(**spec["conv"])
        if conv.bias is not None:
            with torch.no_grad():
                conv.bias.uniform_(-0.5, 0.5)
    bn = seed_bn(nn.BatchNorm2d(conv.out_channels, **spec.get("bn", {})), seed=spec["seed"])
    if spec.get("cancel"):
        cancel_bias(conv, bn, seed=spec["seed"])
    return conv.eval(), bn.eval()


def conv_pair(spec: Mapping[str, Any]) -> tuple[nn.Conv2d, nn.Conv2d]:
    """The two convolutions of a 5.7 case: ``Conv2d(**spec["first"])`` and ``Conv2d(**spec["second"])``, seeded."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec["seed"])
        first, second = nn.Conv2d(**spec["first"]), nn.Conv2d(**spec["second"])
    return first.eval(), second.eval()


def record_pair(seed: int, kind: str = "noisy") -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Two synthetic records ``(a, b)`` with the same names and shapes, for ``compare_records(a, b)``.

    ``kind``: ``"noisy"``: ``a`` is ``b`` plus noise of about 1e-3 (float32); ``"zero_reference"``: as
    noisy, but ``b["block2"]`` is all zeros; ``"float16_extremes"``: float16 records whose values reach
    +-60000, where ``a - b`` in float16 overflows (65504 is float16's largest value).
    """
    gen = torch.Generator().manual_seed(seed)
    shapes = {"block1": (2, 4, 5, 5), "block2": (2, 8, 3, 3), "output": (2, 10)}
    if kind == "float16_extremes":
        b = {k: ((torch.rand(s, generator=gen) * 2 - 1) * 60000).half() for k, s in shapes.items()}
        a = {k: (-v.float() * torch.rand(v.shape, generator=gen)).half() for k, v in b.items()}
        return a, b
    if kind not in ("noisy", "zero_reference"):
        raise ValueError(f"unknown kind {kind!r}: noisy, zero_reference or float16_extremes")
    b = {k: torch.randn(s, generator=gen) for k, s in shapes.items()}
    if kind == "zero_reference":
        b["block2"] = torch.zeros(shapes["block2"])
    a = {k: v + 1e-3 * torch.randn(v.shape, generator=gen) for k, v in b.items()}
    return a, b
