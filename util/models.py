"""Deterministic model builders: torchvision definitions with ``weights=None`` and fixed seeds.

Nothing is downloaded. Parameter and MAC counts do not depend on weight values, but activation
statistics do, so every builder seeds torch before it initialises the weights.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from util import SEED


class TinyGrouped(nn.Module):
    """A small course-made model that exercises what counters get wrong.

    Grouped and depthwise convolutions, a dilated strided conv, convs with and without bias, and a
    Linear applied to a 3-D tensor (a sequence of feature vectors). Input: ``N x 4 x H x W``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(4, 8, kernel_size=3, padding=1, groups=2, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.act = nn.ReLU()
        self.depthwise = nn.Conv2d(8, 8, kernel_size=3, stride=2, padding=2, dilation=2, groups=8)
        self.pointwise = nn.Conv2d(8, 16, kernel_size=1)
        self.pool = nn.AdaptiveAvgPool2d((4, 4))
        self.mix = nn.Linear(16, 12, bias=False)
        self.head = nn.Linear(12 * 16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act(self.bn(self.stem(x)))
        x = self.pointwise(self.depthwise(x))
        x = self.pool(x).flatten(2).transpose(1, 2)   # N x 16 positions x 16 channels
        x = self.mix(x)                                 # Linear on a 3-D tensor
        return self.head(x.flatten(1))


class TinyTied(nn.Module):
    """A small course-made autoencoder with what torchvision's models never have.

    * **A tied weight**: ``decode`` (a ``ConvTranspose2d``) uses ``encode``'s weight tensor, as tied
      autoencoders and language models (embedding = output layer) do. It is *one* parameter of
      8 x 2 x 3 x 3 = 144 elements that two modules hold: ``model.parameters()`` yields it once.
    * **A transposed convolution** with ``groups=2`` that doubles the resolution.
    * **A module called twice** (``mix``, a Linear on a 4-D tensor) and a ReLU called three times.

    Input: ``N x 4 x H x W`` (H and W even); output ``N x 10``. 546 parameters.
    """

    def __init__(self) -> None:
        super().__init__()
        self.encode = nn.Conv2d(4, 8, kernel_size=3, stride=2, padding=1, groups=2)
        self.act = nn.ReLU()
        self.mix = nn.Linear(8, 8)
        self.decode = nn.ConvTranspose2d(8, 4, kernel_size=3, stride=2, padding=1, output_padding=1, groups=2)
        self.decode.weight = self.encode.weight            # tied: one tensor, two modules
        self.refine = nn.Conv2d(4, 4, kernel_size=3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.encode(x)).permute(0, 2, 3, 1)   # N x H/2 x W/2 x 8: channels last
        h = self.mix(self.act(self.mix(h))).permute(0, 3, 1, 2)
        y = self.act(self.refine(self.decode(h)))          # back to N x 4 x H x W
        return self.head(self.pool(y).flatten(1))


class DigitsCNN(nn.Module):
    """The course's small CNN for scikit-learn's bundled digits (1 x 8 x 8 images, 10 classes).

    ``conv1`` (1 -> 16, 3x3, pad 1, no bias) + ``bn1`` + ReLU, ``conv2`` (16 -> 32) + ``bn2`` + ReLU,
    ``pool`` (max 2x2), ``conv3`` (32 -> 32) + ``bn3`` + ReLU, ``fc`` (512 -> 10). 19,258 parameters,
    19,088 of them in the four weight tensors of its convolutions and ``fc``. Trained with Adam
    (lr 3e-3, batch 64, 4 epochs) on :func:`util.data.digits_split` it reaches about 99.7 % test
    accuracy (labs 9 and 12). Exported to ONNX its nodes are named ``/conv1/Conv`` ... ``/fc/Gemm``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.pool = nn.MaxPool2d(2)
        self.conv3 = nn.Conv2d(32, 32, 3, padding=1, bias=False)
        self.bn3 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(512, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn1(self.conv1(x)))
        x = self.pool(torch.relu(self.bn2(self.conv2(x))))
        x = torch.relu(self.bn3(self.conv3(x)))
        return self.fc(torch.flatten(x, 1))


def seed_bn(model: nn.Module, seed: int = 1) -> nn.Module:
    """Give every BatchNorm of ``model`` non-trivial statistics, in place, and return ``model``.

    A fresh BatchNorm has mean 0, variance 1, weight 1 and bias 0, so folding it into the conv before
    it changes almost nothing. Here, from a ``torch.Generator`` seeded with the integer ``seed`` (in
    module order): running_mean ~ N(0, 0.1^2), running_var ~ U(0.5, 2), weight ~ U(0.75, 1.25),
    bias ~ N(0, 0.1^2). The same seed gives the same statistics on every machine.
    """
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                size = module.num_features
                module.running_mean.copy_(torch.randn(size, generator=generator) * 0.1)
                module.running_var.copy_(0.5 + 1.5 * torch.rand(size, generator=generator))
                if module.affine:
                    module.weight.copy_(0.75 + 0.5 * torch.rand(size, generator=generator))
                    module.bias.copy_(torch.randn(size, generator=generator) * 0.1)
    return model


def _resnet18_bnstats() -> nn.Module:
    import torchvision.models as tvm

    return seed_bn(tvm.resnet18(weights=None, num_classes=10), seed=1)


def _torchvision(name: str, **kwargs) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        import torchvision.models as tvm
        return getattr(tvm, name)(weights=None, **kwargs)
    return build


BUILDERS: dict[str, Callable[[], nn.Module]] = {
    "googlenet": _torchvision("googlenet", aux_logits=False, init_weights=True),
    "resnet18": _torchvision("resnet18"),
    "mobilenet_v2": _torchvision("mobilenet_v2"),
    "mobilenet_v3_small": _torchvision("mobilenet_v3_small"),
    "squeezenet1_1": _torchvision("squeezenet1_1"),
    "alexnet": _torchvision("alexnet"),
    "tiny_grouped": TinyGrouped,
    "tiny_tied": TinyTied,
    "resnet18_bnstats": _resnet18_bnstats,
    "digits_cnn": DigitsCNN,
}
"""Every model the course builds, by name."""


def build_model(name: str, seed: int = SEED) -> nn.Module:
    """Build model ``name`` in eval mode with weights initialised from ``seed``.

    >>> build_model("googlenet")   # 6,624,904 parameters, no download
    """
    try:
        builder = BUILDERS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; choose one of {', '.join(BUILDERS)}") from None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = builder()
    return model.eval()


def example_input(shape: tuple[int, ...] | list[int], seed: int = SEED) -> torch.Tensor:
    """A reproducible standard-normal input of ``shape`` (the same on every machine)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(tuple(shape), generator=generator)
