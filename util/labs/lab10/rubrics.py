"""How lab 10's written questions are marked (grader-only: students, kernels and judges never see this file).

Each item's text is what the student reads when it is applied; its note guides markers only. The model
answers are in the solution's answer cells (``solutions/lab10_transformer_costs.ipynb``).
"""
from util.rubric import Item, Rubric

RUBRICS = {
    "10.Q2": Rubric(items=(
        Item("A", 0.5, "About 31%: the token embedding is 50,257 x 768 = 38.6 million parameters",
             note="accept 30-32 % or 'about a third' with the product shown"),
        Item("B", 0.5, "Counts it once although the head uses it too (tied)",
             note="a fraction of about 62 % counts the head twice: do not give B"),
    )),
    "10.Q4": Rubric(items=(
        Item("A", 1, "The Linears and the head do the same work per token: one row through every weight matrix, "
             "whether the token comes in a prefill or alone", note="'same weight MACs per token' is enough"),
        Item("B", 1, "What grows is attention: QK^T and AV over the T = past + 1 cached positions, linear in the "
             "position (n_head x T x head_dim per layer each)", note="must name attention over the cache"),
        Item("X", -0.5, "Says a decode step recomputes the earlier tokens (that is decoding without a cache)"),
    ), notes="The question is about per-token cost: weights are per token, attention per position."),
    "10.Q5": Rubric(items=(
        Item("A", 0.5, "About 37.7 MB per sequence: 2 x 12 layers x 768 x 1024 positions x 2 bytes",
             note="37.7 MB or 36 MiB; 75 MB is float32"),
        Item("B", 0.5, "From a batch of 7 the cache is larger than the 249 MB of weights (6 x 37.7 = 226 MB)"),
    )),
    "10.Q6": Rubric(items=(
        Item("A", 0.5, "MACs grow in proportion to L: every token goes through every weight"),
        Item("B", 0.5, "The weights are read once whatever L is, so the bytes moved hardly grow"),
    )),
    "10.Q7": Rubric(items=(
        Item("A", 0.5, "With a large batch the weights are shared and the intensity tends to MACs per sequence over "
             "KV-cache bytes per sequence", note="the limit named in the task's text"),
        Item("B", 0.5, "Fewer KV heads shrink the cache bytes per sequence (by n_head / n_kv_head) for about the "
             "same MACs, lifting that limit above the ridge", note="must say why the limit rises, not only that"),
    )),
    "10.Q8": Rubric(items=(
        Item("A", 0.5, "The Tanh and the Mul/Add nodes of the tanh GELU became one FastGelu per layer"),
        Item("B", 0.5, "The Constants were folded into the fused nodes and initializers (the optimizer's "
             "constant folding)", note="'absorbed into FastGelu / initializers' is enough"),
    )),
    "10.Q9": Rubric(items=(
        Item("A", 0.5, "At opset 20 GELU exports as one Gelu(approximate='tanh') node, which is fused into BiasGelu"),
        Item("B", 0.5, "relmax grows to about 2e-4 (instead of about 1e-6)",
             note="the order of magnitude is what counts"),
        Item("C", 1, "BiasGelu computes the exact (erf) GELU whatever the attribute says: a fusion that ignores an "
             "attribute changes the function, so it must check it to stay a rewrite that preserves the result"),
    )),
}
