"""The gradebook as numbers: statuses, one file per lab plus a summary, overrides, late penalties, a roster.

Classes are built in memory (tests/classes.py) and stored as grading would store them; no notebook runs.
"""
from __future__ import annotations

import csv
import dataclasses
import os
import stat

import pytest
from classes import result, store

from grader.report import class_folder, gradebook
from grader.report.settings import Settings


def _rows(path):
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _book(out, **settings):
    return class_folder.build(out, Settings().updated(**settings))


def test_statuses_tell_full_marks_partial_errors_and_ungraded_apart(tmp_path):
    store(tmp_path, "full", result("lab900", {"900.1": 5, "900.2": 5}))
    store(tmp_path, "partial", result("lab900", {"900.1": 5, "900.2": 0}))
    store(tmp_path, "raised", result("lab900", {"900.1": 5, "900.2": (0, "error", "cell 3 raised ValueError")}))
    store(tmp_path, "slow", result("lab900", {"900.1": 5, "900.2": (0, "missing", "never exported")}, execution="timeout"))
    store(tmp_path, "script", result("lab900", {"900.1": (0, "missing", "not a notebook"),
                                              "900.2": (0, "missing", "not a notebook")}, execution="missing"))
    store(tmp_path, "fault", result("lab900", {"900.1": 5, "900.2": 0}, execution="crash"), retry=True)
    book = _book(tmp_path)
    assert {r.submission: r.status for r in book.rows} == {
        "full": "full marks", "partial": "partial", "raised": "errors", "slow": "errors", "script": "ungraded",
        "fault": "ungraded"}
    assert {r.submission: r.problems for r in book.rows}["raised"] == "900.2 error"


def test_scores_are_numbers_and_each_lab_has_its_own_file(tmp_path):
    store(tmp_path, "amy", result("lab900", {"900.1": 5, "900.2": 0}))
    store(tmp_path, "bob", dataclasses.replace(result("lab8", {"8.1": 5}), release=1))  # lab 8 before its Q1, Q2
    class_folder.write(_book(tmp_path))
    summary = _rows(tmp_path / "gradebook.csv")
    assert list(summary[0]) == ["submission", "lab", "release", "score", "max", "late days", "penalty", "total", "percent",
                                "status"]
    assert [(r["submission"], r["lab"], r["total"], r["max"], r["percent"], r["status"]) for r in summary] == [
        ("bob", "lab8", "5", "5", "100.0", "full marks"), ("amy", "lab900", "5", "10", "50.0", "partial")]
    lab900 = _rows(tmp_path / "gradebook_lab900.csv")
    assert [k for k in lab900[0] if k[0].isdigit()] == ["900.1", "900.1 max", "900.2", "900.2 max"]
    assert (lab900[0]["900.1"], lab900[0]["900.2"], lab900[0]["900.2 max"], lab900[0]["problems"]) == ("5", "0", "5", "900.2 failed")
    assert [k for k in _rows(tmp_path / "gradebook_lab8.csv")[0] if k[0].isdigit()] == ["8.1", "8.1 max"]
    assert float(lab900[0]["total"]) + 0 == 5.0  # a number a spreadsheet can add up


def test_every_result_file_gets_the_same_mode(tmp_path):
    store(tmp_path, "amy", result("lab900", {"900.1": 5, "900.2": 0}))
    old = os.umask(0o022)
    try:
        class_folder.write(_book(tmp_path))
    finally:
        os.umask(old)
    modes = {str(p.relative_to(tmp_path)): stat.S_IMODE(p.stat().st_mode) for p in tmp_path.rglob("*") if p.is_file()}
    assert {"gradebook.csv", "statistics.csv", "report.html", "amy/feedback.html", "amy/grading.json"} <= set(modes)
    assert set(modes.values()) == {0o644}, modes


