"""Lab 6's grader-side judges on hand-made files: good inputs pass, each kind of bad input fails with
a message that says what is wrong, and no file the kernel saved can crash them."""
from __future__ import annotations

import io
import json

import cloudpickle
import numpy as np
import pytest

from grader.judge.isolated import serving
from util.contract import EXACT
from util.labs.lab6 import judge, zoo
from util.labs.lab6.search import BudgetExceeded, ErrorFunction

SEARCH = {"model": "ln_narrow", "seed": 33, "low": -1.0, "high": 1.0, "budget": 50}


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _ill_conditioned(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = zoo.SHAPES["ln_narrow"]
    return (rng.uniform(0.5, 1.0, (shape[0], 1)) + 1e-6 * rng.uniform(-1, 1, shape)).astype(np.float32)


@pytest.fixture(scope="module")
def judge_here():
    """This process is the judge: its replays of a search run in student processes, as in grading."""
    with serving():
        yield


def _search(fn) -> np.ndarray:
    """A search function as the hidden case saves it: pickled by value (cloudpickle)."""
    return np.frombuffer(cloudpickle.dumps(fn), dtype=np.uint8)


def _returns(x):
    def search_input(error_fn, shape, low, high, budget, seed):
        return x
    return search_input


def _case(x, search=None) -> bytes:
    return _npz(x=x, search=_search(search or _returns(x)))


def test_search_judge_passes_an_ill_conditioned_input_and_fails_uniform_random_ones(judge_here):
    assert judge.check_search(SEARCH, _case(_ill_conditioned()), EXACT) == []
    rng = np.random.default_rng(0)
    uniform = rng.uniform(-1, 1, zoo.SHAPES["ln_narrow"]).astype(np.float32)
    (problem,) = judge.check_search(SEARCH, _case(uniform), EXACT)
    assert "the median of 20 uniform random inputs" in problem and "at least 100x" in problem


def test_the_replay_serves_every_call_and_enforces_the_budget(judge_here):
    """The search runs again in a student process; its error function is the grader's: the budget is
    counted there, whatever the kernel's counter said."""
    good = _ill_conditioned()

    def spends(n):
        def search_input(error_fn, shape, low, high, budget, seed):
            for _ in range(n):
                error_fn(np.zeros(shape, np.float32))
            return good
        return search_input

    assert judge.check_search(SEARCH, _case(good, spends(50)), EXACT) == []  # the whole budget: fine
    (problem,) = judge.check_search(SEARCH, _case(good, spends(51)), EXACT)
    assert problem.startswith("replayed by the grader, search_input raised BudgetExceeded: the error function was "
                              "called more than its budget of 50 times")

    def resets_the_counter(error_fn, shape, low, high, budget, seed):
        for _ in range(60):
            error_fn.calls = 0  # what worked on the kernel's counter
            error_fn(np.zeros(shape, np.float32))
        return good

    (problem,) = judge.check_search(SEARCH, _case(good, resets_the_counter), EXACT)
    assert "BudgetExceeded" in problem


@pytest.mark.parametrize("data, message", [
    (b"not an npz", "is not the .npz of arrays the course saves after your function returns (it is not an .npz"),
    (_npz(x=np.zeros((16, 16), np.float32), y=np.zeros(1)), "named ['x', 'y']; the grader expected exactly ['search', 'x']"),
    (_case(np.zeros((16, 15), np.float32)), "x has shape [16, 15]; expected [16, 16]"),
    (_case(np.full((16, 16), 2.0, np.float32)), "outside [-1, 1]"),
    (_case(np.full((16, 16), np.nan, np.float32)), "outside [-1, 1]"),
    (_npz(x=np.array([{"a": 1}], dtype=object)), "(an array in it holds Python objects)"),   # never unpickled
    (_npz(x=np.zeros((16, 16), np.float32), search=np.frombuffer(b"not a pickle", dtype=np.uint8)),
     "replayed by the grader, search_input raised UnpicklingError"),
])
def test_search_judge_explains_bad_files(judge_here, data, message):
    (problem,) = judge.check_search(SEARCH, data, EXACT)
    assert message in problem


@pytest.mark.parametrize("names, message", [
    (["ConvMulFusion"], None),
    ([], "not sufficient: with no pass disabled"),
    (["ConvBNFusion"], "not sufficient"),
    (["ConvMulFusion", "ConvBNFusion"], "not 1-minimal: without 'ConvBNFusion'"),
    (["ConvMulFusion", "GeluFusion"], "'GeluFusion' is not one of the candidate passes"),
    (["ConvMulFusion", "ConvMulFusion"], "names a pass twice"),
    ([1, 2], "not a list of names"),
])
def test_isolation_judge(names, message):
    problems = judge.check_isolation({"model": "conv_mul", "seed": 51}, json.dumps(names).encode(), EXACT)
    assert problems == [] if message is None else message in problems[0]


def test_isolation_judge_rejects_bytes_that_are_not_json():
    assert judge.check_isolation({"model": "conv_mul", "seed": 51}, b"\xff\x00", EXACT) == [
        "the saved pass list is not JSON"]


def test_error_function_counts_calls_checks_inputs_and_keeps_its_budget():
    error_fn = ErrorFunction(zoo.load("ln_narrow"), zoo.SHAPES["ln_narrow"], -1.0, 1.0, budget=2)
    assert error_fn(_ill_conditioned()) > 1e-5 and error_fn.calls == 1
    with pytest.raises(ValueError, match="outside"):
        error_fn(np.full((16, 16), 3.0))
    assert error_fn.calls == 1                      # a refused input costs no call
    error_fn(np.zeros((16, 16)))
    with pytest.raises(BudgetExceeded, match="budget of 2"):
        error_fn(np.zeros((16, 16)))
