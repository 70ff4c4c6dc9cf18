"""Class-scale grading on the tiny lab: resumable, forced, regrade diff, statistics, feedback files,
and a grader fault on one notebook that neither stops the class nor is remembered as done."""
from __future__ import annotations

import csv
import json

import pytest
from tinylab import GOOD_1, GOOD_2, export, notebook, registered, write

from grader.core.limits import Limits
from grader.grade import batch, jobs

LIMITS = Limits(cell_timeout=30, notebook_timeout=60)


def _class(root):
    heading_1, heading_2 = ("md", "## Task 900.1: First (5 points)"), ("md", "## Task 900.2: Second (5 points)")
    write(notebook(heading_1, GOOD_1, heading_2, GOOD_2), root / "amy" / "lab900.ipynb")
    write(notebook(heading_1, export("900.1", "40"), heading_2, GOOD_2), root / "bob" / "lab900.ipynb")
    return root


def _csv(path):
    with path.open() as handle:
        return list(csv.DictReader(handle))


@pytest.fixture
def lab900(tmp_path):
    with registered(tmp_path / "references") as lab:
        yield lab


def _grade(tmp_path, capsys, **options):
    code = batch.main(paths=[tmp_path / "class"], out=tmp_path / "out", progress=False, limits=LIMITS, **options)
    return code, capsys.readouterr()


def test_a_rerun_keeps_unchanged_submissions_and_regrades_changed_ones(tmp_path, capsys, lab900):
    _class(tmp_path / "class")
    code, _ = _grade(tmp_path, capsys)
    assert code == 0
    assert [(r["submission"], r["total"], r["max"], r["status"]) for r in _csv(tmp_path / "out" / "gradebook.csv")] == [
        ("amy__lab900", "10", "10", "full marks"), ("bob__lab900", "5", "10", "partial")]
    record = {n: (tmp_path / "out" / n / "grading.json").stat().st_mtime_ns for n in ("amy__lab900", "bob__lab900")}

    code, printed = _grade(tmp_path, capsys)
    assert code == 0 and "2 of 2 submissions unchanged" in printed.err
    assert {n: (tmp_path / "out" / n / "grading.json").stat().st_mtime_ns for n in record} == record
    assert "amy__lab900" in printed.out and "full marks" in printed.out  # kept results are still in the gradebook

    write(notebook(("md", "## Task 900.1: First (5 points)"), GOOD_1, ("md", "## Task 900.2: Second (5 points)"),
                   GOOD_2), tmp_path / "class" / "bob" / "lab900.ipynb")  # bob fixes 900.1
    code, printed = _grade(tmp_path, capsys)
    assert "1 of 2 submissions unchanged" in printed.err
    assert (tmp_path / "out" / "amy__lab900" / "grading.json").stat().st_mtime_ns == record["amy__lab900"]
    assert _csv(tmp_path / "out" / "regrade_diff.csv") == [
        {"submission": "bob__lab900", "lab": "lab900", "release": "1", "task": "900.1", "old": "0", "new": "5",
         "change": "5", "because": "submission"},
        {"submission": "bob__lab900", "lab": "lab900", "release": "1", "task": "total", "old": "5", "new": "10",
         "change": "5", "because": "submission"}]


def test_changed_references_regrade_everyone_and_the_diff_says_why(tmp_path, capsys, lab900):
    _class(tmp_path / "class")
    _grade(tmp_path, capsys)
    refs = tmp_path / "references" / "lab900.json"
    data = json.loads(refs.read_text())
    data["answers"]["900.2"] = 43  # a corrected reference: 42 was wrong
    refs.write_text(json.dumps(data))
    code, printed = _grade(tmp_path, capsys)
    assert "unchanged" not in printed.err
    diff = _csv(tmp_path / "out" / "regrade_diff.csv")
    assert {(r["submission"], r["task"], r["old"], r["new"], r["because"]) for r in diff} == {
        ("amy__lab900", "900.2", "5", "0", "references"), ("amy__lab900", "total", "10", "5", "references"),
        ("bob__lab900", "900.2", "5", "0", "references"), ("bob__lab900", "total", "5", "0", "references")}
    assert "Scores changed in this run (2 submissions)" in printed.out


def test_force_regrades_and_an_unchanged_score_is_not_a_change(tmp_path, capsys, lab900):
    _class(tmp_path / "class")
    _grade(tmp_path, capsys)
    before = (tmp_path / "out" / "amy__lab900" / "grading.json").stat().st_mtime_ns
    code, printed = _grade(tmp_path, capsys, force=True)
    assert code == 0 and "unchanged" not in printed.err
    assert (tmp_path / "out" / "amy__lab900" / "grading.json").stat().st_mtime_ns != before
    assert _csv(tmp_path / "out" / "regrade_diff.csv") == []