def test_overrides_change_points_status_and_feedback_and_bad_lines_are_reported(tmp_path):
    store(tmp_path, "amy", result("lab900", {"900.1": 5, "900.2": 0}))
    store(tmp_path, "bob", result("lab900", {"900.1": 0, "900.2": 5}))
    (tmp_path / "overrides.csv").write_text(
        "student,task,points,reason\n"
        "amy,900.2,5,regrade request: the reference was wrong\n"
        "bob,900.1,2.5,partial credit for the method\n"
        "bob,900.7,1,typo\n"
        "cat,900.1,1,no such student\n"
        "amy,900.1,6,more than the task is worth\n")
    book = _book(tmp_path, overrides=str(tmp_path / "overrides.csv"))
    rows = {r.submission: r for r in book.rows}
    assert (rows["amy"].total, rows["amy"].status) == (10, "full marks")
    assert (rows["bob"].total, rows["bob"].status) == (7.5, "partial")
    assert [(o.task, o.old, o.new) for o in rows["amy"].overrides] == [("900.2", 0, 5)]
    assert book.problems == (
        "overrides line 4: no graded submission of 'bob' has task 900.7; nothing changed",
        "overrides line 5: no graded submission of 'cat' has task 900.1; nothing changed",
        "overrides line 6: 6 points for task 900.1, which is worth 5: write 0 to 5; nothing changed")
    class_folder.write(book)
    feedback = (tmp_path / "amy" / "feedback.md").read_text()
    assert "**Score: 10 / 10**" in feedback
    assert "Task 900.2: 5 points instead of the autograder's 0, set by your instructor. Reason: regrade request" in feedback
    assert "regrade request: the reference was wrong" in (tmp_path / "amy" / "feedback.html").read_text()
    assert _rows(tmp_path / "gradebook_lab900.csv")[0]["overrides"] == "900.2: 0 -> 5 (regrade request: the reference was wrong)"
    # the autograder's own result is untouched
    assert '"score": 0' in (tmp_path / "amy" / "grading.json").read_text()


def test_late_penalty_per_day_with_an_extension(tmp_path):
    deadline = "2025-03-07T23:59:00+00:00"
    store(tmp_path, "ontime", result("lab900", {"900.1": 5, "900.2": 5}), submitted="2025-03-07T23:00:00+00:00")
    store(tmp_path, "late", result("lab900", {"900.1": 5, "900.2": 5}), submitted="2025-03-09T10:00:00+00:00")
    store(tmp_path, "extended", result("lab900", {"900.1": 5, "900.2": 5}), submitted="2025-03-09T10:00:00+00:00")
    store(tmp_path, "verylate", result("lab900", {"900.1": 5, "900.2": 0}), submitted="2025-04-30T10:00:00+00:00")
    (tmp_path / "extensions.csv").write_text("student,lab,days,until,reason\nextended,lab900,2,,illness\n")
    book = _book(tmp_path, deadlines=[f"lab900={deadline}"], late_policy="10%/day",
                 extensions=str(tmp_path / "extensions.csv"))
    rows = {r.submission: r for r in book.rows}
    assert {n: (r.late.days, r.penalty, r.total) for n, r in rows.items()} == {
        "ontime": (0, 0, 10), "late": (2, 2, 8), "extended": (0, 0, 10), "verylate": (54, 5, 0)}
    assert rows["late"].status == "full marks"  # the work is complete; the penalty shows in total and late days
    class_folder.write(book)
    assert "Late: submitted 2025-03-09 10:00 +0000, 2 days after the deadline" in (tmp_path / "late" / "feedback.md").read_text()
    assert {r["submission"]: (r["late days"], r["penalty"], r["total"]) for r in _rows(tmp_path / "gradebook.csv")}[
        "late"] == ("2", "2", "8")


def test_a_flag_only_policy_marks_late_work_and_takes_nothing(tmp_path):
    store(tmp_path, "late", result("lab900", {"900.1": 5, "900.2": 5}), submitted="2025-03-09T10:00:00+00:00")
    row, = _book(tmp_path, deadlines=["lab900=2025-03-07T23:59:00+00:00"], late_policy="flag").rows
    assert (row.late.days, row.penalty, row.total) == (2, 0, 10)
    assert "no points taken off" in row.late.sentence()


def test_settings_are_remembered_and_malformed_ones_say_what_to_write(tmp_path):
    settings = Settings().updated(deadlines=["lab900=2025-03-07T23:59:00+00:00"], late_policy="5%/day")
    settings.save(tmp_path)
    again = Settings.load(tmp_path).updated(roster=None)
    assert again.deadlines == {"lab900": "2025-03-07T23:59:00+00:00"} and again.late_policy == "5%/day"
    assert Settings.load(tmp_path).updated(deadlines=["lab900=none"]).deadlines == {}
    with pytest.raises(ValueError, match="write 'flag'"):
        Settings().updated(late_policy="ten percent")
    with pytest.raises(ValueError, match="ISO 8601"):
        Settings().updated(deadlines=["lab900=next friday"])
    with pytest.raises(ValueError, match="LAB=TIME"):
        Settings().updated(deadlines=["2025-03-07"])


