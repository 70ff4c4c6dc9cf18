"""Lab 9 example submissions: the solution with one realistic mistake each.

The expected failures were found by grading each variant (``tests/test_labs.py`` asserts them). The
integer mistakes leave DigitsCNN's accuracy where it was: only the bytes give them away.
"""
from util.contract import ANSWER, Mistake

INTEGER_CASES = ("input zero point -128 with padding 1", "depthwise, stride 2, output zero point 127 (saturates)",
                 "multipliers just below 1 (M0 rounds to 2^31)", "2,304-deep linear: acc * M0 needs 64 bits",
                 "DigitsCNN's layers end to end")

MISTAKES = (
    Mistake(
        name="pad_with_integer_zero",
        description="Pads the int8 input with the integer 0 and subtracts the zero point afterwards, so a padded "
                    "pixel means real 0 - zx (128 steps when zx = -128) instead of real 0.",
        replacements=(
            ("    x = np.asarray(xq, dtype=np.int64) - zx\n    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), "
             "(padding, padding)))\n",
             "    x = np.pad(np.asarray(xq, dtype=np.int64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))\n"
             "    x = x - zx   # padded with the integer 0\n"),
        ),
        expected_failures={"9.3": (ANSWER, INTEGER_CASES[0], INTEGER_CASES[1], INTEGER_CASES[4]), "9.5": (ANSWER,)},
        variants=(
            (("    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))\n",
              "    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)), constant_values=-zx)\n"),),
        ),
    ),
    Mistake(
        name="floor_in_the_shift",
        description="Shifts without adding half a step first: (acc * M0) >> shift floors instead of rounding.",
        replacements=(("scaled = (acc * M0 + (np.int64(1) << (shift - 1))) >> shift",
                       "scaled = (acc * M0) >> shift   # floors"),),
        expected_failures={"9.3": (ANSWER, *INTEGER_CASES)},
        variants=(
            (("scaled = (acc * M0 + (np.int64(1) << (shift - 1))) >> shift",
              "scaled = np.floor_divide(acc * M0, np.int64(1) << shift)"),),
        ),
    ),
    Mistake(
        name="int32_product",
        description="Multiplies the accumulator by M0 in int32, as a 32-bit accelerator register would: the "
                    "product of a 2^17 accumulator and a 2^30 multiplier wraps around.",
        replacements=(("scaled = (acc * M0 + (np.int64(1) << (shift - 1))) >> shift",
                       "scaled = ((acc.astype(np.int32) * M0.astype(np.int32)).astype(np.int64)\n"
                       "              + (np.int64(1) << (shift - 1))) >> shift"),),
        expected_failures={"9.3": (ANSWER, *INTEGER_CASES), "9.5": (ANSWER,)},
        variants=(
            (("scaled = (acc * M0 + (np.int64(1) << (shift - 1))) >> shift",
              "scaled = ((acc * M0).astype(np.int32).astype(np.int64) + (np.int64(1) << (shift - 1))) >> shift"),),
        ),
    ),
    Mistake(
        name="m0_in_int32",
        description="Stores the fixed-point multiplier in an int32 array and forgets that m just below 1 rounds "
                    "to 2^31: that M0 wraps to -2^31.",
        replacements=(("    return np.where(carry, M0 // 2, M0), 31 - (exponent.astype(np.int64) + carry)\n",
                       "    return M0.astype(np.int32), 31 - exponent.astype(np.int64)\n"),),
        expected_failures={"9.3": (INTEGER_CASES[2],)},
        variants=(
            (("    M0 = np.rint(mantissa * 2.0 ** 31).astype(np.int64)\n",
              "    M0 = np.rint(mantissa * 2.0 ** 31).astype(np.int32)   # 2^31 does not fit\n"),),
        ),
    ),
    Mistake(
        name="range_not_widened",
        description="Takes lo = min(x) and hi = max(x) without widening the range to contain 0: an all-positive "
                    "tensor gets a zero point below -128 (clipped), and real 0 is no longer representable.",
        replacements=(("        lo = np.minimum(x.min(axis=reduce), 0.0)\n        hi = np.maximum(x.max(axis=reduce), 0.0)\n",
                       "        lo = x.min(axis=reduce)\n        hi = x.max(axis=reduce)\n"),),
        expected_failures={"9.1": ("an all-positive activation, 8-bit asymmetric",)},
        variants=(
            (("        lo = np.minimum(x.min(axis=reduce), 0.0)\n", "        lo = x.min(axis=reduce)\n"),),
        ),
    ),
    Mistake(
        name="percentile_per_batch",
        description="Averages each batch's percentile instead of taking the percentile of all values together: "
                    "the same when batches are equal in size and content, not otherwise.",
        replacements=(("            ranges[name] = (float(np.percentile(every, 100 - p)), float(np.percentile(every, p)))",
                       "            ranges[name] = (float(np.mean([np.percentile(v.numpy(), 100 - p) for v in parts])),\n"
                       "                            float(np.mean([np.percentile(v.numpy(), p) for v in parts])))"),),
        expected_failures={"9.2": (ANSWER, "one outlier pixel, percentile 99.99",
                                   "batches of 50, 7 and 1 images, in-place ReLUs, percentile 99.9")},
        variants=(
            (("            ranges[name] = (float(np.percentile(every, 100 - p)), float(np.percentile(every, p)))",
              "            ranges[name] = (float(torch.stack([torch.quantile(v, (100 - p) / 100) for v in parts]).mean()),\n"
              "                            float(torch.stack([torch.quantile(v, p / 100) for v in parts]).mean()))"),),
        ),
    ),
    Mistake(
        name="one_at_a_time",
        description="Tries keeping each node in float on its own and, when none suffices, keeps them all: on "
                    "the outlier models no single node helps, and all four are far from 1-minimal.",
        replacements=(("    current, n = list(candidates), 2\n    while len(current) >= 2:",
                       "    singles = [c for c in candidates if sufficient([c])]\n"
                       "    return singles[:1] or list(candidates)\n"
                       "    current, n = list(candidates), 2\n    while len(current) >= 2:"),),
        expected_failures={"9.6": (ANSWER, "an outlier channel after conv1 (K = 500)",
                                   "an outlier channel after conv2, through the pool",
                                   "an outlier channel after conv3 (before fc)")},
        variants=(
            (("    current, n = list(candidates), 2\n    while len(current) >= 2:",
              "    single = next(([c] for c in candidates if sufficient([c])), None)   # one node, else all\n"
              "    return single if single is not None else list(candidates)\n"
              "    current, n = list(candidates), 2\n    while len(current) >= 2:"),),
        ),
    ),
)
