"""Files the kernel saves for grader-side checks: listed without reading them, judged in a confined
judge process (one hostile file costs only its own case), scored, and copied for disputes."""
import json
import os

import pytest
from tinylab import registered

from grader.core.limits import Limits
from grader.execute.kernel import Execution
from grader.judge import artifacts, score
from util.artifacts import case_file
from util.contract import Case, Lab, Task

SPEC = {"M": 4}
CONTENTS = {"good": b"1234", "short": b"12", "raised": b"boom", "crash": b"crash", "hang": b"hang",
            "bloat": b"bloat", "child": b"child", "noise": b"noise", "many": b"many", "after": b"5678"}
"""Case id -> what its saved file holds (see tests/tinylab_labs/lab900/judge.py); ``absent`` saves none."""
LIMITS = Limits(memory=512 << 20, procs=16, judge_timeout=8)


def lab(check="lab900.judge:check_size", names=("good", "short", "absent", "raised")):
    task = Task(id="900.1", title="Saved model", answer_points=1, answer="x", function="f", run_case=lambda f, s: None,
                cases=tuple(Case(name, {"M": i}, i + 1) for i, name in enumerate(names)), grader_check=check)
    return Lab("lab900", "t", "lab900.ipynb", (task,))


def records(the_lab):
    return {"900.1": {c.id: {"status": "ok", "value": {"saved": "x"}} for c in the_lab.tasks[0].cases}}


def saved(the_lab, folder):
    """Write each case's file into ``folder`` as a kernel would; list them as the grader does."""
    folder.mkdir(parents=True, exist_ok=True)
    for case in the_lab.tasks[0].cases:
        if case.id in CONTENTS:
            (folder / case_file(case.spec)).write_bytes(CONTENTS[case.id])
    return artifacts.list_files(folder)


@pytest.fixture
def tiny(tmp_path):
    with registered(tmp_path / "references"):
        yield


def test_verdicts_judge_each_saved_file_in_a_judge_process_and_never_raise(tmp_path, tiny):
    the_lab = lab()
    found = artifacts.verdicts(the_lab, records(the_lab), saved(the_lab, tmp_path / "files"), limits=LIMITS)["900.1"]
    assert found["good"] == [] and found["short"] == ["only 2 bytes"]
    assert found["absent"] == ["f() returned, but no file was saved for this case"]
    assert found["raised"] == ["the grader could not check the model (RuntimeError: hostile bytes)"]


def test_a_file_that_crashes_hangs_or_bloats_its_check_costs_only_its_own_case(tmp_path, tiny):
    the_lab = lab(names=("crash", "good", "hang", "bloat", "child", "noise", "many", "after"))
    found = artifacts.verdicts(the_lab, records(the_lab), saved(the_lab, tmp_path / "files"), limits=LIMITS)["900.1"]
    assert found["crash"] == ["the grader's check of this file crashed (signal 11)"]
    assert found["hang"] == ["the grader's check of this file was still running after 8 s and was stopped"]
    assert found["bloat"] in (["the grader's check of this file ran out of memory"],  # a MemoryError (rlimit)
                              ["the grader's check of this file used more than 512 MiB of memory and was stopped"])
    assert found["good"] == found["child"] == found["noise"] == found["after"] == []  # judged, before and after
    assert len(found["many"]) == 20 and all(len(p) <= 400 for p in found["many"])


def test_cases_that_failed_in_the_kernel_are_not_judged_again(tmp_path, tiny):
    the_lab = lab()
    kernel = records(the_lab)
    kernel["900.1"]["short"] = {"status": "error", "message": "ValueError: no"}
    kernel["900.1"]["raised"] = ["not", "a", "record"]  # whatever the kernel wrote, never a grader fault
    found = artifacts.verdicts(the_lab, kernel, saved(the_lab, tmp_path / "files"), limits=LIMITS)["900.1"]
    assert set(found) == {"good", "absent"}


def test_a_bad_check_name_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="names no function"):
        artifacts.verdicts(lab("grader.nothing:here"), records(lab()), {}, limits=LIMITS)


