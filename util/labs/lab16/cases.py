"""Lab 16's hidden cases: the inputs the grader runs the student's functions on, which the notebook never shows.

Grader-only (``util.labs.GRADER_ONLY``): never in the students' copy, the student image or a graded kernel, which
receives each case's input only when the grader runs it (``util.hidden``). ``tasks.py`` states what each task's
cases are worth (``Task.hidden_points``); the registry attaches these to it (``Lab.with_cases``).

Every seed here draws weights or logits any value of which makes a valid case (``Case.seeds``: a term secret draws
them anew); what each case tests is in its architecture, plan, shape, budget or rule, not in its seed. The re-run
of 16.5 holds for any seed: over seeds 0 to 199 the course's loss got 346 to 356 of the 360 test images right and the
labels alone 277 to 335, so the threshold sits between them, at 341 images (94.5 %): 5 images below the course's
worst seed, 6 above the labels' best (``python benchmarks/bench_lab16_grading.py --seeds 200``). Task 16.7's cases
name no seed: the judge draws each network's weights from the grading secret at every grading
(``judge_residual.weights_seed``); what a case tests is its architecture and the groups it cuts. Task 16.8's
re-run names no seed either: the grader draws the fine-tuning's order from the secret (``judge_schedule.order_seed``);
over the orders 0 to 7 the cubic schedule kept 329 to 339 of the 360 test images right, 95 % pruned at the last step
36 to 38 and one cut of the trained model to 95 % (then one step's 8 batches) 182 to 212, so the floor sits at 80 %
(288 images): 41 below the schedule's worst order, 76 above one cut's best
(``python benchmarks/bench_lab16_grading.py --schedule-seeds 8``). Task 16.9's cases name no seed nor size: the judge
draws each TinyGPT's widths, heads, vocabulary, ``r``, ``alpha``, batch, length and weights from the grading secret
(``judge_lora_gpt.setting``); what a case tests is its kind of attention, its blocks and its head.
"""
from __future__ import annotations

from util.contract import Case

SEEDED = ("seed",)

