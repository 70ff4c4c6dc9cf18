"""Lab 7 example submissions: the solution with one realistic mistake each.

The expected failures were worked out by running each variant on every case. The per-consumer Cast
and the LpNormalization default pass the notebook's own toy; they show on the mixer and on ResNet-18.
"""
from util.contract import ANSWER, Mistake

MISTAKES = (
    Mistake(
        name="cast_per_consumer",
        description="Inserts one Cast for every node that reads a tensor instead of one per (tensor, dtype), "
                    "so a tensor read by two float16 nodes is cast twice (ResNet-18's downsampling convs, the "
                    "mixer's shared weight and its float16 graph output).",
        replacements=(
            ("if need not in cast_of:", "if True:  # a new Cast for every reader"),
            ('cast_of[need] = f"{t}_{need}"', 'cast_of[need] = f"{t}_{need}_{k}_{j}"'),
        ),
        expected_failures={"7.2": (ANSWER, "mixer", "ResNet-18, conv1 and fc excluded"),
                           "7.3": (ANSWER, "mixer, parameters in float16")},
        variants=(
            (("            if need not in cast_of:\n                cast_of[need] = f\"{t}_{need}\"\n"
              "                add_cast(stored, cast_of[need], t, need)\n            nodes[k].input[j] = cast_of[need]\n",
              "            if (need, k) not in cast_of:   # one Cast per reading node\n"
              "                cast_of[need, k] = f\"{t}_{need}_{k}\"\n"
              "                add_cast(stored, cast_of[need, k], t, need)\n            nodes[k].input[j] = cast_of[need, k]\n"),),
        ),
    ),
    Mistake(
        name="attribute_default_ignored",
        description="Reads a conditional op's attribute only when the node sets it, so an LpNormalization "
                    "that leaves p to its ONNX default (2, which squares its input) runs in float16.",
        replacements=(
            ("    schema = onnx.defs.get_schema(node.op_type, OPSET)\n",
             "    return None  # left out: no value to compare\n    schema = onnx.defs.get_schema(node.op_type, OPSET)\n"),
        ),
        expected_failures={"7.1": ("mixer, default lists",), "7.2": ("mixer",), "7.3": ("mixer, parameters in float16",)},
        variants=(
            (("    default = schema.attributes[name].default_value if name in schema.attributes else None\n",
              "    default = None   # only what the node sets\n"),),
        ),
    ),
    Mistake(
        name="emulator_rounds_casts_only",
        description="Rounds only what the Casts produce, not the float16 results of the nodes themselves, "
                    "which is what onnxruntime effectively does: no intermediate result ever overflows.",
        replacements=(
            ("rounded = [t for t in node.output if types.get(t) == TensorProto.FLOAT16]",
             "rounded = []  # only the Casts round"),
        ),
        expected_failures={"7.4": (ANSWER, "RMS chain, all float16", "toy in mixed precision",
                                   "ResNet-18, all float16"),
                           "7.5": (ANSWER, "RMS chain", "gate")},
        variants=(
            (("rounded = [t for t in node.output if types.get(t) == TensorProto.FLOAT16]",
              "rounded = [t for t in node.output if node.op_type == \"Cast\" and types.get(t) == TensorProto.FLOAT16]"),),
        ),
    ),
)
