"""Lab 9's judges against students who read them, each attack beside a control that plays the same
wrong answer straight.

Class 5, a required method that leaves no trace in the output. Task 9.3 asks for integer-only inference and
compares the int8 outputs byte for byte with the course's integer reference. Before release 2 every way of
requantising in floating point gave the reference's bytes on all five hidden models (float64 with ``M`` or with
``M0 * 2**-shift``, half up or ``np.rint``: 20 of 20 points; float32 ``np.rint``: 16). Each hidden model now holds
three pruned channels at rounding ties (``util.labs.lab9.qmodel.plant_ties``): every floating-point way below gets
at least one byte of every hidden model wrong, while the integer rule and an exact wide float (``np.longdouble``,
whose 64-bit mantissa holds ``acc * M0`` exactly: the integer rule computed exactly) pass. Judged in the grader's
own judge process, as whoever runs the tests (root in CI) and as an unprivileged grader.

Classes 1-4 and 6 do not occur in lab 9's judges: no judge runs or times student code, evaluates a figure the
student could fit (9.5 and 9.6 judge what ``quantize_static`` makes with the judge's own call), or reads a
recording; grader-only files are the core's (``tests/test_limits_and_sandbox.py``).
"""
from __future__ import annotations

import numpy as np
import pytest
from judged_files import judge_files, save_case

from grader.author.solution import solution_namespace
from grader.execute import confinement
from util.labs import get_lab
from util.labs.lab9 import judge, judge_intref
from util.labs.lab9.qmodel import TIES, case_model, maxpool2d_int8, plant_ties

LAB = get_lab("lab9")
CASES = [c.id for c in LAB.task("9.3").cases]


def _fixed(multiplier):
    m0, shift = judge_intref.fixed_point(multiplier)
    return m0, shift


def _requantizers():
    """Name -> requantize(acc [N, C, ...], layer) in a way other than int64 (the last: in int64, floor)."""
    def along(acc, values):
        shape = [1] * acc.ndim
        shape[1] = -1
        return np.asarray(values).reshape(shape)

    def real_m(kind, rounding):
        def requantize(acc, layer):
            value = acc.astype(kind) * along(acc, layer.multiplier.astype(kind))
            return np.rint(value) if rounding == "rint" else np.floor(value + kind(0.5))
        return requantize

    def fixed_float64(acc, layer):
        m0, shift = _fixed(layer.multiplier)
        return np.floor(acc.astype(np.float64) * along(acc, m0 * 2.0 ** -shift.astype(np.float64)) + 0.5)

    def product_then_divide(acc, layer):          # int64 product, float64 division
        m0, shift = _fixed(layer.multiplier)
        return np.round((acc * along(acc, m0)) / along(acc, 2.0 ** shift))

    def float_product_int_shift(acc, layer):      # float64 product, integer shift
        m0, shift = _fixed(layer.multiplier)
        product = (acc.astype(np.float64) * along(acc, m0)).astype(np.int64)
        return (product + (np.int64(1) << along(acc, shift - 1))) >> along(acc, shift)

    def long_double(acc, layer):                  # exact: a 64-bit mantissa holds acc * M0
        m0, shift = _fixed(layer.multiplier)
        value = acc.astype(np.longdouble) * along(acc, m0).astype(np.longdouble) / along(acc, np.longdouble(2) ** shift)
        return np.floor(value + np.longdouble(0.5))

    def floor_shift(acc, layer):                  # the control: the integer way, floored (a plain mistake)
        m0, shift = _fixed(layer.multiplier)
        return (acc * along(acc, m0)) >> along(acc, shift)

    return {"float64 M, half up": real_m(np.float64, "half"), "float64 M, np.rint": real_m(np.float64, "rint"),
            "float32 M, half up": real_m(np.float32, "half"), "float32 M, np.rint": real_m(np.float32, "rint"),
            "float64 M0 * 2**-shift": fixed_float64, "int64 product / 2**shift, np.round": product_then_divide,
            "float64 product, integer shift": float_product_int_shift, "np.longdouble": long_double,
            "floor (control)": floor_shift}


FLOATING = [name for name in _requantizers() if name not in ("np.longdouble", "floor (control)")]


def run_integer_with(requantize):
    """A student's ``run_integer`` that computes the accumulators in int64 and requantises with ``requantize``."""
    def run_integer(qmodel, xq):
        y = np.asarray(xq)
        for layer in qmodel.layers:
            if layer.kind == "maxpool":
                y = maxpool2d_int8(y, layer.kernel_size)
            elif layer.kind == "flatten":
                y = y.reshape(len(y), -1)
            else:
                acc = (judge_intref.int_conv2d(y, layer.x_zero_point, layer.weight, layer.bias, layer.stride,
                                               layer.padding, layer.groups) if layer.kind == "conv"
                       else judge_intref.int_linear(y, layer.x_zero_point, layer.weight, layer.bias))
                low = layer.y_zero_point if layer.relu else -128
                y = np.clip(requantize(acc, layer) + layer.y_zero_point, low, 127).astype(np.int8)
        return y
    return run_integer


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab9", ("9.1", "9.2", "9.3"))


def test_every_hidden_model_holds_the_three_ties_in_its_last_layer():
    for case in LAB.task("9.3").cases:
        model, _ = case_model(case.spec)
        last = [layer for layer in model.layers if layer.kind in ("conv", "linear")][-1]
        assert not last.weight[-3:].any() and last.weight[:-3].any(), case.id
        sign = "+" if last.y_zero_point + 62 <= 127 else "-"
        assert last.bias[-3:].tolist() == [acc for _, acc, _, _ in TIES[sign]], case.id
        m0, shift = _fixed(last.multiplier[-3:])
        assert [(int(a), int(b)) for a, b in zip(m0, shift)] == [(m, s) for _, _, m, s in TIES[sign]], case.id
    signs = {"+" if case_model(c.spec)[0].layers[-1].y_zero_point + 62 <= 127 else "-" for c in LAB.task("9.3").cases}
    assert signs == {"+", "-"}   # both directions are exercised (the depthwise case's zero point is 127)


