"""Lab 12's declaration, graphs, executor and grader-side checks, against the solution and against
deliberately wrong and hostile inputs (no notebook is run here; test_labs.py grades the notebooks, the
training judge has its own file, test_lab12_training.py)."""
from __future__ import annotations

import io
import itertools
import json
import random

import numpy as np
import pytest
import torch

from grader.author.solution import solution_namespace
from grader.judge import artifacts
from util.artifacts import READ_FAILED, case_file
from util.contract import Tolerance
from util.labs import get_lab
from util.labs.lab12 import judge, tasks
from util.labs.lab12.executor import Chain, plan_problems, run_plan, schedule, uniform_chain
from util.labs.lab12.graphs import GRAPHS, build_graph, feeds, forward_values, parameter_names
from util.labs.lab12.nets import NETS, build_net
from util.labs.lab12.schedule import training_graph

LAB = get_lab("lab12")
A = 4 * 128 * 256


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab12", ("12.1", "12.2", "12.3", "12.4"))


def npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def test_declaration_adds_up_and_names_real_checks():
    assert LAB.max_points == 100
    assert [t.max_points for t in LAB.tasks] == [25, 20, 15, 20, 20]
    files = [case_file(c.spec) for t in LAB.tasks if t.grader_check for c in t.cases]
    assert len(files) == len(set(files)) == 13
    for task in LAB.tasks:
        if task.grader_check:
            assert callable(artifacts.check_function(task))


def test_graphs_and_nets_are_reproducible():
    for name in GRAPHS:
        first, second = build_graph(name), build_graph(name)
        assert str(first.graph) == str(second.graph)
        for param in parameter_names(first):
            assert torch.equal(getattr(first, param), getattr(second, param)), (name, param)
    for name in NETS:
        first, second = build_net(name).state_dict(), build_net(name).state_dict()
        assert all(torch.equal(first[k], second[k]) for k in first), name
    tied = build_net("tied_mlp")
    assert tied.first.weight is tied.second.weight and len(list(tied.parameters())) == 5


