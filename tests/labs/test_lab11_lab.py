"""Lab 11: the declaration, the exact parts' robustness, the recorded traces, the solution at 1 and 2
threads, and the live measurement path (plumbing only: no test here depends on how fast anything ran).

The notebooks themselves are graded in tests/test_labs.py (solution 100, lab 0, examples exact); the
margins of the measured cases under load are the benchmark's (benchmarks/bench_lab11_grading.py)."""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch

from grader.author.solution import solution_namespace
from grader.judge import artifacts, references
from grader.judge.compare import compare
from util.answers import OUTPUT_DIR_ENV, to_jsonable
from util.artifacts import case_file
from util.hidden import with_files
from util.labs import get_lab
from util.labs.lab11 import judge, judge_measure, machine, tasks
from util.labs.lab11.traces import load_trace, profiled_nodes

LAB = get_lab("lab11")
MEASURED = [(task, case) for task in LAB.tasks for case in task.cases if "measure" in case.spec]


@pytest.fixture(scope="module")
def solution():
    """The whole solution notebook run in this process (about 8 s of CPU: its measurements included)."""
    return solution_namespace("lab11", tuple(task.id for task in LAB.tasks))


def test_declaration_adds_up_and_keeps_measured_points_under_40():
    assert LAB.max_points == 100
    assert sum(case.points for _, case in MEASURED) == 24
    assert {case.spec["measure"] for _, case in MEASURED} == {"peak", "bandwidth", "profile", "achieved"}
    for task in LAB.tasks:
        if task.grader_check:  # every case of such a task saves a file the grader finds by its name
            assert callable(artifacts.check_function(task))
            names = [case_file(case.spec) for case in task.cases]
            assert len(names) == len(set(names))
    cases = references.load(LAB)["cases"]
    for task, case in MEASURED:  # a measured case's reference is its file's name, never a number
        assert set(cases[task.id][case.id]) <= {"saved", "layers"}


def test_the_design_figures_of_resnet18(solution):
    rows = solution["layers"]
    assert len(rows) == 21 and sum(r["bound"] == "memory" for r in rows) == 6
    assert min(r["intensity"] for r in rows) == pytest.approx(0.2265, abs=1e-4)
    assert max(r["intensity"] for r in rows) == pytest.approx(33.882, abs=1e-3)
    layer4 = next(r for r in rows if r["name"] == "layer4.1.conv1")
    assert (layer4["macs"], layer4["bytes"]) == (9_437_184, 9_453_568)
    assert sum(p["seconds"] for p in solution["predicted"]) == pytest.approx(3.1317e-3, rel=1e-4)
    assert solution["crossing"] == {"conv1": 1, "layer1.0.conv1": 1, "layer3.0.conv2": 1, "layer4.1.conv1": 2,
                                    "fc": 11}


@pytest.mark.parametrize("model", ["resnet18_bnstats", "mobilenet_v2"])
def test_the_layer_macs_are_what_flopcountermode_counts(solution, model):
    """Lab 1's convention (conv and linear matrix products, no bias) is FlopCounterMode's count halved."""
    from torch.utils.flop_counter import FlopCounterMode

    net, x = machine.build(model), machine.course_input((1, 3, 64, 64))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        net(x)
    assert sum(row["macs"] for row in solution["layer_table"](net, x, machine.GRADER_MACHINE)) * 2 == \
        counter.get_total_flops()


def test_no_graded_layer_sits_near_a_ridge(solution):
    """Bounds are graded exactly: a layer within rounding of the ridge would make them CPU-dependent. The
    FLOPs-as-MACs mistake moves the ridge to 2.5 MAC/B: no layer is near that one either, and the layers
    between the two are what the example submission fails on."""
    between = 0
    for case in LAB.task("11.2").cases:
        rows = solution["layer_table"](machine.build(case.spec["model"]), machine.course_input(case.spec["shape"]),
                                       machine.GRADER_MACHINE)
        for row in rows:
            for ridge in (1.25, 2.5):
                assert abs(row["intensity"] / ridge - 1) > 1e-3, (case.id, row)
        between += sum(1.25 <= r["intensity"] < 2.5 for r in rows)
    assert between == 6  # five in ResNet-18 at batch 2, one in the MLP at batch 16


def test_ridge_batch_agrees_with_a_search_in_exact_arithmetic(solution):
    from fractions import Fraction

    def searched(layer, sample, ridge):
        x1 = torch.zeros(1, *sample)
        with torch.no_grad():
            out = layer(x1)
        macs = solution["layer_macs"](layer, out)
        params, act = sum(p.numel() for p in layer.parameters()), x1.numel() + out.numel()
        for batch in range(1, 10_000):
            if Fraction(batch * macs, 4 * (batch * act + params)) >= ridge:
                return batch
        return None

    resnet = machine.build("resnet18_bnstats")
    for name, sample in {"conv1": (3, 64, 64), "layer4.1.conv1": (512, 2, 2), "fc": (512,),
                         "layer4.0.downsample.0": (256, 4, 4)}.items():
        assert solution["ridge_batch"](resnet.get_submodule(name), sample, machine.GRADER_MACHINE) == \
            searched(resnet.get_submodule(name), sample, Fraction(5, 4))
    for case in LAB.task("11.6").cases[:2]:
        layer = machine.layer_of(case.spec["model"], case.spec["layer"])
        assert solution["ridge_batch"](layer, tuple(case.spec["sample"]), machine.GRADER_MACHINE) == \
            searched(layer, case.spec["sample"], Fraction(5, 4))


