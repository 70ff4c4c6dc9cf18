"""Lab 14 example submissions: the solution with one realistic mistake each.

Each passes what the notebook's own shapes show and fails where a hidden case has the structure it ignores: a
ragged edge (the unmasked matmul reads and writes past its tensors, which the grader's counter refuses), a second
pass over the row (the traffic doubles), values whose exponential overflows (a softmax without the maximum, in
float32 or float64 alike), more than one key block per query block (the accumulator must be rescaled whenever the
running maximum moves), the diagonal of a causal mask; in 14.7, shared memory without the pipeline's stages (every
hidden configuration has two or more) and an occupancy that leaves out the registers (three of the five hidden
configurations are limited by them); in 14.8, a backward whose dS leaves out D = rowsum(dO * O) (wrong dQ and
dK on every case) and a causal backward that visits the blocks above the diagonal (right gradients, the traffic
of a full one); in 14.9, a chooser that excludes only the candidates that fit no SM, not those that spill (it picks
the spilling 256 x 256 x 32 and 128 x 256 x 64 where they would be fastest). 14.7's occupancy without the
registers also fails 14.9 where the registers decide (its chooser uses that occupancy).

``variants``: the same mistake made another way the task allows (float64, another call, another order); the tests
(``tests/labs/test_lab14_variants.py``) grade each through the task's cases and expect the same failures.
"""
from util.contract import ANSWER, Mistake

CONFIGS = ("128x128x32 fp16, 3 stages", "64x256x32 fp16, 4 stages", "128x256x64 bf16, 3 stages",
           "256x256x64 fp16, 4 stages", "64x32x32 fp16, 2 stages")
WARPS = (8, 4, 8, 8, 4)
SHARED = tuple(f"shared memory of {config}" for config in CONFIGS)
OCCUPANCY = tuple(f"occupancy of {config}, {warps} warps" for config, warps in zip(CONFIGS, WARPS))
"""Task 14.7's hidden cases, in order (``util.labs.lab14.cases_tiles``): shared memory, then occupancy."""
BACKWARD = ("2 heads of 80 x 16, query blocks of 32 and key blocks of 16 (ragged)",
            "causal, 2 heads of 90 x 16, query blocks of 32 and key blocks of 16 (key blocks inside a query block, a "
            "ragged diagonal)",
            "causal, 72 x 32, query blocks of 16 and key blocks of 32")
"""Task 14.8's hidden cases, in order (``util.labs.lab14.cases``)."""
_DS = "ds = p * (tl.dot(do, tl.trans(v)) - delta[:, None])"
_BLOCK_DS = "dp = tl.dot(do, tl.trans(v))\n            ds = p * (dp - tl.sum(p * dp, axis=1)[:, None])"
KEY_DS = "            dv += tl.dot(tl.trans(p), do)\n            " + _DS
QUERY_DS = "            " + _DS + "\n            dq += tl.dot(ds, k) * scale"
"""The backward's two lines that compute dS (the key-block programs', the query-block programs')."""
LAUNCH = ("3,072 x 6,144 x 4,096: a spilling 256 x 256 tile, and 4 stages that halve the occupancy",
          "256 x 8,192 x 8,192 (a batch of 256 tokens): the spilling 128 x 256 x 64 at 4 warps",
          "1,000 x 5,000 x 2,048 (ragged): occupancy against bytes, a candidate that fits no SM")
"""Task 14.9's hidden cases, in order (``util.labs.lab14.cases_launch``)."""
_SPILLS = '    if compiled["spills"]:\n        return None\n'
OVERFLOW = "16 rows of 1,000 values of size 1,000 (exp overflows float32 and float64 without the maximum)"
"""Task 14.4's case that catches a softmax without the maximum (``util.labs.lab14.cases``)."""

