"""Property tests (Hypothesis) of everything that handles a student's data in the grader's own
process: arbitrary answers through the comparison and the feedback, arbitrary names and messages
through every result writer, arbitrary file names, metadata, answers and messages through a whole
batch. Each asserts: no exception escapes, every file has a row, every output file is valid
(strict UTF-8, JSON that parses, Markdown that renders no tag or link of the student's) and
bounded."""
from __future__ import annotations

import csv
import io
import json
import re
import unicodedata
from pathlib import Path

import mistune
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader.core.results import CheckResult, SubmissionResult, TaskResult
from grader.judge.compare import compare, describe
from grader.report import feedback, gradebook, stats
from util.contract import EXACT, Tolerance

TEXT = st.text(st.characters(codec=None, categories=None), max_size=200) | st.sampled_from([
    "\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07\x1b[32mALL PASSED\x1b[0m", "<script>alert(1)</script>",
    "[your grade](https://evil.example)", '=HYPERLINK("http://evil","x")', "\ud800\udcff", "E" * 5000,
    "| a | b |\n|---|---|", "+1-2", "@SUM(A1)", "\t=1", "-", "www.evil.example", "a@b.example"])
NUMBERS = st.integers() | st.integers(min_value=10**300, max_value=10**400) | st.floats()
JSON = st.recursive(st.none() | st.booleans() | NUMBERS | TEXT,
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=20)
REFERENCE = st.recursive(st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
                         lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                      max_size=3), max_leaves=8)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MD = mistune.create_markdown(escape=False, plugins=["table", "url", "strikethrough"])
OWN_TAGS = re.compile(r"<(?!/?(p|h1|h2|strong|em|table|thead|tbody|tr|th|td|ul|li|br)\b)", re.IGNORECASE)
STATUSES = ("passed", "failed", "error", "timeout", "memory", "crash", "missing")


def clean_text(text: str, what: str) -> None:
    """``text`` is valid UTF-8 with no control characters but newline and tab."""
    text.encode("utf-8")
    bad = [c for c in text if unicodedata.category(c) == "Cc" and c not in "\n\t"]
    assert not bad, f"{what} holds control characters {bad[:5]!r}"


def clean_json(value, what: str) -> None:
    if isinstance(value, str):
        value.encode("utf-8")  # no lone surrogate came back from the file
    elif isinstance(value, dict):
        for key, item in value.items():
            clean_json(key, what)
            clean_json(item, what)
    elif isinstance(value, list):
        for item in value:
            clean_json(item, what)


def check_markdown(text: str, what: str) -> None:
    clean_text(text, what)
    rendered = MD(text)
    assert not OWN_TAGS.search(rendered), f"{what} renders a tag of the student's: {OWN_TAGS.search(rendered)}"


def check_csv(path: Path, rows: int | None = None) -> list[list[str]]:
    text = path.read_bytes().decode("utf-8")
    clean_text(text.replace("\r\n", "\n"), path.name)
    table = list(csv.reader(io.StringIO(text)))
    for row in table:
        for cell in row:
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")) or re.fullmatch(r"[+-][\d.eE+-]*", cell), cell
    if rows is not None:
        assert len(table) == rows + 1, (len(table), rows)
    return table


@SETTINGS
@given(REFERENCE, JSON, st.booleans())
def test_comparing_any_answer_never_raises_and_says_little(expected, actual, reveal):
    mismatches = compare(expected, actual, Tolerance(rtol=1e-3, atol=1e-9))
    text = describe(mismatches, Tolerance(rtol=1e-3, atol=1e-9), reveal)
    assert len(text) < 2000
    assert compare(expected, expected, EXACT) == []  # a reference always matches itself


RESULTS = st.builds(
    lambda name, notes, messages, statuses, status: SubmissionResult(
        name, "lab900", tuple(TaskResult(f"900.{i}", "Task", (CheckResult(f"case {m[:10]}", s, 0, 5, m, i % 2 == 0),))
                            for i, (m, s) in enumerate(zip(messages, statuses))), 1.0, status, tuple(notes)),
    TEXT, st.lists(TEXT, max_size=30), st.lists(TEXT, min_size=1, max_size=4),
    st.lists(st.sampled_from(STATUSES), min_size=4, max_size=4), st.sampled_from(("completed", "timeout", "crash")))


