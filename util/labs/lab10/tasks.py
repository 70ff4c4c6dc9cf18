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
"each token was fed once") are the judge's too, and nothing recorded beside the student's code enters them:

* the kernel runs ``generate`` (under the course's :class:`~util.labs.lab10.recorder.StepRecorder`, for the
  returned step lengths) and saves the tokens, the cache tensors and ``generate`` itself, pickled;
* the judge rebuilds the seeded model from the spec and decodes *without* a cache itself, then checks
  the tokens against its own and the cache's shapes, bytes and values against its own keys and values;
* then it replays ``generate`` in a student process on a model of its own (another seed, another prompt)
  whose Linears and embeddings it serves itself (``decode_harness.py``): the student process never holds
  those weights, and every call of them reaches the judge, which records what each step fed the model
  (ids, positions, rows per Linear) and requires the prompt once, then one token at a time (each Linear
  processing exactly those rows), with the replay's tokens and cache right too. A hook removed, a recorder
  rewritten or ``F.linear`` on a weight in the notebook's process changes nothing the judge reads; a
  "cached" decoding that recomputes the whole sequence shows in the rows served; the MACs of such steps are
  measured with the judge's own ``FlopCounterMode`` on its own cached forward.

Task 10.6 saves the optimized ONNX model: the judge counts its fused operators, requires every node on
the way to the logits, re-does the course's export and optimization to compare every operator's count,
and runs it with onnxruntime at two sequence lengths against its own PyTorch model.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Mapping

from util.contract import Lab, Release, Task, Tolerance, Written
from util.labs.lab10.public_checks import CHECKS

LAB_NAME = "lab10"
JUDGE = "util.labs.lab10.judge"
RATIO = Tolerance(rtol=1e-9)
"""Intensities are ratios of exact integers: only the last bits of a float may differ."""
LOG10 = Tolerance(atol=0.5)
"""Task 10.6's rounding difference, as log10: half a decade either way (counts stay exact)."""


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
    """The student's cached ``generate`` (under the course's hooks, for the returned step lengths); the tokens,
    the cache and ``generate`` itself (pickled, for the judge's replay) saved.

    Nothing saved here is a verdict or a count: the judge decides "same tokens" against its own uncached
    decoding, "the cache holds T entries" from the saved tensors themselves, and "each token fed once" from
    its own replay of ``generate`` on a model whose modules it serves (module docstring)."""
    import cloudpickle
    import numpy as np
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
    arrays = {"tokens": tokens, "generate": np.frombuffer(cloudpickle.dumps(fn), dtype=np.uint8)}
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


RELEASES = (
    Release(1, "2026-11-25", "The first release: parameters, MACs, KV-cache bytes and arithmetic intensity of TinyGPT "
            "and GPT-2 small from a config, greedy decoding with a KV cache, and the ONNX export's fusions."),
    Release(2, "2026-11-26",
            "Nothing you write changes. Task 10.5: the grader replays your generate on a model of its own whose "
            "Linears and embeddings it computes itself, and records there what each step fed the model (as it "
            "asked before, call the modules: their weights cannot be read in that replay). Task 10.6: every "
            "operator of your optimized model, fused or not, must be on the way to the logits and as many as in "
            "the grader's own export and optimization of the same model.",
            marker="replays your `generate` on a model and"),
    Release(3, "2026-11-26", "Questions Q1-Q9 and the wrap-up get answer cells: Q2, Q4-Q9 (9 points) are marked "
            "by hand, taken from the exported answers of tasks 10.1-10.4 and 10.6; Q1, Q3 and the wrap-up are "
            "for practice.", marker="are answered in words, in the answer cell below"),
)
"""The lab's changelog (``Lab.releases``); release 2 replays 10.5's decoding on modules the grader serves."""


