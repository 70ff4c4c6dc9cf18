"""The example class (every lab's example submissions, lab 4's as folders, two with the same file name)
regraded one student at a time ends with the same gradebook as one class run.

What is under test is how a class's folder merges runs (which folder a submission goes to, which rows
the gradebooks hold), not the grading itself: each notebook is "graded" by a stand-in that gives it
a fixed score derived from its path, so the test takes seconds. tests/test_batch.py does the same
with real kernels on the tiny lab.
"""
from __future__ import annotations

import csv
import zlib
from pathlib import Path

import pytest

from grader.core.results import CheckResult, SubmissionResult, TaskResult
from grader.grade import batch, jobs
from grader.grade.collect import find_submissions
from util.answers import write_json

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "grader" / "examples"
LABS_WITH_EXAMPLES = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir() and any(p.rglob("*.ipynb")))
FILES = ("gradebook.csv", "statistics.csv", *(f"gradebook_{lab}.csv" for lab in LABS_WITH_EXAMPLES))


def _stand_in(path, lab, out_dir, **_):
    """A fixed result per path: task i passes when bit i of the path's CRC is set."""
    crc = zlib.crc32(str(Path(path).relative_to(REPO)).encode())
    tasks = tuple(TaskResult(task.id, task.title, (CheckResult(
        "answer", "passed" if crc >> i & 1 else "failed", task.max_points if crc >> i & 1 else 0, task.max_points,
        "" if crc >> i & 1 else f"differs by {crc % 97}"),)) for i, task in enumerate(lab.tasks))
    result = SubmissionResult(str(path), lab.name, tasks, 1.0, "completed")
    write_json(out_dir / "results.json", result.to_gradescope_dict())
    return result


@pytest.fixture
def stand_in(monkeypatch):
    monkeypatch.setattr(jobs, "grade_submission", _stand_in)
    monkeypatch.setattr(batch, "prepare", lambda labs: None)


def _grade(paths, out, **options):
    return batch.main(paths=paths, out=out, progress=False, sandbox=False, **options)  # no kernel runs


def _snapshot(out):
    return {name: (out / name).read_text() for name in FILES}


def _regraded(notebooks: list[Path]) -> list[Path]:
    """Those regraded one at a time: every notebook whose name another lab's example shares (the folders a merge can
    confuse), and the first of every lab; all 72 would take a minute (each run rewrites the whole class's files)."""
    lab = lambda path: path.relative_to(EXAMPLES).parts[0]  # noqa: E731
    stems = [path.stem for path in notebooks]
    shared = {path for path, stem in zip(notebooks, stems) if stems.count(stem) > 1}
    first = {lab(path): path for path in reversed(notebooks)}
    chosen = [path for path in notebooks if path in shared or first[lab(path)] == path]
    assert len(shared) >= 2 and {lab(path) for path in chosen} == set(LABS_WITH_EXAMPLES)
    return chosen


def test_the_example_class_regraded_one_at_a_time_ends_as_one_class_run(tmp_path, stand_in, capsys):
    out = tmp_path / "gradebook"
    assert _grade([EXAMPLES], out) == 0
    class_run = _snapshot(out)
    with (out / "gradebook.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    notebooks = find_submissions([EXAMPLES])
    assert len(notebooks) >= 15 and len(rows) == len({r["submission"] for r in rows}) == len(notebooks)
    assert {r["lab"] for r in rows} == set(LABS_WITH_EXAMPLES) >= {"lab1", "lab2", "lab3", "lab4"}
    for notebook in reversed(_regraded(notebooks)):  # any order: each keeps the folder the class run gave it
        assert _grade([notebook], out, force=True) == 0
    capsys.readouterr()
    assert _snapshot(out) == class_run
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(r["submission"] for r in rows)


def test_a_new_submission_never_takes_another_students_folder(tmp_path, stand_in, capsys):
    """lab1's and lab4's grouped_conv_ignored graded alone, one after the other, into one folder."""
    out = tmp_path / "gradebook"
    first = EXAMPLES / "lab1" / "grouped_conv_ignored.ipynb"
    second = EXAMPLES / "lab4" / "grouped_conv_ignored" / "grouped_conv_ignored.ipynb"
    assert _grade([first], out) == 0 and _grade([second], out) == 0
    capsys.readouterr()
    with (out / "gradebook.csv").open() as handle:
        rows = {r["submission"]: r["lab"] for r in csv.DictReader(handle)}
    assert rows == {"grouped_conv_ignored": "lab1", "lab4__grouped_conv_ignored": "lab4"}