def test_a_roster_names_each_row_and_lists_students_who_submitted_nothing(tmp_path):
    classroom = tmp_path / "class"
    store(tmp_path / "out", "amy", result("lab900", {"900.1": 5, "900.2": 0}), source=classroom / "s001" / "lab900.ipynb")
    store(tmp_path / "out", "bob", result("lab900", {"900.1": 5, "900.2": 5}), source=classroom / "bob_s002" / "lab900.ipynb")
    store(tmp_path / "out", "zed", result("lab900", {"900.1": 5, "900.2": 5}), source=tmp_path / "elsewhere" / "lab900.ipynb")
    (tmp_path / "roster.csv").write_text(
        "student_id,name,email,submission\n"
        "s001,Amy Adams,amy@example.edu,\n"
        "s002,Bob Brown,bob@example.edu,class/*_s002/\n"
        "s003,Cat Clark,cat@example.edu,class/s003\n")
    book = _book(tmp_path / "out", roster=str(tmp_path / "roster.csv"))
    assert [(r.submission, r.student.student_id if r.student else None, r.status) for r in book.rows] == [
        ("amy", "s001", "partial"), ("bob", "s002", "full marks"), ("zed", None, "full marks"),
        ("", "s003", "not submitted")]
    assert book.unowned == ("zed",)
    class_folder.write(book)
    lab900 = _rows(tmp_path / "out" / "gradebook_lab900.csv")
    assert [(r["student_id"], r["name"], r["total"], r["status"]) for r in lab900] == [
        ("s001", "Amy Adams", "5", "partial"), ("s002", "Bob Brown", "10", "full marks"), ("", "", "10", "full marks"),
        ("s003", "Cat Clark", "0", "not submitted")]


def test_a_roster_with_mistakes_is_reported_with_its_line(tmp_path):
    store(tmp_path, "amy", result("lab900", {"900.1": 5, "900.2": 0}))
    (tmp_path / "roster.csv").write_text("student_id,name\ns1,A\ns1,B\n")
    book = _book(tmp_path, roster=str(tmp_path / "roster.csv"))
    assert book.problems == (f"{tmp_path / 'roster.csv'} line 3: student_id s1 is also on line 2; ids must be unique",)
    assert book.roster is None and [r.submission for r in book.rows] == ["amy"]


def test_identical_submissions_are_flagged(tmp_path):
    store(tmp_path, "amy", result("lab900", {"900.1": 5, "900.2": 0}), digest="same")
    store(tmp_path, "bob", result("lab900", {"900.1": 5, "900.2": 0}), digest="same")
    store(tmp_path, "cat", result("lab900", {"900.1": 5, "900.2": 0}), digest="other")
    assert {r.submission: r.identical for r in _book(tmp_path).rows} == {"amy": ("bob",), "bob": ("amy",), "cat": ()}


def test_the_terminal_gradebook_has_one_table_per_lab():
    from grader.report.gradebook import Cell, Row
    rows = [Row("amy", "lab900", (Cell("900.1", "First", 5, 5, "passed"),), "full marks"),
            Row("bob", "lab8", (Cell("8.1", "Other", 0, 4, "failed"),), "partial")]
    first, second = gradebook.render(rows).split("\n\n")
    assert first.splitlines()[0] == "lab900" and "8.1" not in first
    assert second.splitlines()[0] == "lab8" and second.splitlines()[3].split() == ["bob", "0", "0", "4", "0", "partial"]


def test_the_report_command_applies_and_remembers_the_settings(tmp_path, capsys):
    from grader import cli
    store(tmp_path, "late", result("lab900", {"900.1": 5, "900.2": 5}), submitted="2025-03-09T10:00:00+00:00")
    assert cli.main(["report", "--out", str(tmp_path), "--deadline", "lab900=2025-03-07T23:59:00+00:00",
                     "--late-policy", "10%/day"]) == 0
    assert "late policy 10% of the lab's points per day late" in capsys.readouterr().out
    assert _rows(tmp_path / "gradebook.csv")[0]["total"] == "8"
    assert cli.main(["report", "--out", str(tmp_path)]) == 0  # remembered
    assert _rows(tmp_path / "gradebook.csv")[0]["total"] == "8"
    assert cli.main(["report", "--out", str(tmp_path), "--late-policy", "flag"]) == 0
    assert _rows(tmp_path / "gradebook.csv")[0]["total"] == "10"
    assert cli.main(["report", "--out", str(tmp_path), "--late-policy", "lots"]) == 2
    assert "write 'flag'" in capsys.readouterr().err
    assert cli.main(["report", "--out", str(tmp_path / "empty")]) == 2