def test_statistics_and_feedback_files(tmp_path, capsys, lab900):
    _class(tmp_path / "class")
    _grade(tmp_path, capsys, feedback_dir=tmp_path / "feedback")
    stats = {r["task"]: r for r in _csv(tmp_path / "out" / "statistics.csv")}
    assert (stats["900.1"]["mean"], stats["900.1"]["pass rate %"], stats["900.1"]["count"]) == ("2.5", "50.0", "1")
    assert stats["900.1"]["most common failure"] == "failed: answer: answer is too small by 1% to 10% (compared exact)"
    assert (stats["900.2"]["mean"], stats["900.2"]["pass rate %"], stats["900.2"]["most common failure"]) == ("5.0", "100.0", "")
    bob = (tmp_path / "feedback" / "bob__lab900.md").read_text()
    assert "**Score: 5 / 10**" in bob and "| 900.1 First | 0/5 | failed |" in bob
    assert (tmp_path / "out" / "bob__lab900" / "feedback.md").read_text() == bob
    page = (tmp_path / "feedback" / "bob__lab900.html").read_text()
    assert "<strong>Score: 5 / 10</strong>" in page and (tmp_path / "out" / "bob__lab900" / "feedback.html").exists()


def test_a_grader_fault_on_one_notebook_is_a_row_and_is_retried_next_time(tmp_path, capsys, lab900, monkeypatch):
    _class(tmp_path / "class")
    real = jobs.grade_submission

    def flaky(path, lab, out_dir, **kwargs):
        if "bob" in str(path):
            raise RuntimeError("disk full")
        return real(path, lab, out_dir, **kwargs)

    monkeypatch.setattr(jobs, "grade_submission", flaky)
    code, printed = _grade(tmp_path, capsys)
    assert code == 1 and "grader fault on bob__lab900" in printed.err
    rows = {r["submission"]: r for r in _csv(tmp_path / "out" / "gradebook.csv")}
    assert rows["amy__lab900"]["total"] == "10" and rows["bob__lab900"]["status"] == "ungraded"
    results = json.loads((tmp_path / "out" / "bob__lab900" / "results.json").read_text())
    assert "the grader could not grade this notebook (RuntimeError: disk full)" in results["output"]

    monkeypatch.setattr(jobs, "grade_submission", real)
    code, printed = _grade(tmp_path, capsys)
    assert code == 0 and "1 of 2 submissions unchanged" in printed.err
    assert {r["submission"]: r["total"] for r in _csv(tmp_path / "out" / "gradebook.csv")}["bob__lab900"] == "5"


GRADEBOOK_FILES = ("gradebook.csv", "gradebook_lab900.csv", "statistics.csv")


def _files(out):
    return {name: (out / name).read_text() for name in GRADEBOOK_FILES}


def test_regrading_one_student_into_the_class_folder_keeps_everyone_else(tmp_path, capsys, lab900):
    """`grade <one notebook> --out <the class's folder> --force` replaces that student's row, not the class."""
    _class(tmp_path / "class")
    _grade(tmp_path, capsys)
    write(notebook(("md", "## Task 900.1: First (5 points)"), GOOD_1, ("md", "## Task 900.2: Second (5 points)"),
                   GOOD_2), tmp_path / "class" / "bob" / "lab900.ipynb")  # bob fixes 900.1
    code = batch.main(paths=[tmp_path / "class" / "bob" / "lab900.ipynb"], out=tmp_path / "out", progress=False,
                      limits=LIMITS, force=True)
    printed = capsys.readouterr()
    assert code == 0
    assert [(r["submission"], r["total"], r["status"]) for r in _csv(tmp_path / "out" / "gradebook.csv")] == [
        ("amy__lab900", "10", "full marks"), ("bob__lab900", "10", "full marks")]
    assert [r["submission"] for r in _csv(tmp_path / "out" / "gradebook_lab900.csv")] == ["amy__lab900", "bob__lab900"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir()) == ["amy__lab900", "bob__lab900"]
    assert [(r["submission"], r["task"], r["change"], r["because"]) for r in _csv(tmp_path / "out" / "regrade_diff.csv")
            ] == [("bob__lab900", "900.1", "5", "submission"), ("bob__lab900", "total", "5", "submission")]
    assert {r["task"]: r["pass rate %"] for r in _csv(tmp_path / "out" / "statistics.csv")} == {
        "900.1": "100.0", "900.2": "100.0"}  # statistics of the whole class, not of the one regraded
    assert "amy__lab900" in printed.out


def test_a_class_regraded_one_student_at_a_time_ends_with_the_class_runs_gradebook(tmp_path, capsys, lab900):
    _class(tmp_path / "class")
    write(notebook(("md", "## Task 900.1: First (5 points)"), "raise ValueError('no')", ("md",
                   "## Task 900.2: Second (5 points)"), GOOD_2), tmp_path / "class" / "cat" / "lab900.ipynb")
    _grade(tmp_path, capsys)
    class_run = _files(tmp_path / "out")
    assert [r["status"] for r in _csv(tmp_path / "out" / "gradebook.csv")] == ["full marks", "partial", "errors"]
    for student in ("cat", "amy", "bob"):
        code = batch.main(paths=[tmp_path / "class" / student / "lab900.ipynb"], out=tmp_path / "out",
                          progress=False, limits=LIMITS, force=True)
        assert code == 0
    capsys.readouterr()
    assert _files(tmp_path / "out") == class_run
