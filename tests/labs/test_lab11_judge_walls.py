"""Lab 11's measured profiles against a notebook that reads recordings instead of measuring, beside a control.

A shipped recording of what is measured: the lab ships ResNet-18's ``torch.profiler`` trace, and
a hidden case hands the graded kernel MobileNetV2's, so a ``profile_layers`` that returns those recordings saved
exactly the numbers a measurement would have, for the two models the measured cases name. The judge now also runs
the saved ``profile_layers`` again in a student process, on a CNN it draws for the grading, and measures that CNN
itself. The attack returns the recording where it has one and a roofline prediction elsewhere; the control plays
the prediction straight everywhere (it must lose the case, so that what the recording gained is real); an honest
``profile_layers`` (the solution's) passes. Two more: the honest profile times 3 (which a total judged within
1/3x to 3x of the grader's let through), and the recording where there is one with a real measurement everywhere
else (which the drawn CNN let through): the grader now runs the function again on the case's own model at an input
side it draws, its own measurement interleaved with it, and judges the total within 0.67x to 1.5x; both fail there.
The same for ``achieved_gflops``: the control counts one sample's MACs.
Judged through the grader's own judge process, as whoever runs the tests (root in CI) and as an unprivileged grader.
"""
from __future__ import annotations

import re
from pathlib import Path

import cloudpickle
import numpy as np
import pytest
from judged_attacks import job, notebook_namespace, verdicts

from grader.execute import confinement
from util.labs import get_lab
from util.labs.lab11.traces import HIDDEN_FOLDER, HIDDEN_TRACES, load_trace