def test_score_turns_problems_into_failed_checks_with_the_message(tmp_path, tiny):
    the_lab = lab()
    refs = {"answers": {"900.1": 1}, "cases": {"900.1": {c: {"saved": "x"} for c in ("good", "short", "absent", "raised")}}}
    execution = Execution("completed", 1.0, ())
    verdicts = artifacts.verdicts(the_lab, records(the_lab), saved(the_lab, tmp_path / "files"), limits=LIMITS)
    del verdicts["900.1"]["raised"]                        # as if the grader never judged it
    (task,) = score.score(the_lab, refs, {"900.1": 1}, records(the_lab), execution, verdicts)
    got = {c.name: (c.status, c.score, c.message) for c in task.checks}
    assert got["good"] == ("passed", 1, "")
    assert got["short"] == ("failed", 0, "only 2 bytes")
    assert got["absent"][0:2] == ("failed", 0)
    assert got["raised"] == ("missing", 0, "the grader did not receive the model this case saved")


def test_list_files_bounds_sizes_skips_links_and_other_names_and_reads_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(artifacts, "MAX_FILE_BYTES", 10)
    (tmp_path / "case-small.onnx").write_bytes(b"12345")
    (tmp_path / "case-big.onnx").write_bytes(b"x" * 11)
    (tmp_path / "notes.txt").write_bytes(b"ignored")
    (tmp_path / "case-link.onnx").symlink_to(tmp_path / "case-small.onnx")
    os.mkfifo(tmp_path / "case-fifo.onnx")  # never opened: reading a FIFO would block the grader
    files = artifacts.list_files(tmp_path)
    assert set(files) == {"case-small.onnx", "case-big.onnx"}
    small, big = files["case-small.onnx"], files["case-big.onnx"]
    assert (small.size, small.path, small.sha256[:8]) == (5, tmp_path / "case-small.onnx", "5994471a")
    assert big.path is None and big.reason == "the saved file is 11 bytes, over the 10 bytes limit"
    assert artifacts.list_files(tmp_path / "absent") == {}


def test_save_files_keeps_small_ones_and_lists_all(tmp_path, monkeypatch):
    monkeypatch.setattr(artifacts, "KEEP_BYTES", 4)
    monkeypatch.setattr(artifacts, "MAX_FILE_BYTES", 5)
    (tmp_path / "in").mkdir()
    for name, data in {"case-a.onnx": b"1234", "case-b.onnx": b"12345", "case-c.onnx": b"123456"}.items():
        (tmp_path / "in" / name).write_bytes(data)
    artifacts.save_files(artifacts.list_files(tmp_path / "in"), tmp_path / "out")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert (tmp_path / "out" / "case-a.onnx").read_bytes() == b"1234" and not (tmp_path / "out" / "case-b.onnx").exists()
    assert manifest["case-b.onnx"]["kept"] is False and manifest["case-b.onnx"]["bytes"] == 5
    assert manifest["case-c.onnx"] == {"read": False, "bytes": 6, "reason": "the saved file is 6 bytes, over the 5 bytes limit"}


def test_save_model_refuses_what_is_not_a_model(tmp_path, monkeypatch):
    from util.artifacts import save_model
    monkeypatch.setenv("COURSE_OUTPUT_DIR", str(tmp_path))
    with pytest.raises(TypeError, match=r"f\(\) must return an onnx.ModelProto, not a dict"):
        save_model({}, SPEC, "lab900", "f")


def test_arrays_round_trip_without_pickle_and_the_grader_finds_any_suffix(tmp_path, monkeypatch):
    import numpy as np

    from grader.judge.artifacts import _case_file, list_files
    from util.answers import OUTPUT_DIR_ENV
    from util.artifacts import files_dir, read_saved_arrays, save_arrays, save_file

    monkeypatch.setenv(OUTPUT_DIR_ENV, str(tmp_path))
    weights = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert save_arrays({"w": weights, "b": [1.5, 2.5]}, {"case": 1}, "labX")["saved"].endswith(".npz")
    save_file(b"\x7fELF", {"case": 2}, "labX", ".so")
    save_file(b"second", {"case": 2}, "labX", ".bin")  # saving again replaces the case's file
    files = list_files(files_dir("labX"))
    assert len(files) == 2
    loaded, problems = read_saved_arrays(_case_file(files, {"case": 1}).path.read_bytes(), expected=["w", "b"])
    assert problems == []
    assert loaded["w"].dtype == np.float32 and (loaded["w"] == weights).all() and list(loaded["b"]) == [1.5, 2.5]
    assert _case_file(files, {"case": 2}).path.read_bytes() == b"second" and _case_file(files, {"case": 3}) is None
    with pytest.raises(TypeError, match="Python objects"):
        save_arrays({"x": np.array([{"a": 1}], dtype=object)}, {"case": 4}, "labX")
    for hostile in (b"", b"garbage", np.array([{"a": 1}], dtype=object).dumps()):
        assert read_saved_arrays(hostile)[0] is None
