"""Lab 10's judges: the solution's saved files pass, every deliberate mistake and hostile file fails with a
message that says what was expected, the solution still passes at two threads, and a graded notebook that
forges everything its kernel can reach gets no judged case."""
import io
import json
import pickle

import nbformat
import numpy as np
import pytest
import torch

from grader import REPO
from grader.author.build import SOLUTIONS
from grader.author.solution import solution_namespace
from grader.core import notebook
from grader.execute import confinement
from grader.judge import artifacts
from grader.judge import references as course_references
from grader.judge.isolated import serving
from util.answers import OUTPUT_DIR_ENV
from util.artifacts import case_file, case_stem, files_dir
from util.labs import get_lab
from util.labs.lab10 import judge
from util.labs.lab10 import judge_measure as measure
from util.labs.lab10.gpt import GPTConfig, prompt_ids, seeded_gpt
from util.labs.lab10.recorder import StepRecorder

LAB = get_lab("lab10")
walls = pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab10", ("10.1", "10.2", "10.3", "10.4", "10.5", "10.6"))


@pytest.fixture()
def saved(monkeypatch, tmp_path):
    """``saved(task_id, case_id, fn) -> (record, bytes)``: the case run as the kernel runs it."""
    monkeypatch.setenv(OUTPUT_DIR_ENV, str(tmp_path))

    def run(task_id, case_id, fn):
        task = LAB.task(task_id)
        case = next(c for c in task.cases if c.id == case_id)
        record = task.run_case(fn, case.spec)
        [path] = list(files_dir("lab10").glob(case_stem(case.spec) + "*"))
        return record, path.read_bytes()
    return run


def _spec(task_id, case_id):
    return next(c.spec for c in LAB.task(task_id).cases if c.id == case_id)


def _check(task_id, case_id, data):
    task = LAB.task(task_id)
    return artifacts.check_function(task)(_spec(task_id, case_id), data, task.tolerance)


def test_declaration_adds_up_and_names_real_checks():
    assert LAB.max_points == 100 and [t.max_points for t in LAB.tasks] == [15, 20, 10, 15, 25, 15]
    files = [case_file(c.spec) for t in LAB.tasks for c in t.cases]
    assert len(files) == len(set(files)) == 18
    assert all(callable(artifacts.check_function(t)) for t in LAB.tasks)


# ---------------------------------------------------------------- 10.1-10.4

def test_count_judges_accept_the_solution_on_every_case(solution, saved):
    for task in LAB.tasks[:4]:
        for case in task.cases:
            _, data = saved(task.id, case.id, solution[task.function])
            assert _check(task.id, case.id, data) == [], (task.id, case.id)


