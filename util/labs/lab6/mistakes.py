"""Lab 6 example submissions: the solution with one realistic mistake each (see ``util.contract.Mistake``).

The expected failures were worked out by grading each variant: every mistake passes the notebook's
own ResNet-18 answers, and is caught by a hidden case whose input needs the missing idea.
"""
from util.contract import Mistake

MISTAKES = (
    Mistake(
        name="one_pass_at_a_time",
        description="Disables the candidate passes one at a time and returns those that restore the bits alone. "
                    "It finds ConvBNFusion on ResNet-18, but on a hand-written layer norm two passes back each "
                    "other up (LayerNormFusionL1 and SimplifiedLayerNormFusion), no single one suffices, and it "
                    "returns an insufficient [].",
        replacements=((
            "    return ddmin(list(candidates), sufficient)",
            "    return [name for name in candidates if sufficient([name])]",
        ),),
        expected_failures={"6.5": ("ln_first",)},
        variants=(
            (("    return ddmin(list(candidates), sufficient)",
              "    return next(([name] for name in candidates if sufficient([name])), [])   # the first pass alone"),),
        ),
    ),
    Mistake(
        name="mre_without_zero_branch",
        description="Computes TracNe's MRE as |d| / (|ref| + 1e-8) everywhere: an element whose reference is 0 "
                    "divides by 1e-8, and a difference of 1e-3 becomes 1e5.",
        replacements=((
            "    terms = np.where(ref64 == 0, diff, diff / (np.abs(ref64) + 1e-8))",
            "    terms = diff / (np.abs(ref64) + 1e-8)",
        ),),
        expected_failures={"6.2": ("zeros in ref",)},
        variants=(
            (("    terms = np.where(ref64 == 0, diff, diff / (np.abs(ref64) + 1e-8))",
              "    terms = diff / np.maximum(np.abs(ref64), 1e-8)"),),
        ),
    ),
    Mistake(
        name="uniform_random_search",
        description="Searches with uniform random inputs: every one is well conditioned, so the best of 50 is a "
                    "few times the median, never the 100x the grader asks for.",
        replacements=((
            "        x = ill_conditioned(rng, shape, low, high)",
            "        x = rng.uniform(low, high, shape).astype(np.float32)",
        ),),
        expected_failures={"6.3": ("ln_first in [0, 1]", "ln_wide in [-100, 100]", "ln_narrow in [-1, 1]")},
        variants=(
            (("        x = ill_conditioned(rng, shape, low, high)",
              "        x = (low + (high - low) * rng.random(shape)).astype(np.float32)"),),
        ),
    ),
)
