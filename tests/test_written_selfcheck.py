"""The students' side of written answers: ``check`` says whether an answer is there and of the length asked,
``progress`` how long each is, both from the notebook as last saved (VS Code and JupyterLab say where it is)."""
from __future__ import annotations

import json

import writtenlab

from util import selfcheck, written
from util.submit import progress


def _saved(tmp_path, nb) -> dict:
    path = writtenlab.write(nb, tmp_path / "lab902_written.ipynb")
    return {"__vsc_ipynb_file__": str(path)}


def test_check_says_when_an_answer_is_empty_short_or_fine(tmp_path, capsys):
    with writtenlab.registered(tmp_path / "refs"):
        namespace = _saved(tmp_path, writtenlab.notebook("Two words", None))
        reports = selfcheck.reports("lab902", namespace)
        outcomes = {o.name: (o.status, o.message) for r in reports for o in r.outcomes}
        assert outcomes == {
            "Q1 answered in 3-40 words (a TA marks it)": (
                "failed", "the answer to Q1 has 2 words; 3-40 are asked (it is marked all the same)"),
            "Q2 answered in 1-20 words (a TA marks it)": (
                "missing", "the answer to Q2 is still empty: replace the placeholder line with your answer")}
        assert "a TA marks its written answer: passing here is not full marks" in reports[0].text()
        namespace = _saved(tmp_path, writtenlab.notebook("It is 41 because the task says.", "Everything."))
        assert all(o.status == "passed" for r in selfcheck.reports("lab902", namespace) for o in r.outcomes)


def test_without_the_notebooks_file_check_says_how_to_check_from_a_terminal(tmp_path, monkeypatch):
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    with writtenlab.registered(tmp_path / "refs"):
        [report] = selfcheck.reports("902.1", {})
        [outcome] = report.outcomes
        assert outcome.status == "missing" and "python -m grader check lab902 --task 902.1" in outcome.hint


def test_progress_shows_each_written_answers_length_as_last_saved(tmp_path, capsys):
    with writtenlab.registered(tmp_path / "refs"):
        progress("lab902", _saved(tmp_path, writtenlab.notebook("It is 41 because.", None)))
        out = capsys.readouterr().out
        assert "902.Q1  Q1, written         2  4 words   marked by hand" in out
        assert "902.Q2  Q2, written         1  not yet   marked by hand" in out
        assert "1/2 written answers (as last saved)" in out and "by a TA on the written answers" in out


def test_the_notebook_is_found_from_jupyterlabs_session_too(tmp_path, monkeypatch):
    path = writtenlab.write(writtenlab.notebook(), tmp_path / "nb.ipynb")
    assert written.notebook_path({"__session__": str(path)}) == str(path)
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    assert written.saved_notebook({}) == json.loads(path.read_text())
    assert written.notebook_path({"__session__": str(tmp_path / "gone.ipynb")}) == str(path)  # the variable next
