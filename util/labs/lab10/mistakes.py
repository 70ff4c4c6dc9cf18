"""Lab 10 example submissions: the solution with one realistic mistake each.

The expected failures were worked out by running each variant on every case. A wrong count in 10.1,
10.2 or 10.3 also shows in 10.4, whose intensities are built from those counts (as a student's are):
the examples declare that too.
"""
from util.contract import ANSWER, Mistake

MISTAKES = (
    Mistake(
        name="positions_restart",
        description="Gives every step positions 0 .. L-1 (wpe(arange(L))), so each decode step's token sits at "
                    "position 0 instead of at the cache's length: the cached tokens drift from the uncached ones.",
        replacements=(
            ("positions = torch.arange(past, past + ids.shape[1])", "positions = torch.arange(ids.shape[1])"),
        ),
        expected_failures={"10.5": (ANSWER, "GQA, batch of 2", "MQA, untied head", "a one-token prompt",
                                    "3 layers, d=96")},
        variants=(
            (("positions = torch.arange(past, past + ids.shape[1])",
              "positions = torch.arange(past, past + ids.shape[1]) - past"),),
        ),
    ),
    Mistake(
        name="kv_bytes_with_n_head",
        description="Sizes the KV cache with n_head instead of n_kv_head: right for multi-head attention, wrong "
                    "for every grouped-query and multi-query model (and so for their intensities).",
        replacements=(
            ("return 2 * cfg.n_layer * cfg.kv_heads * cfg.head_dim * T * batch * element",
             "return 2 * cfg.n_layer * cfg.n_head * cfg.head_dim * T * batch * element"),
        ),
        expected_failures={"10.3": ("GQA and MQA TinyGPTs, batches and dtypes",
                                    "GPT-2 small at T=1024 in float16: MHA, GQA-4, MQA"),
                           "10.4": (ANSWER, "MQA decode and prefill")},
        variants=(
            (("return 2 * cfg.n_layer * cfg.kv_heads * cfg.head_dim * T * batch * element",
              "return 2 * cfg.n_layer * cfg.d_model * T * batch * element"),),
        ),
    ),
    Mistake(
        name="tied_head_counted_twice",
        description="Adds the head's vocab x d_model parameters even when it is tied to the token embedding "
                    "(as named_parameters(remove_duplicate=False) would): every tied model's count and bytes "
                    "are too large, and so every intensity too small.",
        replacements=(
            ('"head": 0 if cfg.tied else vocab * d,', '"head": vocab * d,'),
        ),
        expected_failures={"10.1": (ANSWER, "MQA, d=96, 3 layers, vocabulary 1000", "GPT-2 small, by part"),
                           "10.4": (ANSWER, "decode at batch 8", "MQA decode and prefill", "GPT-2 small in float16")},
        variants=(
            (('"embedding": vocab * d + cfg.n_positions * d,',
              '"embedding": (2 if cfg.tied else 1) * vocab * d + cfg.n_positions * d,'),),
        ),
    ),
    Mistake(
        name="causal_halving",
        description="Counts only the unmasked half of the attention scores (L x past + L(L+1)/2 pairs) against "
                    "the stated convention, which counts all L x T: every prefill is undercounted, a single "
                    "decode step is not.",
        replacements=(
            ("attention = cfg.n_layer * 2 * cfg.n_head * L * (past + L) * cfg.head_dim",
             "attention = cfg.n_layer * 2 * cfg.n_head * (L * past + L * (L + 1) // 2) * cfg.head_dim"),
        ),
        expected_failures={"10.2": (ANSWER, "GQA, prefill and decode", "MQA, chunked prefill over a cache, batch 2",
                                    "logits of the last position only"),
                           "10.4": (ANSWER, "MQA decode and prefill", "GPT-2 small in float16")},
        variants=(
            (("attention = cfg.n_layer * 2 * cfg.n_head * L * (past + L) * cfg.head_dim",
              "attention = cfg.n_layer * cfg.n_head * (2 * L * past + L * (L + 1)) * cfg.head_dim"),),
        ),
    ),
    Mistake(
        name="default_opset",
        description="Leaves opset_version to the exporter's default (20 in PyTorch 2.14): GELU exports as one "
                    "Gelu node, which onnxruntime 1.31.1's optimizer fuses into BiasGelu, the exact (erf) GELU "
                    "instead of GPT-2's tanh approximation; no FastGelu, logits about 2e-4 off, not opset 17.",
        replacements=(
            ("dynamo=False, opset_version=17,", "dynamo=False,"),
        ),
        expected_failures={"10.6": (ANSWER, "MQA", "3 layers, d=96, GQA")},
        variants=(
            (("dynamo=False, opset_version=17,", "dynamo=False, opset_version=20,"),),
        ),
    ),
)
