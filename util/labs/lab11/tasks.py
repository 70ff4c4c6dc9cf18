"""Lab 11, from counts to time (the roofline, profilers, and what a measurement can be trusted to say): the
one declaration of its tasks.

Students build a machine model from a best-of-runs timer (11.1), place every layer of ResNet-18 on the
roofline with lab 1's MACs over lab 2's bytes (11.2), read the profiles of ``torch.profiler`` and onnxruntime
(11.3), predict each layer's time (11.4), set the predictions against per-layer measurements (11.5), and see
batch size move layers across the ridge (11.6).

Exact where it can be: intensities, bounds, predictions, trace tables and rank correlations are graded
exactly under the grader-supplied machine model (``machine.GRADER_MACHINE``: 100 GFLOP/s, 40 GB/s) and on
the recorded traces the lab ships (``traces/``); the timing discipline is graded exactly on scripted
workloads that run on a clock of their own (``machine.ScriptedWork``), and the arithmetic of a measurement
with a timer whose answer is known (``machine.fixed_timer``).

Measured where it must be (24 of the 100 points): the machine model, the per-layer profiles and the achieved
GFLOP/s. Their cases save what the student's function measured in the graded kernel; the grader's judge
(``judge.py``) measures the same thing itself, in its own process pinned to one CPU with one thread
(``judge_measure.py``), and grades a ratio within a band or a rank correlation between the two, with bands
from the noise study in the lab's benchmark (``benchmarks/bench_lab11_grading.py``). No measured number is
ever compared with the reference file: the reference of a measured case is only the name of its saved file.
Since a profile or a GFLOP/s figure can be read from a recording instead of measured, those cases also save the
student's function, and the judge runs it again in a student process on a CNN or a convolution it draws for
each grading (``machine.drawn_cnn``, ``machine.drawn_conv``; ``measure_harness.py``) and measures the same itself.

Some cases call a second function of the notebook besides the task's own (``measure_peak`` in task 11.1,
``ort_profile`` in 11.3, ...): they find it where the task's function was defined, in the notebook's
namespace (:func:`_notebook_function`).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from util.contract import Lab, Release, Task, Tolerance, Written
from util.labs.lab11.public_checks import CHECKS

LAB_NAME = "lab11"
JUDGE = "util.labs.lab11.judge"
FLOATS = Tolerance(rtol=1e-9)
"""Every float here is arithmetic on exact inputs (counts, recorded durations, scripted clocks): only the
last bits of a float sum may differ."""

def _notebook_function(fn: Callable, name: str) -> Callable:
    """The notebook's function ``name``, found in the namespace where the task's function ``fn`` was defined."""
    found = getattr(fn, "__globals__", {}).get(name)
    if not callable(found):
        raise NameError(f"the grader calls {name}() in this case, and the notebook defines no function of that name "
                        f"next to {getattr(fn, '__name__', 'the task function')}(); keep the names the notebook gives")
    return found


def _number(value: Any, what: str) -> float:
    """``value`` (a Python, numpy or 0-d torch number; not a bool) as a float, or a ``TypeError`` saying what it was."""
    import numbers

    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # a 0-d array or tensor
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must return a number, not {type(value).__name__} ({str(value)[:60]})")
    return float(value)


def _model_and_input(spec: Mapping[str, Any]):
    from util.labs.lab11.machine import build, course_input

    return build(spec["model"]), course_input(spec["shape"])


def _onnx(spec: Mapping[str, Any]):
    from util.onnx_models import export_torchvision

    return export_torchvision(spec["model"], input_shape=tuple(spec["shape"]), fold_batchnorm=True)


# ---------------------------------------------------------------- 11.1 machine model

def _scripted(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """``best_time`` on a scripted workload and its clock: the best time and how many calls it made."""
    from util.labs.lab11.machine import ScriptedWork

    work = ScriptedWork(spec["script_ns"])
    best = fn(work, runs=spec["runs"], warmup=spec["warmup"], clock=work.clock)
    return {"best_s": _number(best, "best_time"), "calls": work.calls}


def _fixed_machine(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """``measure_peak`` and ``measure_bandwidth`` timed by a timer whose answer is known."""
    from util.labs.lab11.machine import fixed_timer

    timer = fixed_timer(spec["seconds"])
    peak = _notebook_function(fn, "measure_peak")(n=spec["n"], runs=spec["runs"], timer=timer)
    bandwidth = _notebook_function(fn, "measure_bandwidth")(mib=spec["mib"], runs=spec["runs"], timer=timer)
    return {"peak_gflops": _number(peak, "measure_peak"), "bandwidth_gbs": _number(bandwidth, "measure_bandwidth")}


def _measured_machine(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """``measure_peak`` or ``measure_bandwidth`` timed by the course's CPU-clock timer; saved for the judge."""
    import numpy as np

    from util.artifacts import save_arrays
    from util.labs.lab11.machine import cpu_timer

    if spec["measure"] == "peak":
        value = _number(_notebook_function(fn, "measure_peak")(n=spec["n"], runs=spec["runs"], timer=cpu_timer),
                        "measure_peak")
    else:
        value = _number(_notebook_function(fn, "measure_bandwidth")(mib=spec["mib"], runs=spec["runs"],
                                                                     timer=cpu_timer), "measure_bandwidth")
    return save_arrays({"value": np.float64(value)}, spec, LAB_NAME)


