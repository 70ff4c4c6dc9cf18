"""Diagnosed feedback: the class setting and its date, what the feedback shows per failed hidden
case (escaped, bounded, from that task's diagnosis only), and Gradescope's after-due-date tests.

Hand-made results and diagnoses (milliseconds); the real example submissions' diagnoses are checked where
they are graded anyway (tests/test_labs.py)."""
from __future__ import annotations

import json
import re
import zipfile
from datetime import datetime, timedelta
from html.parser import HTMLParser

import pytest
from classes import store
from hypothesis import given, settings
from hypothesis import strategies as st

from grader import cli
from grader.core import safe_text
from grader.core.results import CheckResult, SubmissionResult, TaskResult
from grader.grade import gradescope
from grader.report import class_folder, feedback
from grader.report.settings import Settings
from util.labs import get_lab

SECRET = "RESULT_OF_THE_OTHER_TASK"


def _result(value_message: str = "2 of 4 values differ") -> SubmissionResult:
    """lab900: task 900.1 fails its hidden case ``big``; task 900.2 passes."""
    first = TaskResult("900.1", "First", (CheckResult("answer", "passed", 2, 2, ""),
                                         CheckResult("big", "failed", 0, 3, value_message, hidden=True),
                                         CheckResult("small", "passed", 3, 3, "", hidden=True)))
    second = TaskResult("900.2", "Second", (CheckResult("answer", "passed", 5, 5, ""),))
    return SubmissionResult("lab900.ipynb", "lab900", (first, second), 1.0, "completed", ())


def _diagnosis(value: str = "[1, 2, 9, 9]", name: str = "off_by_two") -> dict:
    return {"900.1": {"cases": [{"case": "big", "input": '{"n": 4}', "value": value, "raised": None,
                                 "expected": "[1, 2, 3, 4]", "found": "2 of 4 values differ"},
                                {"case": "small", "input": SECRET, "value": SECRET, "raised": None,
                                 "expected": SECRET, "found": ""}],  # passes now: a stale row, never shown
                      "mistakes": [{"name": name, "hint": "adds two to the last values"}]},
            "900.2": {"cases": [{"case": "other", "input": SECRET, "value": SECRET, "raised": None,
                                 "expected": SECRET, "found": SECRET}], "mistakes": []}}


class _Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def _shows(text: str, shown: str) -> bool:
    """Whether ``text`` (Markdown or HTML feedback) shows ``shown``, escaped as it goes there."""
    return safe_text.markdown(shown) in text or safe_text.html(shown) in text


def _parsed(page: str) -> _Page:
    parsed = _Page()
    parsed.feed(page)
    return parsed


def test_diagnosed_feedback_shows_the_case_its_value_the_expected_and_the_mistake():
    for render in (feedback.render, feedback.render_html):
        text = render("amy", _result(), diagnosis=_diagnosis())
        for shown in ("What went wrong on the hidden inputs", "big", "[1, 2, 9, 9]", "[1, 2, 3, 4]",
                      "off_by_two", "adds two to the last values", feedback.DIAGNOSED_NOTE):
            assert _shows(text, shown), (render, shown)
        assert SECRET not in text  # another task's entry, a check that passes now
        assert feedback.HIDDEN_NOTE not in text


def test_a_judged_case_shows_the_property_that_failed_and_a_raise_shows_the_error():
    diagnosis = {"900.1": {"cases": [{"case": "big", "input": "{}", "value": None, "raised": "ValueError: bad n",
                                      "expected": None, "found": "the sum is not preserved"}], "mistakes": []}}
    cases, mistakes, more = feedback.explained(_result().tasks[0], diagnosis)
    assert cases == [[("Case", "big"), ("Input", "{}"), ("Your function raised", "ValueError: bad n"),
                      ("Property that failed", "the sum is not preserved")]]
    assert mistakes == [] and more == 0


def test_without_a_diagnosis_the_feedback_is_exactly_todays():
    res = _result()
    assert feedback.render("amy", res, diagnosis=None) == feedback.render("amy", res)
    assert feedback.render_html("amy", res, diagnosis=None) == feedback.render_html("amy", res)


