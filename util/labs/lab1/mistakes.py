"""Lab 1 example submissions: realistic mistakes and exactly which checks each must fail."""
from util.contract import ANSWER, Mistake

MISTAKES = (
    Mistake(
        name="flops_as_macs",
        description="reports FLOPs (2 per multiply-accumulate) where MACs are asked",
        replacements=((
            '    return {"total": sum(by_type.values()), "by_type": dict(sorted(by_type.items()))}',
            '    flops = {kind: 2 * macs for kind, macs in by_type.items()}  # a MAC is a multiply and an add\n'
            '    return {"total": sum(flops.values()), "by_type": dict(sorted(flops.items()))}'),),
        expected_failures={"1.4": (ANSWER, "resnet18@1x3x224x224", "mobilenet_v3_small@1x3x160x160",
                                   "squeezenet1_1@1x3x128x128", "tiny_grouped@2x4x16x16", "tiny_tied@2x4x16x16")},
        variants=(
            (("by_type[type(module).__name__] += driving.numel() * module.weight[0].numel()",
              "by_type[type(module).__name__] += 2 * driving.numel() * module.weight[0].numel()  # FLOPs"),
             ("by_type[type(module).__name__] += output.numel() * module.in_features",
              "by_type[type(module).__name__] += 2 * output.numel() * module.in_features")),
        ),
    ),
    Mistake(
        name="grouped_conv_ignored",
        description="counts every input channel for every output, forgetting groups (depthwise convs)",
        replacements=((
            "driving.numel() * module.weight[0].numel()",
            "driving.numel() * module.in_channels * module.kernel_size[0] * module.kernel_size[1]"),),
        expected_failures={"1.4": ("mobilenet_v3_small@1x3x160x160", "tiny_grouped@2x4x16x16", "tiny_tied@2x4x16x16")},
        variants=(
            (("driving.numel() * module.weight[0].numel()",
              "driving.numel() * module.weight[0].numel() * module.groups"),),
        ),
    ),
    Mistake(
        name="trainable_missing",
        description="counts every parameter as trainable, ignoring requires_grad",
        replacements=((
            "trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)",
            "trainable = sum(p.numel() for p in model.parameters())"),),
        expected_failures={"1.1": (ANSWER, "resnet18 with layer1 frozen")},
        variants=(
            (("trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)",
              "trainable = sum(p.numel() for _, p in model.named_parameters())"),),
        ),
    ),
    Mistake(
        name="weights_times_four",
        description="assumes 4 bytes per parameter whatever the dtype",
        replacements=((
            "return sum(p.numel() * p.element_size() for p in model.parameters())",
            "return sum(p.numel() for p in model.parameters()) * 4  # float32 is 4 bytes"),),
        expected_failures={"1.2": (ANSWER, "tiny_grouped with a float16 stem")},
        variants=(
            (("return sum(p.numel() * p.element_size() for p in model.parameters())",
              "return sum(p.numel() * (torch.finfo(torch.float32).bits // 8) for p in model.parameters())"),),
        ),
    ),
    Mistake(
        name="hooks_keyed_by_class",
        description="keys captured activations by class name, so every Conv2d overwrites the last",
        replacements=((
            "lambda mod, inputs, output, name=name: outputs.__setitem__(name, output.detach())",
            "lambda mod, inputs, output: outputs.__setitem__(type(mod).__name__, output.detach())"),),
        expected_failures={"1.5": (ANSWER, "resnet18@1x3x64x64", "tiny_grouped@2x4x16x16", "tiny_tied@2x4x16x16")},
        variants=(
            (("lambda mod, inputs, output, name=name: outputs.__setitem__(name, output.detach())",
              "lambda mod, inputs, output: outputs.__setitem__(mod._get_name(), output.detach())"),),
        ),
    ),
    Mistake(
        name="transposed_conv_as_conv",
        description="counts a transposed convolution like a convolution, per output element instead of "
                    "per input element, so an upsampling layer looks twice as expensive as it is",
        replacements=((
            "driving = inputs[0] if module.transposed else output",
            "driving = output  # one filter per output element"),),
        expected_failures={"1.4": ("tiny_tied@2x4x16x16",)},
        variants=(
            (("by_type[type(module).__name__] += driving.numel() * module.weight[0].numel()",
              "by_type[type(module).__name__] += (output.numel() * module.in_channels // module.groups\n"
              "                                                * module.kernel_size[0] * module.kernel_size[1])"),),
        ),
    ),
    Mistake(
        name="tied_weight_counted_twice",
        description="adds up every module's own parameters, so a weight two layers share counts twice",
        replacements=((
            "total = sum(p.numel() for p in model.parameters())",
            "total = sum(p.numel() for m in model.modules() for p in m.parameters(recurse=False))"),),
        expected_failures={"1.1": ("tiny_tied",)},
        variants=(
            (("total = sum(p.numel() for p in model.parameters())",
              "total = sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False))"),),
        ),
    ),
)
