"""Lab 17 example submissions: the solution with one realistic mistake each.

The expected failures were worked out by running each on every case. A wrong count in 17.1 also shows in 17.5
and 17.6, whose plans use ``moe_counts`` (as a student's do); a wrong cache in 17.3 shows in 17.6: the examples
declare that too.
"""
from util.contract import ANSWER, Mistake

MOE_1 = "Mixtral with more experts, a shared one and dense first layers"
MOE_2 = "DeepSeek-V3 with 64 experts, top-6, 2 shared, no query latent, other latents"
MOE_3 = "small models: tied heads, two shared experts, dense MLA"
ROUTE_1 = "128 tokens, 16 experts, top-2 and top-4"
ROUTE_2 = "96 tokens, 64 experts, top-8, tight capacity"
ROUTE_3 = "50 tokens on 3 ranks, 6 experts, top-1 and top-3"
KV_MLA = "MLA: other latents and rotary keys, batches, element sizes"
FIT_1 = "Chinchilla's law, another seed, two budgets"
FIT_2 = "a law with beta > alpha, three budgets"
PLAN_1 = "Llama 3 8B, ZeRO-3, no checkpointing, a deadline"
PLAN_2 = "Mixtral on a pipeline of 8, ZeRO-2, checkpointing, a deadline"
PLAN_3 = "a DeepSeek-V3 of 64 experts whose memory sets the cluster"
PLAN_4 = "no cluster meets the deadline; a small GPU"
SERVE_2 = "MLA on a cluster, a model too large, a compute-bound batch"
"""The hidden cases' ids (``cases.py``) the examples fail."""

MISTAKES = (
    Mistake(
        name="activated_counts_every_expert",
        description="Counts every routed expert as activated (as if each token went to all of them): a mixture's "
                    "activated parameters and FLOPs per token come out as a dense model's of its total size.",
        replacements=(
            ("activated = embedding + head + common + cfg.n_moe_layers * cfg.top_k * expert",
             "activated = embedding + head + common + cfg.n_moe_layers * cfg.n_experts * expert"),
        ),
        expected_failures={"17.1": (ANSWER, MOE_1, MOE_2, MOE_3),
                           "17.5": (ANSWER, PLAN_2, PLAN_3),
                           "17.6": (ANSWER, SERVE_2)},
        variants=(
            (("activated = embedding + head + common + cfg.n_moe_layers * cfg.top_k * expert", "activated = total"),),
        ),
    ),
    Mistake(
        name="shared_expert_forgotten",
        description="Leaves DeepSeek's shared experts out of the count: every model with a shared expert is short "
                    "of n_shared x 3 x d_model x d_expert parameters per MoE layer.",
        replacements=(
            ("+ cfg.n_moe_layers * (d * cfg.n_experts + cfg.n_shared * expert))",
             "+ cfg.n_moe_layers * d * cfg.n_experts)"),
        ),
        expected_failures={"17.1": (ANSWER, MOE_1, MOE_2, MOE_3),
                           "17.5": (ANSWER, PLAN_3),
                           "17.6": (ANSWER, SERVE_2)},
        variants=(
            (("    d = cfg.d_model\n    if cfg.attention == \"mla\":",
              "    cfg = type(cfg)(**{**vars(cfg), \"n_shared\": 0})   # the shared experts left out\n"
              "    d = cfg.d_model\n    if cfg.attention == \"mla\":"),),
        ),
    ),
    Mistake(
        name="capacity_per_batch",
        description="Applies the capacity to the whole batch (capacity x experts assignments in all, first come "
                    "first served) instead of to each expert: an expert many tokens choose takes more than its "
                    "capacity, and fewer assignments are dropped.",
        replacements=(
            ("if kept[e] < capacity:", "if kept.sum() < capacity * E:"),
        ),
        expected_failures={"17.2": (ANSWER, ROUTE_1, ROUTE_2, ROUTE_3)},
        variants=(
            (("capacity = math.ceil(capacity_factor * T * top_k / E)",
              "capacity = math.ceil(capacity_factor * T * top_k)"),
             ("if kept[e] < capacity:", "if int(kept.sum()) < capacity:")),
        ),
    ),
    Mistake(
        name="mla_caches_full_keys",
        description="Caches MLA's per-head keys and values (n_heads x (qk_nope + qk_rope + v_head) a layer) instead "
                    "of the latent and the rotary key it computes them from.",
        replacements=(
            ("per_layer = cfg.kv_lora_rank + cfg.qk_rope_dim",
             "per_layer = cfg.n_heads * (cfg.qk_nope_dim + cfg.qk_rope_dim + cfg.v_head_dim)"),
        ),
        expected_failures={"17.3": (ANSWER, KV_MLA),
                           "17.6": (ANSWER, SERVE_2)},
        variants=(
            (("per_layer = cfg.kv_lora_rank + cfg.qk_rope_dim",
              "per_layer = cfg.n_heads * (cfg.qk_nope_dim + cfg.v_head_dim) + cfg.qk_rope_dim"),),
        ),
    ),
    Mistake(
        name="fit_in_linear_space",
        description="Fits the loss itself instead of its logarithm (residual model - loss): the small, high-loss "
                    "runs weigh most and every parameter moves by about 1 %.",
        replacements=(
            ("return np.log(np.exp(e) + np.exp(a) / N ** alpha + np.exp(b) / D ** beta) - np.log(loss)",
             "return np.exp(e) + np.exp(a) / N ** alpha + np.exp(b) / D ** beta - loss"),
        ),
        expected_failures={"17.4": (ANSWER, FIT_1, FIT_2)},
        variants=(
            (("return np.log(np.exp(e) + np.exp(a) / N ** alpha + np.exp(b) / D ** beta) - np.log(loss)",
              "return loss - (np.exp(e) + np.exp(a) * N ** -alpha + np.exp(b) * D ** -beta)"),),
        ),
    ),
    Mistake(
        name="optimizer_state_forgotten",
        description="Counts 16-bit weights and gradients but not Adam's 12 bytes a parameter of optimizer state: "
                    "every plan's memory is too small, and the smallest cluster too small where memory decides it.",
        replacements=(
            ('"optimizer": 12 * shard / (plan.dp if plan.zero >= 1 else 1)',
             '"optimizer": 0 * shard / (plan.dp if plan.zero >= 1 else 1)'),
        ),
        expected_failures={"17.5": (ANSWER, PLAN_1, PLAN_2, PLAN_3, PLAN_4)},
        variants=(
            (('memory["total"] = sum(memory.values())',
              'memory["total"] = sum(v for part, v in memory.items() if part != "optimizer")'),),
        ),
    ),
    Mistake(
        name="bubble_ignored",
        description="Leaves the pipeline bubble out of the run's time: every pipelined plan finishes (pp - 1) / m "
                    "too early, and the smallest cluster for a deadline can come out too small.",
        replacements=(
            ("/ (1 - bubble) / 86400", "/ 86400"),
        ),
        expected_failures={"17.5": (ANSWER, PLAN_1, PLAN_2, PLAN_3, PLAN_4)},
        variants=(
            (("days = flops / (plan.gpus * gpu.peak_flops * plan.utilisation) / (1 - bubble) / 86400",
              "days = flops / plan.gpus / (gpu.peak_flops * plan.utilisation) / 86400"),),
        ),
    ),
)
