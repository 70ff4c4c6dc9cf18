"""Files the kernel saves for grader-side checks: bounded reading, verdicts, scoring, dispute copies."""
import json

import pytest

from grader.judge import artifacts, score
from grader.execute.kernel import Execution
from util.artifacts import case_file
from util.contract import Case, Lab, Task

SPEC = {"M": 4}


def _problems_if_short(spec, data, tolerance):
    if data == b"boom":
        raise RuntimeError("hostile bytes")
    return [] if len(data) >= 4 else [f"only {len(data)} bytes"]


def lab(check="tests.test_artifacts:_problems_if_short"):
    task = Task(id="9.1", title="Saved model", points=1, answer="x", function="f", run_case=lambda f, s: None,
                cases=(Case("good", {"M": 4}, 2), Case("short", {"M": 5}, 3), Case("absent", {"M": 6}, 4),
                       Case("raised", {"M": 7}, 5)), grader_check=check)
    return Lab("lab9", "t", "lab9.ipynb", (task,))


def ok_records():
    return {"9.1": {c: {"status": "ok", "value": {"saved": "x"}} for c in ("good", "short", "absent", "raised")}}


FILES = {case_file({"M": 4}): b"1234", case_file({"M": 5}): b"12", case_file({"M": 7}): b"boom"}


def test_verdicts_judge_each_saved_file_and_never_raise():
    found = artifacts.verdicts(lab(), ok_records(), FILES)["9.1"]
    assert found["good"] == [] and found["short"] == ["only 2 bytes"]
    assert found["absent"] == ["f() returned, but no model file was saved for this case"]
    assert found["raised"] == ["the grader could not check the model (RuntimeError: hostile bytes)"]


def test_cases_that_failed_in_the_kernel_are_not_judged_again():
    records = ok_records()
    records["9.1"]["short"] = {"status": "error", "message": "ValueError: no"}
    assert "short" not in artifacts.verdicts(lab(), records, FILES)["9.1"]


def test_a_bad_check_name_is_a_clear_error():
    with pytest.raises(ValueError, match="names no function"):
        artifacts.verdicts(lab("grader.nothing:here"), ok_records(), FILES)


def test_score_turns_problems_into_failed_checks_with_the_message():
    the_lab = lab()
    refs = {"answers": {"9.1": 1}, "cases": {"9.1": {c: {"saved": "x"} for c in ("good", "short", "absent", "raised")}}}
    execution = Execution("completed", 1.0, ())
    verdicts = artifacts.verdicts(the_lab, ok_records(), FILES)
    del verdicts["9.1"]["raised"]                        # as if the grader never judged it
    (task,) = score.score(the_lab, refs, {"9.1": 1}, ok_records(), execution, verdicts)
    got = {c.name: (c.status, c.score, c.message) for c in task.checks}
    assert got["good"] == ("passed", 2, "")
    assert got["short"] == ("failed", 0, "only 2 bytes")
    assert got["absent"][0:2] == ("failed", 0)
    assert got["raised"] == ("missing", 0, "the grader did not receive the model this case saved")


def test_read_files_bounds_sizes_and_skips_links_and_other_names(tmp_path, monkeypatch):
    monkeypatch.setattr(artifacts, "MAX_FILE_BYTES", 10)
    (tmp_path / "case-small.onnx").write_bytes(b"12345")
    (tmp_path / "case-big.onnx").write_bytes(b"x" * 11)
    (tmp_path / "notes.txt").write_bytes(b"ignored")
    (tmp_path / "case-link.onnx").symlink_to(tmp_path / "case-small.onnx")
    files = artifacts.read_files(tmp_path)
    assert files["case-small.onnx"] == b"12345"
    assert files["case-big.onnx"] == "the saved file is 0 MiB, over the 0 MiB limit"
    assert set(files) == {"case-small.onnx", "case-big.onnx"}
    assert artifacts.read_files(tmp_path / "absent") == {}


def test_save_files_keeps_small_ones_and_lists_all(tmp_path, monkeypatch):
    monkeypatch.setattr(artifacts, "KEEP_BYTES", 4)
    artifacts.save_files({"case-a.onnx": b"1234", "case-b.onnx": b"12345", "case-c.onnx": "too big"}, tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert (tmp_path / "case-a.onnx").read_bytes() == b"1234" and not (tmp_path / "case-b.onnx").exists()
    assert manifest["case-b.onnx"]["kept"] is False and manifest["case-b.onnx"]["bytes"] == 5
    assert manifest["case-c.onnx"] == {"read": False, "reason": "too big"}


def test_save_model_refuses_what_is_not_a_model(tmp_path, monkeypatch):
    from util.artifacts import save_model
    monkeypatch.setenv("COURSE_OUTPUT_DIR", str(tmp_path))
    with pytest.raises(TypeError, match=r"f\(\) must return an onnx.ModelProto, not a dict"):
        save_model({}, SPEC, "lab9", "f")


def test_arrays_round_trip_without_pickle_and_the_grader_finds_any_suffix(tmp_path, monkeypatch):
    import numpy as np

    from grader.judge.artifacts import _case_data, read_files
    from util.answers import OUTPUT_DIR_ENV
    from util.artifacts import files_dir, load_arrays, save_arrays, save_file

    monkeypatch.setenv(OUTPUT_DIR_ENV, str(tmp_path))
    weights = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert save_arrays({"w": weights, "b": [1.5, 2.5]}, {"case": 1}, "labX")["saved"].endswith(".npz")
    save_file(b"\x7fELF", {"case": 2}, "labX", ".so")
    save_file(b"second", {"case": 2}, "labX", ".bin")  # saving again replaces the case's file
    files = read_files(files_dir("labX"))
    assert len(files) == 2
    loaded = load_arrays(_case_data(files, {"case": 1}))
    assert loaded["w"].dtype == np.float32 and (loaded["w"] == weights).all() and list(loaded["b"]) == [1.5, 2.5]
    assert _case_data(files, {"case": 2}) == b"second" and _case_data(files, {"case": 3}) is None
    with pytest.raises(TypeError, match="Python objects"):
        save_arrays({"x": np.array([{"a": 1}], dtype=object)}, {"case": 4}, "labX")
    for hostile in (b"", b"garbage", np.array([{"a": 1}], dtype=object).dumps()):
        with pytest.raises(ValueError, match="not an array file"):
            load_arrays(hostile)
