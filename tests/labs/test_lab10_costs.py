"""Lab 10: the course's formulas (the solution's) against the grader's measurements, the design's figures,
and the facts of the pinned versions the notebook states.

The notebooks themselves are graded in tests/test_labs.py (solution 100, lab 0, examples exact); the
judges in test_lab10_judge.py."""
import io
import itertools
import warnings

import numpy as np
import pytest
import torch

from grader.author.solution import solution_namespace
from util.labs import get_lab
from util.labs.lab10 import judge_measure as measure
from util.labs.lab10.cases import GQA_DEEP, GQA_UNTIED, MQA_WIDE
from util.labs.lab10.gpt import GPT2_SMALL, TINY, GPTConfig, build_gpt, prompt_ids, seeded_gpt

CONFIGS = {
    "toy": GPTConfig(vocab=3, n_positions=2, d_model=4, n_layer=1, n_head=1),
    "tiny": TINY,
    "gqa untied": GPTConfig.from_dict(GQA_UNTIED),
    "mqa wide": GPTConfig.from_dict(MQA_WIDE),
    "gqa deep": GPTConfig.from_dict(GQA_DEEP),
    "odd d_ff, 3 layers": GPTConfig(vocab=77, n_positions=40, d_model=24, n_layer=3, n_head=6, n_kv_head=3, d_ff=40,
                                    tied=False),
    "gpt2 small": GPT2_SMALL,
}


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab10", ("10.1", "10.2", "10.3", "10.4"))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_formula_equals_the_grader_measurement(solution, name):
    cfg = CONFIGS[name]
    assert solution["param_count"](cfg) == measure.parameters(cfg)
    for kind in (torch.float32, torch.bfloat16, torch.int8):
        assert solution["weight_bytes"](cfg, kind) == measure.weight_bytes(cfg, kind)
    for length, past, logits, batch in itertools.product((1, 2, 7), (0, 1, 9), ("all", "last"), (1, 3)):
        assert solution["macs"](cfg, length, past, logits, batch) == measure.macs(cfg, length, past, logits, batch)
    for tokens, batch, kind in ((1, 1, torch.float32), (13, 2, torch.float16)):
        assert solution["kv_cache_bytes"](cfg, tokens, batch, kind) == measure.cache_bytes(cfg, tokens, batch, kind)
    for length, past, batch in ((1, 9, 4), (7, 0, 1)):
        assert solution["intensity"](cfg, length, past, torch.float16, batch) == \
            measure.intensity(cfg, length, past, torch.float16, batch)


def test_the_design_figures(solution):
    params, macs, kv, intensity = (solution[k] for k in ("param_count", "macs", "kv_cache_bytes", "intensity"))
    assert [params(CONFIGS[n])["total"] for n in ("toy", "tiny", "gqa untied", "mqa wide", "gpt2 small")] == \
        [272, 141_056, 165_504, 397_440, 124_439_808]
    assert params(TINY) == {"embedding": 40_960, "attention": 33_280, "mlp": 66_176, "norm": 640, "head": 0,
                            "total": 141_056}
    toy = build_gpt(CONFIGS["toy"])
    assert sum(p.numel() for _, p in toy.named_parameters(remove_duplicate=False)) == 284   # the head counted twice
    assert (macs(TINY, 16), macs(TINY, 1, past=16)) == (2_162_688, 135_424)
    assert kv(TINY, 17) == 17_408
    gpt2 = {heads: GPTConfig(**{**GPT2_SMALL.to_dict(), "n_kv_head": heads}) for heads in (12, 4, 1)}
    assert [kv(gpt2[h], 1024, 1, torch.float16) for h in (12, 4, 1)] == [37_748_736, 12_582_912, 3_145_728]
    assert round(intensity(GPT2_SMALL, 512, 0, torch.float32, logits="last"), 1) == 90.3
    assert round(intensity(GPT2_SMALL, 1, 512, torch.float32), 3) == 0.248
    ridge = solution["batch_to_ridge"]
    assert [ridge(gpt2[h], 512, 10, torch.float16) for h in (12, 4, 1)] == [None, 39, 22]
    for heads, batch in ((4, 39), (1, 22)):   # the smallest batch: it reaches the ridge, one fewer does not
        assert intensity(gpt2[heads], 1, 512, torch.float16, batch) >= 10 > \
            intensity(gpt2[heads], 1, 512, torch.float16, batch - 1)


