"""Lab 10, what a transformer costs: the one declaration of its tasks.

On the course's TinyGPT (GPT-2's layout, ``gpt.py``) and GPT-2 small's shape, students count from a
config alone the parameters (10.1), the MACs of prefill and of one decode step (10.2), the KV cache's
bytes under multi-head, grouped-query and multi-query attention (10.3) and the arithmetic intensity
of each phase (10.4); then they decode greedily with a KV cache (10.5) and export the model to ONNX
for onnxruntime's transformer optimizer (10.6).

Every count is graded twice: exactly against the reference (the solution's formula, run by
``regen``), and against what the grader measures itself, in its judge process, on a model it builds
from the case's spec (``judge.py``): parameters and bytes of the built model, MACs with PyTorch's
``FlopCounterMode`` (FLOPs / 2), the cache tensors' own bytes. The kernel only saves what the
student's function returned.

Task 10.5's verdicts ("the same tokens as decoding without a cache", "the cache holds T entries",
"each token was fed once") are the judge's too, and no count from the notebook enters them:

* the kernel runs ``generate`` under the course's :class:`~util.labs.lab10.recorder.StepRecorder`
  (forward hooks on the model's embedding and Linear modules) and saves the tokens, the cache tensors
  and what each step fed the model (ids, positions, rows per Linear);
* the judge rebuilds the seeded model from the spec and decodes *without* a cache itself, then checks
  the tokens against its own, the cache's shapes, bytes and values against its own keys and values,
  and that the steps fed the prompt once and then one token at a time (each Linear processing exactly
  those rows); the MACs of those steps are measured with the judge's own ``FlopCounterMode`` on its own
  cached forward. A ``FlopCounterMode`` patched in the notebook changes nothing the judge reads; a
  "cached" decoding that recomputes the whole sequence shows in the rows its Linears processed. (Only
  code written to deceive the hooks could hide that; hooks make it visible to anyone who reads it.)

Task 10.6 saves the optimized ONNX model: the judge counts its fused operators, runs it with
onnxruntime at two sequence lengths against its own PyTorch model, and re-does the course's export
and optimization to compare the counts.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Mapping

from util.contract import Case, Lab, Release, Task, Tolerance, Written
from util.labs.lab10.public_checks import CHECKS

LAB_NAME = "lab10"
JUDGE = "util.labs.lab10.judge"
RATIO = Tolerance(rtol=1e-9)
"""Intensities are ratios of exact integers: only the last bits of a float may differ."""
LOG10 = Tolerance(atol=0.5)
"""Task 10.6's rounding difference, as log10: half a decade either way (counts stay exact)."""

GPT2_SMALL = {"vocab": 50257, "n_positions": 1024, "d_model": 768, "n_layer": 12, "n_head": 12}
TINY = {"vocab": 512, "n_positions": 128, "d_model": 64, "n_layer": 2, "n_head": 4}
GQA_UNTIED = {**TINY, "n_kv_head": 2, "tied": False}
MQA_WIDE = {"vocab": 1000, "n_positions": 128, "d_model": 96, "n_layer": 3, "n_head": 6, "n_kv_head": 1}
GQA_DEEP = {"vocab": 1000, "n_positions": 128, "d_model": 96, "n_layer": 3, "n_head": 6, "n_kv_head": 2}


def _config(fields: Mapping[str, Any]):
    from util.labs.lab10.gpt import GPTConfig

    return GPTConfig.from_dict(fields)


def _dtype(name: str):
    import torch

    return getattr(torch, name)


def _saved(value: Any, spec: Mapping[str, Any], what: str) -> Any:
    """``value`` as JSON, saved for the judge; returned for the comparison with the reference."""
    from util.answers import to_jsonable
    from util.artifacts import save_file

    plain = to_jsonable(value, what)
    save_file(json.dumps(plain).encode(), spec, LAB_NAME, ".json")
    return plain


def _params(fn: Callable, spec: Mapping[str, Any]) -> Any:
    return _saved(fn(_config(spec["config"])), spec, "param_count(cfg)")


def _macs(fn: Callable, spec: Mapping[str, Any]) -> Any:
    cfg = _config(spec["config"])
    return _saved([fn(cfg, length, past=past, logits=logits, batch=batch)
                   for length, past, logits, batch in spec["points"]], spec, "macs(...)")


