"""Class-scale grading on the tiny lab: resumable, forced, regrade diff, statistics, feedback files,
and a grader fault on one notebook that neither stops the class nor is remembered as done."""
from __future__ import annotations

import csv
import json

import pytest

from grader.grade import batch
from grader.execute.limits import Limits
from tinylab import GOOD_1, GOOD_2, export, notebook, registered, write

LIMITS = Limits(cell_timeout=30, notebook_timeout=60)


def _class(root):
    heading_1, heading_2 = ("md", "## Task 9.1: First (5 points)"), ("md", "## Task 9.2: Second (5 points)")
    write(notebook(heading_1, GOOD_1, heading_2, GOOD_2), root / "amy" / "lab9.ipynb")
    write(notebook(heading_1, export("9.1", "40"), heading_2, GOOD_2), root / "bob" / "lab9.ipynb")
    return root


def _csv(path):
    with path.open() as handle:
        return list(csv.DictReader(handle))


@pytest.fixture
def lab9(tmp_path):
    with registered(tmp_path / "references") as lab:
        yield lab


def _grade(tmp_path, capsys, **options):
    code = batch.main(paths=[tmp_path / "class"], out=tmp_path / "out", progress=False, limits=LIMITS, **options)
    return code, capsys.readouterr()


def test_a_rerun_keeps_unchanged_submissions_and_regrades_changed_ones(tmp_path, capsys, lab9):
    _class(tmp_path / "class")
    code, _ = _grade(tmp_path, capsys)
    assert code == 0
    assert [(r["submission"], r["total"]) for r in _csv(tmp_path / "out" / "gradebook.csv")] == [
        ("amy__lab9", "10/10"), ("bob__lab9", "5/10")]
    record = {n: (tmp_path / "out" / n / "grading.json").stat().st_mtime_ns for n in ("amy__lab9", "bob__lab9")}

    code, printed = _grade(tmp_path, capsys)
    assert code == 0 and "2 of 2 submissions unchanged" in printed.err
    assert {n: (tmp_path / "out" / n / "grading.json").stat().st_mtime_ns for n in record} == record
    assert "amy__lab9" in printed.out and "10/10" in printed.out  # kept results are still in the gradebook

    write(notebook(("md", "## Task 9.1: First (5 points)"), GOOD_1, ("md", "## Task 9.2: Second (5 points)"),
                   GOOD_2), tmp_path / "class" / "bob" / "lab9.ipynb")  # bob fixes 9.1
    code, printed = _grade(tmp_path, capsys)
    assert "1 of 2 submissions unchanged" in printed.err
    assert (tmp_path / "out" / "amy__lab9" / "grading.json").stat().st_mtime_ns == record["amy__lab9"]
    assert _csv(tmp_path / "out" / "regrade_diff.csv") == [
        {"submission": "bob__lab9", "lab": "lab9", "task": "9.1", "old": "0", "new": "5", "change": "+5",
         "because": "notebook"},
        {"submission": "bob__lab9", "lab": "lab9", "task": "total", "old": "5", "new": "10", "change": "+5",
         "because": "notebook"}]


def test_changed_references_regrade_everyone_and_the_diff_says_why(tmp_path, capsys, lab9):
    _class(tmp_path / "class")
    _grade(tmp_path, capsys)
    refs = tmp_path / "references" / "lab9.json"
    data = json.loads(refs.read_text())
    data["answers"]["9.2"] = 43  # a corrected reference: 42 was wrong
    refs.write_text(json.dumps(data))
    code, printed = _grade(tmp_path, capsys)
    assert "unchanged" not in printed.err
    diff = _csv(tmp_path / "out" / "regrade_diff.csv")
    assert {(r["submission"], r["task"], r["old"], r["new"], r["because"]) for r in diff} == {
        ("amy__lab9", "9.2", "5", "0", "references"), ("amy__lab9", "total", "10", "5", "references"),
        ("bob__lab9", "9.2", "5", "0", "references"), ("bob__lab9", "total", "5", "0", "references")}
    assert "Scores changed since the last grading (2 submissions)" in printed.out


def test_force_regrades_and_an_unchanged_score_is_not_a_change(tmp_path, capsys, lab9):
    _class(tmp_path / "class")
    _grade(tmp_path, capsys)
    before = (tmp_path / "out" / "amy__lab9" / "grading.json").stat().st_mtime_ns
    code, printed = _grade(tmp_path, capsys, force=True)
    assert code == 0 and "unchanged" not in printed.err
    assert (tmp_path / "out" / "amy__lab9" / "grading.json").stat().st_mtime_ns != before
    assert _csv(tmp_path / "out" / "regrade_diff.csv") == []


def test_statistics_and_feedback_files(tmp_path, capsys, lab9):
    _class(tmp_path / "class")
    _grade(tmp_path, capsys, feedback_dir=tmp_path / "feedback")
    stats = {r["task"]: r for r in _csv(tmp_path / "out" / "statistics.csv")}
    assert (stats["9.1"]["mean"], stats["9.1"]["pass rate"], stats["9.1"]["count"]) == ("2.50", "50%", "1")
    assert stats["9.1"]["most common failure"] == "failed: answer: answer: expected N found N (compared exact)"
    assert (stats["9.2"]["mean"], stats["9.2"]["pass rate"], stats["9.2"]["most common failure"]) == ("5.00", "100%", "")
    bob = (tmp_path / "feedback" / "bob__lab9.md").read_text()
    assert "**Score: 5 / 10**" in bob and "| 9.1 First | 0/5 | failed |" in bob
    assert (tmp_path / "out" / "bob__lab9" / "feedback.md").read_text() == bob


def test_a_grader_fault_on_one_notebook_is_a_row_and_is_retried_next_time(tmp_path, capsys, lab9, monkeypatch):
    _class(tmp_path / "class")
    real = batch.grade_submission

    def flaky(path, lab, out_dir, **kwargs):
        if "bob" in str(path):
            raise RuntimeError("disk full")
        return real(path, lab, out_dir, **kwargs)

    monkeypatch.setattr(batch, "grade_submission", flaky)
    code, printed = _grade(tmp_path, capsys)
    assert code == 1 and "grader fault on bob__lab9" in printed.err
    rows = {r["submission"]: r for r in _csv(tmp_path / "out" / "gradebook.csv")}
    assert rows["amy__lab9"]["total"] == "10/10" and rows["bob__lab9"]["status"] == "crash"
    results = json.loads((tmp_path / "out" / "bob__lab9" / "results.json").read_text())
    assert "the grader could not grade this notebook (RuntimeError: disk full)" in results["output"]

    monkeypatch.setattr(batch, "grade_submission", real)
    code, printed = _grade(tmp_path, capsys)
    assert code == 0 and "1 of 2 submissions unchanged" in printed.err
    assert {r["submission"]: r["total"] for r in _csv(tmp_path / "out" / "gradebook.csv")}["bob__lab9"] == "5/10"
