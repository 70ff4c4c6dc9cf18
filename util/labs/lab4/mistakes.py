"""Lab 4 example submissions: the solution with one realistic mistake each (see ``__init__``).

Lab 4 is a folder lab, so each example is a folder ``grader/examples/lab4/<name>/`` with the
notebook and its ``cpp/`` project; these mistakes are all in ``cpp/analysis.cpp``. GoogLeNet has no
grouped convolution, so counting with the input's channels passes the notebook's own task and
fails only on the hidden MobileNetV2 and ``tiny_addmm``.
"""
from util.contract import ANSWER, Mistake

RESNET18, MOBILENET_V2, TINY = "resnet18@1x3x128x128", "mobilenet_v2@1x3x160x160", "tiny_addmm@2x4x16x16"
TIED = "tiny_tied@2x4x16x16"

MISTAKES = (
    Mistake(
        name="top_level_only",
        description="Counts the outputs of the model's top-level modules only (the earlier analyzer's bug): "
                    "a container's output stands in for all of its leaves.",
        replacements=((
            "collect_leaves(root, leaves);",
            "for (const ModuleCall& child : root.children) leaves.push_back(&child);  // top-level modules",
        ),),
        expected_failures={"4.2": (ANSWER, RESNET18, MOBILENET_V2, TINY)},
        variants=(  # the walk itself stops one level down: a container among the root's children is taken whole
            (("  for (const ModuleCall& child : call.children) collect_leaves(child, leaves);",
              "  for (const ModuleCall& child : call.children) leaves.push_back(&child);  // one level down"),),
        ),
    ),
    Mistake(
        name="buffers_counted_as_weights",
        description="Adds the buffers (BatchNorm's running statistics) to the weights because they are "
                    "saved in the file too.",
        replacements=((
            "    report.bytes += tensor.numel() * static_cast<int64_t>(tensor.element_size());\n  }\n",
            "    report.bytes += tensor.numel() * static_cast<int64_t>(tensor.element_size());\n  }\n"
            "  for (const auto& buffer : model.named_buffers(/*recurse=*/true)) {  // saved in the file too\n"
            "    report.tensors += 1;\n"
            "    report.parameters += buffer.value.numel();\n"
            "    report.bytes += buffer.value.numel() * static_cast<int64_t>(buffer.value.element_size());\n"
            "  }\n",
        ),),
        expected_failures={"4.1": (ANSWER, RESNET18, MOBILENET_V2, TINY)},
        variants=(  # the buffers added by another call (buffers() instead of named_buffers()), in another place
            (("  std::set<const c10::TensorImpl*> seen;\n",
              "  std::set<const c10::TensorImpl*> seen;\n"
              "  for (const at::Tensor& buffer : model.buffers(/*recurse=*/true)) {  // the file holds them too\n"
              "    report.tensors += 1;\n"
              "    report.parameters += buffer.numel();\n"
              "    report.bytes += buffer.numel() * static_cast<int64_t>(buffer.element_size());\n"
              "  }\n"),),
        ),
    ),
    Mistake(
        name="grouped_conv_ignored",
        description="Takes C_in from the convolution's input instead of the weight, so a grouped or "
                    "depthwise convolution is counted as if every output read every input channel.",
        replacements=((
            "return driving.numel() * (weight.numel() / weight.size(0));",
            "return driving.numel() * node.arg(\"input\").toTensor().size(1) * weight.size(2) * weight.size(3);",
        ),),
        expected_failures={"4.3": (MOBILENET_V2, TINY, TIED)},
        variants=(  # groups ignored by multiplying them back in: a filter's C_in / groups times groups
            (("return driving.numel() * (weight.numel() / weight.size(0));",
              "return driving.numel() * (weight.numel() / weight.size(0)) * node.arg(\"groups\").toInt();"),),
        ),
    ),
    Mistake(
        name="shared_weight_counted_twice",
        description="Counts every entry of named_parameters(), so a weight two modules share (tied "
                    "weights) is counted twice; Python's model.parameters() counts it once.",
        replacements=((
            "    if (!seen.insert(tensor.unsafeGetTensorImpl()).second) continue;  // a tied weight, already counted\n",
            "",
        ),),
        expected_failures={"4.1": (TIED,)},
        variants=(  # parameters told apart by their names, which a tied weight's two entries do not share
            (("  std::set<const c10::TensorImpl*> seen;\n", "  std::set<std::string> seen;  // by name\n"),
             ("    if (!seen.insert(tensor.unsafeGetTensorImpl()).second) continue;  // a tied weight, already counted\n",
              "    if (!seen.insert(param.name).second) continue;  // a name already counted\n")),
        ),
    ),
)