def test_count_judges_refuse_each_mistake_and_name_the_value(solution, saved):
    params = solution["param_count"]

    def head_twice(cfg):
        found = params(cfg)
        extra = cfg.vocab * cfg.d_model if cfg.tied else 0
        return {**found, "head": found["head"] + extra, "total": found["total"] + extra}

    _, data = saved("10.1", "GPT-2 small, by part", head_twice)
    assert _check("10.1", "GPT-2 small, by part", data) == [
        "param_count(cfg)['head'] differs from the parameters the grader counted in the built model (yours larger)",
        "param_count(cfg)['total'] differs from the parameters the grader counted in the built model (yours larger)"]

    def halved(cfg, L, past=0, logits="all", batch=1):
        full = solution["macs"](cfg, L, past, logits, batch)
        return full - batch * cfg.n_layer * 2 * cfg.n_head * cfg.head_dim * (L * (L - 1) // 2)

    _, data = saved("10.2", "GQA, prefill and decode", halved)
    [problem] = _check("10.2", "GQA, prefill and decode", data)
    assert problem == ("call 1: macs returned 1,494,528, which differs from the grader's measurement of the built "
                       "model (yours smaller)")
    assert _check("10.2", "one token, empty cache", saved("10.2", "one token, empty cache", halved)[1]) == []

    def kv_n_head(cfg, T, batch=1, dtype=torch.float32):
        return 2 * cfg.n_layer * cfg.n_head * cfg.head_dim * T * batch * torch.empty(0, dtype=dtype).element_size()

    case = "GPT-2 small at T=1024 in float16: MHA, GQA-4, MQA"
    problems = _check("10.3", case, saved("10.3", case, kv_n_head)[1])
    assert [p.split(":")[0] for p in problems] == ["call 2", "call 3"]

    def off_by_a_bit(cfg, L, past, dtype, batch=1, logits="all"):
        return solution["intensity"](cfg, L, past, dtype, batch, logits) * (1 + 1e-7)

    problems = _check("10.4", "decode at batch 8", saved("10.4", "decode at batch 8", off_by_a_bit)[1])
    assert len(problems) == 2 and "by more than rtol=1e-09 (yours larger)" in problems[0]


@pytest.mark.parametrize("data, start", [
    (b"\x00not json", "the values saved for this case are not JSON"),
    (json.dumps([1]).encode(), "macs should be 2 values, one per call"),
    (json.dumps([True, 1]).encode(), "call 1: macs returned a bool, not a number"),
    (json.dumps(["1511424", 128256]).encode(), "call 1: macs returned a str, not a number"),
    (json.dumps([1511424.0, 128256]).encode(), "call 1: macs returned a float (1511424.0); counts are ints"),
])
def test_count_judge_on_hostile_values(data, start):
    problems = _check("10.2", "GQA, prefill and decode", data)
    assert problems and problems[0].startswith(start), problems


def test_params_judge_on_a_dict_with_other_keys():
    data = json.dumps({"total": 165_504}).encode()
    assert _check("10.1", "GQA, untied head", data)[0].startswith("param_count(cfg) should return a dict with the keys")


# ---------------------------------------------------------------- 10.5

CASES_10_5 = [c.id for c in LAB.task("10.5").cases]


@walls
def test_decoding_judge_accepts_the_solution_at_one_and_two_threads(solution, saved):
    records = {}
    with serving():                               # the judge's replay asks this process for student processes
        for threads in (1, 2):
            torch.set_num_threads(threads)
            try:
                for case_id in CASES_10_5:
                    record, data = saved("10.5", case_id, solution["generate"])
                    assert _check("10.5", case_id, data) == [], (threads, case_id)
                    records[threads, case_id] = record
            finally:
                torch.set_num_threads(1)
    refs = course_references.load(LAB)["cases"]["10.5"]
    assert all(records[threads, case_id] == refs[case_id] for threads, case_id in records)


def test_every_case_chooses_each_token_by_a_clear_margin():
    """Identity of cached and uncached decoding is not vacuous: every token of every case (of the answer, and of
    the grader's replay of each case) wins by at least 100 times the difference between cached and uncached logits."""
    from util.judging import secret

    specs = [c.spec for c in LAB.task("10.5").cases] + [{"config": {}, "prompt": 8, "new": 48, "seed": 6, "batch": 1}]
    settings = []
    for spec in specs:
        cfg = GPTConfig.from_dict(spec["config"])
        settings.append((spec, seeded_gpt(cfg, spec["seed"]), prompt_ids(cfg, spec["prompt"], spec["seed"], spec["batch"])))
    for _ in range(2):  # the grader's replays, on two grading secrets: the first model drawn with a clear margin
        secret.renew()
        for case in LAB.task("10.5").cases:
            model, prompt, _ = judge.replay_setting(case.spec, GPTConfig.from_dict(case.spec["config"]))
            settings.append((case.spec, model, prompt))
    for spec, model, prompt in settings:
        cfg = GPTConfig.from_dict(spec["config"])
        tokens, gaps = measure.greedy_uncached(model, prompt, spec["new"])
        cache, steps = [None] * cfg.n_layer, []
        with torch.no_grad():
            steps.append(measure.step(model, prompt, cache)[:, -1])
            for j in range(spec["new"] - 1):
                steps.append(measure.step(model, tokens[:, j:j + 1], cache)[:, -1])
            uncached = model(torch.cat([prompt, tokens[:, :-1]], 1))[:, spec["prompt"] - 1:]
        difference = float((torch.stack(steps, 1) - uncached).abs().max())
        assert float(gaps.min()) > 100 * difference, spec
        assert min(len(set(row)) for row in tokens.tolist()) >= 0.6 * spec["new"], spec


def _generate_variant(solution, kind):
    """A wrong ``generate`` (same signature) built from the solution's pieces."""
    forward = solution["forward_cached"]

    @torch.no_grad()
    def generate(model, prompt, n, use_cache=True):
        cache, ids, new = [None] * len(model.blocks), prompt, []
        if kind == "token_by_token":              # a prompt fed one token at a time: right, but not a prefill
            for i in range(prompt.shape[1]):
                logits = forward(model, prompt[:, i:i + 1], cache)
        for step in range(n):
            if kind == "recompute":               # the whole sequence at every step, into a fresh cache
                cache = [None] * len(model.blocks)
                logits = forward(model, ids, cache)
            elif kind == "token_by_token" and step > 0:
                logits = forward(model, new[-1], cache)
            token = logits[:, -1].argmax(-1, keepdim=True)
            new.append(token)
            ids = torch.cat([ids, token], 1)
        return torch.cat(new, 1), cache           # recompute: the last step's cache is the right one
    return generate


@walls
def test_decoding_judge_sees_a_recomputing_decoding_whatever_the_kernel_counts(solution, saved, monkeypatch):
    """Same tokens, a right cache, FlopCounterMode patched in the kernel to report nothing: still failed, from what
    the grader's replay fed the model it serves (the saved file holds no count and no step)."""
    import torch.utils.flop_counter as flop_counter

    class Silent(flop_counter.FlopCounterMode):
        def get_total_flops(self):
            return 0

    with monkeypatch.context() as kernel:        # patched while the case runs, as a notebook could
        kernel.setattr(flop_counter, "FlopCounterMode", Silent)
        _, data = saved("10.5", "a one-token prompt", _generate_variant(solution, "recompute"))
    with serving():
        [problem] = _check("10.5", "a one-token prompt", data)
        assert problem.startswith(judge.REPLAY + "the decoding fed the model 24 steps of 1, 2, 3, 4, 5, 6, ... tokens; "
                                  "with a cache it feeds the prompt once (1 tokens), then only the newest token, 23 times")
        assert problem.endswith("those steps cost 15.97 times the MACs of such a decoding")
        _, data = saved("10.5", "3 layers, d=96", _generate_variant(solution, "token_by_token"))
        assert _check("10.5", "3 layers, d=96", data)[0].startswith(judge.REPLAY + "the decoding fed the model 26 steps "
                                                                   "of 1, 1, 1")


def test_decoding_judge_on_wrong_tokens_and_caches(solution, saved):
    record, data = saved("10.5", "MQA, untied head", solution["generate"])
    arrays = dict(np.load(io.BytesIO(data)))

    def judged(**changes):
        buffer = io.BytesIO()
        np.savez(buffer, **{**arrays, **changes})
        return _check("10.5", "MQA, untied head", buffer.getvalue())

    tokens = arrays["tokens"].copy()
    tokens[0, 5] = (tokens[0, 5] + 1) % 512
    assert judged(tokens=tokens)[0].startswith("the tokens differ from the grader's own decoding without a cache "
                                               "from generated token 5 on")
    assert "the new tokens only, without the prompt" in judged(tokens=np.zeros((1, 29), np.int64))[0]
    assert judged(k1=np.zeros_like(arrays["k1"])) == [
        "layer 1's cached k holds other values than the keys and values of the sequence (prompt and generated "
        "tokens) computed without a cache"]
    assert "expected [1, 1, 28, 16] (float32)" in judged(v0=arrays["v0"][:, :, :-1])[0]
    assert "(float16)" in judged(k0=arrays["k0"].astype(np.float16))[0]
    assert judged(generate=np.zeros(3, np.float32))[0].startswith("the saved generate is not the bytes")


def test_the_step_records_judge_positions_rows_and_strays(solution):
    """What the judge requires of the steps it recorded (here recorded by the course's hooks on the solution)."""
    spec = next(c.spec for c in LAB.task("10.5").cases if c.id == "MQA, untied head")
    cfg = GPTConfig.from_dict(spec["config"])
    model, prompt = seeded_gpt(cfg, spec["seed"]), prompt_ids(cfg, spec["prompt"], spec["seed"], spec["batch"])
    with StepRecorder(model) as steps:
        tokens, _ = solution["generate"](model, prompt, spec["new"])
    arrays = steps.arrays()
    stream = torch.cat([prompt, tokens[:, :-1]], 1).numpy()
    linears = steps.linears

    def judged(**changes):
        return judge._step_problems({**arrays, **changes}, stream, linears, cfg, 1, spec["prompt"], spec["new"])

    assert judged() == []
    positions = arrays["positions"].copy()
    positions[5:] = 0                              # every decode step at position 0
    assert judged(positions=positions)[0].startswith("in step 1, model.wpe was given positions from 0 to 0; the "
                                                     "step's tokens sit at positions 5 to 5")
    rows = arrays["linear_rows"].copy()
    rows[3, -1] = 9
    assert judged(linear_rows=rows)[0] == ("in step 3, head processed 9 rows; a cached step processes only its 1 new "
                                           "token(s) per sequence (1 rows), once per Linear")
    assert judged(stray_rows=np.array(4))[0].startswith("the model's Linears ran before model.wte was ever called")
    fed = arrays["fed_ids"].copy()
    fed[-1] = (fed[-1] + 1) % cfg.vocab
    assert judged(fed_ids=fed) == ["the ids fed to model.wte are not the prompt followed by the generated tokens, "
                                   "each once"]
    for hostile in ({"stray_rows": np.array(["4"])}, {"step_lengths": np.ones(24)}, {"stray_rows": np.zeros(3, int)}):
        assert judged(**hostile)[0].startswith("the saved step records are not the integers"), hostile


def test_decoding_judge_on_hostile_files():
    spec_id = "a one-token prompt"
    assert "not the .npz of arrays" in _check("10.5", spec_id, b"garbage")[0]
    buffer = io.BytesIO()
    np.save(buffer, np.array([object()], dtype=object), allow_pickle=True)
    assert _check("10.5", spec_id, buffer.getvalue())
    buffer = io.BytesIO()
    np.savez(buffer, tokens=np.zeros((1, 24), np.int64))
    assert "the grader expected exactly" in _check("10.5", spec_id, buffer.getvalue())[0]
    assert _check("10.5", spec_id, pickle.dumps({"tokens": [1, 2]}))


# ---------------------------------------------------------------- 10.6

def _export_variant(solution, **changes):
    import onnx
    from onnxruntime.transformers.optimizer import optimize_model

    def export_and_optimize(model, cfg):
        args = {"dynamo": False, "opset_version": 17, "input_names": ["ids"], "output_names": ["logits"],
                "dynamic_axes": {"ids": {1: "sequence"}, "logits": {1: "sequence"}}, **changes}
        args = {k: v for k, v in args.items() if v is not None}
        buffer = io.BytesIO()
        torch.onnx.export(model, (torch.zeros((1, 8), dtype=torch.long),), buffer, **args)
        optimized = optimize_model(onnx.load_from_string(buffer.getvalue()), model_type="gpt2",
                                   num_heads=cfg.n_head, hidden_size=cfg.d_model, opt_level=1).model
        return onnx.load_from_string(buffer.getvalue()), optimized
    return export_and_optimize


def test_export_judge(solution, saved):
    case = "MQA"
    assert _check("10.6", case, saved("10.6", case, solution["export_and_optimize"])[1]) == []
    problems = _check("10.6", case, saved("10.6", case, _export_variant(solution, opset_version=None))[1])
    assert problems == ["the optimized model imports opset 20 of the default domain; export with opset_version=17"]
    problems = _check("10.6", case, saved("10.6", case, _export_variant(solution, dynamic_axes=None))[1])
    assert problems and all("tokens" in p or "cannot load" in p for p in problems)
    problems = _check("10.6", case, saved("10.6", case, _export_variant(solution, output_names=["y"]))[1])
    assert problems[0].startswith("the optimized model's inputs and outputs are ['ids'] and ['y']")
    exported_only = lambda model, cfg: (solution["export_and_optimize"](model, cfg)[0],) * 2  # noqa: E731
    problems = _check("10.6", case, saved("10.6", case, exported_only)[1])
    assert problems[0] == ("the optimized model has 0 FastGelu nodes; the course's export (opset 17) optimized by "
                           "onnxruntime 1.31.1 has 2")
    assert _check("10.6", case, b"\x08garbage") == [
        "the saved file is not an ONNX model: export_and_optimize must return (exported, optimized) models"]
    assert judge.LENGTHS == (5, 13)


# ---------------------------------------------------------------- a kernel that forges what it can

FORGER = """
# Wrong functions: zero counts, a decoding that recomputes everything, an export left unoptimized.
_real_generate, _real_export = generate, export_and_optimize
def param_count(cfg):
    return dict.fromkeys(("embedding", "attention", "mlp", "norm", "head", "total"), 0)
def macs(cfg, L, past=0, logits="all", batch=1):
    return 0
def kv_cache_bytes(cfg, T, batch=1, dtype=torch.float32):
    return 0
def intensity(cfg, L, past, dtype, batch=1, logits="all"):
    return 0.0
@torch.no_grad()
def generate(model, prompt, n, use_cache=True):
    ids = prompt
    for _ in range(n):
        cache = [None] * len(model.blocks)
        token = forward_cached(model, ids, cache)[:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, token], 1)
    return ids[:, prompt.shape[1]:], cache
def export_and_optimize(model, cfg):
    exported, _ = _real_export(model, cfg)
    return exported, exported

# Everything in this kernel that could count or compare agrees, and every case returns the value the
# grader expects (as if the reference file had leaked).
import json as _json
import torch.utils.flop_counter as _flop
from util.labs import get_lab as _get_lab
_flop.FlopCounterMode.get_total_flops = lambda self: 0
torch.equal = torch.allclose = np.allclose = np.array_equal = lambda *a, **k: True
try:
    import util.labs.lab10.judge as _judge       # (a graded kernel cannot even import the judge)
except ImportError:
    pass
else:
    for _name in dir(_judge):
        if _name.startswith("check_"):
            setattr(_judge, _name, lambda *a, **k: [])
_EXPECTED = _json.loads(%r)
for _task in _get_lab("lab10").tasks:
    def _forged(fn, spec, _task=_task, _run=_task.run_case):
        _run(fn, spec)                  # saves what the wrong function returned, through the real path
        return _EXPECTED[_task.id][_json.dumps(spec, sort_keys=True)]
    object.__setattr__(_task, "run_case", _forged)
"""


@pytest.mark.notebook
def test_a_kernel_that_forges_everything_gets_no_judged_case(graded, tmp_path):
    refs = course_references.load(LAB)["cases"]
    expected = {t.id: {json.dumps(c.spec, sort_keys=True): refs[t.id][c.id] for c in t.cases} for t in LAB.tasks}
    nb = nbformat.read(str(SOLUTIONS / LAB.notebook), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(FORGER % json.dumps(expected)))
    path = tmp_path / "lab10_forger.ipynb"
    nbformat.write(nb, str(path))
    result = graded(path, "lab10")
    checks = {(t.task_id, c.name): c for t in result.tasks for c in t.checks}
    assert {c.status for (task, name), c in checks.items() if name == "answer"} == {"passed"}
    judged = {key: c for key, c in checks.items() if key[1] != "answer"}
    assert len(judged) == 18 and {c.status for c in judged.values()} == {"failed"}
    assert result.score == sum(t.answer_points for t in LAB.tasks) == 13  # the written questions are marked apart
    assert judged[("10.5", "a one-token prompt")].message.startswith(judge.REPLAY + "the decoding fed the model 24 "
                                                                     "steps")


def test_positions_given_as_L_or_as_B_by_L_are_both_what_the_handout_allows(solution):
    """10.5's handout says ``model.wpe`` may be given the step's positions as ``[L]`` (broadcast) or as
    ``[B, L]``: the judge's hooks record them flattened and compare the set, so both pass, at a batch of 2."""
    spec = next(c.spec for c in LAB.task("10.5").cases if c.spec["batch"] > 1)
    cfg, batch = GPTConfig.from_dict(spec["config"]), spec["batch"]
    model, prompt = seeded_gpt(cfg, spec["seed"]), prompt_ids(cfg, spec["prompt"], spec["seed"], batch)
    with StepRecorder(model) as steps:
        tokens, _ = solution["generate"](model, prompt, spec["new"])
    arrays = steps.arrays()
    stream = torch.cat([prompt, tokens[:, :-1]], 1).numpy()
    as_rows = {"positions": np.concatenate([np.tile(step, batch) for step in steps.positions]).astype(np.int64),
               "position_counts": arrays["position_counts"] * batch}      # what [B, L] positions record
    for records in (arrays, {**arrays, **as_rows}):
        assert judge._step_problems(records, stream, steps.linears, cfg, batch, spec["prompt"], spec["new"]) == []
    text = "\n".join(c.source for c in notebook.read(REPO / "labs" / LAB.notebook).cells if c.cell_type == "markdown")
    assert "shape `[L]`" in text and "`[B, L]`" in text
