"""LMS exports: the files Canvas's, Moodle's and Blackboard's grade importers read, and plain CSV, with
every roster student as a row (those who submitted nothing too). Each format is one module of
``grader/report/lms/``, found by the registry; the command line's choices come from it.

The Canvas layout is the one its importer parses (instructure/canvas-lms lib/gradebook_importer.rb:
the header starts Student, ID, then SIS User ID, SIS Login ID, and the last student column is
Section; a row starting "Points Possible" gives the maxima); Moodle's (grade/import/csv) maps an
identifier column (email address or ID number) and grade and feedback columns chosen at import.
"""
from __future__ import annotations

import csv

from classes import result, store

from grader import cli
from grader.report import class_folder, export
from grader.report.settings import Settings

ROSTER = ("student_id,name,email,submission,section,canvas_id\n"
          "s001,\"Adams, Amy\",amy@example.edu,class/amy,A1,101\n"
          "s002,\"Brown, Bob\",bob@example.edu,class/bob,A1,\n"
          "s003,\"Clark, Cat\",cat@example.edu,class/cat,A2,\n")


def _class(tmp_path, **settings):
    out, classroom = tmp_path / "out", tmp_path / "class"
    store(out, "amy", result("lab900", {"900.1": 5, "900.2": 0}), source=classroom / "amy" / "lab900.ipynb",
          submitted="2025-03-07T12:00:00+00:00")
    store(out, "bob", result("lab900", {"900.1": 5, "900.2": 5}), source=classroom / "bob" / "lab900.ipynb",
          submitted="2025-03-09T12:00:00+00:00")
    (tmp_path / "roster.csv").write_text(ROSTER)
    settings = {"roster": str(tmp_path / "roster.csv"), **settings}
    return class_folder.build(out, Settings().updated(**settings))


def _csv(path):
    with path.open(newline="") as handle:
        return list(csv.reader(handle))


def test_canvas_import_file(tmp_path):
    book = _class(tmp_path, deadlines=["lab900=2025-03-08T00:00:00+00:00"], late_policy="10%/day")
    done = export.build(book, "canvas", columns={"lab900": "Lab 9 (4711)"})
    assert done.headers == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lab 9 (4711)"]
    assert done.rows == [["    Points Possible", "", "", "", "", 10],
                         ["Adams, Amy", "101", "s001", "amy@example.edu", "A1", 5],
                         ["Brown, Bob", "", "s002", "bob@example.edu", "A1", 8],  # 2 days late at 10% a day
                         ["Clark, Cat", "", "s003", "cat@example.edu", "A2", 0]]  # submitted nothing
    assert done.warnings == []


def test_moodle_import_file_with_feedback(tmp_path):
    done = export.build(_class(tmp_path), "moodle", missing="blank")
    assert done.headers == ["ID number", "Email address", "Full name", "lab900", "lab900 feedback"]  # lab900: unregistered
    assert done.rows == [["s001", "amy@example.edu", "Adams, Amy", 5, "5/10 (partial)"],
                         ["s002", "bob@example.edu", "Brown, Bob", 10, "10/10 (full marks)"],
                         ["s003", "cat@example.edu", "Clark, Cat", "", "nothing submitted"]]


def test_plain_csv_with_and_without_a_roster(tmp_path):
    done = export.build(_class(tmp_path), "csv")
    assert done.headers[:4] == ["student_id", "name", "email", "section"]
    assert done.rows[2] == ["s003", "Clark, Cat", "cat@example.edu", "A2", 0, 10, 0.0, "not submitted", ""]
    no_roster = class_folder.build(tmp_path / "out", Settings())
    assert [r[0] for r in export.build(no_roster, "csv").rows] == ["amy", "bob"]


