"""Reading a kernel's exports: bounded in number, size and depth, never through a link, checked
for shape; what breaks a rule is refused with a reason, and the grader holds no more than the limits."""
from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pytest

from grader.core.untrusted import MAX_DEPTH, Refused, loads, nesting
from grader.judge.exports import HIDDEN, MAX_ANSWER_FILES, MAX_EXPORT_BYTES, MAX_TOTAL_BYTES, read_exports


def _answer(folder: Path, task: str, value_json: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{task}.json").write_text('{"task": "%s", "value": %s}' % (task, value_json))


def test_each_hostile_answer_is_refused_with_its_reason(tmp_path):
    answers = tmp_path / "answers"
    _answer(answers, "900.1", "41")
    _answer(answers, "900.2", "[" * 5000 + "]" * 5000)
    _answer(answers, "900.3", "9" * 5000)
    _answer(answers, "900.4", "[" + "1," * MAX_EXPORT_BYTES + "1]")
    os.symlink("/etc/passwd", answers / "900.5.json")
    os.mkfifo(answers / "900.6.json")
    (answers / "900.7.json").write_text('{"task": 3')
    (answers / "900.8.json").write_text('{"value": 1}')
    _answer(answers, "900.9", '"\\ud800 [[[[ \\" ["')  # brackets inside a string do not count
    exports = read_exports(answers, tmp_path / "cases.json")
    assert exports.answers == {"900.1": 41, "900.9": '\ud800 [[[[ " ['}
    assert exports.refused == {
        "900.2": f"it is nested 5,001 levels deep; the grader reads at most {MAX_DEPTH}",
        "900.3": exports.refused["900.3"],
        "900.4": "it is 4 MiB; the grader reads at most 2 MiB",
        "900.5": "it is a link, which the grader does not follow",
        "900.6": "it is not a plain file",
        "900.7": "it is not valid JSON (Expecting ',' delimiter at line 1, column 11)",
        "900.8": 'it is not an exported answer ({"task": ..., "value": ...})',
    }
    assert exports.refused["900.3"].startswith("it is not readable JSON (ValueError: Exceeds the limit (4300 digits)")


def test_hidden_case_records_are_checked_for_shape(tmp_path):
    (tmp_path / "cases.json").write_text(json.dumps({
        "900.1": {"ok": {"status": "ok", "value": 1}, "no value": {"status": "ok"}, "odd": {"status": "won"},
                "error": {"status": "error", "message": 5}, "list": [1]},
        "900.2": "not a dict"}))
    exports = read_exports(tmp_path / "answers", tmp_path / "cases.json")
    assert exports.cases == {"900.1": {"ok": {"status": "ok", "message": "", "value": 1},
                                     "error": {"status": "error", "message": ""}}}
    (tmp_path / "cases.json").write_text("[" * 100)
    assert read_exports(tmp_path / "answers", tmp_path / "cases.json").refused == {
        HIDDEN: f"it is nested 100 levels deep; the grader reads at most {MAX_DEPTH}"}


def test_many_answer_files_are_read_up_to_the_count_and_the_total(tmp_path):
    answers = tmp_path / "answers"
    big = json.dumps("x" * (MAX_EXPORT_BYTES - 100))
    for i in range(6):  # six answers under the per-file cap: together over the total
        _answer(answers, f"900.{i}", big)
    exports = read_exports(answers, tmp_path / "cases.json")
    assert sorted(exports.answers) == [f"900.{i}" for i in range(MAX_TOTAL_BYTES // MAX_EXPORT_BYTES)]
    assert exports.refused["900.5"].startswith("the notebook's exports together are over 8 MiB")
    for i in range(MAX_ANSWER_FILES + 10):
        _answer(answers, f"x{i:03d}", "1")
    exports = read_exports(answers, tmp_path / "cases.json")
    assert len(exports.answers) + len(exports.refused) == MAX_ANSWER_FILES + 1  # one says why the rest is not
    assert f"exported {6 + MAX_ANSWER_FILES + 10} answer files" in exports.refused[max(exports.refused)]


def test_the_grader_holds_no_more_than_the_limits(tmp_path):
    answers = tmp_path / "answers"
    for i in range(6):  # six answers of 15 MiB once made the grader hold 2.2 GiB
        _answer(answers, f"900.{i}", "[" + "[]," * (5 << 20) + "[]]")
    before = psutil.Process().memory_info().rss
    exports = read_exports(answers, tmp_path / "cases.json")
    assert exports.answers == {} and len(exports.refused) == 6
    assert psutil.Process().memory_info().rss - before < 64 << 20


def test_nesting_is_counted_without_recursion():
    assert nesting(b"[" * 1_000_000) == 1_000_000
    assert nesting(b'{"a": [1, {"b": "]]]]}}}"}], "c": []}') == 3
    assert nesting(b"12") == 0
    with pytest.raises(Refused, match="nested 40 levels"):
        loads(b"[" * 40 + b"]" * 40)
    assert loads(b"[" * 32 + b"]" * 32, 32) is not None
