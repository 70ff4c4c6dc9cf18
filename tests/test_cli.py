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
    assert "lab1_pytorch_analysis" in printed.out and "ungraded" in printed.out
    assert "homework.ipynb: cannot tell which lab" in printed.err
    results = json.loads((out_dir / "lab1_pytorch_analysis" / "results.json").read_text())
    assert results["score"] == 0 and len(results["tests"]) == 5
    assert all(t["extra_data"]["status"] == "missing" and "is not a valid Jupyter notebook: it is not valid JSON "
               "(Expecting value at line 1, column 1)" in t["output"]
               for t in results["tests"])
    with (out_dir / "gradebook_lab1.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [k for k in rows[0] if k[0].isdigit()] == [
        "1.1", "1.1 max", "1.2", "1.2 max", "1.3", "1.3 max", "1.4", "1.4 max", "1.5", "1.5 max", "1.Q1", "1.Q1 max"]
    assert (rows[0]["1.Q1"], rows[0]["max"]) == ("0", "100")  # no answer read: nothing to mark, the lab's 100 kept
    assert [(r["submission"], r["total"], r["max"], r["status"]) for r in rows] == [
        ("lab1_pytorch_analysis", "0", "100", "ungraded")]
    with (out_dir / "gradebook.csv").open() as handle:
        assert [(r["submission"], r["lab"], r["status"]) for r in csv.DictReader(handle)] == [
            ("lab1_pytorch_analysis", "lab1", "ungraded"), ("homework", "unknown", "ungraded")]


def test_grade_with_nothing_to_grade_says_so(tmp_path, capsys):
    assert cli.main(["grade", str(tmp_path), "--no-progress"]) == 2
    assert "no .ipynb files" in capsys.readouterr().err
    assert cli.main(["grade", str(tmp_path / "missing.ipynb"), "--no-progress"]) == 2


def test_same_file_names_in_different_folders_get_distinct_result_folders(tmp_path):
    from grader.grade.collect import output_names
    paths = [tmp_path / "alice" / "lab1.ipynb", tmp_path / "bob" / "lab1.ipynb"]
    for p in paths:
        p.parent.mkdir()
        p.touch()
    assert output_names(paths) == ["alice__lab1", "bob__lab1"]


def test_parallel_grading_lists_rows_by_name_whatever_finishes_first(tmp_path, capsys):
    for student in ("zed", "amy"):
        (tmp_path / student).mkdir()
        (tmp_path / student / "lab1.ipynb").write_text("{")
    code = cli.main(["grade", str(tmp_path / "zed"), str(tmp_path / "amy"), "--out", str(tmp_path / "out"),
                     "--jobs", "2", "--no-progress"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines[0] == "lab1" and [line.split()[0] for line in lines[3:5]] == ["amy__lab1", "zed__lab1"]
    assert all(json.loads((tmp_path / "out" / n / "results.json").read_text())["score"] == 0
               for n in ("zed__lab1", "amy__lab1"))


def test_version_and_help_on_every_subcommand_and_flag(capsys):
    import argparse

    import pytest

    from grader import __version__
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"python -m grader {__version__}"
    parser = cli.parser()
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, sub in subparsers.choices.items():
        assert [a.help for a in subparsers._choices_actions if a.dest == name][0], name
        if name != "check":  # the student's self-check has its own tests (test_selfcheck.py)
            assert sub.description, f"{name} has no description"
        undocumented = [a.option_strings or a.dest for a in sub._actions if not a.help]
        assert undocumented == [], f"{name}: {undocumented}"


def test_flags_mean_the_same_in_every_subcommand():
    """A flag that several subcommands have is spelled, typed and defaulted alike in each."""
    import argparse

    parser = cli.parser()
    [subparsers] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    seen: dict[str, tuple] = {}
    for name, sub in subparsers.choices.items():
        for action in sub._actions:
            for flag in action.option_strings:
                if flag in ("-h", "--help", "--out", "--check", "--lab") or name == "check":
                    continue  # --out is a folder or a file, --check a mode: each says so in its help
                signature = (action.dest, action.type, action.default, action.metavar)
                assert seen.setdefault(flag, signature) == signature, (name, flag)
    for flag in ("--timeout", "--cell-timeout", "--memory", "--procs", "--fsize", "--disk", "--max-output",
                 "--max-notebook", "--max-notebook-output", "--judge-timeout", "--max-saved-files", "--max-saved-file", "--max-saved", "--keep-saved"):
        assert {n for n, sub in subparsers.choices.items() if flag in sub._option_string_actions} >= {
            "grade", "gradescope", "autograde"}, flag
    for flag in ("--roster", "--overrides", "--extensions", "--deadline", "--late-policy"):
        assert {n for n, sub in subparsers.choices.items() if flag in sub._option_string_actions} == {
            "grade", "report", "export"}, flag


def test_every_limit_has_a_flag_and_the_autograder_passes_them_all_on():
    """Each field of Limits is set by a flag of grade; the Gradescope autograder's script passes every one."""
    from dataclasses import fields

    from grader.core.limits import Limits
    from grader.grade.gradescope import limit_flags

    changed = Limits(notebook_timeout=61, cell_timeout=7, memory=3 << 30, procs=9, fsize=5 << 20, disk=6 << 20,
                     output=7 << 10, notebook_output=9 << 20, notebook_size=8 << 20, judge_timeout=33, saved_files=11,
                     saved_file=12 << 20, saved_total=13 << 20, kept_saved=14 << 20)
    assert all(getattr(changed, f.name) != f.default for f in fields(Limits))
    args = cli.parser().parse_args(["autograde", "--lab", "lab1", *limit_flags(changed).split()])
    assert cli._limits(args) == changed