CASES = {
    "16.1": (
        Case("two blocks and one pool, 60 % globally",
             {"model": {"widths": [8, 16], "pools": [1]}, "seed": 11, "sparsity": 0.6, "scope": "global"}, 1.0,
             seeds=SEEDED),
        Case("three blocks and a hidden layer, 75 % per layer",
             {"model": {"widths": [12, 24, 16], "pools": [2], "hidden": [32]}, "seed": 12, "sparsity": 0.75,
              "scope": "layer"}, 1.0, seeds=SEEDED),
        Case("half the weights zero already, 70 % globally",
             {"model": {"widths": [16, 32, 32], "pools": [2]}, "seed": 13, "zeroed": 0.5, "sparsity": 0.7,
              "scope": "global"}, 1.0, seeds=SEEDED),
        Case("33 % per layer, counts that round up",
             {"model": {"widths": [6, 10, 14, 20], "pools": [1, 3]}, "seed": 14, "sparsity": 0.33, "scope": "layer"},
             1.0, seeds=SEEDED),
    ),
    "16.2": (
        Case("two adjacent blocks cut",
             {"model": {"widths": [12, 24, 16], "pools": [2], "hidden": [32]}, "seed": 21,
              "plan": {"conv1": 8, "conv2": 10}}, 3, seeds=SEEDED),
        Case("the last block, before the Linear layers",
             {"model": {"widths": [8, 16], "pools": [1]}, "seed": 22, "plan": {"conv2": 5}}, 3, seeds=SEEDED),
        Case("every block of a DigitsCNN",
             {"model": {}, "seed": 23, "plan": {"conv1": 12, "conv2": 20, "conv3": 9}}, 3, seeds=SEEDED),
    ),
    "16.3": (
        Case("6 x 16 in float16", {"shape": [6, 16], "seed": 31, "kind": "normal", "value_bytes": 2}, 1.5,
             seeds=SEEDED),
        Case("a convolution's weight, rows of 4 x 3 x 3, in float32",
             {"shape": [10, 4, 3, 3], "seed": 32, "kind": "normal", "value_bytes": 4}, 1.5, seeds=SEEDED),
        Case("small whole numbers: ties in most groups",
             {"shape": [5, 24], "seed": 33, "kind": "ties", "value_bytes": 2}, 1.5, seeds=SEEDED),
        Case("rows of 512 in float32", {"shape": [3, 512], "seed": 34, "kind": "normal", "value_bytes": 4}, 1.5,
             seeds=SEEDED),
    ),
    "16.4": (
        Case("a Linear whose bias decides the rank",
             {"layer": {"kind": "linear", "in": 50, "out": 40, "bias": True}, "seed": 41, "budget": 489}, 1.5,
             seeds=SEEDED),
        Case("a strided, padded convolution",
             {"layer": {"kind": "conv", "in": 16, "out": 24, "kernel": 3, "stride": 2, "padding": 1, "bias": False},
              "seed": 42, "budget": 1500}, 1.5, seeds=SEEDED),
        Case("a budget above the full rank",
             {"layer": {"kind": "linear", "in": 12, "out": 6, "bias": True}, "seed": 43, "budget": 10_000}, 1.5,
             seeds=SEEDED),
        Case("a budget below rank 1: ValueError",
             {"layer": {"kind": "conv", "in": 8, "out": 8, "kernel": 3, "bias": True}, "seed": 44, "budget": 80}, 1.5,
             seeds=SEEDED),
    ),
    "16.5": (
        Case("T=4, alpha=0.9, half the rows labeled",
             {"rows": 16, "labeled": 8, "T": 4.0, "alpha": 0.9, "seed": 51, "scale": 3.0}, 1.5, seeds=SEEDED),
        Case("no row labeled, T=8", {"rows": 10, "labeled": 0, "T": 8.0, "alpha": 0.7, "seed": 52, "scale": 2.0}, 1.5,
             seeds=SEEDED),
        Case("every row labeled, T=2, alpha=0.25",
             {"rows": 12, "labeled": 12, "T": 2.0, "alpha": 0.25, "seed": 53, "scale": 4.0}, 1.5, seeds=SEEDED),
        Case("the grader trains the small student with your loss: 94.5 % with 100 labels",
             {"seed": 5, "labels": 100, "T": 4.0, "alpha": 0.9, "epochs": 10, "min_accuracy": 0.945,
              "cpu_seconds": 10, "wall_seconds": 40}, 7.5, seeds=SEEDED),
    ),
    "16.6": (
        Case("a hidden layer and the output layer, r=4",
             {"model": {"widths": [8, 16], "pools": [1, 2], "hidden": [24]}, "seed": 61, "targets": ["hidden1", "fc"],
              "r": 4, "alpha": 8.0, "batch": 5}, 3, seeds=SEEDED),
        Case("a DigitsCNN's fc, r=2, alpha=16",
             {"model": {}, "seed": 62, "targets": ["fc"], "r": 2, "alpha": 16.0, "batch": 3}, 3, seeds=SEEDED),
    ),
    "16.7": (
        Case("additions: an identity chain (the stem and every block's conv2 one group), a downsampling block (its "
             "1 x 1 shortcut and its conv2 one group), a group of four convolutions",
             {"networks": [
                 {"arch": {"stem": 32, "blocks": [["basic", 8], ["basic", 10]]},
                  "prunes": [["block2.conv2", 16], ["block1.conv1", 4]]},
                 {"arch": {"stem": 8, "blocks": [["down", 8, 16], ["basic", 12]]},
                  "prunes": [["block1.short", 8], ["stem", 5]]},
                 {"arch": {"stem": 24, "blocks": [["basic", 8], ["basic", 8], ["basic", 8]]},
                  "prunes": [["block3.conv2", 12], ["block2.conv1", 4]]}]}, 3),
        Case("a concatenation (each side its own group, read at its offset by the next block), and every convolution "
             "of a network with all three kinds of block cut to half its width",
             {"networks": [
                 {"arch": {"stem": 10, "blocks": [["basic", 6], ["concat", 8, 12], ["down", 12, 32]]},
                  "prunes": [["block2.right", 5], ["block2.left", 3], ["block3.conv2", 16], ["stem", 5]]},
                 {"arch": {"stem": 12, "blocks": [["basic", 12], ["down", 16, 24], ["concat", 12, 8]]},
                  "every": True}]}, 3),
        Case("every group of a larger network cut to a quarter of its width, timed by the grader: at least 1.5x as fast",
             {"arch": {"stem": 32, "blocks": [["basic", 32], ["down", 64, 64], ["basic", 64]]}, "chain": 0.25,
              "timed": {"rounds": 5, "calls": 5, "batch": 64, "min_speedup": 1.5}}, 3),
    ),
    "16.8": (
        Case("to 90 % in 10 steps from an unpruned model", {"final": 0.9, "steps": 10, "initial": 0.0}, 1.6),
        Case("from 50 % to 80 % in 5 steps (a model pruned before)", {"final": 0.8, "steps": 5, "initial": 0.5}, 1.6),
        Case("to 97 % in 3 steps from 20 %", {"final": 0.97, "steps": 3, "initial": 0.2}, 1.6),
        Case("DigitsCNN pruned again by the grader with your schedule to 95 % in 8 steps of 8 batches: at least 80 %",
             {"final": 0.95, "steps": 8, "initial": 0.0, "batches": 8, "min_accuracy": 0.8}, 3.2),
    ),
    "16.9": (
        Case("a TinyGPT of one block with multi-head attention and a tied head",
             {"attention": "multi-head", "layers": 1, "tied": True}, 2),
        Case("grouped-query attention in two blocks: each value projection narrower than the query's",
             {"attention": "grouped-query", "layers": 2, "tied": True}, 3),
        Case("multi-query attention in three blocks, the head not tied: the frozen blocks' activations kept for the "
             "first block's adapters", {"attention": "multi-query", "layers": 3, "tied": False}, 3),
    ),
}
"""Task id -> its hidden cases (``Lab.with_cases``)."""
