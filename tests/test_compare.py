import pytest

from grader.judge.compare import MAX_MISMATCHES, compare, describe
from util.contract import EXACT, Tolerance


def test_equal_nested_values_match():
    value = {"total": 3, "by_type": {"Conv2d": 2, "Linear": 1}, "rows": [[1, 2], "x"]}
    assert compare(value, value) == []


def test_int_mismatch_reports_path_and_values():
    [m] = compare({"by_type": {"Conv2d": 2}}, {"by_type": {"Conv2d": 4}})
    assert (m.path, m.expected, m.actual, m.reason) == ("answer['by_type']['Conv2d']", 2, 4, "value")


def test_missing_and_unexpected_keys():
    reasons = {(m.path, m.reason) for m in compare({"a": 1, "b": 2}, {"a": 1, "c": 3})}
    assert reasons == {("answer['b']", "missing key"), ("answer['c']", "unexpected key")}


def test_list_length_mismatch_is_one_difference():
    [m] = compare([1, 2, 3], [1, 2])
    assert (m.reason, m.expected, m.actual) == ("length", 3, 2)


def test_float_tolerance_is_relative_and_absolute():
    assert compare(1.0, 1.0005, Tolerance(rtol=1e-3)) == []
    assert len(compare(1.0, 1.002, Tolerance(rtol=1e-3))) == 1
    assert compare(0.0, 1e-10, Tolerance(atol=1e-9)) == []
    assert len(compare(1e-6, 2e-6, Tolerance(rtol=1e-3, atol=1e-9))) == 1


def test_integers_stay_exact_under_a_float_tolerance():
    assert len(compare(1000, 1001, Tolerance(rtol=0.1))) == 1


def test_int_reference_accepts_an_equal_float_but_not_a_string():
    assert compare(6624904, 6624904.0, EXACT) == []
    assert compare(5, "5")[0].reason == "type"
    assert compare(True, 1)[0].reason == "type"


def test_describe_hides_expected_values_for_hidden_checks():
    mismatches = compare({"total": 1498376192}, {"total": 2996752384})
    hidden = describe(mismatches, EXACT, reveal=False)
    shown = describe(mismatches, EXACT, reveal=True)
    assert "1,498,376,192" not in hidden and "is too large by a factor between 1.5 and 3" in hidden
    assert "expected 1,498,376,192, found 2,996,752,384" in shown


def test_describe_limits_the_list():
    mismatches = compare(list(range(3)), [9, 9, 9])
    assert "and 1 more differences" in describe(mismatches, EXACT, reveal=True, limit=2)


@pytest.mark.parametrize("expected, actual, words", [
    (100, 100.5, "is too large by less than 1%"),
    (100, 95, "is too small by 1% to 10%"),
    (100, 70, "is too small by 10% to 50%"),
    (100, 250, "is too large by a factor between 1.5 and 3"),
    (100, 20, "is too small by a factor between 3 and 10"),
    (100, 5000, "is too large by a factor between 10 and 100"),
    (1000, 2, "is too small by a factor between 100 and 1000"),
    (1, 10**400, "is too large by a factor of 1,000 or more"),
    (-5, 5, "has the wrong sign"),
    (0, 3, "is too large"),
    (-10, -30, "is too small by a factor between 1.5 and 3"),
    (2.0, float("nan"), "is NaN"),
    (2.0, float("inf"), "is too large by a factor of 1,000 or more"),
])
def test_feedback_says_how_a_number_differs_without_the_number(expected, actual, words):
    text = describe(compare(expected, actual, Tolerance(rtol=1e-6)), Tolerance(rtol=1e-6))
    assert text == f"answer {words} (compared within rtol=1e-06)"  # the whole text: bands, never the value


def test_feedback_on_structure_names_the_part_not_the_value():
    text = describe(compare({"a": [1, 2, 3], "b": "x", "c": 1}, {"a": [1], "b": "y", "d": 2}), EXACT)
    assert text == ("answer['a'] has 1 items (too few); answer['b'] differs from the reference; "
                    "answer['c'] is missing; answer['d'] is not expected (compared exact)")


@pytest.mark.parametrize("actual", [
    10**400, -(10**5000) if False else -(10**4000), "\ud800", {"\udcff": 1}, [[[[[]]]]] * 3, None, True,
    float("nan"), float("inf"), {"total": 10**400, "by_type": {"Conv2d": "x" * 10**6}},
], ids=["huge int", "huge negative", "surrogate", "surrogate key", "nested", "null", "bool", "nan", "inf", "mixed"])
def test_comparison_is_total(actual):
    expected = {"total": 3.5, "by_type": {"Conv2d": 2}}
    for e, a in ((expected, actual), (3.5, actual), (2, actual), ([1, 2], actual), ("s", actual)):
        for reveal in (False, True):
            text = describe(compare(e, a, Tolerance(rtol=1e-3)), Tolerance(rtol=1e-3), reveal)
            assert len(text) < 1000
            text.encode("utf-8", "surrogatepass")


def test_a_million_differences_are_counted_not_kept():
    mismatches = compare({}, {str(i): i for i in range(10**5)})
    assert len(mismatches) == MAX_MISMATCHES and mismatches.total == 10**5
    assert describe(mismatches, EXACT).endswith("; and 99,996 more differences (compared exact)")
