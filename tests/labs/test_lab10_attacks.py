"""Lab 10's judges against students who read them, each attack beside a control that plays the same
wrong answer straight.

Task 10.5 asks for greedy decoding with a KV cache: the prompt fed once, then one token per step. The tokens and
the cache of a decoding that recomputes the whole sequence at every step are the same, so the judge must know how
each step fed the model. It used to read that from the course's ``StepRecorder``, forward hooks on the model's
modules in the graded kernel (class 1, a rule kept in state the student's code shares; class 5, a required method
that leaves no trace in the output): a ``generate`` that recomputes everything could remove the hooks, call
``F.linear`` on the weights, and write a cached decoding's records into the recorder, for the full 20 points.

Now the judge replays ``generate`` in a student process on a model of its own whose Linears and embeddings it
serves itself (``util.labs.lab10.decode_harness``): the records are the judge's, the weights never reach the
student's code. Judged through the grader's judge process, as whoever runs the tests (root in CI) and as an
unprivileged grader:

* honest: the solution's ``generate``: passes;
* control: a decoding that recomputes the sequence at every step (and builds the right cache at the end), played
  straight: fails, on the steps the judge served;
* forger: the same decoding with the hooks removed while it recomputes, then a cached decoding's records written
  into the recorder: passed before (20 points), fails now like the control (the replay has no recorder to forge);
* bypass: the same decoding computed with ``F.linear`` / ``F.embedding`` on the modules' weights, each module
  called once per step on a dummy row for the hooks: passed before (20 points), fails now (the replay's modules
  hold no weights; the message says to call the modules).

Task 10.6 (class 5: the optimizer's work leaves a trace only in counts the judge read) asks for the export optimized
by onnxruntime's transformer optimizer; the judge counted the fused operators of the saved model and ran it. An
unoptimized export with every LayerNormalization but the first written out in primitives and the fused operators
added beside the graph (``padded``) had those counts and ran right: 10 points. The judge now requires every node on
the way to the logits and every operator as often as in its own export and optimization of the same model:

* control: the export, unoptimized, played straight: fails (0 FastGelu), before and now;
* padded (the fused operators beside the graph) and wired (the same, each multiplied by 0 and added to the logits,
  so every node feeds the output): passed before, fail now.

The other classes: 10.1-10.4 and 10.6 run no student code in a judge and time nothing (2), judge on models the
judge builds from the spec (3), read no recording (4); grader-only files are the core's (6).
"""
from __future__ import annotations

import sys

import cloudpickle
import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from judged_files import judge_files, save_case
from onnx import helper, numpy_helper

from grader.author.solution import solution_namespace
from grader.execute import confinement
from util.labs import get_lab
from util.labs.lab10 import judge

LAB = get_lab("lab10")
CASES = [c.id for c in LAB.task("10.5").cases]
pytestmark = pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")
cloudpickle.register_pickle_by_value(sys.modules[__name__])   # as a notebook's functions are: by value, not by import


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab10", ("10.1", "10.2", "10.3", "10.4", "10.5", "10.6"))


def _recorder(model):
    """The course's StepRecorder watching ``model`` in this process, if any (found through its hooks)."""
    for hook in list(getattr(model.wte, "_forward_hooks", {}).values()):
        owner = getattr(hook, "__self__", None)
        if owner is not None and hasattr(owner, "linear_rows"):
            return owner
    return None


def _forge(model, prompt, tokens):
    """Write into the kernel's recorder what a cached decoding of ``tokens`` after ``prompt`` would have recorded."""
    recorder = _recorder(model)
    if recorder is None:
        return
    batch, length = prompt.shape
    new = tokens.shape[1]
    recorder.ids = [prompt.reshape(-1).tolist()] + [tokens[:, j].tolist() for j in range(new - 1)]
    recorder.positions = [list(range(length))] + [[length + j] for j in range(new - 1)]
    recorder.linear_rows = [[batch * length] * len(recorder.linears)] + \
        [[batch] * len(recorder.linears) for _ in range(new - 1)]
    recorder.stray_rows = 0