def test_flop_counter_counts_nothing_for_cpu_sdpa_and_all_of_the_explicit_attention():
    from torch.utils.flop_counter import FlopCounterMode

    q = k = v = torch.randn(1, 4, 16, 16)
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert counter.get_total_flops() == 0
    with FlopCounterMode(display=False) as counter:
        build_gpt(TINY).blocks[0].attn.attend(q, k, v)
    assert counter.get_total_flops() // 2 == 2 * 4 * 16 * 16 * 16


def test_default_weights_repeat_a_token_and_the_test_weights_do_not():
    """Why the cases use seeded_gpt: PyTorch's initialisation makes greedy decoding nearly constant."""
    prompt = prompt_ids(TINY, 8, 6)
    default, _ = measure.greedy_uncached(build_gpt(TINY, 6), prompt, 48)
    seeded, gaps = measure.greedy_uncached(seeded_gpt(TINY, 6), prompt, 48)
    assert len(set(default[0].tolist())) <= 2
    assert len(set(seeded[0].tolist())) >= 30 and float(gaps.min()) > 1e-2


def _export(model, opset=17):
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kwargs = {} if opset is None else {"opset_version": opset}
        torch.onnx.export(model, (torch.zeros((1, 8), dtype=torch.long),), buffer, dynamo=False, input_names=["ids"],
                          output_names=["logits"], dynamic_axes={"ids": {1: "s"}, "logits": {1: "s"}}, **kwargs)
    return buffer.getvalue()


@pytest.mark.parametrize("case", [c.id for c in get_lab("lab10").task("10.6").cases] + ["TinyGPT"])
def test_the_fusions_the_export_judge_expects_are_what_onnxruntime_makes(case):
    """``judge.expected_fusions`` (a stated fact of onnxruntime 1.31.1) against a real export and optimization
    of each model task 10.6 grades, with the course's export."""
    import onnx
    from onnxruntime.transformers.optimizer import optimize_model

    from util.labs.lab10.fusions import fusion_summary
    from util.labs.lab10.judge import expected_fusions

    spec = next((c.spec for c in get_lab("lab10").task("10.6").cases if c.id == case), {"config": {}, "seed": 0})
    cfg = GPTConfig.from_dict(spec["config"])
    data = _export(seeded_gpt(cfg, spec["seed"]))
    optimized = optimize_model(onnx.load_from_string(data), model_type="gpt2", num_heads=cfg.n_head,
                               hidden_size=cfg.d_model, opt_level=1).model
    assert fusion_summary(onnx.load_from_string(data), optimized)["fused"] == expected_fusions(cfg)


def test_onnxruntime_fusions_under_the_pins():
    """FastGelu and SkipLayerNormalization, no Attention; at the exporter's default opset (20) the
    optimizer fuses the tanh Gelu node into BiasGelu, the exact GELU, and the model changes; and
    optimize_model empties the weights of the ModelProto it is given."""
    import onnx
    from onnxruntime.transformers.optimizer import optimize_model

    from util.labs.lab10.fusions import fusion_summary
    from util.onnx_session import run

    model, ids = seeded_gpt(TINY, 0), prompt_ids(TINY, 12, 1)
    with torch.no_grad():
        reference = model(ids).numpy()
    found = {}
    for opset in (17, None):
        data = _export(model, opset)
        given = onnx.load_from_string(data)
        optimized = optimize_model(given, model_type="gpt2", num_heads=4, hidden_size=64, opt_level=1).model
        logits = run(optimized, {"ids": ids.numpy()})["logits"]
        found[opset] = (fusion_summary(onnx.load_from_string(data), optimized)["fused"],
                        float(np.abs(logits - reference).max() / np.abs(reference).max()),
                        {e.version for e in optimized.opset_import if e.domain == ""})
        assert all(init.data_location == onnx.TensorProto.EXTERNAL for init in given.graph.initializer)
    assert found[17][0] == {"Attention": 0, "MultiHeadAttention": 0, "FastGelu": 2, "BiasGelu": 0,
                            "SkipLayerNormalization": 4, "LayerNormalization": 1}
    assert found[17][1] < 2e-6 and found[17][2] == {17}
    assert found[None][0]["FastGelu"] == 0 and found[None][0]["BiasGelu"] == 2 and found[None][2] == {20}
    assert found[None][1] > 5e-5