WRITTEN = {
    "10.1": (Written("10.Q1", "How many parameters do its embeddings have (token and position)? Its one block (two "
                     "LayerNorms, four attention Linears with biases, the MLP's two Linears with biases, `d_ff = 16`)? "
                     "Its final LayerNorm? Its head?", 0, words=(1, 100), since=3),
             Written("10.Q2", "GPT-2 small (`vocab 50257, n_positions 1024, d_model 768, n_layer 12, n_head 12`, tied) "
                     "has 124,439,808 parameters (its model card's figure). Roughly which fraction sits in the token "
                     "embedding?", 1, words=(5, 60), since=3)),
    "10.2": (Written("10.Q3", "TinyGPT, prefill of 16 tokens: 131,072 MACs per token in the Linears and the head, and "
                     "how many in attention?", 0, words=(1, 100), since=3),
             Written("10.Q4", "Why does a decode step cost about as much as one token of prefill, and what grows with "
                     "its position?", 2, words=(20, 150), since=3)),
    "10.3": (Written("10.Q5", "GPT-2 small in float16 at T = 1024: how many MB for one sequence, and at which batch does "
                     "the cache outgrow the weights (249 MB in float16)?", 1, words=(5, 80), since=3),),
    "10.4": (Written("10.Q6", "Why does prefill's intensity grow about in proportion to L, as long as the weights are "
                     "most of the bytes moved?", 1, words=(15, 120), since=3),
             Written("10.Q7", "Why can grouped-query attention make a ridge reachable that multi-head attention never "
                     "reaches?", 1, words=(20, 150), since=3)),
    "10.6": (Written("10.Q8", "`op_counts(exported)` shows 2 `Tanh` nodes and 69 `Constant`s, `op_counts(optimized)` "
                     "none of either. Where did they go?", 1, words=(10, 100), since=3),
             Written("10.Q9", "Export with `opset_version=20` instead: which fused operator appears, and how large is "
                     "`relmax` then? Why must a fusion check an operator's attributes?", 2, words=(20, 150), since=3),
             Written("10.Wrap-up", "Answer the four wrap-up questions above in the cell below", 0, words=(0, 600),
                     since=3)),
}
"""The lab's questions answered in words (release 3): Q1, Q3 and the wrap-up for practice, the others marked by
hand against ``rubrics.py``; their points came out of each task's exported answer."""


LAB = Lab(
    name=LAB_NAME,
    title="What a transformer costs",
    notebook="lab10_transformer_costs.ipynb",
    packages=("torch", "onnx", "onnxruntime", "numpy"),
    releases=RELEASES,
    tasks=(
        Task(
            id="10.1", title="Parameters and bytes", answer_points=2,
            answer="{'tiny': param_count(TINY), 'tiny_bytes_fp32': weight_bytes(TINY, torch.float32), "
                   "'gpt2_small_bytes': {'float32', 'float16', 'int8'}}",
            keys=("tiny", "tiny_bytes_fp32", "gpt2_small_bytes"),
            function="param_count", run_case=_params, grader_check=f"{JUDGE}:check_params", checks=CHECKS["10.1"],
            written=WRITTEN["10.1"],
            hidden_points=12,
        ),
        Task(
            id="10.2", title="Prefill and decode MACs", answer_points=2,
            answer="{'tiny_prefill_16', 'tiny_decode_past_16', 'gpt2_prefill_512_last', 'gpt2_decode_past_512'}: MACs (ints)",
            keys=("tiny_prefill_16", "tiny_decode_past_16", "gpt2_prefill_512_last", "gpt2_decode_past_512"),
            function="macs", run_case=_macs, grader_check=f"{JUDGE}:check_macs", checks=CHECKS["10.2"],
            written=WRITTEN["10.2"],
            hidden_points=16,
        ),
        Task(
            id="10.3", title="KV-cache bytes", answer_points=1,
            answer="{'tiny_17_fp32', 'gpt2_1024_fp16', 'gpt2_1024_fp16_batch8'}: bytes (ints)",
            keys=("tiny_17_fp32", "gpt2_1024_fp16", "gpt2_1024_fp16_batch8"),
            function="kv_cache_bytes", run_case=_kv, grader_check=f"{JUDGE}:check_kv", checks=CHECKS["10.3"],
            written=WRITTEN["10.3"],
            hidden_points=8,
        ),
        Task(
            id="10.4", title="Arithmetic intensity", answer_points=1,
            answer="{'gpt2_prefill_512', 'gpt2_decode_past_512', 'batch_to_ridge_10', 'batch_to_ridge_100'}",
            keys=("gpt2_prefill_512", "gpt2_decode_past_512", "batch_to_ridge_10", "batch_to_ridge_100"),
            tolerance=RATIO, function="intensity", run_case=_intensity, grader_check=f"{JUDGE}:check_intensity",
            checks=CHECKS["10.4"], written=WRITTEN["10.4"],
            hidden_points=12,
        ),
        Task(
            id="10.5", title="Greedy decoding with a KV cache", answer_points=5,
            answer="{'tokens', 'distinct', 'cache_shape', 'cache_bytes', 'macs_cached', 'macs_uncached'} of 48 "
                   "tokens after the 8-token prompt",
            keys=("tokens", "distinct", "cache_shape", "cache_bytes", "macs_cached", "macs_uncached"),
            function="generate", run_case=_decode, grader_check=f"{JUDGE}:check_decoding", judged=("function",), checks=CHECKS["10.5"],
            hidden_points=20,
        ),
        Task(
            id="10.6", title="ONNX export and fusions", answer_points=2,
            answer="{'nodes_before', 'nodes_after', 'fused': {op: count}, 'relmax_log10'} of TinyGPT",
            keys=("nodes_before", "nodes_after", "fused", "relmax_log10"), tolerance=LOG10,
            function="export_and_optimize", run_case=_export, grader_check=f"{JUDGE}:check_export",
            checks=CHECKS["10.6"], written=WRITTEN["10.6"],
            hidden_points=10,
        ),
    ),
)
