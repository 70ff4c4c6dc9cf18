"""Written answers are student text, graded for real: a class graded, marked and graded again keeps every mark;
answers holding HTML, spreadsheet formulas, 10 MB of text or lone surrogates stay inert and bounded in every
file the grader writes and on the marking page."""
from __future__ import annotations

import csv
import io
import json

import pytest
import writtenlab
from hypothesis import given, settings
from hypothesis import strategies as st

from grader import cli
from grader.core import records
from grader.core.results import WrittenAnswer
from grader.mark.api import Desk
from grader.mark.store import Mark, Store
from util.written import MAX_CHARACTERS

HTML = "<script>alert('x')</script><img src=x onerror=alert(1)> [link](javascript:alert(1))"
FORMULA = "=HYPERLINK(\"http://evil.example\",\"click\")"


def _grade(folder, out, *extra):
    assert cli.main(["grade", str(folder), "--out", str(out), "--no-progress", "-j", "1", *extra]) == 0


def _gradebook(out):
    """Submission (its folder's first part: ``amy`` for ``amy__lab902_written``) -> its gradebook row."""
    with (out / "gradebook_lab902.csv").open(encoding="utf-8") as handle:
        return {r["submission"].split("__")[0]: r for r in csv.DictReader(handle)}


@pytest.mark.notebook
def test_a_graded_class_keeps_its_marks_through_a_regrade_and_flags_a_changed_answer(tmp_path):
    with writtenlab.registered(tmp_path / "refs"):
        folder, out = tmp_path / "class", tmp_path / "out"
        writtenlab.write(writtenlab.notebook("It is 41 because the task says so.", "Everything."),
                         folder / "amy" / "lab902_written.ipynb")
        writtenlab.write(writtenlab.notebook("Forty-one.", "All.", metadata=False), folder / "bob" / "lab902_written.ipynb")
        _grade(folder, out)
        rows = _gradebook(out)
        assert {name: (r["902.Q1"], r["total"], r["status"]) for name, r in rows.items()} == {
            "amy": ("to mark", "7", "to mark"), "bob": ("to mark", "7", "to mark")}
        bob = records.load(out / "bob__lab902_written").result
        assert [(w.question, w.text, w.found) for w in bob.written] == [
            ("902.Q1", "Forty-one.", "heading"), ("902.Q2", "All.", "heading"), ("902.P", "", "heading")]
        with Store(out) as store:
            for name in ("amy__lab902_written", "bob__lab902_written"):
                for answer in records.load(out / name).result.written[:2]:
                    store.save(Mark(name, answer.question, answer.sha256, ("A",)), 0)
        _grade(folder, out, "--force")  # graded again: the marks are untouched
        rows = _gradebook(out)
        assert {name: (r["902.Q1"], r["902.Q2"], r["total"]) for name, r in rows.items()} == {
            "amy": ("1", "1", "9"), "bob": ("1", "1", "9")}
        writtenlab.write(writtenlab.notebook("It is 41, as the first cell fixes it.", "Everything."),
                         folder / "amy" / "lab902_written.ipynb")
        _grade(folder, out)
        amy = _gradebook(out)["amy"]
        assert (amy["902.Q1"], amy["total"], amy["status"], amy["problems"]) == ("1", "9", "to mark", "902.Q1 to re-mark")


@pytest.mark.notebook
def test_hostile_answers_stay_inert_and_bounded_everywhere(tmp_path):
    huge = "word " * (2 << 20)  # 10 MiB
    with writtenlab.registered(tmp_path / "refs"):
        folder, out = tmp_path / "class", tmp_path / "out"
        writtenlab.write(writtenlab.notebook(HTML, FORMULA), folder / "html" / "lab902_written.ipynb")
        hostile = folder / "huge" / "lab902_written.ipynb"  # JSON escapes the lone surrogates: "\\ud800"
        hostile.parent.mkdir(parents=True)
        hostile.write_text(json.dumps(writtenlab.notebook(huge, "\ud800 lone \udfff surrogates \x1b[2J")))
        _grade(folder, out)
        for name in ("html__lab902_written", "huge__lab902_written"):
            raw = (out / name / "grading.json").read_bytes()
            raw.decode("utf-8")  # strict: valid UTF-8 whatever the answer held
            assert len(raw) < 200_000
        huge_result = records.load(out / "huge__lab902_written").result
        q1, q2, _ = huge_result.written
        assert len(q1.text) <= MAX_CHARACTERS and q1.text.endswith("characters cut]")
        assert q2.text == "\\ud800 lone \\udfff surrogates" and "\x1b" not in q2.text
        for name in ("html__lab902_written", "huge__lab902_written"):
            for suffix in ("md", "html"):
                text = (out / name / f"feedback.{suffix}").read_text(encoding="utf-8")
                assert "<script>" not in text and "<img" not in text and len(text) < 100_000
        with Store(out) as store:
            desk = Desk(out, store)
            page = json.dumps(desk.answers("902.Q1"))  # the page puts each text into the document as text only
            assert len(page) < 100_000 and sorted(a["text"][:20] for a in json.loads(page)["answers"]) == [
                HTML[:20], "word word word word "]
            exported = tmp_path / "todo.csv"
            assert cli.main(["mark", str(out), "--export-csv", str(exported)]) == 0
        rows = list(csv.DictReader(io.StringIO(exported.read_text(encoding="utf-8"))))
        texts = {r["text"] for r in rows}
        assert "'" + FORMULA in texts and not any(t.startswith(("=", "+", "-", "@")) for t in texts)
        assert max(len(t) for t in texts) <= MAX_CHARACTERS + 100


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=3000) | st.binary(max_size=300).map(lambda b: b.decode("utf-8", "surrogateescape")))
def test_any_answer_is_kept_as_valid_utf8_within_the_limit_with_a_stable_hash(text):
    answer = WrittenAnswer("902.Q1", text)
    answer.text.encode("utf-8")  # strict
    assert len(answer.text) <= MAX_CHARACTERS
    assert WrittenAnswer("902.Q1", answer.text).sha256 == answer.sha256  # cleaning twice changes nothing
    assert answer.words == len(answer.text.split())
