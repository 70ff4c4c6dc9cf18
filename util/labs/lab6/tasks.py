"""Lab 6, compiler-introduced numerical errors (TracNe on onnxruntime): the one declaration of its tasks.

onnxruntime's optimisation levels and ``disabled_optimizers`` play the part of TVM's ``opt_level``
and ``disabled_pass``. Students measure what each level does to ResNet-18, define error metrics,
search for inputs that maximise the error, trace the first tensor where the optimised and
unoptimised graphs diverge, and isolate a smallest set of passes responsible.

How each task is judged:

* 6.1, 6.2, 6.4 return numbers, names and counts that only a correct computation produces; they
  come back from the kernel and are compared with the references (floats that are rounding
  errors as log10 within half a decade, ``LOG10``; counts and names exact).
* 6.3 (an input that maximises the error) and 6.5 (a set of passes) have known-constant verdicts
  ("at least 100x the random baseline", "sufficient and 1-minimal"). A student's kernel could fake
  any check run there, so ``run_case`` only *saves* the input or the names (``util.artifacts``) and
  the grader's judge (``judge.py``) decides in its own process, on models it loads itself.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Mapping

from util.contract import EXACT, Lab, Release, Task, Tolerance, Written
from util.labs.lab6.public_checks import CHECKS as PUBLIC

LAB_NAME = "lab6"
LOG10 = Tolerance(atol=0.5)
"""log10 of a relative error, within half a decade: rounding errors differ between CPUs' kernels."""
METRICS = Tolerance(rtol=1e-9)
"""Task 6.2's metrics on stated arrays: float64 arithmetic, equal up to summation order."""
JUDGE = "util.labs.lab6.judge"


def _levels(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab6 import zoo

    return fn(zoo.load(spec["model"]), zoo.feeds(spec["model"], spec["seed"]))


def _metrics(fn: Callable, spec: Mapping[str, Any]) -> Any:
    import numpy as np

    return fn(np.array(spec["out"], dtype=spec["dtype"]), np.array(spec["ref"], dtype=spec["dtype"]))


def _search(fn: Callable, spec: Mapping[str, Any]) -> Any:
    import cloudpickle
    import numpy as np

    from util.artifacts import save_arrays
    from util.labs.lab6 import zoo
    from util.labs.lab6.search import ErrorFunction

    shape = zoo.SHAPES[spec["model"]]
    error_fn = ErrorFunction(zoo.load(spec["model"]), shape, spec["low"], spec["high"], spec["budget"])
    x = fn(error_fn, shape, spec["low"], spec["high"], spec["budget"], spec["seed"])
    search = np.frombuffer(cloudpickle.dumps(fn), dtype=np.uint8)  # the grader replays it, counting the calls
    return save_arrays({"x": error_fn.validate(x), "search": search}, spec, LAB_NAME)


def _trace(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.labs.lab6 import zoo

    return fn(zoo.load(spec["model"]), zoo.feeds(spec["model"], spec["seed"]), spec["level"],
              disabled=tuple(spec["disabled"]))


def _isolate(fn: Callable, spec: Mapping[str, Any]) -> Any:
    from util.artifacts import save_file
    from util.labs.lab6 import zoo
    from util.labs.lab6.passes import CANDIDATES

    names = fn(zoo.load(spec["model"]), zoo.feeds(spec["model"], spec["seed"]), list(CANDIDATES))
    if not isinstance(names, (list, tuple)) or not all(isinstance(name, str) for name in names):
        raise TypeError(f"isolate_passes() must return a list of pass names (str), not {names!r:.80}")
    return save_file(json.dumps(list(names)).encode(), spec, LAB_NAME, ".json")


def prepare() -> None:
    """Fill the export cache with ResNet-18 and the zoo (the notebook's models and the hidden cases')."""
    from util.labs.lab6 import zoo

    zoo.prepare()



WRITTEN = {
    "6.5": (Written("6.Q1", "On `layer_norm` no single pass restores the bits, yet `ddmin` finds a set that "
                     "does. Why does disabling one pass at a time fail there, why is the set `ddmin` "
                     "returns 1-minimal but not necessarily the smallest, and about how many sessions "
                     "does it need compared with trying every subset of the 64 candidates?",
                     5, words=(40, 250), since=2),),
}
"""The lab's questions answered in words, marked by hand against ``rubrics.py`` (release 2): their
points came out of their task's exported answer."""


LAB = Lab(
    name=LAB_NAME,
    title="Compiler-introduced numerical errors",
    notebook="lab6_compiler_errors.ipynb",
    packages=("torch", "torchvision", "onnx", "onnxscript", "onnxruntime", "numpy"),
    releases=(
        Release(1, "2026-11-23", "The first release: onnxruntime's optimisation levels, error metrics, a search for "
                "error-maximising inputs, the first divergent tensor and the passes isolated by delta "
                "debugging."),
        Release(2, "2026-11-26", "Task 6.5 asks a written question, Q1 (5 points, marked by hand): why delta debugging "
                "finds what disabling one pass at a time misses; its points came from 6.5's exported "
                "answer.",
                marker="(written, 5 points of task 6.5, marked by hand)"),
    ),
    prepare="util.labs.lab6.tasks:prepare",
    shared_sources=("util/export_cache.py",),
    tasks=(
        Task(
            id="6.1", title="Optimisation levels", answer_points=5,
            answer="level_report(resnet, resnet_feeds): {level: {'nodes', 'ops', 'bitwise', 'relmax_log10'}} "
                   "for DISABLE_ALL, BASIC and EXTENDED",
            keys=("DISABLE_ALL", "BASIC", "EXTENDED"), tolerance=LOG10,
            function="level_report", run_case=_levels, checks=PUBLIC["6.1"],
            hidden_points=10,
        ),
        Task(
            id="6.2", title="Error metrics", answer_points=4,
            answer="error_metrics(out, ref) on the stated pair: {'bitwise', 'max_abs', 'relmax', 'mre'}",
            keys=("bitwise", "max_abs", "relmax", "mre"), tolerance=METRICS,
            function="error_metrics", run_case=_metrics, checks=PUBLIC["6.2"],
            hidden_points=6,
        ),
        Task(
            id="6.3", title="Error-maximising input search", answer_points=5,
            answer="{'random': who_is_wrong(ln_linear, random feeds), 'bad': {'unopt_wrong', 'opt_wrong', "
                   "'optimisation_to_blame'} at the stated ill-conditioned input}",
            keys=("random", "bad"), tolerance=LOG10,
            function="search_input", run_case=_search, grader_check=f"{JUDGE}:check_search", judged=("function",), checks=PUBLIC["6.3"],
            hidden_points=15,
        ),
        Task(
            id="6.4", title="Trace the first divergence", answer_points=4,
            answer="trace(resnet, resnet_feeds, 'BASIC'): {'tensors_unopt', 'matched', 'first_divergent', "
                   "'producer_op'}",
            keys=("tensors_unopt", "matched", "first_divergent", "producer_op"), tolerance=EXACT,
            function="trace", run_case=_trace, checks=PUBLIC["6.4"],
            hidden_points=16,
        ),
        Task(
            id="6.5", title="Isolate the pass", answer_points=2, written=WRITTEN["6.5"],
            answer="isolate_passes(resnet, resnet_feeds, CANDIDATES): a list of pass names",
            tolerance=EXACT, function="isolate_passes", run_case=_isolate,
            grader_check=f"{JUDGE}:check_isolation", checks=PUBLIC["6.5"],
            hidden_points=28,
        ),
    ),
)