@SETTINGS
@given(TEXT, RESULTS)
def test_every_result_writer_writes_valid_bounded_text(name, result):
    data = json.loads(json.dumps(result.to_gradescope_dict(), ensure_ascii=False).encode("utf-8"))
    clean_json(data, "results.json")
    assert len(json.dumps(data)) < 200_000 and len(result.notes) <= 20
    for test in data["tests"]:
        clean_text(test["output"], "a test's output")
    text = feedback.render(name, result)
    assert len(text) < 200_000
    check_markdown(text, "feedback.md")
    page = feedback.render_html(name, result)
    clean_text(page, "feedback.html")
    assert not re.search(r"<(script|img|iframe)\b|<a\b(?![^>]*href=\"#)", page, re.IGNORECASE) and len(page) < 400_000
    assert SubmissionResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result  # stored, reloaded


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(TEXT, RESULTS), min_size=1, max_size=3))
def test_every_class_file_is_valid_and_bounded(tmp_path_factory, graded):
    """The records of a class with any names and messages, through every class-level writer (the
    gradebooks, statistics, every feedback, the class report)."""
    from grader.core import records
    from grader.grade.collect import folder_name
    from grader.report import class_folder
    from grader.report.settings import Settings

    out = tmp_path_factory.mktemp("class")
    names = []
    for i, (name, result) in enumerate(graded):
        folder = f"{folder_name(name)}~{i}"
        names.append(folder)
        records.save(out / folder, {"lab": result.lab, "submission": str(i)}, result)
    book = class_folder.build(out, Settings())
    assert {row.submission for row in book.rows} == set(names)
    class_folder.write(book)
    for path in out.rglob("*"):
        if not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8")
        assert len(text) < 2_000_000, path
        if path.suffix == ".csv":
            check_csv(path)
        elif path.suffix == ".md":
            check_markdown(text, path.name)
        elif path.suffix == ".html" and path.name.startswith("feedback"):
            assert not re.search(r"<(script|img|iframe)\b|<a\b(?![^>]*href=\"#)", text, re.IGNORECASE), path
    table = check_csv(out / "gradebook.csv", len(graded))
    assert len(table) == len(graded) + 1
    clean_text(gradebook.render(list(book.rows)), "the gradebook table")
    clean_text(stats.render(list(book.stats)), "the statistics table")


FILE_NAME = st.builds(lambda head, body, notebook: head + body + (b".ipynb" if notebook else b""),
                      st.sampled_from([b"", b"=", b"+", b"-", b"@", b"\t", b"\x1b[2J", b"lab900", b"\xff", b"."]),
                      st.binary(max_size=20), st.booleans()).filter(
    lambda b: b and b"/" not in b and b"\0" not in b and b not in (b".", b".."))
NOTEBOOK = st.builds(lambda course, cells: {"cells": cells, "metadata": {"course": course}, "nbformat": 4,
                                            "nbformat_minor": 5},
                     st.just({"lab": "lab900"}) | JSON,
                     st.lists(st.builds(lambda source: {"id": "cell", "cell_type": "code", "source": source,
                                                        "metadata": {}, "outputs": [], "execution_count": None}, TEXT),
                              max_size=1))
CONTENT = NOTEBOOK.map(lambda nb: json.dumps(nb).encode()) | st.binary(max_size=200)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=st.lists(st.tuples(FILE_NAME, CONTENT), min_size=1, max_size=4),
       answers=st.dictionaries(st.sampled_from(["900.1", "900.2", "x"]), JSON, max_size=3),
       messages=st.lists(TEXT, max_size=3))
def test_a_batch_of_any_files_answers_and_messages_gives_every_file_a_valid_row(tmp_path_factory, files, answers,
                                                                                 messages):
    """Real files with any names and metadata; the kernel's side replaced by a run that exported
    ``answers`` and raised ``messages`` (the grader's side is what is tested here)."""
    import contextlib
    import os

    from tinylab import registered

    from grader.execute.kernel import CellError, Execution
    from grader.grade import batch, submission
    from grader.grade.run import Run

    root = tmp_path_factory.mktemp("batch")
    for i, (name, content) in enumerate(files):
        folder = os.path.join(os.fsencode(root), b"class", f"s{i}".encode())
        os.makedirs(folder)
        with open(os.path.join(folder, name), "wb") as handle:
            handle.write(content)

    def run(nb, lab, **kwargs):
        errors = tuple(CellError(i, "900.2", message, message) for i, message in enumerate(messages))
        return Run(dict(answers), {}, Execution("completed", 0.1, errors), nb)

    printed = io.StringIO()
    with registered(root / "references"), pytest.MonkeyPatch.context() as patch, \
            contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        patch.setattr(submission, "run_notebook", run)
        code = batch.main(paths=[root / "class"], out=root / "out", progress=False, sandbox=False,
                          show_feedback=True, feedback_dir=root / "feedback")
    assert code in (0, 1)
    clean_text(printed.getvalue(), "what the batch printed")
    table = check_csv(root / "out" / "gradebook.csv", len(files))  # a row per student folder
    for row in table[1:]:
        folder = root / "out" / row[0].removeprefix("'")
        data = json.loads((folder / "results.json").read_bytes().decode("utf-8"))
        clean_json(data, "results.json")
        assert len(json.dumps(data)) < 200_000
        check_markdown((folder / "feedback.md").read_bytes().decode("utf-8"), "feedback.md")
    check_csv(root / "out" / "statistics.csv")
