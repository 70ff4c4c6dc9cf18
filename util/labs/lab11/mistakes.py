"""Lab 11 example submissions: the solution with one realistic mistake each.

Every one of them fails only exact checks, so its score is the same on any machine at any load: the
measured cases (the machine model, the profiles, the achieved GFLOP/s) are timed through the timer the
grader passes, and none of these mistakes touches what they measure. The failures were worked out by
grading each variant.

* A single cold timing is the mistake students make most, and on a real clock it fails only sometimes
  (the first sgemm of a process ran at 0.04x to 0.59x of the best here). ``best_time`` is therefore graded
  on scripted workloads whose clock is their own: one timing of the first call is the slow one there,
  every time.
* Profiling at onnxruntime's default level renames the nodes on every x86 CPU with AVX2 (the NCHWc
  layout); on a CPU without it (ARM) the default level would keep the names and this example would pass.
"""
from util.contract import ANSWER, Mistake

MISTAKES = (
    Mistake(
        name="flops_as_macs_in_ridge",
        description="Divides the peak (FLOP/s) by the bandwidth without converting FLOPs to MACs, so the ridge "
                    "is 2.5 MAC/B instead of 1.25: layers between the two are called memory-bound, and the batch "
                    "at which a layer crosses the ridge doubles.",
        replacements=(('return machine["peak_gflops"] / (2 * machine["bandwidth_gbs"])',
                       'return machine["peak_gflops"] / machine["bandwidth_gbs"]  # GFLOP/s over GB/s'),),
        expected_failures={"11.2": (ANSWER, "ResNet-18 @2x3x64x64", "MLP @16x784"),
                           "11.6": (ANSWER, "first Linear of the MLP")},
        variants=(
            (('return machine["peak_gflops"] / (2 * machine["bandwidth_gbs"])',
              'return 1e9 * machine["peak_gflops"] / (1e9 * machine["bandwidth_gbs"])'),),
        ),
    ),
    Mistake(
        name="weights_left_out_of_bytes",
        description="Counts only the activations a layer reads and writes, not its weights, so every layer of "
                    "ResNet-18 looks compute-bound and layer4's prediction drops 10x.",
        replacements=(("return 4 * (x.numel() + sum(p.numel() for p in module.parameters()) + output.numel())",
                       "return 4 * (x.numel() + output.numel())"),),
        expected_failures={"11.2": (ANSWER, "MobileNetV2 @1x3x64x64", "ResNet-18 @2x3x64x64", "MLP @16x784"),
                           "11.4": (ANSWER,), "11.5": (ANSWER,),
                           "11.6": (ANSWER, "first Linear of the MLP")},
        variants=(
            (("return 4 * (x.numel() + sum(p.numel() for p in module.parameters()) + output.numel())",
              "return x.element_size() * x.numel() + output.element_size() * output.numel()"),),
        ),
    ),
    Mistake(
        name="one_cold_timing",
        description="Times one call, the first: no warm-up, no best of several runs.",
        replacements=(("""    for _ in range(warmup):
        fn()
    best = math.inf
    for _ in range(runs):
        start = clock()
        fn()
        best = min(best, clock() - start)
    return best""", """    start = clock()
    fn()
    return clock() - start"""),),
        expected_failures={"11.1": (ANSWER, "best_time, scripted: a cold start and a noisy neighbour",
                                    "best_time, scripted: no warm-up, 3 runs")},
        variants=(
            (("    for _ in range(warmup):\n        fn()\n    best = math.inf\n    for _ in range(runs):\n"
              "        start = clock()\n        fn()\n        best = min(best, clock() - start)\n    return best",
              "    import timeit\n    return timeit.timeit(fn, number=1, timer=clock)   # one call, cold"),),
        ),
    ),
    Mistake(
        name="ort_default_level",
        description="Profiles onnxruntime at its default optimisation level (ALL): the convolutions run in the "
                    "blocked NCHWc layout, renamed, with Reorder nodes, so the profile no longer names the "
                    "model's nodes.",
        replacements=(("    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED\n", ""),),
        expected_failures={"11.3": (ANSWER, "ort_profile: MobileNetV2 @1x3x64x64, the nodes timed")},
        variants=(
            (("    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED\n",
              "    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL\n"),),
        ),
    ),
)