def test_several_submissions_of_one_student_and_a_grader_fault_are_reported(tmp_path):
    book = _class(tmp_path)
    store(tmp_path / "out", "amy_again", result("lab900", {"900.1": 5, "900.2": 5}),
          source=tmp_path / "class" / "amy" / "resubmitted" / "lab900.ipynb", submitted="2025-03-08T12:00:00+00:00")
    store(tmp_path / "out", "cat", result("lab900", {"900.1": 0, "900.2": 0}, execution="crash",
                                          notes=("the grader could not grade this notebook (OSError)",)),
          source=tmp_path / "class" / "cat" / "lab900.ipynb", retry=True)
    book = class_folder.build(tmp_path / "out", book.settings)
    done = export.build(book, "canvas")
    assert [row[5] for row in done.rows] == [10, 10, 10, ""]
    assert done.warnings == [
        "s001 has 2 submissions for lab900 (amy, amy_again): exported amy_again, the latest",
        "s003: lab900 (cat) could not be graded (a grader fault): left empty; grade it again first"]


def test_the_export_command(tmp_path, capsys):
    _class(tmp_path)
    assert cli.main(["export", "--format", "canvas", "--out", str(tmp_path / "out"),
                     "--roster", str(tmp_path / "roster.csv")]) == 0
    rows = _csv(tmp_path / "out" / "export_canvas.csv")
    assert rows[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] and len(rows) == 5
    assert "export_canvas.csv: canvas upload file, 3 rows" in capsys.readouterr().out
    # the roster is remembered: the next export needs no --roster
    assert cli.main(["export", "--format", "moodle", "--out", str(tmp_path / "out"), "--file",
                     str(tmp_path / "m.csv")]) == 0
    assert len(_csv(tmp_path / "m.csv")) == 4
    # without a roster, an LMS export says what it needs
    assert cli.main(["export", "--format", "canvas", "--out", str(tmp_path / "out"), "--roster", "none"]) == 2
    assert "needs a roster" in capsys.readouterr().err


def test_a_malformed_column_says_what_to_write(tmp_path, capsys):
    _class(tmp_path)
    assert cli.main(["export", "--format", "csv", "--out", str(tmp_path / "out"), "--column", "Lab 9"]) == 2
    assert "--column 'Lab 9': write LAB=NAME" in capsys.readouterr().err


def test_blackboard_grade_centre_file(tmp_path):
    """Blackboard matches rows by Username and updates a column whose header ends in its column id;
    every field is quoted in the file it writes."""
    roster = ROSTER.replace("section,canvas_id", "section,canvas_id,login_id").replace(",101\n", ",101,aadams\n")
    roster = roster.replace("A1,\n", "A1,,\n").replace("A2,\n", "A2,,\n")
    (tmp_path / "blackboard.csv").write_text(roster)
    book = _class(tmp_path, roster=str(tmp_path / "blackboard.csv"), deadlines=["lab900=2025-03-08T00:00:00+00:00"],
                  late_policy="10%/day")
    done = export.build(book, "blackboard", missing="blank")
    assert done.headers == ["Last Name", "First Name", "Username", "Student ID",
                            "lab900 [Total Pts: 10 Score]"]
    assert done.rows == [["Adams", "Amy", "aadams", "s001", 5],  # "Last, First" as the roster writes it
                         ["Brown", "Bob", "s002", "s002", 8],   # no login_id: the student id
                         ["Clark", "Cat", "s003", "s003", ""]]
    assert export.build(book, "blackboard", columns={"lab900": "Lab 9 |12345"}).headers[-1] == "Lab 9 |12345"
    assert cli.main(["export", "--format", "blackboard", "--out", str(tmp_path / "out"), "--roster",
                     str(tmp_path / "blackboard.csv")]) == 0
    text = (tmp_path / "out" / "export_blackboard.csv").read_text()
    assert text.splitlines()[:2] == ['"Last Name","First Name","Username","Student ID","lab900 [Total Pts: 10 Score]"',
                                     '"Adams","Amy","aadams","s001","5"']


def test_every_format_is_a_module_and_the_command_line_offers_each():
    from grader.report import lms

    assert sorted(lms.formats()) == ["blackboard", "canvas", "csv", "moodle"]
    action = next(a for a in cli.parser()._subparsers._group_actions[0].choices["export"]._actions
                  if a.dest == "format")
    assert list(action.choices) == list(lms.formats())
    assert all(f"{name}: " in action.help for name in lms.formats())
