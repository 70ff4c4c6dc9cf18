"""Files the kernel saves for grader-side checks: listed without reading them, judged in a confined
judge process (one hostile file costs only its own case), scored, and copied for disputes."""
import json
import os

import pytest
from tinylab import registered

from grader.core.limits import Limits, format_size
from grader.execute.kernel import Execution
from grader.judge import artifacts, score
from util.artifacts import case_file, case_stem
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


def saved(the_lab, folder, limits=LIMITS):
    """Write each case's file into ``folder`` as a kernel would; list them as the grader does."""
    folder.mkdir(parents=True, exist_ok=True)
    for case in the_lab.tasks[0].cases:
        if case.id in CONTENTS:
            (folder / case_file(case.spec)).write_bytes(CONTENTS[case.id])
    return artifacts.list_files(folder, artifacts.declared(the_lab, records(the_lab)), limits)


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


def test_a_check_that_takes_returned_gets_what_each_case_returned_in_the_kernel(tmp_path, tiny):
    """A summary the kernel computed beside the student's code (what the grader compares with the reference) can
    be bound to the file judged: the check receives it as ``returned``; a check without the argument never does."""
    the_lab = lab("lab900.judge:check_returned", names=("good", "short", "after"))
    kernel = records(the_lab)
    kernel["900.1"]["good"]["value"] = {"bytes": 4}            # the truth about b"1234"
    kernel["900.1"]["short"]["value"] = {"bytes": 4}           # a lie: b"12" holds 2
    kernel["900.1"]["after"] = {"status": "ok"}                # no value at all
    found = artifacts.verdicts(the_lab, kernel, saved(the_lab, tmp_path / "files"), limits=LIMITS)["900.1"]
    assert found == {"good": [], "short": ["the case returned {'bytes': 4}; its file holds 2 bytes"],
                     "after": ["the case returned None; its file holds 4 bytes"]}
    plain = artifacts.verdicts(lab(names=("good",)), kernel, saved(lab(names=("good",)), tmp_path / "plain"),
                               limits=LIMITS)["900.1"]
    assert plain == {"good": []}                               # check_size(spec, data, tolerance): unchanged


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


def _stems(*specs):
    return {case_stem(spec): spec for spec in specs}


def test_list_files_bounds_sizes_skips_links_and_other_names_and_reads_nothing(tmp_path):
    small, big, link, fifo = ({"M": i} for i in range(4))
    (tmp_path / case_file(small)).write_bytes(b"12345")
    (tmp_path / case_file(big)).write_bytes(b"x" * 11)
    (tmp_path / "notes.txt").write_bytes(b"ignored")
    (tmp_path / case_file(link)).symlink_to(tmp_path / case_file(small))
    os.mkfifo(tmp_path / case_file(fifo))  # never opened: reading a FIFO would block the grader
    listing = artifacts.list_files(tmp_path, _stems(small, big, link, fifo), Limits(saved_file=10))
    assert list(listing.files) == [case_file(small), case_file(big)]
    found_small, found_big = listing.files.values()
    assert (found_small.size, found_small.path, found_small.sha256[:8]) == (5, tmp_path / case_file(small), "5994471a")
    assert found_big.path is None and found_big.reason == (
        "the file this case saved is 11 bytes, over the 10 bytes the grader reads per file: it was not judged; "
        "return only what the task asks for, as the lab's helpers save it")
    assert (listing.undeclared, listing.undeclared_bytes) == (3, 7 + len(str(tmp_path / case_file(small))))
    assert artifacts.list_files(tmp_path / "absent", _stems(small)) == artifacts.Listing()


def test_only_declared_files_are_listed_and_the_rest_is_counted_unread(tmp_path):
    """A file per case is judged; junk ``case-*`` files, a second file for a case, a name with an odd
    suffix and a folder are counted in a note, never listed, judged or kept."""
    one, two = {"M": 1}, {"M": 2}
    (tmp_path / case_file(one)).write_bytes(b"1234")
    (tmp_path / case_file(one, ".zzz")).write_bytes(b"second file of case one")  # sorted after .onnx: an extra
    for i in range(40):
        (tmp_path / f"case-{i:016x}.onnx").write_bytes(b"j" * 100)
    (tmp_path / (case_file(two, "") + ".onnx\x1b[2J")).write_bytes(b"odd suffix")
    (tmp_path / (case_file(two, "") + ".dir")).mkdir()
    listing = artifacts.list_files(tmp_path, _stems(one, two))
    assert list(listing.files) == [case_file(one)]
    folder_size = os.lstat(tmp_path / (case_file(two, "") + ".dir")).st_size
    assert (listing.undeclared, listing.undeclared_bytes) == (43, 40 * 100 + 23 + 10 + folder_size)
    assert listing.note() == (f"43 files ({format_size(listing.undeclared_bytes)}) among the files saved for the "
                              "grader's checks belong to no hidden case: neither judged nor kept (only the file "
                              "each case saves through the lab's helpers counts)")


