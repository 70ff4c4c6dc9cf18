"""Lab 12 example submissions: the solution with one realistic mistake each.

The expected failures were worked out by grading each variant. Each passes what the notebook shows
by hand and fails where a hidden case has the structure the mistake ignores: a value read twice (the
residual MLP, a tied weight), a storage saved twice (every model: a ReLU's output is the next
layer's input, the loss's log-probabilities are saved twice), Adam's two moments, the kept inputs of
the segments before.
"""
from util.contract import ANSWER, Mistake

MISTAKES = (
    Mistake(
        name="fan_out_overwritten",
        description="Stores each gradient a node passes back instead of adding it to what is there: right on "
                    "the MLP, where every value is read once, wrong where a value is read twice (a residual "
                    "block's input, a weight two layers share).",
        replacements=(("grads[node.name] = grads[node.name] + g if node.name in grads else g",
                       "grads[node.name] = g"),),
        expected_failures={"12.1": ("residual MLP (a tensor read twice)", "one weight used by two layers")},
        variants=(
            (("grads[node.name] = grads[node.name] + g if node.name in grads else g",
              "grads.update({node.name: g})"),),
        ),
    ),
    Mistake(
        name="saved_per_tensor",
        description="Adds up the bytes of every tensor autograd saves instead of every storage: a ReLU's output "
                    "that the next Linear saves again, a flatten view and the loss's log-probabilities count "
                    "twice (2,360,324 bytes for the 8-block chain instead of 1,311,748).",
        replacements=(("storages[storage.data_ptr()] = storage.nbytes()",
                       "storages[len(storages)] = tensor.numel() * tensor.element_size()"),),
        expected_failures={"12.2": (ANSWER, "8 Linear+ReLU blocks at batch 128, SGD",
                                    "an MLP with a frozen first layer, momentum",
                                    "DigitsCNN at batch 16 (BatchNorm in train mode), Adam",
                                    "a weight two layers share, Adam")},
        variants=(
            (("storages[storage.data_ptr()] = storage.nbytes()",
              "storages[len(storages)] = storage.nbytes()   # each saved tensor's storage, every time"),),
        ),
    ),
    Mistake(
        name="adam_state_1x",
        description="Counts one copy of the parameters for Adam's state, as for momentum; Adam keeps two moments "
                    "(exp_avg and exp_avg_sq).",
        replacements=(('{"sgd": 0, "momentum": 1, "adam": 2}[optimizer]', '{"sgd": 0, "momentum": 1, "adam": 1}[optimizer]'),),
        expected_failures={"12.2": (ANSWER, "DigitsCNN at batch 16 (BatchNorm in train mode), Adam",
                                    "a weight two layers share, Adam")},
        variants=(
            (('{"sgd": 0, "momentum": 1, "adam": 2}[optimizer]', '(0 if optimizer == "sgd" else 1)'),),
        ),
    ),
    Mistake(
        name="segment_inputs_not_charged",
        description="Checks each segment's own need against the budget but forgets the inputs kept for the segments "
                    "before it, so every plan looks affordable: it picks no checkpointing, whose real peak is over "
                    "the budget, and never raises.",
        replacements=(("if kept + local > budget:", "if local > budget:"),),
        expected_failures={"12.4": (ANSWER, "a budget below every plan's peak: ValueError",
                                    "wide and narrow blocks in turn", "30 blocks of mixed widths")},
        variants=(
            (("if kept + local > budget:", "if max(local, 0) > budget:"),),
        ),
    ),
)