def test_the_setting_needs_a_day_is_remembered_and_none_goes_back_to_summary(tmp_path):
    with pytest.raises(ValueError, match="--feedback-from"):
        Settings().updated(feedback="diagnosed")
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        Settings().updated(feedback="diagnosed", feedback_from="next monday")
    chosen = Settings().updated(feedback="diagnosed", feedback_from="2025-03-10")
    chosen.save(tmp_path)
    assert Settings.load(tmp_path) == chosen and "diagnosed feedback from 2025-03-10" in chosen.describe()
    assert Settings.load(tmp_path).updated(feedback="summary").feedback_start() is None


def test_the_day_and_the_deadline_both_gate_it():
    chosen = Settings().updated(feedback="diagnosed", feedback_from="2025-03-10", deadlines=["lab900=2025-03-12T23:59"])
    local = datetime(2025, 3, 10).astimezone()
    assert not chosen.diagnosed("lab900", local - timedelta(seconds=1))
    assert not chosen.diagnosed("lab900", local + timedelta(days=1))  # the day came, the deadline has not passed
    assert chosen.diagnosed("lab900", datetime(2025, 3, 13).astimezone())
    assert chosen.diagnosed("lab8", local)  # no deadline of its own: from the day
    assert not Settings().diagnosed("lab900", datetime(2030, 1, 1).astimezone())


def test_the_class_feedback_switches_on_its_day(tmp_path):
    out = tmp_path / "class"
    folder = store(out, "amy", _result())
    (folder / feedback.DIAGNOSIS).write_text(json.dumps(_diagnosis()))
    chosen = Settings().updated(feedback="diagnosed", feedback_from="2025-03-10")
    summary = {}
    for name, settings_, now in (("summary", Settings(), datetime(2025, 4, 1).astimezone()),
                                 ("before", chosen, datetime(2025, 3, 9, 23, 59).astimezone()),
                                 ("after", chosen, datetime(2025, 3, 10, 0, 1).astimezone())):
        class_folder.write(class_folder.build(out, settings_), now=now)
        summary[name] = ((folder / "feedback.md").read_text(), (folder / "feedback.html").read_text())
    assert summary["before"] == summary["summary"]  # before the day: exactly today's feedback
    assert not any(_shows(text, "[1, 2, 9, 9]") or "What went wrong" in text for text in summary["summary"])
    for text in summary["after"]:
        assert _shows(text, "[1, 2, 9, 9]") and _shows(text, "[1, 2, 3, 4]") and _shows(text, "off_by_two")
        assert SECRET not in text


def test_report_takes_and_remembers_the_flags(tmp_path):
    out = tmp_path / "class"
    folder = store(out, "amy", _result())
    (folder / feedback.DIAGNOSIS).write_text(json.dumps(_diagnosis()))
    assert cli.main(["report", "--out", str(out), "--student-feedback", "diagnosed", "--feedback-from",
                     "2000-01-01"]) == 0
    assert _shows((folder / "feedback.md").read_text(), "[1, 2, 3, 4]")
    assert cli.main(["report", "--out", str(out)]) == 0  # remembered
    assert _shows((folder / "feedback.html").read_text(), "[1, 2, 3, 4]")
    assert cli.main(["report", "--out", str(out), "--feedback-from", "2999-01-01"]) == 0  # not yet
    assert not _shows((folder / "feedback.md").read_text(), "[1, 2, 3, 4]")
    assert json.loads((out / "class.json").read_text())["feedback"] == "diagnosed"
    assert cli.main(["report", "--out", str(out), "--student-feedback", "diagnosed", "--feedback-from", "none"]) == 2


_HOSTILE = st.one_of(
    st.sampled_from(["<script>alert(1)</script>", "</code></dd><script>x()</script>", "<img src=x onerror=y>",
                     "\" onmouseover=\"z", "[a](javascript:x) ![i](y) | # h `c`"]),
    st.text(alphabet=st.sampled_from("<>&\"'/=|`*_[]()!# scriptimg\n\u2028x"), max_size=80))


