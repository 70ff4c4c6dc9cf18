"""Lab 3 example submissions: the solution with one realistic mistake each (see ``__init__``).

The expected failures were worked out by running each variant on every check. Both mistakes pass
the notebook's own visible examples, whose sizes divide evenly and whose bounds are equal, which is
why the hidden cases use partial tiles and unequal bounds.
"""
from util.contract import ANSWER, Mistake

MISTAKES = (
    Mistake(
        name="full_size_last_tile",
        description="Gives every tile the full bound size, so the last, partial tile claims rows or "
                    "columns that do not exist (the Split sizes add up to more than the dimension).",
        replacements=((
            "return [min(bound, total - i * bound) for i in range(count)]",
            "return [bound] * count",
        ),),
        expected_failures={"3.2": ("100x70x130 partial tiles", "33x65x17 transA, bounds 16x32x8",
                                   "50x40x30 transB alpha beta, bounds 32x16x8",
                                   "45x77x29 both transposed, bounds 8x24x16"),
                           "3.3": (ANSWER, "gemm_chain, bounds 64x64x64", "gemm_chain, bounds 4x8x16",
                                   "alexnet, bounds 64x64x64")},
        variants=(
            (("return [min(bound, total - i * bound) for i in range(count)]",
              "return [bound for _ in range(0, total, bound)]   # every tile full"),),
        ),
    ),
    Mistake(
        name="m_bound_for_every_dimension",
        description="Tiles K and N with m_max too, so a MatMul exceeds k_max or n_max whenever the "
                    "bounds differ (the notebook's 64 x 64 x 64 never shows it).",
        replacements=((
            "ms, ks, ns = tile_sizes(M, bm), tile_sizes(K, bk), tile_sizes(N, bn)",
            "ms, ks, ns = tile_sizes(M, bm), tile_sizes(K, bm), tile_sizes(N, bm)",
        ),),
        expected_failures={"3.2": (ANSWER, "33x65x17 transA, bounds 16x32x8",
                                   "50x40x30 transB alpha beta, bounds 32x16x8")},
        variants=(
            (("    bm, bk, bn = bounds\n    ms, ks, ns",
              "    bm = bk = bn = min(bounds[0], bounds[0])   # one bound for every dimension\n    ms, ks, ns"),),
        ),
    ),
)
