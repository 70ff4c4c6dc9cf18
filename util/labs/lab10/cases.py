"""Lab 10's hidden cases: the inputs the grader runs the student's functions on, which the notebook never shows.

Grader-only (``util.labs.GRADER_ONLY``): never in the students' copy, the student image or a graded kernel,
which receives each case's input only when the grader runs it (``util.hidden``). ``tasks.py`` states what
each task's cases are worth (``Task.hidden_points``); the registry attaches these to it (``Lab.with_cases``).
"""
from __future__ import annotations

from typing import Any, Mapping

from util.contract import Case

GPT2_SMALL = {"vocab": 50257, "n_positions": 1024, "d_model": 768, "n_layer": 12, "n_head": 12}


TINY = {"vocab": 512, "n_positions": 128, "d_model": 64, "n_layer": 2, "n_head": 4}


GQA_UNTIED = {**TINY, "n_kv_head": 2, "tied": False}


MQA_WIDE = {"vocab": 1000, "n_positions": 128, "d_model": 96, "n_layer": 3, "n_head": 6, "n_kv_head": 1}


GQA_DEEP = {"vocab": 1000, "n_positions": 128, "d_model": 96, "n_layer": 3, "n_head": 6, "n_kv_head": 2}


def _points(name: str, points: float, config: Mapping[str, Any], rows: list) -> Case:
    return Case(name, {"config": dict(config), "points": rows}, points)


def _decoding(name: str, config: Mapping[str, Any], prompt: int, new: int, seed: int, batch: int = 1) -> Case:
    return Case(name, {"config": dict(config), "prompt": prompt, "new": new, "seed": seed, "batch": batch}, 5)


CASES = {
    '10.1': (
        Case("GQA, untied head", {"config": GQA_UNTIED}, 4),
        Case("MQA, d=96, 3 layers, vocabulary 1000", {"config": MQA_WIDE}, 4),
        Case("GPT-2 small, by part", {"config": GPT2_SMALL}, 4),
    ),
    '10.2': (
        _points("GQA, prefill and decode", 4, GQA_UNTIED, [[12, 0, "all", 1], [1, 20, "all", 1]]),
        _points("MQA, chunked prefill over a cache, batch 2", 4, MQA_WIDE, [[1, 100, "all", 1],
                                                                           [4, 60, "all", 2]]),
        _points("logits of the last position only", 4, GQA_DEEP, [[40, 0, "last", 1], [9, 30, "last", 3]]),
        _points("one token, empty cache", 4, TINY, [[1, 0, "all", 1], [1, 0, "last", 3]]),
    ),
    '10.3': (
        Case("GQA and MQA TinyGPTs, batches and dtypes", {"queries": [
            {"config": GQA_UNTIED, "T": 17, "batch": 1, "dtype": "float32"},
            {"config": MQA_WIDE, "T": 33, "batch": 3, "dtype": "bfloat16"},
            {"config": GQA_DEEP, "T": 100, "batch": 2, "dtype": "float16"}]}, 4),
        Case("GPT-2 small at T=1024 in float16: MHA, GQA-4, MQA", {"queries": [
            {"config": GPT2_SMALL, "T": 1024, "batch": 1, "dtype": "float16"},
            {"config": {**GPT2_SMALL, "n_kv_head": 4}, "T": 1024, "batch": 1, "dtype": "float16"},
            {"config": {**GPT2_SMALL, "n_kv_head": 1}, "T": 1024, "batch": 1, "dtype": "float16"}]}, 4),
    ),
    '10.4': (
        _points("decode at batch 8", 4, TINY, [[1, 64, "float32", 8, "all"], [1, 127, "float32", 8, "all"]]),
        _points("MQA decode and prefill", 4, MQA_WIDE, [[1, 100, "float32", 1, "all"],
                                                        [1, 100, "float16", 16, "all"],
                                                        [32, 0, "float32", 1, "last"]]),
        _points("GPT-2 small in float16", 4, GPT2_SMALL, [[256, 0, "float16", 1, "last"],
                                                          [1, 256, "float16", 4, "all"]]),
    ),
    '10.5': (
        _decoding("GQA, batch of 2", {**TINY, "n_kv_head": 2}, prompt=6, new=20, seed=31, batch=2),
        _decoding("MQA, untied head", {**TINY, "n_kv_head": 1, "tied": False}, prompt=5, new=24, seed=2),
        _decoding("a one-token prompt", TINY, prompt=1, new=24, seed=0),
        _decoding("3 layers, d=96", GQA_DEEP, prompt=7, new=20, seed=31),
    ),
    '10.6': (
        Case("MQA", {"config": {**TINY, "n_kv_head": 1}, "seed": 21}, 5),
        Case("3 layers, d=96, GQA", {"config": GQA_DEEP, "seed": 22}, 5),
    ),
}
"""Task id -> its hidden cases (``Lab.with_cases``)."""