def wrong_decodings(solution):
    """``{"control", "forger", "bypass"}``: a ``generate`` that recomputes the whole sequence at every step."""
    forward = solution["forward_cached"]

    def recompute(model, prompt, n, logits_of=None):
        logits_of = logits_of or (lambda m, ids, cache: forward(m, ids, cache))
        ids = prompt
        for _ in range(n):
            ids = torch.cat([ids, logits_of(model, ids, [None] * len(model.blocks))[:, -1].argmax(-1, keepdim=True)], 1)
        cache = [None] * len(model.blocks)
        logits_of(model, ids[:, :-1], cache)                     # the right cache, built once at the end
        return ids[:, prompt.shape[1]:], cache

    @torch.no_grad()
    def control(model, prompt, n, use_cache=True):
        return recompute(model, prompt, n)

    @torch.no_grad()
    def forger(model, prompt, n, use_cache=True):
        hooks = {name: dict(module._forward_hooks) for name, module in model.named_modules()}
        for module in model.modules():
            module._forward_hooks.clear()                        # the recorder sees nothing of the work
        try:
            tokens, cache = recompute(model, prompt, n)
        finally:
            for name, module in model.named_modules():
                module._forward_hooks.update(hooks[name])
        _forge(model, prompt, tokens)                           # and records what a cached decoding feeds
        return tokens, cache

    def by_weights(model, ids, cache):
        """TinyGPT's forward over the whole sequence computed from the weights (no module called), keys and
        values into ``cache``."""
        x = F.embedding(ids, model.wte.weight) + F.embedding(torch.arange(ids.shape[1]), model.wpe.weight)
        for i, block in enumerate(model.blocks):
            h = block.ln1(x)
            a = block.attn
            batch, length, _ = h.shape
            q = F.linear(h, a.q.weight, a.q.bias).view(batch, length, a.n_head, a.head_dim).transpose(1, 2)
            k = F.linear(h, a.k.weight, a.k.bias).view(batch, length, a.n_kv_head, a.head_dim).transpose(1, 2)
            v = F.linear(h, a.v.weight, a.v.bias).view(batch, length, a.n_kv_head, a.head_dim).transpose(1, 2)
            cache[i] = (k, v)
            merged = a.attend(q, k, v).transpose(1, 2).reshape(batch, length, -1)
            x = x + F.linear(merged, a.o.weight, a.o.bias)
            m = block.mlp
            x = x + F.linear(m.act(F.linear(block.ln2(x), m.fc.weight, m.fc.bias)), m.proj.weight, m.proj.bias)
        return F.linear(model.ln_f(x), model.head.weight)

    @torch.no_grad()
    def bypass(model, prompt, n, use_cache=True):
        tokens, cache = recompute(model, prompt, n, by_weights)
        batch = prompt.shape[0]
        stream = torch.cat([prompt, tokens[:, :-1]], 1)
        start = 0
        for length in [prompt.shape[1]] + [1] * (n - 1):        # each module once per step, for the hooks
            model.wte(stream[:, start:start + length])
            model.wpe(torch.arange(start, start + length))
            for module in model.modules():
                if isinstance(module, torch.nn.Linear):
                    module(torch.zeros(batch, length, module.in_features))
            start += length
        return tokens, cache

    return {"control": control, "forger": forger, "bypass": bypass}


def _saved(solution, tmp_path, cases=CASES):
    functions = {"honest": solution["generate"], **wrong_decodings(solution)}
    saved = {}
    for name, function in functions.items():
        for case_id in cases:
            spec, data, _ = save_case("lab10", "10.5", case_id, function, tmp_path)
            saved[f"{name}/{case_id}"] = ("10.5", spec, data)
    return saved