def _saved_storage_sizes(gm, inputs) -> list[int]:
    """The sizes of the storages autograd saves on a forward pass of ``gm``, its parameters left out."""
    gm = build_graph(gm)
    own = {p.untyped_storage().data_ptr() for p in gm.parameters()}
    found: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in own:
            found[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        gm(*inputs.values())
    return sorted(found.values())


@pytest.mark.parametrize("name", GRAPHS)
def test_training_graph_saves_what_autograd_saves(name):
    """12.3's table of saved tensors against autograd's own saved-tensor hooks (by storage): the same
    storages, but for the 4-byte total weight ``nll_loss`` also saves."""
    inputs = feeds(name, 8, 3) if name != "tiny" else {"x": torch.rand(3, 2), "y": torch.tensor([0, 1, 1])}
    nodes, nbytes = training_graph(build_graph(name), inputs)
    listed = sorted(nbytes[t] for t in dict.fromkeys(t for node in nodes for t in node["saves"]))
    loss = any(node["op"] == "nll_loss" for node in nodes)
    assert sorted(listed + [4] * loss) == _saved_storage_sizes(name, inputs)
    assert all(node["op"] != "flatten" for node in nodes)


def _peak_by_events(nodes, nbytes) -> tuple[int, str]:
    """12.3's peak computed another way: allocation and free events (the solution walks lifetimes)."""
    results = {node["outputs"][0] for node in nodes}
    steps = [(node["name"], node["inputs"], node["outputs"]) for node in nodes]
    grads_done = set()
    for node in reversed(nodes):
        reads = list(node["saves"]) + ([("g", node["outputs"][0])] if node is not nodes[-1] else [])
        writes = []
        for tensor in node["inputs"]:
            if tensor in results:
                (reads if ("g", tensor) in grads_done else writes).append(("g", tensor))
                grads_done.add(("g", tensor))
        steps.append((node["name"] + ".backward", reads, writes))
    last = {}
    for index, (_, reads, writes) in enumerate(steps):
        for tensor in [*reads, *writes]:
            last[tensor] = index
    size = {**nbytes, **{("g", t): nbytes[t] for t in results}}
    held = {t for t in nbytes if t not in results and not any(t in node["outputs"] for node in nodes)}
    best = (-1, "")
    for index, (name, _, writes) in enumerate(steps):
        held |= set(writes)
        memory = sum(size[t] for t in held)
        if memory > best[0]:
            best = (memory, name)
        held = {t for t in held if last.get(t, index) > index}
    return best


@pytest.mark.parametrize("name, batch", [(n, b) for n in GRAPHS if n != "sum_mul" for b in (1, 16)] + [("chain", 128)])
def test_the_solution_peak_agrees_with_an_independent_walk(solution, name, batch):
    nodes, nbytes = training_graph(build_graph(name), feeds(name, batch, 0))
    found = solution["training_peak"](nodes, nbytes)
    assert (found["peak_bytes"], found["peak_at"]) == _peak_by_events(nodes, nbytes)


def test_the_chains_peak_and_the_hand_table(solution):
    nodes, nbytes = training_graph(build_graph("chain"), feeds("chain", 128))
    assert solution["training_peak"](nodes, nbytes) == {"peak_bytes": 12 * A, "peak_at": "log_softmax.backward"}
    tiny, tiny_bytes = training_graph(build_graph("tiny"), {"x": torch.tensor([[1.0, 2.0]]), "y": torch.tensor([1])})
    assert solution["training_peak"](tiny, tiny_bytes) == {"peak_bytes": 32, "peak_at": "log_softmax"}


def _closed_form(chain: Chain, plan: list[int]) -> int:
    """The peak of a plan by the formula the notebook states (kept starts + the segment's own need)."""
    sizes, best, kept = chain.bytes, 0, 0
    for s, e in zip(plan, [*plan[1:], chain.n]):
        kept += sizes[s]
        held = 0
        for i in range(s, e):
            held += sizes[i + 1]
            best = max(best, kept + held + sizes[i + 1] + (sizes[i] if i else 0))
    return best


def _plans(n: int):
    for mask in range(1 << (n - 1)):
        yield [0] + [k for k in range(1, n) if mask >> (k - 1) & 1]


def test_the_executor_measures_what_the_notebook_states():
    chain = uniform_chain(8)
    sqrt_rule, none = run_plan(chain, [0, 3, 6]), run_plan(chain, list(range(8)))
    assert (sqrt_rule.peak_bytes, sqrt_rule.peak_at, sqrt_rule.recompute_macs) == (7 * A, "backward 7", 5 * chain.macs[0])
    assert (none.peak_bytes, none.recompute_macs) == (11 * A, 0)
    assert [s for s, _, _ in schedule(chain, [0, 3, 6])][8:12] == ["loss", "recompute 6", "backward 7", "backward 6"]
    generator = random.Random(12)
    for _ in range(60):
        n = generator.randint(1, 7)
        small = Chain(generator.choice([1, 3]), tuple(generator.choice([2, 4, 8, 24]) for _ in range(n + 1)))
        plan = next(itertools.islice(_plans(n), generator.randrange(1 << (n - 1)), None))
        run = run_plan(small, plan)
        assert run.peak_bytes == _closed_form(small, plan), (small, plan)
        dropped = set(range(1, n)) - set(plan)
        assert run.recompute_macs == sum(small.macs[j - 1] for j in dropped)


def test_every_plan_gives_autograds_gradients():
    chain = Chain(16, (32, 64, 16, 48, 32, 8))
    generator = torch.Generator().manual_seed(0)
    weights = [(torch.randn(b, a, generator=generator) / a ** 0.5, torch.randn(b, generator=generator) * 0.1)
               for a, b in zip(chain.widths, chain.widths[1:])]
    labels = torch.randint(0, chain.widths[-1], (chain.batch,), generator=generator)
    h = torch.rand(chain.batch, chain.widths[0], generator=generator)
    for w, b in weights:
        w.requires_grad_()
        b.requires_grad_()
        h = torch.relu(h @ w.T + b)
    torch.nn.functional.cross_entropy(h, labels).backward()
    for plan in _plans(chain.n):
        grads = run_plan(chain, plan).grads
        for i, (w, b) in enumerate(weights):
            assert torch.allclose(grads[f"W{i}"], w.grad, atol=1e-6) and torch.allclose(grads[f"b{i}"], b.grad, atol=1e-6)


def test_least_recompute_is_exact_against_trying_every_plan():
    generator = random.Random(3)
    for _ in range(150):
        n = generator.randint(1, 9)
        chain = Chain(2, tuple(generator.choice([4, 8, 16, 32]) for _ in range(n + 1)))
        peaks = {tuple(plan): _closed_form(chain, plan) for plan in _plans(n)}
        low, high = min(peaks.values()), max(peaks.values())
        for budget in (low - 1, low, (low + high) // 2, high, generator.randint(low, high)):
            fitting = [sum(chain.macs[j - 1] for j in set(range(1, n)) - set(p)) for p, peak in peaks.items()
                       if peak <= budget]
            assert judge.least_recompute(chain, budget) == (min(fitting) if fitting else None)


def test_the_solution_plans_are_optimal_and_the_sqrt_rule_is_not(solution):
    plan = solution["checkpoint_plan"]
    for case in LAB.task("12.4").cases:
        spec = case.spec
        chain = Chain(spec["batch"], tuple(spec["widths"]))
        least = judge.least_recompute(chain, spec["budget"])
        if least is None:
            with pytest.raises(ValueError):
                plan(chain, spec["budget"])
            continue
        found = run_plan(chain, plan(chain, spec["budget"]))
        assert found.peak_bytes <= spec["budget"] and found.recompute_macs == least, case.id
    mixed = next(c.spec for c in LAB.task("12.4").cases if len(c.spec["widths"]) > 20)
    chain = Chain(mixed["batch"], tuple(mixed["widths"]))
    sqrt_rule = run_plan(chain, list(range(0, chain.n, 5)))
    assert sqrt_rule.peak_bytes <= mixed["budget"] and sqrt_rule.recompute_macs > 10 * judge.least_recompute(
        chain, mixed["budget"])


def test_plan_problems():
    chain = uniform_chain(4)
    assert plan_problems(chain, [0, 2]) == []
    assert plan_problems(chain, [1, 2]) == ["a plan's first segment starts at block 0; found [1, 2]"]
    assert plan_problems(chain, [0, 2, 2])[0].startswith("segment starts must increase and stay below 4")
    assert plan_problems(chain, [0, 4])[0].startswith("segment starts must increase")
    assert plan_problems(chain, "0, 2")[0].startswith("a plan is a list of ints")
    assert plan_problems(chain, [0, True])[0].startswith("a plan is a list of ints")


def _plan_file(**saved) -> bytes:
    return json.dumps(saved).encode()


def test_the_plan_judge_on_good_wrong_and_hostile_files():
    cases = {c.id: c.spec for c in LAB.task("12.4").cases}
    fits, too_small = cases["a budget every plan fits: no checkpointing"], cases["a budget below every plan's peak: ValueError"]
    wide = cases["wide and narrow blocks in turn"]
    exact = Tolerance()
    assert judge.check_plan(fits, _plan_file(plan=list(range(6))), exact) == []
    assert judge.check_plan(fits, _plan_file(plan=[0, 3]), exact) == [
        f"the plan recomputes {4 * 128 * 256 * 256:,} multiply-adds; another plan within the budget recomputes fewer"]
    assert judge.check_plan(fits, _plan_file(raised="ValueError"), exact) == [
        "checkpoint_plan raised ValueError, but a plan fits this budget of 2,097,152 bytes"]
    assert judge.check_plan(too_small, _plan_file(raised="ValueError"), exact) == []
    assert judge.check_plan(too_small, _plan_file(plan=[0, 3, 6]), exact) == [
        "run by the grader's executor, the plan's peak is 917,504 bytes (at backward 7), over the budget of 917,503; "
        "no plan fits this budget: checkpoint_plan must raise ValueError"]
    assert judge.check_plan(wide, _plan_file(plan=list(range(12))), exact)[0].startswith(
        "run by the grader's executor, the plan's peak is 2,097,152 bytes")
    assert judge.check_plan(wide, _plan_file(plan=[0, 13]), exact)[0].startswith("segment starts must increase")
    unreadable = "the file saved for this case is not the plan the course saves; run the notebook again from the top"
    for data in (b"\xff\xfe", b"[0, 1]", _plan_file(plan=[0], extra=1), b"{" * 100_000, b" " * (2 << 20)):
        assert judge.check_plan(fits, data, exact) == [unreadable]


def test_the_gradient_judge(solution):
    """12.1's judge runs the saved ``grad`` again in a student process and grades those gradients: the
    solution's pass, one off by 1e-4 on ``w1`` fails with its measure, and the gradients the kernel saved count
    for nothing (wrong ones beside the solution's function still pass)."""
    import cloudpickle

    from grader.judge.isolated import serving

    spec = LAB.task("12.1").cases[0].spec
    gm = build_graph(spec["graph"])
    gm.requires_grad_(False)
    honest = solution["grad"]
    found = honest(gm, feeds(spec["graph"], spec["batch"], spec["start"]), parameter_names(gm))
    good = {f"grad/{k}": v.double().numpy() for k, v in found.items()}

    def off(gm, inputs, wrt):
        grads = honest(gm, inputs, wrt)
        grads["w1"] = grads["w1"] * (1 + 1e-4)
        return grads

    def saved(function, arrays) -> bytes:
        return npz(**arrays, grad_fn=np.frombuffer(cloudpickle.dumps(function), dtype=np.uint8))

    with serving():
        assert judge.check_grads(spec, saved(honest, good), tasks.GRADIENTS) == []
        zeros = {name: np.zeros_like(value) for name, value in good.items()}
        assert judge.check_grads(spec, saved(honest, zeros), tasks.GRADIENTS) == []
        [problem] = judge.check_grads(spec, saved(off, good), tasks.GRADIENTS)

        def nan(gm, inputs, wrt):
            return {**honest(gm, inputs, wrt), "b0": torch.full_like(gm.b0, float("nan"))}

        def transposed(gm, inputs, wrt):
            grads = honest(gm, inputs, wrt)
            return {**grads, "w3": grads["w3"].T.contiguous()}

        assert judge.check_grads(spec, saved(nan, good), tasks.GRADIENTS) == [
            "the gradient of 'b0' holds NaN or infinity"]
        [shape] = judge.check_grads(spec, saved(transposed, good), tasks.GRADIENTS)
    assert problem.startswith("the gradient of 'w1' differs from float64 autograd by 0.0001 of its largest element")
    assert shape.startswith("the gradient of 'w3' has shape [64, 10]") and shape.endswith("has shape [10, 64]"), shape
    missing = {k: v for k, v in good.items() if k != "grad/b3"}
    assert "the grader expected exactly" in judge.check_grads(spec, saved(honest, missing), tasks.GRADIENTS)[0]
    assert judge.check_grads(spec, b"not an npz", tasks.GRADIENTS) == [READ_FAILED.format(why="it is not an .npz (zip) archive")]
    pickled = io.BytesIO()
    np.savez(pickled, **{k: np.array([object()], dtype=object) for k in [*good, "grad_fn"]})
    assert "holds Python objects" in judge.check_grads(spec, pickled.getvalue(), tasks.GRADIENTS)[0]


def test_grad_may_not_ask_autograd():
    spec = LAB.task("12.1").cases[0].spec

    def lazy(gm, inputs, wrt):
        gm.requires_grad_(True)
        gm(*inputs.values()).backward()
        return {name: getattr(gm, name).grad for name in wrt}

    def functional(gm, inputs, wrt):
        params = {name: getattr(gm, name) for name in wrt}
        return torch.func.grad(lambda p: torch.func.functional_call(gm, p, tuple(inputs.values())))(params)

    for cheat in (lazy, functional):
        with pytest.raises(RuntimeError, match="grad must work the gradients out itself|don't yet support saved tensor"):
            tasks._grad(cheat, spec)


def test_the_memory_judge(solution):
    exact = Tolerance()
    for case in LAB.task("12.2").cases:
        spec = case.spec
        found = solution["training_memory"](build_net(spec["model"]), tuple(spec["batch"]), spec["optimizer"])
        good = {k: np.array(found[k], dtype=np.int64) for k in ("saved_activations", "total")}
        assert judge.check_memory(spec, npz(**good), exact) == [], case.id
    spec = LAB.task("12.2").cases[0].spec
    assert judge.measured_saved_bytes(build_net("chain8"), [128, 256]) == 9 * A + A + 128 * 8 + 4
    low = {"saved_activations": np.array(9 * A, dtype=np.int64), "total": np.array(1, dtype=np.int64)}
    assert judge.check_memory(spec, npz(**low), exact) == [
        "saved_activations is 1,179,648 bytes, less than the grader measured on a real training step (the unique "
        "storages autograd saves, the model's parameters and buffers left out, the loss's tensors included)",
        "total is 1 bytes, less than weights + grads + optimizer_state + the saved activations the grader measured"]
    floats = {"saved_activations": np.array(1.5), "total": np.array(2, dtype=np.int64)}
    assert judge.check_memory(spec, npz(**floats), exact)[0].startswith("saved_activations was saved as float64")


def test_forward_values_and_the_given_backward_helpers():
    from util.labs.lab12.graphs import conv2d_vjp, max_pool2d_vjp

    gm = build_graph("digits_cnn")
    values = forward_values(gm, feeds("digits_cnn", 4))
    assert values["nll_loss"].shape == () and values["max_pool2d"].shape == (4, 32, 4, 4)
    x = torch.rand(2, 3, 6, 6, requires_grad=True)
    w = torch.rand(4, 3, 3, 3, requires_grad=True)
    out = torch.nn.functional.conv2d(x, w, None, 2, 1)
    g = torch.rand_like(out)
    out.backward(g)
    gx, gw = conv2d_vjp(x.detach(), w.detach(), g, 2, 1)
    assert torch.allclose(gx, x.grad, atol=1e-5) and torch.allclose(gw, w.grad, atol=1e-5)
    x.grad = None
    pooled = torch.nn.functional.max_pool2d(x, 2)
    g = torch.rand_like(pooled)
    pooled.backward(g)
    assert torch.equal(max_pool2d_vjp(x.detach(), g, 2), x.grad)


def _stated_need(sizes: list[int], s: int, e: int) -> int:
    """12.4's handout and ``help(run_plan)``: the memory a segment [s, e) needs at its largest backward step."""
    return max(sum(sizes[s + 1:i + 2]) + sizes[i + 1] + (sizes[i] if i else 0) for i in range(s, e))


def test_the_stated_segment_need_gives_run_plans_peak_for_unequal_widths():
    """Issue 37: 12.4 states a segment's need for blocks of different widths; the peak it gives (kept starts so far
    plus the need, the largest over the segments) is what run_plan measures, on every plan of random chains."""
    rng = random.Random(37)
    for _ in range(12):
        n = rng.randint(1, 6)
        chain = Chain(2, tuple(rng.choice([4, 16, 64, 256]) for _ in range(n + 1)))
        for r in range(n):
            for rest in itertools.combinations(range(1, n), r):
                plan = [0, *rest]
                bounds = [*plan, n]
                stated = max(sum(chain.bytes[k] for k in plan[:j + 1]) + _stated_need(chain.bytes, s, e)
                             for j, (s, e) in enumerate(zip(bounds, bounds[1:])))
                assert stated == run_plan(chain, plan).peak_bytes, (chain.widths, plan)
    assert "need(s, e) = max over i = s .. e-1" in run_plan.__doc__


def test_measuring_memory_may_leave_batchnorm_and_train_mode_changed_as_the_handout_says(solution):
    """Issue 37: 12.2 says measuring may leave BatchNorm's statistics updated and the model in train mode, because
    the grader calls the function on a fresh model per case and measures on its own: that measurement does not
    depend on what an earlier call left in a model."""
    from grader import REPO
    from grader.core import notebook
    from util.labs.lab12.judge import measured_saved_bytes
    from util.labs.lab12.nets import build_net

    used = build_net("digits_cnn")
    before = {k: v.clone() for k, v in used.state_dict().items()}
    solution["training_memory"](used, (16, 1, 8, 8), "adam")
    changed = [k for k, v in used.state_dict().items() if not torch.equal(v, before[k])]
    assert used.training and changed and all("running" in k or "num_batches" in k for k in changed)
    assert measured_saved_bytes(used, (16, 1, 8, 8)) == measured_saved_bytes(build_net("digits_cnn"), (16, 1, 8, 8))
    text = " ".join(" ".join(c.source for c in notebook.read(REPO / "labs" / LAB.notebook).cells
                             if c.cell_type == "markdown").split())
    assert "**What measuring may change in the model.**" in text and "on a freshly built model for each case" in text