@settings(max_examples=60, deadline=None)
@given(value=_HOSTILE, name=_HOSTILE, pad=st.integers(0, 5000))
def test_hostile_values_are_escaped_and_bounded(value, name, pad):
    hostile = value + "y" * pad
    diagnosis = _diagnosis(value=hostile, name=name)
    diagnosis["900.1"]["cases"][0]["input"] = hostile
    page = feedback.render_html("amy", _result(value_message=value), diagnosis=diagnosis)
    parsed = _parsed(page)
    assert "script" not in parsed.tags and "img" not in parsed.tags and parsed.tags.count("a") == 2  # the task index
    text = "".join(parsed.text)
    assert safe_text.plain(hostile, feedback.LIMIT_SHOWN) in text  # shown as written, cut
    assert "y" * (feedback.LIMIT_SHOWN + 1) not in text
    md = feedback.render("amy", _result(value_message=value), diagnosis=diagnosis)
    assert "<script" not in md and "<img" not in md and not re.search(r"(?<!\\)\](\(|$)", md)  # no live link
    assert all(len(line) < 4 * feedback.LIMIT_SHOWN + 100 for line in md.splitlines())


def _explained() -> dict:
    return {"900.1": feedback.explained_text(_result().tasks[0], _diagnosis())}


def test_gradescope_shows_the_summary_now_and_the_explanation_after_the_due_date():
    plain = _result().to_gradescope_dict()
    data = _result().to_gradescope_dict(_explained())
    assert data["tests"][:len(plain["tests"])] == plain["tests"]  # the summary as without it, visible at once
    assert all(t["visibility"] == "visible" for t in plain["tests"])
    extra = data["tests"][len(plain["tests"]):]
    assert [(t["number"], t["visibility"], t["score"], t["max_score"]) for t in extra] == [
        ("900.1.explained", "after_due_date", 0, 0)]
    assert "Input: {\"n\": 4}" in extra[0]["output"] and "Expected: [1, 2, 3, 4]" in extra[0]["output"]
    assert "Likely mistake: off_by_two: adds two to the last values" in extra[0]["output"]
    assert SECRET not in json.dumps(data) and data["score"] == plain["score"]


@pytest.mark.parametrize("student_feedback", ["summary", "diagnosed"])
def test_autograde_adds_after_due_date_tests_only_when_built_diagnosed(tmp_path, monkeypatch, student_feedback):
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "lab1.ipynb").write_text("{}")

    def graded(path, lab, out_dir, limits=None):  # stands in for a notebook run: its files, as grading writes them
        out_dir.mkdir(parents=True)
        (out_dir / feedback.DIAGNOSIS).write_text(json.dumps(_diagnosis(value=f"{tmp_path}/submission/x")))
        return _result()

    monkeypatch.setattr(gradescope, "grade_submission", graded)
    data = gradescope.autograde(get_lab("lab1"), tmp_path, student_feedback=student_feedback)
    after = [t for t in data["tests"] if t["visibility"] == "after_due_date"]
    if student_feedback == "summary":
        assert after == [] and len(data["tests"]) == 2
    else:
        assert [t["number"] for t in after] == ["900.1.explained"]
        assert "Your value: x\n" in after[0]["output"] and str(tmp_path) not in json.dumps(data)
    assert "What went wrong" not in (tmp_path / "results" / "feedback.md").read_text()


def test_the_zip_built_diagnosed_tells_run_autograder(tmp_path):
    for flag in ("summary", "diagnosed"):
        zip_path = tmp_path / f"{flag}.zip"
        assert cli.main(["gradescope", "--lab", "lab1", "--out", str(zip_path), "--student-feedback", flag]) == 0
        with zipfile.ZipFile(zip_path) as archive:
            command = archive.read("run_autograder").decode().strip().splitlines()[-1]
        assert command.startswith('exec "$PYTHON" -m grader autograde --lab lab1 --memory')
        assert command.endswith(" --student-feedback diagnosed") == (flag == "diagnosed")
        assert cli.parser().parse_args(command.split()[4:]).student_feedback == (None if flag == "summary" else flag)  # the flag autograde takes