def _assert_verdicts(verdicts, cases=CASES):
    for case_id in cases:
        new = next(c.spec["new"] for c in LAB.task("10.5").cases if c.id == case_id)
        assert verdicts[f"honest/{case_id}"] == [], case_id
        for name in ("control", "forger"):
            [problem] = verdicts[f"{name}/{case_id}"]
            assert problem.startswith(judge.REPLAY + f"the decoding fed the model {new + 1} steps of "), (name, problem)
            assert "times the MACs of such a decoding" in problem
        [problem] = verdicts[f"bypass/{case_id}"]
        assert problem.startswith(judge.REPLAY + "generate raised AttributeError: in the grader's replay the weights "
                                  "of model.wte stay with the grader: call the module (model.wte(x))"), problem


def test_the_attacks_pass_the_kernels_records(solution, tmp_path):
    """What the attacks do in the graded kernel: the forger's and the bypass's records are a cached decoding's,
    the control's are not (so a judge reading the kernel's records gave the attacks their points)."""
    for name, function in wrong_decodings(solution).items():
        _, _, value = save_case("lab10", "10.5", CASES[2], function, tmp_path)
        assert (value["step_lengths"] == [1] * 24) == (name != "control"), name


def test_recomputing_decodings_earn_nothing_in_the_graders_judge(solution, tmp_path):
    cases = [CASES[0], CASES[3]]      # a batch of 2; 3 layers (each replay starts a student process: seconds)
    _assert_verdicts(judge_files("lab10", _saved(solution, tmp_path, cases), tmp_path), cases)


@pytest.mark.slow  # as an unprivileged grader: the same judge; the sandbox's unprivileged path runs every time in tests/test_walls.py, tests/test_unprivileged.py and labs 7 and 13's attacks
def test_the_same_as_an_unprivileged_grader(solution, tmp_path):
    cases = [CASES[1]]
    _assert_verdicts(judge_files("lab10", _saved(solution, tmp_path, cases), tmp_path, as_user=True), cases)


# ---------------------------------------------------------------- 10.6

def padded(exported, cfg, wired: bool = False):
    """``exported`` (unoptimized) with every LayerNormalization but the first written out in primitives and the fused
    operators the optimizer would make added beside the graph (``wired``: each multiplied by 0 and added to the
    logits): the fused counts of an optimized model, nothing fused."""
    model = onnx.load_from_string(exported.SerializeToString())
    nodes, first = [], True
    for node in model.graph.node:
        if node.op_type != "LayerNormalization" or first:
            first = first and node.op_type != "LayerNormalization"
            nodes.append(node)
            continue
        (x, scale, bias), t = node.input[:3], node.output[0]
        eps = next((a.f for a in node.attribute if a.name == "epsilon"), 1e-5)
        model.graph.initializer.append(numpy_helper.from_array(np.array(eps, np.float32), f"{t}_eps"))
        nodes += [helper.make_node("ReduceMean", [x], [f"{t}_mean"], axes=[-1]),
                  helper.make_node("Sub", [x, f"{t}_mean"], [f"{t}_d"]),
                  helper.make_node("Mul", [f"{t}_d", f"{t}_d"], [f"{t}_sq"]),
                  helper.make_node("ReduceMean", [f"{t}_sq"], [f"{t}_var"], axes=[-1]),
                  helper.make_node("Add", [f"{t}_var", f"{t}_eps"], [f"{t}_ve"]),
                  helper.make_node("Sqrt", [f"{t}_ve"], [f"{t}_std"]),
                  helper.make_node("Div", [f"{t}_d", f"{t}_std"], [f"{t}_n"]),
                  helper.make_node("Mul", [f"{t}_n", scale], [f"{t}_s"]),
                  helper.make_node("Add", [f"{t}_s", bias], [t])]
    source = next(n for n in nodes if n.op_type == "LayerNormalization").input[0]
    model.graph.initializer.extend([numpy_helper.from_array(np.ones(cfg.d_model, np.float32), "pad_g"),
                                    numpy_helper.from_array(np.zeros(cfg.d_model, np.float32), "pad_b"),
                                    numpy_helper.from_array(np.zeros((), np.float32), "pad_zero")])
    pads = [helper.make_node("FastGelu", [source], [f"pad_gelu{i}"], domain="com.microsoft")
            for i in range(cfg.n_layer)]
    pads += [helper.make_node("SkipLayerNormalization", [source, source, "pad_g", "pad_b"], [f"pad_skip{i}"],
                              domain="com.microsoft") for i in range(2 * cfg.n_layer)]
    nodes += pads
    if wired:
        logits = model.graph.output[0].name
        for node in nodes:
            node.output[:] = [f"{o}_unpadded" if o == logits else o for o in node.output]
        total = f"{logits}_unpadded"
        for i, pad in enumerate(pads):
            nodes += [helper.make_node("ReduceMean", [pad.output[0]], [f"pad_sum{i}"], axes=[-1], keepdims=1),
                      helper.make_node("Mul", [f"pad_sum{i}", "pad_zero"], [f"pad_nothing{i}"]),
                      helper.make_node("Add", [total, f"pad_nothing{i}"], [logits if i == len(pads) - 1
                                                                          else f"pad_total{i}"])]
            total = f"pad_total{i}"
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