def _kv(fn: Callable, spec: Mapping[str, Any]) -> Any:
    return _saved([fn(_config(q["config"]), q["T"], batch=q["batch"], dtype=_dtype(q["dtype"]))
                   for q in spec["queries"]], spec, "kv_cache_bytes(...)")


def _intensity(fn: Callable, spec: Mapping[str, Any]) -> Any:
    cfg = _config(spec["config"])
    return _saved([fn(cfg, length, past, _dtype(kind), batch=batch, logits=logits)
                   for length, past, kind, batch, logits in spec["points"]], spec, "intensity(...)")


def _decode(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's cached ``generate`` under the course's hooks; tokens, cache and steps saved.

    Nothing saved here is a verdict or a count: the judge decides "same tokens" against its own uncached
    decoding, "the cache holds T entries" from the saved tensors themselves, and the MACs from the steps
    the hooks recorded, measured with its own ``FlopCounterMode`` (module docstring)."""
    import torch

    from util.artifacts import save_arrays
    from util.labs.lab10.gpt import prompt_ids, seeded_gpt
    from util.labs.lab10.recorder import StepRecorder

    cfg = _config(spec["config"])
    model = seeded_gpt(cfg, spec["seed"])
    prompt = prompt_ids(cfg, spec["prompt"], spec["seed"], spec["batch"])
    with StepRecorder(model) as steps:
        result = fn(model, prompt.clone(), spec["new"], use_cache=True)
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise TypeError(f"generate(..., use_cache=True) must return (tokens, cache), not {type(result).__name__}")
    tokens, cache = result
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"generate's tokens must be a tensor [batch, n], not a {type(tokens).__name__}")
    if not isinstance(cache, (list, tuple)) or len(cache) != cfg.n_layer or not all(
            isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(t, torch.Tensor) for t in pair)
            for pair in cache):
        raise TypeError(f"generate's cache must be a list of {cfg.n_layer} (k, v) pairs of tensors, one per layer")
    arrays = {"tokens": tokens, **steps.arrays()}
    for i, (k, v) in enumerate(cache):
        arrays[f"k{i}"], arrays[f"v{i}"] = k, v
    save_arrays(arrays, spec, LAB_NAME)
    return {"tokens": tokens.tolist(), "cache_shape": [list(k.shape) for k, _ in cache],
            "step_lengths": steps.lengths()}


def _export(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's export and optimization of a seeded TinyGPT; the optimized model is saved."""
    from util.artifacts import save_model
    from util.labs.lab10.fusions import fusion_summary
    from util.labs.lab10.gpt import seeded_gpt

    cfg = _config(spec["config"])
    result = fn(seeded_gpt(cfg, spec["seed"]), cfg)
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise TypeError(f"export_and_optimize must return (exported, optimized), not {type(result).__name__}")
    exported, optimized = result
    summary = fusion_summary(exported, optimized)
    save_model(optimized, spec, LAB_NAME, fn.__name__)
    return summary


def _points(name: str, points: float, config: Mapping[str, Any], rows: list) -> Case:
    return Case(name, {"config": dict(config), "points": rows}, points)


def _decoding(name: str, config: Mapping[str, Any], prompt: int, new: int, seed: int, batch: int = 1) -> Case:
    return Case(name, {"config": dict(config), "prompt": prompt, "new": new, "seed": seed, "batch": batch}, 5)


WRITTEN = {
    "10.1": (Written("10.Q1", "How many parameters do its embeddings have (token and position)? Its one block (two "
                     "LayerNorms, four attention Linears with biases, the MLP's two Linears with biases, `d_ff = 16`)? "
                     "Its final LayerNorm? Its head?", 0, words=(1, 100), since=2),
             Written("10.Q2", "GPT-2 small (`vocab 50257, n_positions 1024, d_model 768, n_layer 12, n_head 12`, tied) "
                     "has 124,439,808 parameters (its model card's figure). Roughly which fraction sits in the token "
                     "embedding?", 1, words=(5, 60), since=2)),
    "10.2": (Written("10.Q3", "TinyGPT, prefill of 16 tokens: 131,072 MACs per token in the Linears and the head, and "
                     "how many in attention?", 0, words=(1, 100), since=2),
             Written("10.Q4", "Why does a decode step cost about as much as one token of prefill, and what grows with "
                     "its position?", 2, words=(20, 150), since=2)),
    "10.3": (Written("10.Q5", "GPT-2 small in float16 at T = 1024: how many MB for one sequence, and at which batch does "
                     "the cache outgrow the weights (249 MB in float16)?", 1, words=(5, 80), since=2),),
    "10.4": (Written("10.Q6", "Why does prefill's intensity grow about in proportion to L, as long as the weights are "
                     "most of the bytes moved?", 1, words=(15, 120), since=2),
             Written("10.Q7", "Why can grouped-query attention make a ridge reachable that multi-head attention never "
                     "reaches?", 1, words=(20, 150), since=2)),
    "10.6": (Written("10.Q8", "`op_counts(exported)` shows 2 `Tanh` nodes and 69 `Constant`s, `op_counts(optimized)` "
                     "none of either. Where did they go?", 1, words=(10, 100), since=2),
             Written("10.Q9", "Export with `opset_version=20` instead: which fused operator appears, and how large is "
                     "`relmax` then? Why must a fusion check an operator's attributes?", 2, words=(20, 150), since=2),
             Written("10.Wrap-up", "Answer the four wrap-up questions above in the cell below", 0, words=(0, 600),
                     since=2)),
}
"""The lab's questions answered in words (release 2): Q1, Q3 and the wrap-up for practice, the others marked by
hand against ``rubrics.py``; their points came out of each task's exported answer."""

LAB = Lab(
    name=LAB_NAME,
    title="What a transformer costs",
    notebook="lab10_transformer_costs.ipynb",
    packages=("torch", "onnx", "onnxruntime", "numpy"),
    releases=(
        Release(1, "2026-11-25", "The first release: parameters, prefill and decode MACs, the KV cache, arithmetic "
                "intensity, greedy decoding with a KV cache, ONNX export and fusions."),
        Release(2, "2026-11-26", "Questions Q1-Q9 and the wrap-up get answer cells: Q2, Q4-Q9 (9 points) are marked "
                "by hand, taken from the exported answers of tasks 10.1-10.4 and 10.6; Q1, Q3 and the wrap-up are "
                "for practice.", marker="are answered in words, in the answer cell below"),
    ),
    tasks=(
        Task(
            id="10.1", title="Parameters and bytes", answer_points=2,
            answer="{'tiny': param_count(TINY), 'tiny_bytes_fp32': weight_bytes(TINY, torch.float32), "
                   "'gpt2_small_bytes': {'float32', 'float16', 'int8'}}",
            keys=("tiny", "tiny_bytes_fp32", "gpt2_small_bytes"),
            function="param_count", run_case=_params, grader_check=f"{JUDGE}:check_params", checks=CHECKS["10.1"],
            written=WRITTEN["10.1"],
            cases=(
                Case("GQA, untied head", {"config": GQA_UNTIED}, 4),
                Case("MQA, d=96, 3 layers, vocabulary 1000", {"config": MQA_WIDE}, 4),
                Case("GPT-2 small, by part", {"config": GPT2_SMALL}, 4),
            ),
        ),
        Task(
            id="10.2", title="Prefill and decode MACs", answer_points=2,
            answer="{'tiny_prefill_16', 'tiny_decode_past_16', 'gpt2_prefill_512_last', 'gpt2_decode_past_512'}: MACs (ints)",
            keys=("tiny_prefill_16", "tiny_decode_past_16", "gpt2_prefill_512_last", "gpt2_decode_past_512"),
            function="macs", run_case=_macs, grader_check=f"{JUDGE}:check_macs", checks=CHECKS["10.2"],
            written=WRITTEN["10.2"],
            cases=(
                _points("GQA, prefill and decode", 4, GQA_UNTIED, [[12, 0, "all", 1], [1, 20, "all", 1]]),
                _points("MQA, chunked prefill over a cache, batch 2", 4, MQA_WIDE, [[1, 100, "all", 1],
                                                                                   [4, 60, "all", 2]]),
                _points("logits of the last position only", 4, GQA_DEEP, [[40, 0, "last", 1], [9, 30, "last", 3]]),
                _points("one token, empty cache", 4, TINY, [[1, 0, "all", 1], [1, 0, "last", 3]]),
            ),
        ),
        Task(
            id="10.3", title="KV-cache bytes", answer_points=1,
            answer="{'tiny_17_fp32', 'gpt2_1024_fp16', 'gpt2_1024_fp16_batch8'}: bytes (ints)",
            keys=("tiny_17_fp32", "gpt2_1024_fp16", "gpt2_1024_fp16_batch8"),
            function="kv_cache_bytes", run_case=_kv, grader_check=f"{JUDGE}:check_kv", checks=CHECKS["10.3"],
            written=WRITTEN["10.3"],
            cases=(
                Case("GQA and MQA TinyGPTs, batches and dtypes", {"queries": [
                    {"config": GQA_UNTIED, "T": 17, "batch": 1, "dtype": "float32"},
                    {"config": MQA_WIDE, "T": 33, "batch": 3, "dtype": "bfloat16"},
                    {"config": GQA_DEEP, "T": 100, "batch": 2, "dtype": "float16"}]}, 4),
                Case("GPT-2 small at T=1024 in float16: MHA, GQA-4, MQA", {"queries": [
                    {"config": GPT2_SMALL, "T": 1024, "batch": 1, "dtype": "float16"},
                    {"config": {**GPT2_SMALL, "n_kv_head": 4}, "T": 1024, "batch": 1, "dtype": "float16"},
                    {"config": {**GPT2_SMALL, "n_kv_head": 1}, "T": 1024, "batch": 1, "dtype": "float16"}]}, 4),
            ),
        ),
        Task(
            id="10.4", title="Arithmetic intensity", answer_points=1,
            answer="{'gpt2_prefill_512', 'gpt2_decode_past_512', 'batch_to_ridge_10', 'batch_to_ridge_100'}",
            keys=("gpt2_prefill_512", "gpt2_decode_past_512", "batch_to_ridge_10", "batch_to_ridge_100"),
            tolerance=RATIO, function="intensity", run_case=_intensity, grader_check=f"{JUDGE}:check_intensity",
            checks=CHECKS["10.4"], written=WRITTEN["10.4"],
            cases=(
                _points("decode at batch 8", 4, TINY, [[1, 64, "float32", 8, "all"], [1, 127, "float32", 8, "all"]]),
                _points("MQA decode and prefill", 4, MQA_WIDE, [[1, 100, "float32", 1, "all"],
                                                                [1, 100, "float16", 16, "all"],
                                                                [32, 0, "float32", 1, "last"]]),
                _points("GPT-2 small in float16", 4, GPT2_SMALL, [[256, 0, "float16", 1, "last"],
                                                                  [1, 256, "float16", 4, "all"]]),
            ),
        ),
        Task(
            id="10.5", title="Greedy decoding with a KV cache", answer_points=5,
            answer="{'tokens', 'distinct', 'cache_shape', 'cache_bytes', 'macs_cached', 'macs_uncached'} of 48 "
                   "tokens after the 8-token prompt",
            keys=("tokens", "distinct", "cache_shape", "cache_bytes", "macs_cached", "macs_uncached"),
            function="generate", run_case=_decode, grader_check=f"{JUDGE}:check_decoding", checks=CHECKS["10.5"],
            cases=(
                _decoding("GQA, batch of 2", {**TINY, "n_kv_head": 2}, prompt=6, new=20, seed=31, batch=2),
                _decoding("MQA, untied head", {**TINY, "n_kv_head": 1, "tied": False}, prompt=5, new=24, seed=2),
                _decoding("a one-token prompt", TINY, prompt=1, new=24, seed=0),
                _decoding("3 layers, d=96", GQA_DEEP, prompt=7, new=20, seed=31),
            ),
        ),
        Task(
            id="10.6", title="ONNX export and fusions", answer_points=2,
            answer="{'nodes_before', 'nodes_after', 'fused': {op: count}, 'relmax_log10'} of TinyGPT",
            keys=("nodes_before", "nodes_after", "fused", "relmax_log10"), tolerance=LOG10,
            function="export_and_optimize", run_case=_export, grader_check=f"{JUDGE}:check_export",
            checks=CHECKS["10.6"], written=WRITTEN["10.6"],
            cases=(
                Case("MQA", {"config": {**TINY, "n_kv_head": 1}, "seed": 21}, 5),
                Case("3 layers, d=96, GQA", {"config": GQA_DEEP, "seed": 22}, 5),
            ),
        ),
    ),
)
