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


def test_without_the_notebooks_file_check_says_it_did_not_check_and_how_to(tmp_path, monkeypatch, capsys):
    """A kernel no front end told its file never reports an answer as missing: it says it did not check, and how."""
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.delenv(written.NOTEBOOK_ENV, raising=False)
    with writtenlab.registered(tmp_path / "refs"):
        [report] = selfcheck.reports("902.1", {})
        [outcome] = report.outcomes
        assert outcome.status == "unchecked" and outcome.message.startswith(selfcheck.UNCHECKED)
        assert "python -m grader check lab902 --task 902.1" in outcome.hint
        assert "MISSING" not in report.text() and "0/0 public checks passed, 1 not checked here" in report.text()
        progress("lab902", {})
        out = capsys.readouterr().out
        assert "written answers not checked here" in out and "0/2 written answers" not in out
        assert "not yet" not in out.split("902.Q1")[1].splitlines()[0]


def test_the_notebook_is_found_from_the_course_variable(tmp_path, monkeypatch):
    """The class server and ``grader check`` name the file in ``$COURSE_NOTEBOOK``; a relative name is taken from
    the kernel's working folder."""
    path = writtenlab.write(writtenlab.notebook(), tmp_path / "nb.ipynb")
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.setenv(written.NOTEBOOK_ENV, str(path))
    assert written.notebook_path({}) == str(path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(written.NOTEBOOK_ENV, "nb.ipynb")
    assert written.saved_notebook({}) == json.loads(path.read_text())


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


def _front_end_notebook(tmp_path, q1):
    """A lab902 notebook whose last cell runs ``check`` and ``progress``, as a student's would."""
    from nbformat.v4 import new_code_cell

    nb = writtenlab.notebook(q1, None)
    nb.cells.append(new_code_cell("from util import check, progress\ncheck('902.1')\nprogress('lab902')"))
    return writtenlab.write(nb, tmp_path / "lab902_written.ipynb")


def _outputs(nb) -> str:
    return "".join(o.get("text", "") for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", []))


def test_in_nbclient_and_nbconvert_a_check_says_what_it_knows(tmp_path, monkeypatch):
    """nbclient (and so nbconvert, papermill and VS Code's runner) tell the kernel nothing of its file: the written
    answer there is reported as not checked, never MISSING; told by ``$COURSE_NOTEBOOK``, the same run reads it."""
    import subprocess
    import sys

    import nbformat
    from nbclient import NotebookClient

    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    monkeypatch.delenv(written.NOTEBOOK_ENV, raising=False)
    with writtenlab.registered(tmp_path / "refs"):
        path = _front_end_notebook(tmp_path, "It is 41 because the task says so.")
        ran = NotebookClient(nbformat.read(str(path), 4), timeout=120, resources={"metadata": {"path": str(tmp_path)}})
        out = _outputs(ran.execute())
        assert "SKIP" in out and "not checked here" in out and "MISSING" not in out
        monkeypatch.setenv(written.NOTEBOOK_ENV, str(path))
        ran = NotebookClient(nbformat.read(str(path), 4), timeout=120, resources={"metadata": {"path": str(tmp_path)}})
        out = _outputs(ran.execute())
        assert "ok      Q1 answered in 3-40 words" in out and "1/2 written answers (as last saved)" in out
        monkeypatch.delenv(written.NOTEBOOK_ENV)
        done = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                               "--output", "converted.ipynb", str(path)], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        out = _outputs(nbformat.read(str(tmp_path / "converted.ipynb"), 4))
        assert "not checked here" in out and "MISSING" not in out
