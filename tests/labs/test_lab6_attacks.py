"""Lab 6's judges against students who read them: what they enforce, and the one class they cannot.

Class 3, evaluation on data the student's code can read. Task 6.3's judge replays the student's search in a
student process and serves (and counts) every evaluation of its error function, so a search that needs more than
its budget of 50 fails there (the control). But the model the error function hides is the course's own (the zoo's
code builds it), so the replayed search can evaluate a copy of it as often as it likes and return the best input
it found (the attack): that passes, as root and as an unprivileged grader. Hiding the model would not help: the
error lives in the layer norm's structure, not in its weights, and an input found on the course's model scores
hundreds of times the baseline on the same architecture with its weights re-drawn (measured below). So the replay
keeps the case's model, and ``docs/trust_model.md`` says what is not enforced. If a fix ever closes this, these
tests must change with it.

The other classes: 6.3's evaluations are counted by the judge, outside the student's code (1); nothing is timed
(2); no recording is read (4); 6.5's verdict (sufficient and 1-minimal) is computed by the judge itself; how the
set was found (ddmin or not) cannot be seen (5, documented); grader-only files are the core's (6).
"""
from __future__ import annotations

import io
import sys
import warnings

import cloudpickle
import numpy as np
import pytest
from judged_files import judge_files

from grader.execute import confinement
from util.labs import get_lab
from util.labs.lab6 import zoo
from util.labs.lab6.search import ErrorFunction, baseline

LAB = get_lab("lab6")
CASE = next(c for c in LAB.task("6.3").cases if c.spec["model"] == "ln_narrow")
LOCAL_EVALUATIONS = 600
pytestmark = pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")
cloudpickle.register_pickle_by_value(sys.modules[__name__])   # as a notebook's functions are: by value


def _draw(rng, shape, low, high):
    """A blind draw: rows at a random centre with a random spread (most of them harmless)."""
    rows = tuple(shape[:-1]) + (1,)
    centre = rng.uniform(low, high, rows)
    spread = (high - low) * 10.0 ** rng.uniform(-9, 0, rows)
    return np.clip(centre + spread * rng.uniform(-1, 1, shape), low, high).astype(np.float32)


def served_search(error_fn, shape, low, high, budget, seed):
    """The control: the blind search through the error function it is given, LOCAL_EVALUATIONS times."""
    rng = np.random.default_rng(seed)
    best_x, best = None, -1.0
    for _ in range(LOCAL_EVALUATIONS):
        x = _draw(rng, shape, low, high)
        error = error_fn(x)
        if error > best:
            best_x, best = x, error
    return best_x


def local_search(error_fn, shape, low, high, budget, seed):
    """The attack: the same search on a copy of the course's model (the zoo's, found by its shape), one served call."""
    from util.labs.lab6 import zoo as course
    from util.labs.lab6.search import ErrorFunction as Local

    name = next(n for n in ("ln_narrow", "ln_first", "ln_wide") if course.SHAPES[n] == tuple(shape))
    x = served_search(Local(course.load(name), shape, low, high, LOCAL_EVALUATIONS), shape, low, high, budget, seed)
    error_fn(x)
    return x


def _saved(tmp_path):
    saved = {}
    for name, function in (("control", served_search), ("attack", local_search)):
        shape = zoo.SHAPES[CASE.spec["model"]]
        arrays = {"x": np.zeros(shape, np.float32), "search": np.frombuffer(cloudpickle.dumps(function), np.uint8)}
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        saved[name] = ("6.3", dict(CASE.spec), buffer.getvalue())
    return saved


def _assert_verdicts(verdicts):
    [control] = verdicts["control"]
    assert control.startswith("replayed by the grader, search_input raised BudgetExceeded"), control
    assert verdicts["attack"] == []                    # not enforced: see the module's docstring


def test_a_search_on_a_copy_of_the_course_model_is_not_stopped_by_the_budget(tmp_path):
    _assert_verdicts(judge_files("lab6", _saved(tmp_path), tmp_path))


def test_the_same_as_an_unprivileged_grader(tmp_path):
    _assert_verdicts(judge_files("lab6", _saved(tmp_path), tmp_path, as_user=True))


def _reseeded(name: str, seed: int):
    """The zoo's model ``name`` with its weights drawn from another torch seed (what hiding the model would use)."""
    import onnx
    import torch

    from util.onnx_models import IR_VERSION, OPSET

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = zoo._modules()[name]()
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), (torch.zeros(zoo.SHAPES[name]),), buffer, dynamo=False, opset_version=OPSET,
                          input_names=["x"], output_names=["y"], do_constant_folding=False)
    proto = onnx.load_from_string(buffer.getvalue())
    proto.ir_version = IR_VERSION
    return proto


def test_hiding_the_models_weights_would_not_help():
    """An input found by local search on the course's model keeps its error on re-drawn weights."""
    spec = CASE.spec
    shape, low, high = zoo.SHAPES[spec["model"]], spec["low"], spec["high"]
    x = served_search(ErrorFunction(zoo.load(spec["model"]), shape, low, high, LOCAL_EVALUATIONS), shape, low, high,
                      50, 0)
    for seed in (777, 778):
        other = ErrorFunction(_reseeded(spec["model"], seed), shape, low, high, 100)
        assert other(x) / baseline(other, 20240601) > 100, seed
