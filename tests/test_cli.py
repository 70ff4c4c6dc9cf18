"""The command line survives bad input: one broken submission never stops a class's grading."""
import csv
import json

import nbformat
from nbformat.v4 import new_notebook

from grader import cli


def test_grade_keeps_going_past_unreadable_and_unknown_notebooks(tmp_path, capsys):
    (tmp_path / "alice").mkdir()
    (tmp_path / "bob").mkdir()
    (tmp_path / "alice" / "lab1_pytorch_analysis.ipynb").write_text("this is not json")
    nbformat.write(new_notebook(), str(tmp_path / "bob" / "homework.ipynb"))
    out_dir = tmp_path / "out"
    code = cli.main(["grade", str(tmp_path / "alice"), str(tmp_path / "bob"), "--out", str(out_dir), "--no-progress"])
    printed = capsys.readouterr()
    assert code == 1
    assert "lab1_pytorch_analysis" in printed.out and "0/100" in printed.out
    assert "homework.ipynb: cannot tell which lab" in printed.err
    results = json.loads((out_dir / "lab1_pytorch_analysis" / "results.json").read_text())
    assert results["score"] == 0 and len(results["tests"]) == 5
    assert all(t["extra_data"]["status"] == "missing" and "not a readable Jupyter notebook" in t["output"]
               for t in results["tests"])
    with (out_dir / "gradebook.csv").open() as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["submission", "lab", "1.1", "1.2", "1.3", "1.4", "1.5", "total", "status"]
    assert rows[1][0] == "lab1_pytorch_analysis" and rows[1][-2] == "0/100"


def test_grade_with_nothing_to_grade_says_so(tmp_path, capsys):
    assert cli.main(["grade", str(tmp_path), "--no-progress"]) == 2
    assert "no .ipynb files" in capsys.readouterr().err
    assert cli.main(["grade", str(tmp_path / "missing.ipynb"), "--no-progress"]) == 2


def test_same_file_names_in_different_folders_get_distinct_result_folders(tmp_path):
    from grader.grade.submission import output_names
    paths = [tmp_path / "alice" / "lab1.ipynb", tmp_path / "bob" / "lab1.ipynb"]
    for p in paths:
        p.parent.mkdir()
        p.touch()
    assert output_names(paths) == ["alice__lab1", "bob__lab1"]


def test_parallel_grading_returns_results_in_submission_order(tmp_path, capsys):
    for student in ("zed", "amy"):
        (tmp_path / student).mkdir()
        (tmp_path / student / "lab1.ipynb").write_text("{")
    code = cli.main(["grade", str(tmp_path / "zed"), str(tmp_path / "amy"), "--out", str(tmp_path / "out"),
                     "--jobs", "2", "--no-progress"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert [line.split()[0] for line in lines[2:4]] == ["zed__lab1", "amy__lab1"]
    assert all(json.loads((tmp_path / "out" / n / "results.json").read_text())["score"] == 0
               for n in ("zed__lab1", "amy__lab1"))
