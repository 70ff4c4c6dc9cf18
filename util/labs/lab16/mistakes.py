"""Lab 16 example submissions: the solution with one realistic mistake each.

The expected failures were worked out by grading each variant. Each looks right on what its own task's answer
shows and fails where a hidden case has the structure the mistake ignores: the last convolution cut (its channels
feed the first Linear through ``flatten``), groups of four, a bias, a temperature other than 1, frozen weights, a
convolution added to another (16.7), a schedule that prunes all at once (16.8), adapters on every projection, the
frozen layers' activations left out, a merge without alpha / r (16.9).
"""
from util.contract import ANSWER, Mistake

RESIDUAL_CASES = (
    "additions: an identity chain (the stem and every block's conv2 one group), a downsampling block (its 1 x 1 "
    "shortcut and its conv2 one group), a group of four convolutions",
    "a concatenation (each side its own group, read at its offset by the next block), and every convolution of a "
    "network with all three kinds of block cut to half its width",
    "every group of a larger network cut to a quarter of its width, timed by the grader: at least 1.5x as fast",
)
"""Task 16.7's cases: each of its mistakes fails every one."""
SCHEDULE_CASES = (
    "to 90 % in 10 steps from an unpruned model",
    "from 50 % to 80 % in 5 steps (a model pruned before)",
    "to 97 % in 3 steps from 20 %",
    "DigitsCNN pruned again by the grader with your schedule to 95 % in 8 steps of 8 batches: at least 80 %",
)
"""Task 16.8's cases: its mistake fails every one."""
GPT_CASES = (
    "a TinyGPT of one block with multi-head attention and a tied head",
    "grouped-query attention in two blocks: each value projection narrower than the query's",
    "multi-query attention in three blocks, the head not tied: the frozen blocks' activations kept for the first "
    "block's adapters",
)
"""Task 16.9's cases: each of its mistakes fails every one."""
LORA_CASES = ("a hidden layer and the output layer, r=4", "a DigitsCNN's fc, r=2, alpha=16")
"""Task 16.6's cases."""