def test_the_count_and_the_total_bound_what_is_judged_in_case_order(tmp_path):
    specs = [{"M": i} for i in range(5)]
    for spec in specs:
        (tmp_path / case_file(spec)).write_bytes(b"x" * 10)
    files = artifacts.list_files(tmp_path, _stems(*specs), Limits(saved_files=4, saved_total=25)).files
    reasons = [f.reason for f in files.values()]
    assert [f.path is not None for f in files.values()] == [True, True, False, False, False]
    assert reasons[2].startswith("the hidden cases saved more than 25 bytes of files in all, the most the grader reads, "
                                 "and this case's file (10 bytes) was past it: it was not judged")
    assert reasons[4].startswith("the hidden cases saved more than 4 files for the grader's checks, the most it reads")


def test_save_files_keeps_what_fits_and_lists_all(tmp_path, monkeypatch):
    monkeypatch.setattr(artifacts, "KEEP_FILE", 4)
    (tmp_path / "in").mkdir()
    specs = {"a": {"M": 1}, "b": {"M": 2}, "c": {"M": 3}, "d": {"M": 4}, "e": {"M": 5}}
    for key, data in {"a": b"1234", "b": b"12345", "c": b"123456", "d": b"12", "e": b"123"}.items():
        (tmp_path / "in" / case_file(specs[key])).write_bytes(data)
    (tmp_path / "in" / "case-junk.onnx").write_bytes(b"junk")
    listing = artifacts.list_files(tmp_path / "in", _stems(*specs.values()), Limits(saved_file=5))
    artifacts.save_files(listing, tmp_path / "out", Limits(kept_saved=7))
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    kept = sorted(p.name for p in (tmp_path / "out").iterdir() if p.name != "manifest.json")
    assert kept == sorted([case_file(specs["a"]), case_file(specs["d"])])  # 4 + 2 bytes; e (3) would pass 7
    assert manifest[case_file(specs["b"])] == {"bytes": 5, "sha256": listing.files[case_file(specs["b"])].sha256,
                                               "kept": False}
    assert manifest[case_file(specs["e"])]["kept"] is False
    assert manifest[case_file(specs["c"])] == {
        "read": False, "bytes": 6, "reason": "the file this case saved is 6 bytes, over the 5 bytes the grader reads "
        "per file: it was not judged; return only what the task asks for, as the lab's helpers save it"}
    assert manifest["undeclared"] == {"files": 1, "bytes": 4, "kept": False, "reason": "no hidden case declares them"}


def test_a_file_swapped_after_it_was_hashed_is_not_copied(tmp_path):
    """The copy for disputes comes from the very file that was hashed: a link or another file put in its
    place afterwards (by a process that outlived its kernel) is never copied."""
    spec = {"M": 1}
    path = tmp_path / "in" / case_file(spec)
    path.parent.mkdir()
    path.write_bytes(b"1234")
    listing = artifacts.list_files(tmp_path / "in", _stems(spec))
    (tmp_path / "secret").write_bytes(b"the grader's secret")
    path.unlink()
    path.symlink_to(tmp_path / "secret")
    artifacts.save_files(listing, tmp_path / "out")
    assert not (tmp_path / "out" / case_file(spec)).exists()
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())[case_file(spec)]["kept"] is False


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
    files = list_files(files_dir("labX"), _stems({"case": 1}, {"case": 2})).files
    assert len(files) == 2
    loaded, problems = read_saved_arrays(_case_file(files, {"case": 1}).path.read_bytes(), expected=["w", "b"])
    assert problems == []
    assert loaded["w"].dtype == np.float32 and (loaded["w"] == weights).all() and list(loaded["b"]) == [1.5, 2.5]
    assert _case_file(files, {"case": 2}).path.read_bytes() == b"second" and _case_file(files, {"case": 3}) is None
    with pytest.raises(TypeError, match="Python objects"):
        save_arrays({"x": np.array([{"a": 1}], dtype=object)}, {"case": 4}, "labX")
    for hostile in (b"", b"garbage", np.array([{"a": 1}], dtype=object).dumps()):
        assert read_saved_arrays(hostile)[0] is None
