"""Lab 11's hidden cases: the inputs the grader runs the student's functions on, which the notebook never shows.

Grader-only (``util.labs.GRADER_ONLY``): never in the students' copy, the student image or a graded kernel,
which receives each case's input only when the grader runs it (``util.hidden``). ``tasks.py`` states what
each task's cases are worth (``Task.hidden_points``); the registry attaches these to it (``Lab.with_cases``).
"""
from __future__ import annotations

from util.contract import Case

SCRIPT_NEIGHBOUR = [80_000_000, 40_000_000, 9_500_000, 25_000_000, 9_000_000, 30_000_000, 9_200_000]
"""A cold first call, a second slow one, then a neighbour that steals the core now and then (ns)."""


SCRIPT_NO_WARMUP = [7_000_000, 3_000_000, 5_000_000, 3_500_000]


CASES = {
    '11.1': (
        Case("best_time, scripted: a cold start and a noisy neighbour",
             {"script_ns": SCRIPT_NEIGHBOUR, "runs": 5, "warmup": 2}, 2),
        Case("best_time, scripted: no warm-up, 3 runs",
             {"script_ns": SCRIPT_NO_WARMUP, "runs": 3, "warmup": 0}, 2),
        Case("measure_peak and measure_bandwidth with a fixed timer",
             {"call": "fixed", "n": 300, "mib": 3, "runs": 2, "seconds": 0.0025}, 2),
        Case("measure_peak(448), measured", {"call": "measured", "measure": "peak", "n": 448, "runs": 10}, 3),
        Case("measure_bandwidth(48), measured",
             {"call": "measured", "measure": "bandwidth", "mib": 48, "runs": 10}, 3),
    ),
    '11.2': (
        Case("MobileNetV2 @1x3x64x64", {"model": "mobilenet_v2", "shape": [1, 3, 64, 64]}, 4),
        Case("ResNet-18 @2x3x64x64", {"model": "resnet18_bnstats", "shape": [2, 3, 64, 64]}, 4),
        Case("MLP @16x784", {"model": "mlp", "shape": [16, 784]}, 4),
    ),
    '11.3': (
        Case("torch_op_table: MobileNetV2 trace", {"trace": {"$file": "cases_data/mobilenet_v2_1x3x64x64.torch.json.gz"}}, 4),
        Case("ort_op_table: MobileNetV2 profile", {"call": "ort", "trace": {"$file": "cases_data/mobilenet_v2_1x3x64x64.ort.json.gz"}}, 4),
        Case("ort_profile: MobileNetV2 @1x3x64x64, the nodes timed",
             {"call": "nodes", "model": "mobilenet_v2", "shape": [1, 3, 64, 64], "runs": 2}, 4),
    ),
    '11.4': (
        Case("four layers on a wide bus", {"machine": "WIDE_BUS", "layers": [
            {"name": "big", "macs": 9_437_184, "bytes": 9_453_568},
            {"name": "small", "macs": 5_120, "bytes": 22_608},
            {"name": "pool", "macs": 0, "bytes": 65_536},
            {"name": "dense", "macs": 4_718_592, "bytes": 393_216}]}, 4),
        Case("four layers on a slow core", {"machine": "SLOW_CORE", "layers": [
            {"name": "a", "macs": 1_000_000, "bytes": 6_250_000},
            {"name": "b", "macs": 3, "bytes": 7},
            {"name": "c", "macs": 524_288, "bytes": 548_864},
            {"name": "d", "macs": 0, "bytes": 0}]}, 4),
    ),
    '11.5': (
        Case("spearman with ties", {"call": "spearman", "a": [3, 1, 4, 1, 5, 9, 2, 6, 5, 3],
                                    "b": [2, 7, 1, 8, 2, 8, 1, 8, 2, 8]}, 3),
        Case("layer_times: MobileNetV2 trace", {"call": "layer_times",
                                                 "trace": {"$file": "cases_data/mobilenet_v2_1x3x64x64.torch.json.gz"}}, 3),
        Case("profile_layers: ResNet-18 @1x3x64x64, measured",
             {"measure": "profile", "model": "resnet18_bnstats", "shape": [1, 3, 64, 64], "runs": 10}, 6),
        Case("profile_layers: MobileNetV2 @1x3x64x64, measured",
             {"measure": "profile", "model": "mobilenet_v2", "shape": [1, 3, 64, 64], "runs": 10}, 6),
    ),
    '11.6': (
        Case("depthwise conv of MobileNetV2", {"model": "mobilenet_v2", "layer": "features.2.conv.1.0",
                                              "sample": [96, 32, 32], "machine": "GRADER_MACHINE"}, 3),
        Case("first Linear of the MLP", {"model": "mlp", "layer": "0", "sample": [784],
                                         "machine": "GRADER_MACHINE"}, 3),
        Case("achieved_gflops with a fixed timer", {
            "call": "fixed", "model": "resnet18_bnstats", "layer": "layer2.0.conv1",
            "sample": [64, 16, 16], "batches": [1, 3, 16], "runs": 2, "seconds": 0.004}, 2),
        Case("achieved_gflops: layer4.1.conv1, measured", {
            "call": "measured", "measure": "achieved", "model": "resnet18_bnstats", "layer": "layer4.1.conv1",
            "sample": [512, 2, 2], "batches": [1, 8, 32], "runs": 10}, 6),
    ),
}
"""Task id -> its hidden cases (``Lab.with_cases``)."""
