"""One grade: the marks of written answers join the autograder's points in the gradebooks, the statistics,
the class report, every LMS export and the student's feedback. Results are built in memory (``writtenlab``)."""
from __future__ import annotations

import csv

import writtenlab

from grader.mark.store import Mark, Store
from grader.report import class_folder, export
from grader.report.settings import Settings

NOTE = "a common mix-up with task 902.2"
"""A marker's note of 902.Q1's rubric: it must never reach a student."""


def _rows(path):
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _mark(out, name, question, items, adjust=0.0, comment=""):
    record = class_folder.stored_records.load(out / name)
    answer = next(w for w in record.result.written if w.question == question)
    with Store(out) as store:
        store.save(Mark(name, question, answer.sha256, tuple(items), adjust, comment, "ta1"), 0)


def test_unmarked_answers_read_to_mark_and_marks_join_the_total(tmp_path):
    with writtenlab.class_of(tmp_path, {"amy": ("It is 41 because.", "All."), "bob": ("41, as said.", "")}) as out:
        class_folder.write(class_folder.build(out, Settings()))
        amy, bob = _rows(out / "gradebook_lab902.csv")
        assert [k for k in amy if k[0].isdigit()] == ["902.1", "902.1 max", "902.2", "902.2 max", "902.Q1",
                                                      "902.Q1 max", "902.Q2", "902.Q2 max", "902.P", "902.P max"]
        assert (amy["902.Q1"], amy["902.Q2"], amy["902.P"], amy["score"], amy["max"], amy["status"]) == (
            "to mark", "to mark", "0", "7", "10", "to mark")
        assert amy["problems"] == "902.Q1 to mark; 902.Q2 to mark"
        assert (bob["902.Q2"], bob["problems"]) == ("0", "902.Q1 to mark")  # no answer: nothing to mark

        _mark(out, "amy", "902.Q1", ["A", "B"], comment="Clear.")
        _mark(out, "amy", "902.Q2", ["A"])
        _mark(out, "bob", "902.Q1", ["A", "X"], adjust=0.5)
        class_folder.write(class_folder.build(out, Settings()))
        amy, bob = _rows(out / "gradebook_lab902.csv")
        assert (amy["902.Q1"], amy["902.Q2"], amy["score"], amy["percent"], amy["status"]) == (
            "2", "1", "10", "100.0", "full marks")
        assert (bob["902.Q1"], bob["score"], bob["status"], bob["problems"]) == ("0.5", "7.5", "partial", "")
        summary = {r["submission"]: r for r in _rows(out / "gradebook.csv")}
        assert (summary["amy"]["total"], summary["bob"]["total"]) == ("10", "7.5")


def test_the_feedback_shows_the_items_applied_and_the_comment_but_never_a_markers_note(tmp_path):
    with writtenlab.class_of(tmp_path, {"amy": ("It is 41 because.", "All.")}) as out:
        class_folder.write(class_folder.build(out, Settings()))
        before = (out / "amy" / "feedback.md").read_text()
        assert "**Score: 7 / 10** (not final: 2 written answers still to be marked)" in before
        assert "Your answer was received (4 words); it has not been marked yet." in before
        _mark(out, "amy", "902.Q1", ["A", "X"], comment="<script>alert(1)</script> [link](http://x) =1+1")
        class_folder.write(class_folder.build(out, Settings()))
        md = (out / "amy" / "feedback.md").read_text()
        html = (out / "amy" / "feedback.html").read_text()
        assert "### Q1 (task 902.1): 0/2 (marked)" in md and "### Q2 (task 902.2): -/1 (to mark)" in md
        assert "- \\+1: Names the number\n- \\-1: Claims it is 42\n" in md  # escaped: no list inside a list
        assert "- Comment: &lt;script&gt;alert(1)&lt;/script&gt; \\[link\\](http:\u200b//x) =1+1" in md
        assert "<script>" not in md
        assert "<li>Comment: &lt;script&gt;alert(1)&lt;/script&gt; [link](http://x) =1+1</li>" in html
        assert "<script>" not in html
        assert "Names the number" in html and NOTE not in md + html and "ta1" not in md + html
        assert "**Score: 7 / 10** (not final: 1 written answer still to be marked)" in md


def test_a_regrade_keeps_every_mark_and_a_changed_answer_is_flagged_to_re_mark(tmp_path):
    with writtenlab.class_of(tmp_path, {"amy": ("It is 41 because.", "All.")}) as out:
        _mark(out, "amy", "902.Q1", ["A", "B"])
        _mark(out, "amy", "902.Q2", ["A"])
        writtenlab.store(out, "amy", writtenlab.result("It is 41 because.", "All.", auto=(3, 0)))  # graded again
        class_folder.write(class_folder.build(out, Settings()))
        [row] = _rows(out / "gradebook_lab902.csv")
        assert (row["902.Q1"], row["902.Q2"], row["score"], row["status"]) == ("2", "1", "6", "partial")
        writtenlab.store(out, "amy", writtenlab.result("It is 41, because the task says so.", "All."))
        class_folder.write(class_folder.build(out, Settings()))
        [row] = _rows(out / "gradebook_lab902.csv")
        assert (row["902.Q1"], row["score"], row["status"], row["problems"]) == ("2", "10", "to mark",
                                                                               "902.Q1 to re-mark")
        assert "earlier mark counts until it is marked again" in (out / "amy" / "feedback.md").read_text()


