"""The gradebook folder's one namespace: no submission's folder can take a class file's name.

A notebook called ``gradebook.csv.ipynb`` once made its folder ``gradebook.csv`` and the class's
gradebook could not be written. Property tests (Hypothesis) try arbitrary names, and names built
from every class file the grader writes, against :func:`grader.grade.collect.folder_name` and
:func:`grader.grade.collect.output_names`; ``tests/test_grader_files.py`` grades such a class.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader.core import namespace
from grader.core.namespace import CLASS_SUFFIXES, class_file, folder_key, is_reserved, move_reserved, unreserved
from grader.core.records import RECORD
from grader.grade.collect import folder_name, keep_folders, output_names
from grader.report import lms
from util.labs import LABS

CLASS_FILES = (["gradebook.csv", "statistics.csv", "report.html", "class.json", "regrade_diff.csv"]
               + [f"gradebook_{lab}.csv" for lab in [*LABS, "lab900", "unknown"]]
               + [f"export_{fmt}.csv" for fmt in lms.formats()])
"""Every class file the grader writes into a gradebook folder (the end-to-end test checks that a graded
class holds no other top-level file)."""
CLASS_NAME = st.sampled_from(CLASS_FILES).flatmap(lambda name: st.sampled_from([
    name, name.upper(), name.title(), name + ".ipynb", " " + name, name + " ", "./" + name, "../" + name,
    name.replace(".", ".."), "." + name, name + "\x00", name + "\u200b"]))
NAME = st.text(max_size=60) | CLASS_NAME | st.builds(lambda a, b: a + b, st.text(max_size=8), CLASS_NAME)
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TAKEN = {name.casefold() for name in CLASS_FILES}


@SETTINGS
@given(NAME)
def test_no_folder_name_is_a_class_file_or_ends_like_one(raw):
    name = folder_name(raw)
    assert not is_reserved(name) and name.casefold() not in TAKEN, (raw, name)
    assert name and "/" not in name and not name.startswith(".")


CASED = st.sampled_from(["alice", "Alice", "ALICE", "caf\u00e9", "cafe\u0301", "CAF\u00c9", "stra\u00dfe", "STRASSE"])


@SETTINGS
@given(st.lists(NAME | CASED, min_size=1, max_size=8))
def test_a_class_named_like_its_class_files_gets_other_folders(names):
    """Distinct folders even where letter case and Unicode normalization do not count (a Mac)."""
    paths = [Path("/class") / f"{raw.replace('/', '_') or 'x'}.ipynb" for raw in names]
    found = output_names(paths)
    assert len({folder_key(name) for name in found}) == len(found), found
    assert not any(is_reserved(name) or name.casefold() in TAKEN for name in found), found


def test_names_one_folder_on_a_mac_get_two():
    """``Alice.ipynb`` beside ``alice.ipynb``: one folder on APFS, so one would replace the other's results."""
    assert output_names([Path("/c/alice.ipynb"), Path("/c/Alice.ipynb"), Path("/c/bob.ipynb")]) == [
        "alice", "Alice~2", "bob"]
    assert output_names([Path("/c/caf\u00e9.ipynb"), Path("/c/cafe\u0301.ipynb")]) == ["caf\u00e9", "cafe\u0301~2"]
    assert output_names([Path("/c/a/lab1.ipynb"), Path("/c/A/lab1.ipynb")]) == ["a__lab1", "A__lab1~2"]


def test_class_file_names_the_folder_and_refuses_a_name_a_submission_could_take(tmp_path):
    for name in CLASS_FILES:
        assert class_file(tmp_path, name) == tmp_path / name
    for bad in ("gradebook", "alice", "report.htm", "x/gradebook.csv", "notes.ipynb"):
        with pytest.raises(ValueError, match="expected a plain name ending in one of .csv"):
            class_file(tmp_path, bad)


def test_unreserved_names_keep_their_words_and_drop_only_the_suffixes():
    assert unreserved("gradebook.csv") == "gradebook_csv"
    assert unreserved("Report.HTML") == "Report_HTML"
    assert unreserved("a.json.csv") == "a.json_csv"  # (no longer ends like a class file)
    assert unreserved("alice.smith") == "alice.smith" and unreserved("lab1") == "lab1"
    assert all(not is_reserved(unreserved("x" + suffix)) for suffix in CLASS_SUFFIXES)


def test_a_folder_an_older_grader_named_like_a_class_file_is_moved_and_keeps_its_source(tmp_path):
    """Results folders written before the rule: ``gradebook.csv/`` (with its record) moves to a free
    name, and the same source is graded into that folder again, never into a class file's name."""
    out = tmp_path / "out"
    for name in ("gradebook.csv", "gradebook_csv", "report.html"):
        (out / name).mkdir(parents=True)
        (out / name / RECORD).write_text(json.dumps({"not": "a full record"}))
    (out / "notes.csv").mkdir()  # not a submission's (no record): left alone
    assert move_reserved(out, RECORD) == [("gradebook.csv", "gradebook_csv~2"), ("report.html", "report_html")]
    assert sorted(p.name for p in out.iterdir()) == ["gradebook_csv", "gradebook_csv~2", "notes.csv", "report_html"]
    assert move_reserved(out, RECORD) == []
    assert namespace.move_reserved(tmp_path / "absent", RECORD) == []


def test_keep_folders_never_keeps_a_class_file_name(tmp_path, monkeypatch):
    """A record left in ``gradebook.csv/`` (not moved yet): its source gets a new, unreserved folder."""
    from grader.core import records

    source = tmp_path / "class" / "gradebook.csv.ipynb"
    monkeypatch.setattr(records, "load_all", lambda out: {
        "gradebook.csv": records.Previous({}, None, str(source))})
    assert keep_folders([source], ["gradebook_csv"], tmp_path / "out") == ["gradebook_csv"]


def test_keep_folders_never_gives_a_new_source_a_folder_one_on_a_mac_with_a_graded_one(tmp_path, monkeypatch):
    from grader.core import records

    monkeypatch.setattr(records, "load_all", lambda out: {"alice": records.Previous({}, None, "/class/alice.ipynb")})
    assert keep_folders([Path("/class/x/Alice.ipynb")], ["Alice"], tmp_path) == ["x__Alice"]
