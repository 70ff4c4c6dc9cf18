from grader.judge.compare import compare, describe
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
    assert "1,498,376,192" not in hidden and "differs from the reference" in hidden
    assert "expected 1,498,376,192, found 2,996,752,384" in shown


def test_describe_limits_the_list():
    mismatches = compare(list(range(3)), [9, 9, 9])
    assert "and 1 more differences" in describe(mismatches, EXACT, reveal=True, limit=2)
