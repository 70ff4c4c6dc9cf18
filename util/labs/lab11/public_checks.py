"""Lab 11's public checks (``check("11.2")``): counts and times the notebook works out by hand, and facts it
states, never a hidden case's input or a measured number. ``CHECKS[task id]`` is attached to each task in
``tasks.py``.
"""
from __future__ import annotations

import math
from typing import Any

from util.checks import equal, first, has_keys
from util.contract import Check

GRADER = {"peak_gflops": 100.0, "bandwidth_gbs": 40.0}


def close(found: Any, expected: float, what: str, rtol: float = 1e-9) -> str | None:
    """``None`` if ``found`` is a number within ``rtol`` of ``expected``."""
    if isinstance(found, (int, float)) and not isinstance(found, bool) and math.isclose(found, expected, rel_tol=rtol):
        return None
    return f"{what} is {found!r}; expected {expected:.10g}"


# ---------------------------------------------------------------- 11.1

def _hand_script(fn) -> str | None:
    from util.labs.lab11.machine import ScriptedWork

    work = ScriptedWork([5_000_000, 2_000_000, 3_000_000])
    found = fn(work, runs=2, warmup=1, clock=work.clock)
    return first(close(found, 0.002, "best_time on a script of 5, 2, 3 ms with 1 warm-up and 2 runs"),
                 equal(work.calls, 3, "the number of calls best_time made (1 warm-up + 2 runs)"))


def _fixed_numbers(answer) -> str | None:
    fixed = answer.get("fixed_timer") if isinstance(answer, dict) else None
    return first(has_keys(fixed, ["peak_gflops", "bandwidth_gbs"], "answer['fixed_timer']"),
                 close(fixed.get("peak_gflops") if isinstance(fixed, dict) else None, 2 * 512 ** 3 / 1e-3 / 1e9,
                       "measure_peak(512) in 1 ms (2 x 512^3 FLOPs)"),
                 close(fixed.get("bandwidth_gbs") if isinstance(fixed, dict) else None, 2 * 64 * 2 ** 20 / 1e-3 / 1e9,
                       "measure_bandwidth(64) in 1 ms (64 MiB read and 64 MiB written)"))


# ---------------------------------------------------------------- 11.2

def _toy_layers(fn) -> str | None:
    import torch
    from torch import nn

    linear = nn.Sequential(nn.Linear(4, 2))
    rows = fn(linear, torch.ones(1, 4), dict(GRADER))
    expected = [{"name": "0", "macs": 8, "bytes": 64, "intensity": 0.125, "bound": "memory"}]
    return equal(rows, expected, "layer_table(Sequential(Linear(4, 2)), 1x4 input)")


def _one_by_one(fn) -> str | None:
    import torch
    from torch import nn

    conv = nn.Sequential(nn.Conv2d(8, 8, 1, bias=False))
    rows = fn(conv, torch.ones(1, 8, 1, 1), dict(GRADER))
    found = rows[0].get("bound") if isinstance(rows, list) and rows and isinstance(rows[0], dict) else rows
    return equal(found, "memory", "the bound of a 1x1 conv (8 -> 8 channels) on a 1x1 image")


def _ridge_and_rows(answer) -> str | None:
    if not isinstance(answer, dict) or not isinstance(answer.get("layers"), list):
        return has_keys(answer, ["ridge", "layers"])
    layers = answer["layers"]
    consistent = all(isinstance(r, dict) and r.get("bytes") and math.isclose(r.get("intensity", -1), r["macs"] / r["bytes"])
                     and r.get("bound") == ("compute" if r["macs"] / r["bytes"] >= 1.25 else "memory") for r in layers)
    return first(close(answer.get("ridge"), 1.25, "ridge(GRADER_MACHINE) in MAC/B"),
                 equal(len(layers), 21, "the number of Conv2d and Linear layers of ResNet-18"),
                 None if consistent else "a layer's intensity is not macs / bytes, or its bound does not follow "
                                         "from comparing it with the ridge")


# ---------------------------------------------------------------- 11.3

def _hand_trace(fn) -> str | None:
    trace = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "dur": 10.5},
        {"ph": "X", "cat": "user_annotation", "name": "layer:conv1", "dur": 12.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "dur": 4.5},
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "dur": 1.0},
        {"ph": "M", "name": "process_name", "args": {"name": "python"}}]}
    return equal(fn(trace), {"aten::conv2d": {"calls": 2, "total_us": 15.0}, "aten::relu": {"calls": 1, "total_us": 1.0}},
                 "torch_op_table of a trace with two conv2d, one relu, one annotation and one metadata event")


def _tables_add_up(answer) -> str | None:
    from util.labs.lab11.traces import load_trace

    if not isinstance(answer, dict) or not isinstance(answer.get("ort"), dict) or not isinstance(answer.get("torch"), dict):
        return has_keys(answer, ["torch", "ort", "live_nodes"])
    runs = sum(e.get("dur", 0) for e in load_trace("resnet18_ort") if e.get("name") == "model_run")
    nodes = sum(row.get("total_us", 0) for row in answer["ort"].values() if isinstance(row, dict))
    conv = answer["torch"].get("aten::conv2d", {})
    return first(None if 0.95 * runs <= nodes <= runs else
                 f"the ORT table's total_us add up to {nodes:,} us; the profile's model_run events last {runs:,} us "
                 "in all, and the nodes should account for 95 % to 100 % of that",
                 equal(conv.get("calls") if isinstance(conv, dict) else conv, 100,
                       "calls of aten::conv2d in the ResNet-18 trace (20 convolutions x 5 runs)"))


# ---------------------------------------------------------------- 11.4

