import json

import numpy as np
import pytest
import torch

from util.answers import AnswerError, read_answers, to_jsonable, write_answer
from util.submit import submit


def test_to_jsonable_converts_torch_and_numpy_values():
    value = {"shape": torch.Size([1, 3]), "dtype": torch.float16, "n": np.int64(7), "x": np.float32(0.5),
             "t": torch.tensor([[1, 2]]), "rows": (1, 2)}
    assert to_jsonable(value) == {"shape": [1, 3], "dtype": "float16", "n": 7, "x": 0.5, "t": [[1, 2]],
                                  "rows": [1, 2]}
    json.dumps(to_jsonable(value))


@pytest.mark.parametrize("bad, where", [({"a": {"b": object()}}, "answer['a']['b']"),
                                        ({"x": float("nan")}, "answer['x']"),
                                        ({(1, 2): 3}, "answer has a key")])
def test_to_jsonable_names_the_bad_place(bad, where):
    with pytest.raises(AnswerError, match=__import__("re").escape(where)):
        to_jsonable(bad)


def test_answers_round_trip_and_skip_broken_files(tmp_path):
    write_answer(tmp_path, "1.1", {"total": 3})
    (tmp_path / "1.2.json").write_text("{not json")
    assert read_answers(tmp_path) == {"1.1": {"total": 3}}
    assert not list(tmp_path.glob(".*.tmp"))


def test_submit_prints_a_block_and_exports(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_OUTPUT_DIR", str(tmp_path))
    submit("1.1", {"total": 6624904, "trainable": 6500168, "non_trainable": 124736})
    out = capsys.readouterr().out
    assert "Task 1.1 · Parameters" in out and "6,624,904" in out
    assert read_answers(tmp_path) == {"1.1": {"total": 6624904, "trainable": 6500168, "non_trainable": 124736}}


def test_submit_rejects_a_wrong_shape_before_exporting(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_OUTPUT_DIR", str(tmp_path))
    with pytest.raises(AnswerError, match="missing: non_trainable"):
        submit("1.1", {"total": 1, "trainable": 1})
    with pytest.raises(KeyError, match="no task '900.9'"):
        submit("900.9", 1)
    assert read_answers(tmp_path) == {}


def test_students_default_output_folder_is_beside_the_notebook(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_OUTPUT_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    submit("1.2", {"float32": 4, "float16": 2, "bfloat16": 2})
    assert read_answers(tmp_path / "outputs" / "lab1") == {"1.2": {"float32": 4, "float16": 2, "bfloat16": 2}}


def test_answers_nested_too_deep_or_integers_too_long_are_refused_where_they_are_made():
    from util.answers import MAX_DEPTH

    deep = 1
    for _ in range(MAX_DEPTH):
        deep = [deep]
    assert to_jsonable(deep) == deep  # as deep as the grader reads
    with pytest.raises(AnswerError, match=f"nested more than {MAX_DEPTH} levels deep"):
        to_jsonable({"a": deep})
    with pytest.raises(AnswerError, match="an integer of over 4,000 digits"):
        to_jsonable([10**5000])