def exports(solution):
    """``{"honest", "control", "padded", "wired"}``: ``export_and_optimize`` functions (same signature)."""
    export = solution["export_and_optimize"]
    return {"honest": export,
            "control": lambda model, cfg: (export(model, cfg)[0],) * 2,
            "padded": lambda model, cfg: (export(model, cfg)[0], padded(export(model, cfg)[0], cfg)),
            "wired": lambda model, cfg: (export(model, cfg)[0], padded(export(model, cfg)[0], cfg, wired=True))}


def _exports_saved(solution, tmp_path):
    saved = {}
    for name, function in exports(solution).items():
        for case in LAB.task("10.6").cases:
            spec, data, _ = save_case("lab10", "10.6", case.id, function, tmp_path)
            saved[f"{name}/{case.id}"] = ("10.6", spec, data)
    return saved


def _assert_export_verdicts(verdicts):
    for case in LAB.task("10.6").cases:
        assert verdicts[f"honest/{case.id}"] == [], case.id
        assert verdicts[f"control/{case.id}"][0].startswith("the optimized model has 0 FastGelu nodes"), case.id
        [padded_problem] = verdicts[f"padded/{case.id}"]
        assert " node(s) of the optimized model feed no output (FastGelu, FastGelu" in padded_problem
        [wired_problem] = verdicts[f"wired/{case.id}"]
        assert "where the grader's own export and optimization of the same model" in wired_problem, wired_problem


def test_the_padded_exports_run_right_with_the_fused_counts(solution):
    """What the attacks are: the fused operators counted as the optimizer's, the logits the PyTorch model's."""
    from util.labs.lab10.fusions import FUSED, op_counts
    from util.labs.lab10.gpt import GPTConfig, prompt_ids, seeded_gpt
    from util.onnx_session import run

    spec = LAB.task("10.6").cases[0].spec
    cfg = GPTConfig.from_dict(spec["config"])
    model = seeded_gpt(cfg, spec["seed"])
    ids = prompt_ids(cfg, 5, spec["seed"])
    with torch.no_grad():
        reference = model(ids).numpy()
    for name in ("padded", "wired"):
        _, optimized = exports(solution)[name](model, cfg)
        counts = op_counts(optimized)
        assert {op: counts.get(op, 0) for op in FUSED} == judge.expected_fusions(cfg), name
        logits = run(optimized, {"ids": ids.numpy()})["logits"]
        assert float(np.abs(logits - reference).max() / np.abs(reference).max()) < judge.OUTPUT_RTOL, name


def test_padded_exports_earn_nothing_in_the_graders_judge(solution, tmp_path):
    _assert_export_verdicts(judge_files("lab10", _exports_saved(solution, tmp_path), tmp_path))


@pytest.mark.slow  # as an unprivileged grader: the same judge; the sandbox's unprivileged path runs every time in tests/test_walls.py, tests/test_unprivileged.py and labs 7 and 13's attacks
def test_padded_exports_the_same_as_an_unprivileged_grader(solution, tmp_path):
    _assert_export_verdicts(judge_files("lab10", _exports_saved(solution, tmp_path), tmp_path, as_user=True))