MISTAKES = (
    Mistake(
        name="first_linear_cut_by_position",
        description="Cuts the last convolution's filters by L1 norm but the first Linear's inputs by position (the "
                    "first n x H x W columns) instead of the columns that read the kept channels: the counts are "
                    "right, and the network computes something else. Cutting conv2 only (the notebook's plan) does "
                    "not show it.",
        replacements=(("reshape(-1, model.side ** 2)[keep].flatten()", "reshape(-1, model.side ** 2)[:len(keep)].flatten()"),),
        expected_failures={"16.2": ("the last block, before the Linear layers", "every block of a DigitsCNN")},
        variants=(
            (("reshape(-1, model.side ** 2)[keep].flatten()",
              "reshape(-1, model.side ** 2)[torch.arange(len(keep))].flatten()"),),
        ),
    ),
    Mistake(
        name="two_four_per_row",
        description="Keeps the larger half of each row instead of 2 of every 4 consecutive weights: half the "
                    "weights are zero and the storage counts look right, but it is not a 2:4 pattern the hardware "
                    "can run.",
        replacements=(("    group = 4\n", "    group = cols\n"),),
        expected_failures={"16.3": (ANSWER, "6 x 16 in float16", "a convolution's weight, rows of 4 x 3 x 3, in float32",
                                    "small whole numbers: ties in most groups", "rows of 512 in float32")},
        variants=(
            (("    mask = torch.zeros_like(groups, dtype=torch.bool).scatter_(2, order[..., :group // 2], True).reshape(weight.shape)\n",
              "    mask = torch.zeros_like(matrix, dtype=torch.bool).scatter_(1, matrix.abs().topk(cols // 2, dim=1).indices, True)"
              ".reshape(weight.shape)\n"),),
            (("    groups = matrix.abs().reshape(rows, -1, group)\n", "    groups = matrix.double().abs().reshape(rows, 1, -1)\n"),
             ("order[..., :group // 2]", "order[..., :cols // 2]")),
        ),
    ),
    Mistake(
        name="rank_budget_without_bias",
        description="Leaves the bias out of the parameter budget: the rank is one too large whenever the bias tips "
                    "the factors over the budget, and a budget below rank 1 is not noticed. conv3 has no bias, so "
                    "the notebook's table looks right.",
        replacements=(("    bias = 0 if layer.bias is None else out\n", "    bias = 0\n"),),
        expected_failures={"16.4": ("a Linear whose bias decides the rank", "a budget below rank 1: ValueError")},
        variants=(
            (("    rank = min((budget - bias) // (fan_in + out), out, fan_in)\n",
              "    rank = min(budget // (fan_in + out), out, fan_in)\n"),),
            (("    rank = min((budget - bias) // (fan_in + out), out, fan_in)\n",
              "    rank = min(math.floor(budget / (fan_in + out)), out, fan_in)\n"),),
        ),
    ),
    Mistake(
        name="temperature_on_one_side",
        description="Divides the teacher's logits by T but not the student's: the loss has other values wherever "
                    "T is not 1. The grader's training run still passes: the student learns to match the softened "
                    "teacher, whose largest logit is the same.",
        replacements=(("F.log_softmax(student_logits / T, dim=1)", "F.log_softmax(student_logits, dim=1)"),),
        expected_failures={"16.5": (ANSWER, "T=4, alpha=0.9, half the rows labeled", "no row labeled, T=8",
                                    "every row labeled, T=2, alpha=0.25")},
        variants=(
            (("F.log_softmax(student_logits / T, dim=1)", "torch.log_softmax(student_logits, 1)"),),
        ),
    ),
    Mistake(
        name="lora_base_left_trainable",
        description="Forgets to freeze the model before adding the adapters: the base counts as trainable, with its "
                    "gradients and Adam's two moments (21,346 trainable parameters instead of 2,088), and so does "
                    "TinyGPT's in 16.9, whose lora_gpt adds its adapters with the same add_lora.",
        replacements=(("    model.requires_grad_(False)\n", ""),),
        expected_failures={"16.6": (ANSWER, "a hidden layer and the output layer, r=4", "a DigitsCNN's fc, r=2, alpha=16"),
                           "16.9": (ANSWER, *GPT_CASES)},
        variants=(
            (("    model.requires_grad_(False)\n", "    model.requires_grad_(True)\n"),),
        ),
    ),
    Mistake(
        name="residual_pruned_on_one_side",
        description="Treats an addition like any other node, passing on the channels of its first input without "
                    "joining the groups of its two inputs: every convolution is a group of its own, so cutting a "
                    "block's conv2 leaves the identity (or the shortcut) it is added to at full width, and the "
                    "network no longer adds up.",
        replacements=(("            for x, y in zip(first, second):\n                union(x, y)\n", ""),),
        expected_failures={"16.7": (ANSWER, *RESIDUAL_CASES)},
        variants=(
            (("            for x, y in zip(first, second):\n                union(x, y)\n            producers[node] = first\n",
              "            producers[node] = second\n"),),
        ),
    ),
    Mistake(
        name="group_ranked_by_first_layer",
        description="Finds the groups and cuts every member, but ranks the group's channels by the L1 norms of its "
                    "first convolution alone instead of their sum over the group: the shapes and counts are right, "
                    "and the network keeps other channels than the masked one.",
        replacements=(("    importance = sum(model.get_submodule(name).weight.detach().abs().sum(dim=(1, 2, 3)) for name in group)\n",
                       "    importance = model.get_submodule(group[0]).weight.detach().abs().sum(dim=(1, 2, 3))\n"),),
        expected_failures={"16.7": (ANSWER, *RESIDUAL_CASES)},
        variants=(
            (("    importance = sum(model.get_submodule(name).weight.detach().abs().sum(dim=(1, 2, 3)) for name in group)\n",
              "    importance = model.get_submodule(conv).weight.detach().abs().sum(dim=(1, 2, 3))\n"),),
        ),
    ),
    Mistake(
        name="schedule_all_at_once",
        description="A schedule that prunes all at once, at the last step: every step but the last keeps the initial "
                    "sparsity, so the model is fine-tuned dense and then cut to the final sparsity in one go, with one "
                    "step's batches to recover. It ends at the stated sparsity, and one cut of that size leaves a "
                    "model that guesses.",
        replacements=(("    return [final + (initial - final) * (1 - k / steps) ** 3 for k in range(1, steps + 1)]",
                       "    return [initial] * (steps - 1) + [final]"),),
        expected_failures={"16.8": (ANSWER, *SCHEDULE_CASES)},
        variants=(
            (("    return [final + (initial - final) * (1 - k / steps) ** 3 for k in range(1, steps + 1)]",
              "    return [final if k == steps else initial for k in range(1, steps + 1)]"),),
            (("    return [final + (initial - final) * (1 - k / steps) ** 3 for k in range(1, steps + 1)]",
              "    return [final + (initial - final) * (1 - k // steps) ** 3 for k in range(1, steps + 1)]"),),
        ),
    ),
    Mistake(
        name="lora_on_every_projection",
        description="Adapts all four of each block's attention projections (q, k, v and o) instead of the query and "
                    "value ones: the adapted model works and merges back, and it trains twice the adapters, with "
                    "their gradients and Adam's moments.",
        replacements=(('for p in ("q", "v")]\n    add_lora', 'for p in ("q", "k", "v", "o")]\n    add_lora'),),
        expected_failures={"16.9": (ANSWER, *GPT_CASES)},
        variants=(
            (('targets = [f"blocks.{i}.attn.{p}" for i in range(len(model.blocks)) for p in ("q", "v")]',
              'targets = [name for name, m in model.named_modules() if ".attn." in name and isinstance(m, nn.Linear)]'),),
            (('for p in ("q", "v")]\n    add_lora', 'for p in "qkv"]\n    add_lora'),),
        ),
    ),
    Mistake(
        name="lora_memory_without_frozen_activations",
        description="Counts as activations only what the adapters themselves keep (each adapter's input and x @ A.T), "
                    "as if the frozen layers kept nothing for backward: the gradient of an early block's adapters "
                    "flows back through every later block, whose inputs autograd keeps too.",
        replacements=(("    activations = saved_bytes(model, batch, length)\n",
                       "    activations = sum(batch * length * (m.base.in_features + m.r) * m.lora_A.element_size()\n"
                       "                      for m in model.modules() if isinstance(m, LoRALinear))\n"),),
        expected_failures={"16.9": (ANSWER, *GPT_CASES)},
        variants=(
            (("    activations = saved_bytes(model, batch, length)\n",
              "    activations = 8 * batch * length * sum(m.lora_A.shape[1] + m.lora_A.shape[0]\n"
              "                                           for m in model.modules() if hasattr(m, 'lora_A'))\n"),),
        ),
    ),
    Mistake(
        name="lora_merged_without_scaling",
        description="Merges B A into the weight without the scaling alpha / r: the adapted model computes base(x) + "
                    "(alpha / r) x A^T B^T, the merged one base(x) + x A^T B^T, which differ wherever alpha is not r "
                    "(16.6's merge too, and the notebook's check of it).",
        replacements=(("            merged.weight += self.scaling * (self.lora_B @ self.lora_A)\n",
                       "            merged.weight += self.lora_B @ self.lora_A\n"),),
        expected_failures={"16.6": (ANSWER, *LORA_CASES), "16.9": (ANSWER, *GPT_CASES)},
        variants=(
            (("            merged.weight += self.scaling * (self.lora_B @ self.lora_A)\n",
              "            merged.weight.add_(self.lora_B @ self.lora_A / self.r)\n"),),
        ),
    ),
)
