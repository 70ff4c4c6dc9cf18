"""What lab 5's answers and cases report about a convolution or a graph: small dicts a student can read.

The notebook imports these for its ``submit`` cells, and the hidden cases return the same dicts, so
an answer and a case describe things the same way.
"""
from __future__ import annotations

from typing import Any


def describe_conv(conv: Any) -> dict[str, Any]:
    """A convolution as the answers of tasks 5.1, 5.6 and 5.7 report it.

    Geometry (weight shape, stride, padding, dilation, groups, padding mode), whether it has a bias,
    its dtype, and the sums of absolute values of its weight and bias (``weight_l1``, ``bias_l1``;
    0.0 without a bias): two numbers only the right parameters produce.

    >>> describe_conv(torch.nn.Conv2d(3, 8, 3, padding=1))["weight_shape"]
    [8, 3, 3, 3]
    """
    from torch import nn

    if not isinstance(conv, nn.Conv2d):
        raise TypeError(f"expected an nn.Conv2d, got {type(conv).__name__}")
    weight = conv.weight.detach()
    bias = conv.bias.detach() if conv.bias is not None else None
    return {"weight_shape": list(weight.shape), "stride": list(conv.stride),
            "padding": conv.padding if isinstance(conv.padding, str) else list(conv.padding),
            "dilation": list(conv.dilation), "groups": conv.groups, "padding_mode": conv.padding_mode,
            "has_bias": bias is not None, "dtype": str(weight.dtype).removeprefix("torch."),
            "weight_l1": float(weight.double().abs().sum()),
            "bias_l1": float(bias.double().abs().sum()) if bias is not None else 0.0}


def count_graph(gm: Any) -> dict[str, int]:
    """``{"bn": BatchNorm2d calls, "conv": Conv2d calls, "nodes": every node}`` of a ``torch.fx.GraphModule``."""
    from torch import nn

    called = [gm.get_submodule(n.target) for n in gm.graph.nodes if n.op == "call_module"]
    return {"bn": sum(isinstance(m, nn.BatchNorm2d) for m in called),
            "conv": sum(isinstance(m, nn.Conv2d) for m in called), "nodes": len(gm.graph.nodes)}