# ---------------------------------------------------------------- 11.2 intensity and bound

def _layer_table(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab11.machine import GRADER_MACHINE

    model, x = _model_and_input(spec)
    return fn(model, x, dict(GRADER_MACHINE))


# ---------------------------------------------------------------- 11.3 traces

def _torch_table(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab11.traces import load_trace

    return fn(load_trace(spec["trace"]))


def _ort_table(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab11.traces import load_trace

    return _notebook_function(fn, "ort_op_table")(load_trace(spec["trace"]))


def _ort_nodes(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The nodes the student's ``ort_profile`` timed, as the course reads its profile file."""
    from pathlib import Path

    from util.labs.lab11.machine import course_input
    from util.labs.lab11.traces import profiled_nodes, read_json

    feeds = {"input": course_input(spec["shape"]).numpy()}
    path = _notebook_function(fn, "ort_profile")(_onnx(spec), feeds, runs=spec["runs"])
    if not isinstance(path, (str, Path)) or not Path(path).is_file():
        raise TypeError(f"ort_profile must return the path of the profile onnxruntime wrote, not {str(path)[:80]!r}")
    return {"nodes": profiled_nodes(read_json(path))}


# ---------------------------------------------------------------- 11.4 predicted time

def _predict(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab11 import machine

    return fn([dict(row) for row in spec["layers"]], dict(getattr(machine, spec["machine"])))


# ---------------------------------------------------------------- 11.5 measured against predicted

def _spearman(fn: Callable, spec: Mapping[str, Any]) -> Any:
    return _number(_notebook_function(fn, "spearman")(list(spec["a"]), list(spec["b"])), "spearman")


def _layer_times(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab11.traces import load_trace

    return _notebook_function(fn, "layer_times")(load_trace(spec["trace"]))


def _pickled(fn: Callable):
    """``fn`` pickled by value (cloudpickle) as a ``uint8`` array: the judge runs it again on a model it draws."""
    import cloudpickle
    import numpy as np

    return np.frombuffer(cloudpickle.dumps(fn), dtype=np.uint8)


def _profile(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """The student's per-layer profile, measured in the kernel and saved for the judge to compare with its own,
    with ``profile_layers`` itself, which the judge runs again on a CNN it draws (``measure_harness``)."""
    import numpy as np

    from util.artifacts import save_arrays

    model, x = _model_and_input(spec)
    found = fn(model, x, runs=spec["runs"])
    if not isinstance(found, Mapping):
        raise TypeError(f"profile_layers must return a dict {{layer name: seconds}}, not {type(found).__name__}")
    names = [str(name) for name in found]
    seconds = [_number(found[name], f"profile_layers()[{name!r}]") for name in found]
    saved = save_arrays({"names": np.array(names, dtype=str), "seconds": np.array(seconds, dtype=np.float64),
                         "function": _pickled(fn)}, spec, LAB_NAME)
    return {**saved, "layers": len(names)}


# ---------------------------------------------------------------- 11.6 batch size

def _ridge_batch(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab11 import machine

    layer = machine.layer_of(spec["model"], spec["layer"])
    return fn(layer, tuple(spec["sample"]), dict(getattr(machine, spec["machine"])))


def _achieved(fn: Callable, spec: Mapping[str, Any]) -> Any:
    """``achieved_gflops`` with a fixed timer (exact) or the course's CPU-clock timer (saved for the judge, with
    ``achieved_gflops`` itself, which the judge runs again on a convolution it draws)."""
    import numpy as np

    from util.artifacts import save_arrays
    from util.labs.lab11 import machine

    achieved = _notebook_function(fn, "achieved_gflops")
    layer = machine.layer_of(spec["model"], spec["layer"])
    timer = machine.fixed_timer(spec["seconds"]) if "seconds" in spec else machine.cpu_timer
    found = achieved(layer, tuple(spec["sample"]), batches=tuple(spec["batches"]), runs=spec["runs"], timer=timer)
    if not isinstance(found, Mapping):
        raise TypeError(f"achieved_gflops must return a dict {{batch: GFLOP/s}}, not {type(found).__name__}")
    values = {int(batch): _number(value, f"achieved_gflops()[{batch!r}]") for batch, value in found.items()}
    if "measure" not in spec:
        return values
    return save_arrays({"batches": np.array(list(values), dtype=np.int64),
                        "gflops": np.array(list(values.values()), dtype=np.float64), "function": _pickled(achieved)},
                       spec, LAB_NAME)


# ---------------------------------------------------------------- one run_case per task

def _exact(call: Callable[[Callable, Mapping[str, Any]], Any]) -> Callable[[Callable, Mapping[str, Any]], Any]:
    """``call``, whose value the grader compares with the reference, in a task whose measured cases the judge
    checks: the grader judges a saved file for every case of such a task, so this one saves its value too
    (the judge has nothing to add to an exact case and passes it; the reference decides)."""
    def run(fn: Callable, spec: Mapping[str, Any]) -> Any:
        import json

        from util.answers import to_jsonable
        from util.artifacts import save_file

        value = to_jsonable(call(fn, spec), "result")
        save_file(json.dumps(value).encode(), spec, LAB_NAME, ".json")
        return value

    return run


def _dispatch(calls: Mapping[str, Callable[[Callable, Mapping[str, Any]], Any]]) -> Callable:
    """A ``run_case`` that runs ``calls[spec["call"]]`` (or ``calls[None]`` when the spec names no call)."""
    def run_case(fn: Callable, spec: Mapping[str, Any]) -> Any:
        return calls[spec.get("call")](fn, spec)

    return run_case


MACHINE_CASES = _dispatch({None: _exact(_scripted), "fixed": _exact(_fixed_machine), "measured": _measured_machine})
TRACE_CASES = _dispatch({None: _torch_table, "ort": _ort_table, "nodes": _ort_nodes})
PROFILE_CASES = _dispatch({None: _profile, "spearman": _exact(_spearman), "layer_times": _exact(_layer_times)})
BATCH_CASES = _dispatch({None: _exact(_ridge_batch), "fixed": _exact(_achieved), "measured": _achieved})


def prepare() -> None:
    """Fill the ONNX export cache with the two models the notebook and the hidden cases profile in onnxruntime."""
    for model in ("resnet18_bnstats", "mobilenet_v2"):
        _onnx({"model": model, "shape": [1, 3, 64, 64]})


RELEASES = (
    Release(1, "2026-11-25", "The first release: a measured machine model, the roofline of ResNet-18's layers, "
            "recorded traces of torch.profiler and onnxruntime, predicted and measured layer times, and batch size."),
    Release(2, "2026-11-26",
            "The grader also runs your profile_layers and achieved_gflops again, in a process of its own, on a CNN "
            "and a convolution it draws for each grading, and compares them with its own measurement of those: on "
            "the drawn CNN at least 85 % of the layers must be within 0.5x to 2x of the grader's times and 90 % "
            "within 0.5x to 2x of your times' median ratio to them; on the drawn convolution every batch within "
            "0.5x to 2x. A profile read from a recorded trace, or predicted, no longer passes; a measured one does, "
            "as before.",
            marker="on a CNN and a convolution it draws for each"),
    Release(3, "2026-11-26", "Tasks 11.5 and 11.6 ask written questions, Q1 and Q2 (3 points each, marked by hand): "
            "why predicted and measured layer times disagree, and why batching helps some layers and "
            "never a depthwise convolution; their points came from the two tasks' exported answers.",
            marker="(written, 3 points of task 11.5, marked by hand)"),
    Release(4, "2026-11-27", "The profiles your notebook measures of ResNet-18 and MobileNetV2 (task 11.5) pass with "
            "their totals within 1/3x to 3x of the grader's (was 0.5x to 2x) and 75 % of the layers within 0.5x to 2x "
            "of the grader's times either as measured or brought to the grader's scale: a notebook that measured "
            "while another program shared its core is slower throughout and keeps its proportions, and it no longer "
            "loses these points. Everything that passed before passes; the profile the grader runs again on a CNN it "
            "draws is judged as before.",
            marker="as measured or brought to the grader's scale"),
)
"""The lab's changelog (``Lab.releases``). Releases 2 and 4 changed no case: the judge of the measured profile and
achieved GFLOP/s also runs the student's functions again on models it draws (2), and judges the kernel's profile by
its proportions and a wider total (4), for notebooks of every release (``judge.py``)."""


WRITTEN = {
    "11.5": (Written("11.Q1", "Predicted and measured times of ResNet-18's layers disagree: by up to about 2x "
                     "for the large early convolutions, by 5x and more for `layer4`'s convolutions at "
                     "batch 1, and by far more for `fc`. Explain each of the three gaps, and why the "
                     "roofline is a bound rather than a forecast.",
                     3, words=(40, 250), since=3),),
    "11.6": (Written("11.Q2", "Why does `layer4.1.conv1` gain several times more GFLOP/s from batch 1 to batch "
                     "32 than `layer1.0.conv1`, and why can a depthwise convolution never reach the "
                     "ridge, whatever the batch?",
                     3, words=(40, 250), since=3),),
}
"""The lab's questions answered in words, marked by hand against ``rubrics.py`` (release 3): their
points came out of their task's exported answer."""


LAB = Lab(
    name=LAB_NAME,
    title="From counts to time: roofline and profilers",
    notebook="lab11_roofline_profiling.ipynb",
    packages=("torch", "torchvision", "onnx", "onnxruntime", "numpy", "cloudpickle"),
    prepare="util.labs.lab11.tasks:prepare",
    releases=RELEASES,
    tasks=(
        Task(
            id="11.1", title="Machine model", answer_points=4,
            answer="{'cold_start': {'best_s', 'calls'} of best_time on the notebook's scripted workload, "
                   "'fixed_timer': {'peak_gflops', 'bandwidth_gbs'} of measure_peak(512) and "
                   "measure_bandwidth(64) timed by fixed_timer(1e-3)}",
            keys=("cold_start", "fixed_timer"), tolerance=FLOATS,
            function="best_time", run_case=MACHINE_CASES, grader_check=f"{JUDGE}:check", checks=CHECKS["11.1"],
            hidden_points=12,
        ),
        Task(
            id="11.2", title="Intensity and bound per layer", answer_points=4,
            answer="{'ridge': ridge(GRADER_MACHINE), 'layers': layer_table(resnet, x, GRADER_MACHINE)}",
            keys=("ridge", "layers"), tolerance=FLOATS,
            function="layer_table", run_case=_layer_table, checks=CHECKS["11.2"],
            hidden_points=12,
        ),
        Task(
            id="11.3", title="Read recorded traces", answer_points=4,
            answer="{'torch': torch_op_table(the ResNet-18 trace), 'ort': ort_op_table(the ResNet-18 profile), "
                   "'live_nodes': profiled_nodes(your ort_profile of ResNet-18)}",
            keys=("torch", "ort", "live_nodes"), tolerance=FLOATS,
            function="torch_op_table", run_case=TRACE_CASES, checks=CHECKS["11.3"],
            hidden_points=12,
        ),
        Task(
            id="11.4", title="Predicted time", answer_points=4,
            answer="predict(layer_table(resnet, x, GRADER_MACHINE), GRADER_MACHINE): a list of "
                   "{'name', 'compute_s', 'memory_s', 'seconds'}",
            tolerance=FLOATS, function="predict", run_case=_predict, checks=CHECKS["11.4"],
            hidden_points=8,
        ),
        Task(
            id="11.5", title="Measured against predicted", answer_points=1, written=WRITTEN["11.5"],
            answer="{'measured_s': layer_times(the ResNet-18 trace), 'ratio': {layer: measured / predicted}, "
                   "'spearman': spearman(predicted, measured)}",
            keys=("measured_s", "ratio", "spearman"), tolerance=FLOATS,
            function="profile_layers", run_case=PROFILE_CASES, grader_check=f"{JUDGE}:check",
            checks=CHECKS["11.5"],
            hidden_points=18, judged=("function",),
        ),
        Task(
            id="11.6", title="Batch size moves layers across the ridge", answer_points=1, written=WRITTEN["11.6"],
            answer="{layer: ridge_batch(layer, sample shape, GRADER_MACHINE)} for conv1, layer1.0.conv1, "
                   "layer3.0.conv2, layer4.1.conv1 and fc of ResNet-18",
            tolerance=FLOATS, function="ridge_batch", run_case=BATCH_CASES, grader_check=f"{JUDGE}:check",
            checks=CHECKS["11.6"],
            hidden_points=14, judged=("function",),
        ),
    ),
)