def test_the_ties_sit_where_each_floating_point_way_rounds_the_other_way():
    for sign, ties in TIES.items():
        for name, acc, m0, shift in ties:
            exact = (acc * m0 + (1 << (shift - 1))) >> shift        # Python ints: the rule itself
            assert abs(exact) in (58, 59, 60, 61, 62), (sign, name)
        (_, a, m0_a, s_a), (_, b, m0_b, s_b), (_, c, _, _) = ties
        assert (a * m0_a) % (1 << s_a) == 1 << (s_a - 1)             # A: exactly a tie
        assert 0 < abs((b * m0_b) % (1 << s_b) - (1 << (s_b - 1))) <= 15 and abs(b * m0_b) > 2 ** 59  # B: near one
        assert float(np.float32(c)) != c and abs(c) > 2 ** 25       # C: float32 cannot hold the accumulator


@pytest.mark.parametrize("way", FLOATING)
def test_each_floating_point_way_gets_every_hidden_model_wrong(way):
    requantize = _requantizers()[way]
    for case in LAB.task("9.3").cases:
        model, xq = case_model(case.spec)
        found = run_integer_with(requantize)(model, xq.copy())
        expected = judge_intref.run_integer(model, xq)
        differ = found != expected
        assert differ[:, -3:].any(), (way, case.id)       # at the ties
        elsewhere = int(differ[:, :-3].sum())              # (float32's np.rint also misses one of DigitsCNN's)
        assert elsewhere == (1 if (way, case.spec["model"]) == ("float32 M, np.rint", "digits_cnn") else 0), way
        assert np.abs(found.astype(int) - expected).max() == 1


def test_the_integer_rule_and_an_exact_wide_float_pass_every_hidden_model(solution):
    exact = run_integer_with(_requantizers()["np.longdouble"])
    for case in LAB.task("9.3").cases:
        model, xq = case_model(case.spec)
        expected = judge_intref.run_integer(model, xq).tobytes()
        assert solution["run_integer"](model, xq.copy()).tobytes() == expected, case.id
        if np.finfo(np.longdouble).nmant >= 63:   # x86-64: 80-bit long double (elsewhere it may be float64)
            assert exact(model, xq.copy()).tobytes() == expected, case.id


def test_plant_ties_refuses_a_fused_relu_near_127():
    from util.labs.lab9.qmodel import QLayer

    layer = QLayer("linear", np.ones((4, 2), np.int8), np.zeros(4, np.int32), np.full(4, 0.01), 0, 100, relu=True)
    with pytest.raises(ValueError, match="fused ReLU"):
        plant_ties(layer)


def _saved(solution, tmp_path):
    """The files the hidden cases of 9.3 save for the honest function, a floating-point one and the control."""
    ways = _requantizers()
    functions = {"honest": solution["run_integer"], "attack": run_integer_with(ways["float64 M, half up"]),
                 "control": run_integer_with(ways["floor (control)"])}
    saved = {}
    for name, function in functions.items():
        for case_id in CASES:
            spec, data, _ = save_case("lab9", "9.3", case_id, function, tmp_path)
            saved[f"{name}/{case_id}"] = ("9.3", spec, data)
    return saved


def _assert_verdicts(verdicts):
    for case_id in CASES:
        assert verdicts[f"honest/{case_id}"] == [], case_id
        [attack] = verdicts[f"attack/{case_id}"]
        assert "in the channels whose accumulator sits at a rounding tie" in attack and "not in floating point" in attack
        [control] = verdicts[f"control/{case_id}"]
        assert "int8 outputs differ from the course's integer reference" in control


pytestmark_walls = pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")


@pytestmark_walls
def test_a_floating_point_requantisation_earns_nothing_in_the_graders_judge(solution, tmp_path):
    _assert_verdicts(judge_files("lab9", _saved(solution, tmp_path), tmp_path))


@pytestmark_walls
def test_the_same_as_an_unprivileged_grader(solution, tmp_path):
    _assert_verdicts(judge_files("lab9", _saved(solution, tmp_path), tmp_path, as_user=True))


def test_the_judge_says_what_to_do(solution, tmp_path):
    spec, data, _ = save_case("lab9", "9.3", CASES[1], run_integer_with(_requantizers()["float32 M, np.rint"]), tmp_path)
    [problem] = judge.check_integer(spec, data)
    assert problem.startswith("100 of 400 int8 outputs differ from the course's integer reference, each by a single "
                              "step, all in the channels whose accumulator sits at a rounding tie")
    spec, data, _ = save_case("lab9", "9.3", CASES[1], solution["run_integer"], tmp_path)
    assert judge.check_integer(spec, data) == []


def test_the_float_set_judge_binds_the_count_the_case_returned():
    """Class 1: 9.6's case returns the size of the list it saves (compared with the reference); the judge requires
    the two to agree (a list saved for the judge, another size reported beside it, fails before any quantisation)."""
    import json

    spec = LAB.task("9.6").cases[0].spec
    [problem] = judge.check_float_set(spec, json.dumps(["/conv1/Conv"]).encode(), returned={"nodes": 2})
    assert problem.startswith("this case returned {'nodes': 2}, but the list it saved has 1 node(s)")
