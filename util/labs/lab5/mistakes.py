"""Lab 5 example submissions: the solution with one classic mistake each.

The expected failures were worked out by grading each variant; the scores follow from them
(each declared check fails, every other one passes).
"""
from util.contract import Mistake

MISTAKES = (
    Mistake(
        name="eps_hard_coded",
        description="Folds with eps = 1e-5, PyTorch's default, instead of the BatchNorm's own eps: right for "
                    "ResNet-18, off by up to 1e-3 relative for MobileNet V3's BatchNorms (eps = 1e-3).",
        replacements=(("scale = gamma / torch.sqrt(var + bn.eps)", "scale = gamma / torch.sqrt(var + 1e-5)"),),
        expected_failures={"5.1": ("grouped, stride 2, BN eps 1e-3",),
                           "5.2": ("mobilenet_v3_small (BN eps 1e-3)",)},
        variants=(
            (("scale = gamma / torch.sqrt(var + bn.eps)",
              "scale = gamma * torch.rsqrt(var + nn.BatchNorm2d(1).eps)   # the default eps"),),
        ),
    ),
    Mistake(
        name="conv_bias_ignored",
        description="Drops the convolution's own bias when folding (ResNet's convolutions have none, so the "
                    "notebook's example cannot show it).",
        replacements=(("own_bias = conv.bias.detach().double() if conv.bias is not None else torch.zeros_like(mean)",
                       "own_bias = torch.zeros_like(mean)"),),
        expected_failures={"5.1": ("conv with a bias", "reflect padding, 3x5 kernel, a bias"),
                           "5.2": ("course net: a shared conv output, a BN after a pool",),
                           "5.5": ("course net with a shared conv output, 8x3x32x32",)},
        variants=(
            (("folded.bias.copy_(beta + (own_bias - mean) * scale)", "folded.bias.copy_(beta - mean * scale)"),),
        ),
    ),
    Mistake(
        name="shared_conv_folded",
        description="Folds every Conv -> BatchNorm pair, also when the convolution's output has another user "
                    "(a skip connection), which then reads normalised values.",
        replacements=(("        if len(source.users) != 1:   # the conv's output is read elsewhere too: folding "
                       "would change it there\n            continue\n", ""),),
        expected_failures={"5.2": ("course net: a shared conv output, a BN after a pool",),
                           "5.5": ("course net with a shared conv output, 8x3x32x32",)},
        variants=(
            (("if len(source.users) != 1:", "if len(source.users) < 1:"),),
        ),
    ),
    Mistake(
        name="relu_modules_only",
        description="Finds breakpoints only where an nn.ReLU module follows an add, as in torchvision's ResNets, "
                    "and misses F.relu, torch.relu and .relu(): the course net's five spellings, and the error "
                    "table of a net whose only breakpoint calls torch.relu (its worst record is then the logits).",
        replacements=(("        return node.target in (F.relu, torch.relu)\n", "        return False\n"),
                      ("    return node.op == \"call_method\" and node.target == \"relu\"\n", "    return False\n")),
        expected_failures={"5.3": ("course net: relu(add) written five ways",),
                           "5.5": ("course net with a shared conv output, 8x3x32x32",)},
        variants=(
            (("    if node.op == \"call_module\":\n        return isinstance(gm.get_submodule(node.target), nn.ReLU)\n",
              "    return node.op == \"call_module\" and isinstance(gm.get_submodule(node.target), nn.ReLU)\n"),),
        ),
    ),
)