def _hand_prediction(fn) -> str | None:
    found = fn([{"name": "hand", "macs": 10 ** 6, "bytes": 400_000}], dict(GRADER))
    row = found[0] if isinstance(found, list) and found and isinstance(found[0], dict) else {}
    return first(close(row.get("compute_s"), 2e-5, "compute_s of 1e6 MACs at 100 GFLOP/s"),
                 close(row.get("memory_s"), 1e-5, "memory_s of 400,000 bytes at 40 GB/s"),
                 close(row.get("seconds"), 2e-5, "seconds, the larger of the two"))


def _max_of_two(answer) -> str | None:
    if not isinstance(answer, list):
        return f"the answer is a {type(answer).__name__}; expected a list of 21 rows"
    ok = all(isinstance(r, dict) and isinstance(r.get("seconds"), float)
             and r["seconds"] == max(r.get("compute_s", 0), r.get("memory_s", 0)) for r in answer)
    return first(equal(len(answer), 21, "the number of rows"),
                 None if ok else "a row's seconds is not the larger of its compute_s and memory_s")


# ---------------------------------------------------------------- 11.5

def _tiny_profile(fn) -> str | None:
    import torch
    from torch import nn

    found = fn(nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2)), torch.ones(1, 8), runs=2)
    if not isinstance(found, dict) or sorted(found) != ["0", "2"]:
        return f"profile_layers of Sequential(Linear, ReLU, Linear) returned {found!r}; expected the keys '0' and '2'"
    slow = [name for name, seconds in found.items() if not isinstance(seconds, float) or not 0 < seconds < 0.1]
    return f"the time of layer {slow[0]} is {found[slow[0]]!r}; expected seconds (a tiny Linear takes microseconds)" \
        if slow else None


def _measured_answer(answer) -> str | None:
    if not isinstance(answer, dict):
        return has_keys(answer, ["measured_s", "ratio", "spearman"])
    rho = answer.get("spearman")
    return first(has_keys(answer, ["measured_s", "ratio", "spearman"]),
                 equal(len(answer.get("measured_s", {})), 21, "the number of layers timed in the ResNet-18 trace"),
                 None if isinstance(rho, float) and -1 <= rho <= 1 else f"spearman is {rho!r}; expected a number in [-1, 1]")


# ---------------------------------------------------------------- 11.6

def _hand_ridge_batch(fn) -> str | None:
    from torch import nn

    return equal(fn(nn.Linear(1000, 1000, bias=False), (1000,), dict(GRADER)), 6,
                 "ridge_batch of Linear(1000, 1000, bias=False): B x 1e6 MACs over 4 (2,000 B + 1e6) bytes reaches "
                 "1.25 MAC/B first at B = 6")


def _ridge_answer(answer) -> str | None:
    layers = ["conv1", "layer1.0.conv1", "layer3.0.conv2", "layer4.1.conv1", "fc"]
    return first(has_keys(answer, layers),
                 None if not isinstance(answer, dict) or all(v is None or isinstance(v, int) and v >= 1
                                                             for v in answer.values())
                 else "each ridge batch is a whole number >= 1, or None when no batch reaches the ridge")


CHECKS: dict[str, tuple[Check, ...]] = {
    "11.1": (
        Check("best_time on 5, 2, 3 ms: 2 ms in 3 calls", _hand_script,
              "time each run on the clock you are given, keep the smallest; call fn warmup + runs times",
              calls_function=True),
        Check("a 1 ms timer gives 268.435456 GFLOP/s and 134.217728 GB/s", _fixed_numbers,
              "FLOPs = 2 n^3; bytes = read + written; divide by the timer's seconds and by 1e9"),
    ),
    "11.2": (
        Check("Linear(4, 2) on 1x4: 8 MACs, 64 bytes, 0.125 MAC/B, memory-bound", _toy_layers,
              "bytes = 4 x (input + weights and bias + output elements); intensity = macs / bytes", calls_function=True),
        Check("a 1x1 conv on a 1x1 image is memory-bound", _one_by_one,
              "compare the intensity with ridge(machine)", calls_function=True),
        Check("ridge 1.25 MAC/B, 21 layers, intensity and bound consistent", _ridge_and_rows,
              "ridge = peak / (2 x bandwidth): a MAC is 2 FLOPs"),
    ),
    "11.3": (
        Check("a hand trace: conv2d 2 calls 15 us, relu 1 call 1 us", _hand_trace,
              "count the events of category cpu_op by name and add their dur", calls_function=True),
        Check("the ORT nodes account for 95-100 % of model_run; conv2d ran 100 times", _tables_add_up,
              "keep the Node events whose name ends in _kernel_time; their op is args['op_name']"),
    ),
    "11.4": (
        Check("1e6 MACs and 400,000 bytes: 20 us of compute, 10 us of memory", _hand_prediction,
              "compute_s = 2 x macs / (peak x 1e9); memory_s = bytes / (bandwidth x 1e9)", calls_function=True),
        Check("21 rows, each the larger of its two times", _max_of_two, "seconds = max(compute_s, memory_s)"),
    ),
    "11.5": (
        Check("a tiny model's profile: two layers, microseconds each", _tiny_profile,
              "annotate the layers, warm up, profile the runs, keep each layer's fastest call in seconds",
              calls_function=True),
        Check("21 layers timed, a correlation in [-1, 1]", _measured_answer,
              "layer_times reads the user_annotation events named layer:<name>"),
    ),
    "11.6": (
        Check("Linear(1000, 1000) without bias reaches the ridge at batch 6", _hand_ridge_batch,
              "intensity(B) = B x MACs / (4 (B x activation elements + weights)); find the first B >= the ridge",
              calls_function=True),
        Check("five ridge batches, each a whole number or None", _ridge_answer,
              "return None when the intensity never reaches the ridge, however large the batch"),
    ),
}
