"""Lab 2 example submissions: the solution with one realistic mistake each (see ``__init__``).

The expected failures were worked out by running each variant on every check: several mistakes
are invisible on some graphs (MobileNetV2 and ResNet-18 hold no int64 tensor, no string attribute;
ResNet-18 has no ``Constant`` node), which is why the hidden graphs exist.
"""
from util.contract import ANSWER, Mistake

TINY = "tiny_shape_graph"

MISTAKES = (
    Mistake(
        name="skip_constant_nodes",
        description="Leaves Constant nodes out of the operator counts because they compute nothing.",
        replacements=((
            "counts = Counter(node.op_type for node in model.graph.node)",
            'counts = Counter(node.op_type for node in model.graph.node if node.op_type != "Constant")',
        ),),
        expected_failures={"2.1": (ANSWER, TINY)},
        variants=(
            (("counts = Counter(node.op_type for node in model.graph.node)",
              "counts = Counter(node.op_type for node in model.graph.node if len(node.input) > 0)"),),
        ),
    ),
    Mistake(
        name="int64_as_four_bytes",
        description="Assumes every element takes 4 bytes, which is only true of float32 and int32.",
        replacements=((
            '"bytes": math.prod(shape) * dtype.itemsize}',
            '"bytes": math.prod(shape) * 4}',
        ),),
        expected_failures={"2.2": ("tiny_shape_graph nodes",)},
        variants=(
            (('"bytes": math.prod(shape) * dtype.itemsize}',
              '"bytes": math.prod(shape) * np.dtype(np.float32).itemsize}'),),
        ),
    ),
    Mistake(
        name="attribute_strings_with_str",
        description="Turns the bytes ONNX stores for a string attribute into text with str(), "
                    "which gives \"b'reflect'\" instead of \"reflect\".",
        replacements=((
            "return value.decode()",
            "return str(value)",
        ),),
        expected_failures={"2.2": ("tiny_shape_graph nodes",)},
        variants=(
            (("return value.decode()", "return repr(value)"),),
        ),
    ),
    Mistake(
        name="bandwidth_first_input_only",
        description="Counts only a node's first input as read (the activation), forgetting weights, "
                    "BatchNorm statistics, Constant operands and shape tensors.",
        replacements=((
            "read = sum(sizes[name] for name in node.input if name)",
            "read = sum(sizes[name] for name in node.input[:1] if name)",
        ),),
        expected_failures={"2.3": (ANSWER, "resnet18", TINY)},
        variants=(
            (("read = sum(sizes[name] for name in node.input if name)",
              "read = sum(sizes[name] for name in node.input  # the activations only\n"
              "                   if name and name not in {init.name for init in model.graph.initializer})"),),
        ),
    ),
    Mistake(
        name="liveness_first_consumer",
        description="Frees a tensor after its first consumer, so skip connections look free.",
        replacements=((
            "dies[name] = step                     # the last consumer wins",
            "dies.setdefault(name, step)           # freed after its first consumer",
        ),),
        expected_failures={"2.4": (ANSWER, "resnet18", TINY)},
        variants=(
            (("                dies[name] = step                     # the last consumer wins",
              "                dies[name] = min(dies.get(name, step), step)   # the first consumer"),),
        ),
    ),
)