MISTAKES = (
    Mistake(
        name="matmul_without_edge_masks",
        description="Loads and stores the matmul's tiles without masks: right whenever M, N and K are multiples of "
                    "the tiles (the notebook's 128 x 128 x 128), but a ragged edge reads and writes past the tensors, "
                    "which the grader's counter refuses.",
        replacements=(
            ("""        a = tl.load(a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)""",
             """        a = tl.load(a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn)"""),
            ("""    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))""",
             """    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc)"""),
        ),
        expected_failures={"14.3": ("100 x 72 x 90 in tiles of 32 (every edge ragged)",
                                    "136 x 100 x 72 in 64 x 32 tiles (ragged rows, columns and depth)")},
        variants=(
            ((  # the loads masked, the store not
                """    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))""",
                """    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc)"""),),
            ((  # only the depth masked (K), rows and columns not
                """        a = tl.load(a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)""",
                """        a = tl.load(a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak, mask=ks[None, :] < K, other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn, mask=ks[:, None] < K, other=0.0)"""),
             ("""    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))""",
              """    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc)""")),
        ),
    ),
    Mistake(
        name="softmax_reads_the_row_twice",
        description="Loads the row once for its maximum and sum and again for the exponentials it writes: the "
                    "right values, twice the reads of a fused softmax.",
        replacements=(
            ("""    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride_y + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)""",
             """    top = tl.max(x, axis=0)
    total = tl.sum(tl.exp(x - top), axis=0)
    again = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=float("-inf"))
    tl.store(y_ptr + row * stride_y + cols, tl.exp(again - top) / total, mask=cols < n_cols)"""),
        ),
        expected_failures={"14.4": (ANSWER, OVERFLOW, "12 rows of 777", "8 rows of exactly 256 (no masked lane)")},
        variants=(
            (("""    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride_y + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)""",
              """    top = tl.max(x, axis=0)
    again = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=float("-inf"))
    e = tl.exp(again - top)
    tl.store(y_ptr + row * stride_y + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)"""),),  # max, then exp
        ),
    ),
    Mistake(
        name="softmax_without_the_maximum",
        description="Takes the exponential of the raw values in float64, without subtracting the row's maximum "
                    "first: float64's exp reaches 709, so the notebook's values (up to about 120) pass, and values "
                    "around 1,000 give infinity over infinity (in float32 the notebook's own values would).",
        replacements=(("    e = tl.exp(x - tl.max(x, axis=0))", "    e = tl.exp(x.to(tl.float64))"),),
        expected_failures={"14.4": (OVERFLOW,)},
        variants=(
            (("    e = tl.exp(x - tl.max(x, axis=0))",  # exp2, in float64
              "    e = tl.exp2(x.to(tl.float64) * 1.4426950408889634)"),),
            (("    e = tl.exp(x - tl.max(x, axis=0))",  # the row's mean subtracted instead, in float64
              "    e = tl.exp(x.to(tl.float64) - tl.sum(tl.where(cols < n_cols, x, 0.0), axis=0) / n_cols)"),),
        ),
    ),
    Mistake(
        name="flash_accumulator_not_rescaled",
        description="Updates the running maximum and sum but adds each block's P V to the accumulator without "
                    "rescaling what it holds by exp(m_old - m_new): right when a query block sees one key block, "
                    "wrong as soon as a later block raises the maximum.",
        replacements=(("        acc = acc * alpha[:, None] + tl.dot(p, v)", "        acc = acc + tl.dot(p, v)"),),
        variants=(
            (("        acc = acc * alpha[:, None] + tl.dot(p, v)", "        acc = tl.dot(p, v, acc)"),),  # dot's acc
            (("        acc = acc * alpha[:, None] + tl.dot(p, v)",  # the block's P V rescaled instead
              "        acc = acc + tl.dot(p, v) * alpha[:, None]"),),
        ),
        expected_failures={"14.5": (ANSWER, "2 heads of 96 x 32 in blocks of 32",
                                    "136 x 64, query blocks of 64 and key blocks of 32 (ragged)",
                                    "causal, 256 x 32 in blocks of 64",
                                    "causal, 150 x 32 in blocks of 32 (a ragged diagonal)")},
    ),
    Mistake(
        name="causal_mask_off_by_one",
        description="Masks the keys after query + 1 instead of after the query, so each query also sees the next "
                    "token (within its block): causal attention that peeks one step ahead.",
        replacements=(('                s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))',
                       '                s = s.masked_fill(cols[None, :] > rows[:, None] + 1, float("-inf"))'),),
        variants=(
            (('                s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))',  # torch.where
              '                s = torch.where(cols[None, :] >= rows[:, None] + 2, float("-inf"), s)'),),
            (('                s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))',  # in float64
              '                s = s.double().masked_fill(cols[None, :] > rows[:, None] + 1, float("-inf")).float()'),),
        ),
        expected_failures={"14.2": (ANSWER, "causal, 4 heads of 128 x 64 in blocks of 32",
                                    "causal, 130 queries in blocks of 32 (a last block of 2)",
                                    "causal, 2,048 queries within a memory budget smaller than one score matrix")},
    ),
    Mistake(
        name="shared_memory_without_stages",
        description="Predicts a program's shared memory as one copy of the A and B tiles, forgetting that Triton's "
                    "pipeline keeps num_stages of them: right only at num_stages=1, and the occupancy it implies "
                    "would be too high.",
        replacements=(("    return num_stages * (block_m * block_k + block_k * block_n) * dtype_bytes",
                       "    return (block_m * block_k + block_k * block_n) * dtype_bytes"),),
        variants=(
            (("    return num_stages * (block_m * block_k + block_k * block_n) * dtype_bytes",  # factored, another order
              "    return dtype_bytes * block_k * (block_m + block_n)"),),
        ),
        expected_failures={"14.7": (ANSWER, *SHARED)},
    ),
    Mistake(
        name="occupancy_without_registers",
        description="Counts the blocks an SM holds from its shared memory, threads and block slots only: the "
                    "registers, which limit most of these tiles, are left out, so the SM seems to hold more blocks "
                    "and the wrong resource is named.",
        replacements=(('        "registers": limits["registers_per_sm"] // per_warp // num_warps,\n', ""),),
        variants=(
            (('        "registers": limits["registers_per_sm"] // per_warp // num_warps,',  # per SM, not per block
              '        "registers": limits["registers_per_sm"] // per_warp,'),),
        ),
        expected_failures={"14.7": (ANSWER, OCCUPANCY[0], OCCUPANCY[2], OCCUPANCY[4]), "14.9": (ANSWER, LAUNCH[2])},
    ),
    Mistake(
        name="backward_without_delta",
        description="Takes dS = P * dP, leaving out the softmax's row term D = rowsum(dO * O): dV is right, dQ and dK "
                    "are wrong on every input (the term is each row's dP averaged under P, never zero).",
        replacements=((KEY_DS, KEY_DS.replace(_DS, "ds = p * tl.dot(do, tl.trans(v))")),
                      (QUERY_DS, QUERY_DS.replace(_DS, "ds = p * tl.dot(do, tl.trans(v))"))),
        variants=(
            ((KEY_DS, KEY_DS.replace(_DS, _BLOCK_DS)),  # D from the block's own P and dP: right only when one key
             (QUERY_DS, QUERY_DS.replace(_DS, _BLOCK_DS))),  # block holds the whole row
            ((KEY_DS, KEY_DS.replace(_DS, "ds = p * tl.dot(do, tl.trans(v))")),),  # only dK's programs without it
        ),
        expected_failures={"14.8": (ANSWER, *BACKWARD)},
    ),
    Mistake(
        name="causal_backward_above_the_diagonal",
        description="When causal, starts every key-block program at the first query block instead of the one holding "
                    "its first key: the blocks above the diagonal are masked to zero, so the gradients are right, "
                    "but Q, dO, O and L are read as often as in a full backward.",
        replacements=(("            begin = (block * BLOCK_N) // BLOCK_M * BLOCK_M", "            begin = 0"),),
        variants=(
            (("            end = tl.minimum(start + BLOCK_M, N)", "            end = N"),),  # dQ's programs instead
        ),
        expected_failures={"14.8": (ANSWER, BACKWARD[1], BACKWARD[2])},
    ),
    Mistake(
        name="chooser_ignores_spills",
        description="Excludes a candidate only when no block of it fits an SM, not when the compiler spilled: a "
                    "spilling tile (255 registers, its accumulator partly in local memory) gets a time, and where "
                    "its bytes are the fewest it is chosen.",
        replacements=((_SPILLS, ""),),
        variants=(
            ((_SPILLS, _SPILLS.replace('compiled["spills"]',  # the compiler never reports more than 255: it spills
                                       'compiled["registers"] > H100_LIMITS["registers_per_thread"]')),),
            ((_SPILLS, _SPILLS.replace('compiled["spills"]', 'compiled["spills"] > 2048')),),  # "a few bytes"
        ),
        expected_failures={"14.9": (ANSWER, LAUNCH[0], LAUNCH[1])},
    ),
)