pytestmark = [pytest.mark.notebook,
              pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")]
LAB = get_lab("lab11")
CASES = {case.spec["model"] if case.spec["measure"] == "profile" else "achieved": case
         for task in LAB.tasks for case in task.cases if case.spec.get("measure") in ("profile", "achieved")}
NOTEBOOK = '''
import math, os, tempfile
import torch
from torch import nn
from util.labs.lab11.machine import GRADER_MACHINE
from util.labs.lab11.traces import LAYER_PREFIX, annotate_layers, layer_modules, read_json


def layer_times(trace):
    best = {}
    for event in trace["traceEvents"]:
        if event.get("cat") == "user_annotation" and event.get("name", "").startswith(LAYER_PREFIX):
            name = event["name"][len(LAYER_PREFIX):]
            best[name] = min(best.get(name, math.inf), event["dur"] / 1e6)
    return best


def profile_layers(model, x, runs=10):
    """The solution's: each layer's fastest call over runs profiled forward passes, after a warm-up."""
    from torch.profiler import ProfilerActivity, profile

    path = os.path.join(tempfile.mkdtemp(prefix="lab11-"), "trace.json")
    with torch.no_grad(), annotate_layers(model):
        model(x)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(runs):
                model(x)
    prof.export_chrome_trace(path)
    return layer_times(read_json(path))


def macs_and_bytes(model, x):
    rows = {}

    def record(module, inputs, output, name):
        if isinstance(module, nn.Conv2d):
            macs = output.numel() * (module.in_channels // module.groups) * math.prod(module.kernel_size)
        else:
            macs = output.numel() * module.in_features
        rows[name] = (macs, 4 * (inputs[0].numel() + sum(p.numel() for p in module.parameters()) + output.numel()))

    handles = [m.register_forward_hook(lambda m, i, o, n=n: record(m, i, o, n)) for n, m in layer_modules(model)]
    with torch.no_grad():
        model(x)
    for handle in handles:
        handle.remove()
    return rows


def predicted(model, x, runs=10):
    """The roofline's time of each layer under the grader's machine, scaled to a typical millisecond in all."""
    rows = macs_and_bytes(model, x)
    seconds = {name: max(2 * macs / 100e9, nbytes / 40e9) for name, (macs, nbytes) in rows.items()}
    return {name: t * 1e-3 * len(seconds) / 20 / sum(seconds.values()) for name, t in seconds.items()}


def recorded(model, x, runs=10):
    """The recording of this model, where the course handed one out; the roofline elsewhere."""
    names = [name for name, _ in layer_modules(model)]
    for times in RECORDINGS:
        if sorted(times) == sorted(names):
            return dict(times)
    return predicted(model, x, runs)


def times3(model, x, runs=10):
    """The solution's profile, three times over: the error the task exists to catch, within the old 1/3x-3x band."""
    return {name: 3 * t for name, t in profile_layers(model, x, runs).items()}


def recorded_else_measured(model, x, runs=10):
    """The recording of this model, where the course handed one out; measured elsewhere (so the drawn CNN passes)."""
    names = [name for name, _ in layer_modules(model)]
    for times in RECORDINGS:
        if sorted(times) == sorted(names):
            return dict(times)
    return profile_layers(model, x, runs)


def achieved_gflops(layer, sample_shape, batches=(1, 8, 32), runs=10, timer=None):
    """The solution's."""
    out = {}
    with torch.no_grad():
        for batch in batches:
            xb = torch.randn(batch, *sample_shape)
            output = layer(xb)
            macs = output.numel() * (layer.in_channels // layer.groups) * math.prod(layer.kernel_size)
            out[batch] = 2 * macs / timer(lambda: layer(xb), runs=runs) / 1e9
    return out


def one_sample(layer, sample_shape, batches=(1, 8, 32), runs=10, timer=None):
    """The MACs of one sample, whatever the batch."""
    return {batch: value / batch for batch, value in achieved_gflops(layer, sample_shape, batches, runs, timer).items()}
'''


def _recordings() -> dict[str, dict[str, float]]:
    """The per-layer times the course's recordings hold (the kernel reads MobileNetV2's from a hidden case's input)."""
    namespace = notebook_namespace(NOTEBOOK, "lab11_recordings", RECORDINGS=[])
    mobilenet = (HIDDEN_FOLDER / HIDDEN_TRACES["mobilenet_v2_torch"]).read_bytes()
    return {"resnet18_bnstats": namespace["layer_times"](load_trace("resnet18_torch")),
            "mobilenet_v2": namespace["layer_times"](load_trace(mobilenet))}


def _jobs(folder: Path) -> list[dict]:
    import torch

    from util.labs.lab11.machine import build, course_input, cpu_timer, layer_of

    recordings = _recordings()
    namespace = notebook_namespace(NOTEBOOK, "lab11_attacks", RECORDINGS=list(recordings.values()))
    torch.set_num_threads(1)
    jobs = []
    for model, case in CASES.items():
        if model == "achieved":
            spec = case.spec
            layer = layer_of(spec["model"], spec["layer"])
            for name, function in (("honest achieved", "achieved_gflops"), ("one sample (control)", "one_sample")):
                values = namespace[function](layer, tuple(spec["sample"]), tuple(spec["batches"]), spec["runs"],
                                             cpu_timer)
                jobs.append(job(folder, "lab11", "11.6", f"job{len(jobs)}", {
                    "batches": np.array(list(values), dtype=np.int64), "gflops": np.array(list(values.values())),
                    "function": np.frombuffer(cloudpickle.dumps(namespace[function]), dtype=np.uint8)}, spec))
                jobs[-1]["spec"]["attacker"] = name
            continue
        x = course_input(case.spec["shape"])
        for name, function in ((f"honest {model}", "profile_layers"), (f"prediction {model} (control)", "predicted"),
                               (f"recording {model}", "recorded"), (f"times 3 {model}", "times3"),
                               (f"recording, measured elsewhere {model}", "recorded_else_measured")):
            times = namespace[function](build(model), x, runs=case.spec["runs"])
            jobs.append(job(folder, "lab11", "11.5", f"job{len(jobs)}", {
                "names": np.array(list(times), dtype=str), "seconds": np.array(list(times.values())),
                "function": np.frombuffer(cloudpickle.dumps(namespace[function]), dtype=np.uint8)}, case.spec))
            jobs[-1]["spec"]["attacker"] = name
    return jobs


def _assert_verdicts(found: dict[str, list[str]]) -> None:
    drawn = "run again by the grader on a CNN it drew for this grading, "
    assert found["honest achieved"] == [], found["honest achieved"]
    control = found["one sample (control)"]
    # one sample's MACs at batch 8: 1/8 of the grader's GFLOP/s, times the noise of two measurements (0.08x seen),
    # under the band's 1/3
    ratios = [float(m.group(1)) for p in control
              if (m := re.match(r"achieved_gflops at batch 8 is ([\d.]+)x what the grader measured for layer4\.1\.conv1", p))]
    assert len(ratios) == 1 and ratios[0] < 1 / 3, control
    for model in ("resnet18_bnstats", "mobilenet_v2"):
        assert found[f"honest {model}"] == [], (model, found[f"honest {model}"])
        control, attack = found[f"prediction {model} (control)"], found[f"recording {model}"]
        assert any(not p.startswith("run again") and "do not predict it" in p for p in control), (model, control)
        assert any(p.startswith(drawn) and "do not predict it" in p for p in attack), (model, attack)
        own = f"run again by the grader on {model} at "
        tripled, replayed = found[f"times 3 {model}"], found[f"recording, measured elsewhere {model}"]
        assert any(p.startswith(own) and "add up to" in p and "(within 0.67x to 1.5x needed)" in p for p in tripled), \
            (model, tripled)
        assert any(p.startswith(drawn) and "add up to" in p for p in tripled), (model, tripled)
        assert replayed and all(p.startswith(own) for p in replayed), (model, replayed)


def test_a_recorded_profile_earns_what_a_prediction_does(tmp_path):
    _assert_verdicts(verdicts(_jobs(tmp_path), tmp_path, "lab11"))


@pytest.mark.slow  # as an unprivileged grader: the same judge; the sandbox's unprivileged path runs every time in tests/test_walls.py, tests/test_unprivileged.py and labs 7 and 13's attacks
def test_the_same_as_an_unprivileged_grader(tmp_path):
    _assert_verdicts(verdicts(_jobs(tmp_path), tmp_path, "lab11", as_user=True))
