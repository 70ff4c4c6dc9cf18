"""Marking offline: the answers to mark out as CSV (anonymous, safe for a spreadsheet), the marks back in:
found by question and answer, blank cells changing nothing, and a file with one bad row changing nothing."""
from __future__ import annotations

import csv
import io

import pytest
import writtenlab
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader import cli
from grader.mark import offline
from grader.mark.api import Desk
from grader.mark.offline import MarksFileError
from grader.mark.store import Mark, Store

ANSWERS = {"amy": ("=HYPERLINK(\"http://evil\",\"click\") 41", "All."), "bob": ("Forty-one, as the task says.", ""),
           "cat": ("@SUM(1+1) because", "Everything.")}


def _read(path):
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


def _write(path, rows, headers=("answer", "question", "answer_sha256", "items", "adjust", "comment")):
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, headers, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8")
    return path


def test_the_export_lists_the_answers_to_mark_anonymously_with_formulas_neutralised(tmp_path):
    with writtenlab.class_of(tmp_path, ANSWERS) as out:
        assert cli.main(["mark", str(out), "--export-csv", str(tmp_path / "todo.csv")]) == 0
        rows = _read(tmp_path / "todo.csv")
        assert list(rows[0]) == offline.HEADERS
        assert sorted((r["question"], r["text"]) for r in rows) == [
            ("902.Q1", "'=HYPERLINK(\"http://evil\",\"click\") 41"), ("902.Q1", "'@SUM(1+1) because"),
            ("902.Q1", "Forty-one, as the task says."), ("902.Q2", "All."), ("902.Q2", "Everything.")]
        text = (tmp_path / "todo.csv").read_text()
        assert not any(name in text for name in ANSWERS)  # anonymous: pseudonyms only
        assert rows[0]["rubric"].startswith("A +1: Names the number | B +1: Says why")
        assert "note" not in rows[0]["rubric"].lower() or "mix-up" not in rows[0]["rubric"]


def test_the_round_trip_writes_the_marks_and_blank_cells_change_nothing(tmp_path):
    with writtenlab.class_of(tmp_path, ANSWERS) as out:
        with Store(out) as store:
            desk = Desk(out, store)
            headers, rows = offline.export(desk, question="902.Q1", names=True)
            amy_sha = next(r[2] for r in rows if r[0] == "amy")
            store.save(Mark("amy", "902.Q1", amy_sha, ("A",), 0, "kept comment"), 0)
        exported = tmp_path / "q1.csv"
        assert cli.main(["mark", str(out), "--export-csv", str(exported), "--question", "902.Q1", "--names"]) == 0
        rows = {r["submission"]: r for r in _read(exported)}
        assert set(rows) == {"bob", "cat"}  # amy is marked already
        rows["bob"] |= {"items": "A B", "adjust": "", "comment": "Good."}
        rows["cat"] |= {"items": "", "adjust": "", "comment": ""}  # blank: changes nothing
        amy = {"submission": "amy", "question": "902.Q1", "answer_sha256": amy_sha, "items": "", "adjust": "0.5",
               "comment": ""}
        _write(exported, [rows["bob"], rows["cat"], amy],
               ("submission", "question", "answer_sha256", "items", "adjust", "comment"))
        assert cli.main(["mark", str(out), "--import-csv", str(exported), "--marker", "ta2"]) == 0
        with Store(out) as store:
            marks = {m.submission: m for m in store.marks()}
        assert set(marks) == {"amy", "bob"}
        assert (marks["bob"].items, marks["bob"].comment, marks["bob"].marker) == (("A", "B"), "Good.", "ta2")
        assert (marks["amy"].items, marks["amy"].adjust, marks["amy"].comment, marks["amy"].version) == (
            ("A",), 0.5, "kept comment", 2)  # only the adjustment changed


def test_a_file_with_a_bad_row_is_reported_line_by_line_and_nothing_is_applied(tmp_path, capsys):
    with writtenlab.class_of(tmp_path, ANSWERS) as out:
        exported = tmp_path / "all.csv"
        cli.main(["mark", str(out), "--export-csv", str(exported)])
        rows = _read(exported)
        for row in rows:
            row["items"] = "A"
        rows[1]["items"] = "A Z"
        rows[2]["adjust"] = "lots"
        rows[3]["answer_sha256"] = "0" * 64
        rows.append({"answer": "nobody", "question": "902.Q1", "items": "A"})
        rows.append(dict(rows[0]))
        _write(exported, rows)
        capsys.readouterr()
        assert cli.main(["mark", str(out), "--import-csv", str(exported)]) == 1
        err = capsys.readouterr().err
        assert "5 bad rows; nothing was applied" in err
        assert "line 3: items Z are not in 902.Q" in err and "line 4: adjust 'lots' is not a number" in err
        assert "line 5: the answer changed since it was exported" in err and "line 7: no answer 'nobody'" in err
        assert "line 8: a second row for this answer" in err
        with Store(out) as store:
            assert store.marks() == []


def test_a_file_that_is_not_utf8_is_refused_whole(tmp_path):
    with writtenlab.class_of(tmp_path, ANSWERS) as out, Store(out) as store:
        bad = tmp_path / "bad.csv"
        bad.write_bytes(b"answer,question,items\nabc,902.Q1,A\xff\xfe\n")
        with pytest.raises(MarksFileError, match="not UTF-8 text .*nothing was applied"):
            offline.apply(Desk(out, store), bad)
        assert store.marks() == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.text(max_size=40), min_size=1, max_size=8), max_size=6),
       st.lists(st.sampled_from(["answer", "question", "items", "adjust", "comment", "x", ""]), min_size=1, max_size=7))
def test_any_file_is_either_applied_whole_or_refused_with_nothing_written(tmp_path_factory, cells, headers):
    tmp_path = tmp_path_factory.mktemp("fuzz")
    with writtenlab.class_of(tmp_path, ANSWERS) as out, Store(out) as store:
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(headers)
        writer.writerows(cells)
        path = tmp_path / "m.csv"
        path.write_text(buffer.getvalue(), encoding="utf-8", errors="surrogatepass")
        try:
            done = offline.apply(Desk(out, store), path)
        except MarksFileError:
            assert store.marks() == []
        else:
            assert len(store.marks()) == len(done.marks)
