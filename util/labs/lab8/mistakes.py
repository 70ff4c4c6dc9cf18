"""Lab 8 example submissions: the solution with one realistic mistake each.

The expected failures were worked out by grading each variant. Three of them pass every check the
notebook shows on the MLP (a chain: each tensor has one reader) and differ only where a graph
branches, a Reshape keeps a dimension, or an output buffer holds old data, which is why the hidden
cases include the residual MLP, ResNet-18, the op zoo and NaN-filled buffers.
"""
from util.contract import ANSWER, Mistake

_PLACE_OUTPUTS = """\
        for name in node.output:
            need = nbytes[name]
            fits = [b for b in free if buffer_bytes[b] >= need]
            if name in outputs or not fits:
                buffer_bytes.append(need)
                assign[name] = len(buffer_bytes) - 1
            else:
                best = min(fits, key=lambda b: (buffer_bytes[b], b))
                free.remove(best)
                assign[name] = best
"""
_FREE_INPUTS = """\
        for name in node.input:
            if name in assign and last_reader[name] == step and name not in outputs:
                free.append(assign[name])
"""

MISTAKES = (
    Mistake(
        name="freed_after_first_reader",
        description="Frees a tensor's buffer after the first node that reads it instead of the last. Right "
                    "on a chain such as the MLP, where each tensor has one reader; on the residual MLP and "
                    "ResNet-18 a block's input is overwritten while its Add still needs it.",
        replacements=(("last_reader[name] = step", "last_reader.setdefault(name, step)"),),
        expected_failures={"8.2": ("residual_mlp@128", "resnet18@1x3x64x64")},
        variants=(
            (("    for step, node in enumerate(model.graph.node):\n        for name in node.input:\n"
              "            last_reader[name] = step\n",
              "    for step, node in reversed(list(enumerate(model.graph.node))):\n        for name in node.input:\n"
              "            last_reader[name] = step   # walked backwards: the first reader is written last\n"),),
        ),
    ),
    Mistake(
        name="in_place_reuse",
        description="Frees a node's last-read inputs before placing its outputs, so an output may take the "
                    "buffer of the input it is computed from (in place). The policy forbids it, and the plan "
                    "has a tensor alive at the same node as another in its buffer on every graph.",
        replacements=((_PLACE_OUTPUTS + _FREE_INPUTS, _FREE_INPUTS + _PLACE_OUTPUTS),),
        expected_failures={"8.2": (ANSWER, "residual_mlp@128", "cnn@16", "resnet18@1x3x64x64",
                                   "consumed_output@64")},
        variants=(  # the same order spelled as one list of this node's last reads, added to the free ones first
            ((_PLACE_OUTPUTS + _FREE_INPUTS,
              "        free += [assign[name] for name in node.input   # this node's last reads: free already\n"
              "                 if name in assign and last_reader[name] == step and name not in outputs]\n"
              + _PLACE_OUTPUTS),),
        ),
    ),
    Mistake(
        name="reshape_zero_taken_literally",
        description="Treats a 0 in Reshape's shape as a dimension of size 0 instead of 'copy the input's "
                    "dimension'. Only the op zoo has such a Reshape.",
        replacements=(("dims = [x[i] if d == 0 else d for i, d in enumerate(target)]", "dims = list(target)"),),
        expected_failures={"8.1": ("op_zoo",)},
        variants=(
            (("dims = [x[i] if d == 0 else d for i, d in enumerate(target)]",
              "dims = list(np.empty(x, dtype=np.int8).reshape(target).shape)   # numpy's reshape: 0 is 0"),),
        ),
    ),
    Mistake(
        name="kernel_adds_into_c",
        description="The C++ kernel adds into C without setting it to zero first. Right when C starts as "
                    "zeros (np.zeros), wrong inside a memory plan, where C's buffer holds an old tensor, and "
                    "wrong for the grader, which fills C with NaN before every call.",
        replacements=(("  std::fill(C, C + static_cast<long>(M) * N, 0.0f);\n", ""),),
        expected_failures={"8.4": (ANSWER, "1x1x1 and 3x5x2000", "257x383x311", "64x1000x3",
                                   "3x faster than naive at 500x700x1000, one thread"),
                           "8.5": (ANSWER, "residual_mlp@256, outputs and 3x speed")},
        variants=(  # C set to zero, but only its first M floats (a count of rows where M x N floats were meant)
            (("  std::fill(C, C + static_cast<long>(M) * N, 0.0f);\n",
              "  std::fill(C, C + static_cast<long>(M), 0.0f);  // C's M rows\n"),),
        ),
    ),
)