def test_an_earlier_releases_notebook_is_not_asked_the_later_question_and_keeps_its_total(tmp_path):
    with writtenlab.registered(tmp_path / "refs"):
        out = tmp_path / "out"
        writtenlab.store(out, "old", writtenlab.result("It is 41.", None, release=1, auto=(3, 5)))
        _mark(out, "old", "902.Q1", ["A", "B"])
        class_folder.write(class_folder.build(out, Settings()))
        [row] = _rows(out / "gradebook_lab902.csv")
        assert (row["release"], row["902.Q1"], row["score"], row["max"], row["status"]) == ("1", "2", "10", "10",
                                                                                          "full marks")
        assert "902.Q2" not in row


def test_the_statistics_give_each_question_its_mean_and_the_item_most_often_missed(tmp_path):
    with writtenlab.class_of(tmp_path, {"amy": ("One two three.", "x"), "bob": ("Four five six.", "y"),
                                         "cat": ("Seven eight nine.", "z")}) as out:
        _mark(out, "amy", "902.Q1", ["A", "B"])
        _mark(out, "bob", "902.Q1", ["A"])
        class_folder.write(class_folder.build(out, Settings()))
        stats = {r["task"]: r for r in _rows(out / "statistics.csv")}
        q1 = stats["902.Q1"]
        assert (q1["title"], q1["submissions"], q1["mean"], q1["full marks"], q1["pass rate %"]) == (
            "Q1 (graded by hand; 1 to mark)", "2", "1.5", "1", "50.0")
        assert (q1["most common failure"], q1["count"]) == ("not earned: rubric item B (Says why)", "1")
        assert "902.P" not in stats and list(stats)[:2] == ["902.1", "902.2"]


def test_the_class_report_has_a_column_per_question_and_counts_marked_and_to_mark(tmp_path):
    with writtenlab.class_of(tmp_path, {"amy": ("It is 41 because.", "All."), "bob": ("41.", "")}) as out:
        _mark(out, "amy", "902.Q1", ["A"])
        class_folder.write(class_folder.build(out, Settings()))
        page = (out / "report.html").read_text()
        assert "<th>902.Q1</th><th>902.Q2</th><th>total</th>" in page
        assert ("<tr><td>902.Q1</td><td class=\"num\">1</td><td class=\"num pending\">1</td>"
                "<td class=\"num pending\">0</td><td class=\"num\">0</td><td class=\"num\">1.00 of 2</td></tr>") in page
        assert "<td class=\"num pending\">to mark</td>" in page


def _exported(out, tmp_path, fmt, unmarked):
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name,email,submission\ns1,Amy Adams,amy@x.org,class/amy\n"
                      "s2,Bob Brown,bob@x.org,class/bob\n")
    book = class_folder.build(out, Settings().updated(roster=str(roster)))
    return export.build(book, fmt, unmarked=unmarked)


def test_exports_leave_a_lab_still_to_mark_blank_or_give_the_total_so_far_or_the_autograders_alone(tmp_path):
    with writtenlab.class_of(tmp_path, {"amy": ("It is 41 because.", "All."), "bob": ("41.", "")}) as out:
        _mark(out, "amy", "902.Q1", ["A", "B"])
        _mark(out, "amy", "902.Q2", ["A"])
        _mark(out, "bob", "902.Q1", ["A"])  # bob is marked; his Q2 is empty: nothing to mark
        blank = _exported(out, tmp_path, "canvas", "blank")
        assert [row[-1] for row in blank.rows[1:]] == [10, 8]
        writtenlab.store(out, "amy", writtenlab.result("It is 41 because.", "Everything, now.",
                                                       auto=(3, 4)), source=tmp_path / "class" / "amy" / "lab902.ipynb")
        blank = _exported(out, tmp_path, "canvas", "blank")
        assert [row[-1] for row in blank.rows[1:]] == ["", 8]
        assert any("s1: lab902 (amy) has written answers still to mark (902.Q2): left empty" in w for w in blank.warnings)
        assert [row[-1] for row in _exported(out, tmp_path, "canvas", "zero").rows[1:]] == [10, 8]
        assert [row[-1] for row in _exported(out, tmp_path, "canvas", "auto").rows[1:]] == [7, 8]  # bob's is final
        moodle = _exported(out, tmp_path, "moodle", "zero")
        assert moodle.rows[0][-1] == "10/10 (to mark); written 3/3 (1 to mark)"