def test_the_recorded_traces_are_what_the_lab_says():
    trace = load_trace("resnet18_torch")["traceEvents"]
    layers = [e["name"] for e in trace if e.get("cat") == "user_annotation"]
    assert len(layers) == 21 * 5 and len(set(layers)) == 21
    assert sum(e.get("name") == "aten::conv2d" for e in trace) == 100
    profile = load_trace("resnet18_ort")
    assert sum(e.get("name") == "model_run" for e in profile) == 6
    from util.onnx_models import export_torchvision

    model = export_torchvision("resnet18_bnstats", input_shape=(1, 3, 64, 64), fold_batchnorm=True)
    nodes = profiled_nodes(profile)
    assert set(nodes) <= {node.name for node in model.graph.node}  # EXTENDED keeps the model's names
    assert sorted(set(nodes.values())) == ["Add", "Conv", "Flatten", "FusedConv", "Gemm", "GlobalAveragePool",
                                           "MaxPool", "Relu"]
    from util.labs.lab11.traces import HIDDEN_FOLDER, HIDDEN_TRACES

    mobilenet = load_trace((HIDDEN_FOLDER / HIDDEN_TRACES["mobilenet_v2_torch"]).read_bytes())["traceEvents"]
    assert len({e["name"] for e in mobilenet if e.get("cat") == "user_annotation"}) == 53


def test_exact_cases_give_the_references_at_two_threads_too(solution, tmp_path, monkeypatch):
    """Everything graded exactly is a count or arithmetic on counts and recorded files: the same with two
    torch threads as with one."""
    monkeypatch.setenv(OUTPUT_DIR_ENV, str(tmp_path))
    expected = references.load(LAB)["cases"]
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for task in LAB.tasks:
            for case in task.cases:
                if "measure" in case.spec:
                    continue
                found = to_jsonable(task.run_case(solution[task.function], with_files(LAB, case.spec)))
                assert not compare(expected[task.id][case.id], found, task.tolerance), (task.id, case.id)
    finally:
        torch.set_num_threads(previous)


def test_the_live_measurement_path_runs_end_to_end(solution, tmp_path, monkeypatch):
    """The solution's measured cases save what the judge reads (the profile and the achieved GFLOP/s with the
    function itself), the judge runs those functions again in a student process on a model it draws, and its own
    measurements come back as positive numbers for the same layers; whether they agree is the benchmark's business."""
    from grader.judge.isolated import serving

    monkeypatch.setenv(OUTPUT_DIR_ENV, str(tmp_path))
    cpu = os.sched_getaffinity(0)
    try:
        with serving():
            for task, case in MEASURED:
                record = task.run_case(solution[task.function], case.spec)
                data = (tmp_path / "files" / record["saved"]).read_bytes()
                problems, figures = judge.assess(case.spec, data, seed=5)
                assert figures and all(math.isfinite(v) and v > 0 for v in figures.values()), (case.id, problems,
                                                                                              figures)
                assert all(isinstance(p, str) for p in problems)
                if case.spec["measure"] in ("profile", "achieved"):
                    assert {"drawn_spearman", "drawn_ratio@1"} & set(figures), figures
    finally:
        os.sched_setaffinity(0, cpu)  # the judge pins the process it measures in
        torch.set_num_threads(1)
    assert judge_measure.peak(64, 2, fresh=True) > 0
    profile = judge_measure.profile("mlp", [1, 784], 2)
    assert list(profile) == ["0", "2", "4"] and all(t > 0 for t in profile.values())


def test_the_graders_timers_time_only_what_they_are_given():
    work = machine.ScriptedWork([3, 1, 2])
    assert machine.fixed_timer(0.5)(work, runs=10) == 0.5 and work.calls == 1
    assert machine.cpu_timer(lambda: sum(range(1000)), runs=3, warmup=2, clock=None) > 0
    assert tasks._number(np.float32(2.5), "f") == 2.5
    for wrong in (True, [1.0], "1", None):
        with pytest.raises(TypeError, match="must return a number"):
            tasks._number(wrong, "measure_peak")


def test_the_course_profiling_helper_raises_no_warning_and_the_handout_says_what_the_messages_are():
    """Issue 37: profiling with the course's helper (``annotate_layers`` around ``torch.profiler.profile``, what
    ``profile_layers`` does, and the export) raises no Python warning, every warning recorded; the ERROR/USDT
    lines students see are Kineto's C++ output, which the handout says a warnings filter cannot hide. 11.6 says
    the batch-32 gain depends on the machine."""
    import tempfile
    import warnings

    from torch import nn
    from torch.profiler import ProfilerActivity, profile

    from grader import REPO
    from grader.core import notebook
    from util.labs.lab11.traces import annotate_layers

    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 2))
    x = torch.randn(1, 3, 8, 8)
    with warnings.catch_warnings(record=True) as caught, tempfile.TemporaryDirectory() as folder:
        warnings.simplefilter("always")
        with torch.no_grad(), annotate_layers(model):
            model(x)
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(2):
                    model(x)
        prof.export_chrome_trace(os.path.join(folder, "trace.json"))
    assert [f"{w.category.__name__}: {w.message}" for w in caught] == []
    text = " ".join(c.source for c in notebook.read(REPO / "labs" / LAB.notebook).cells if c.cell_type == "markdown")
    text = " ".join(text.split())
    assert "`warnings.filterwarnings` cannot hide them" in text
    assert "**The ratios depend on the machine**" in text
