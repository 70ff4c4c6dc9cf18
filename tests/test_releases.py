"""A notebook is graded as the release of its lab it was built from, says so, and regen never changes a
released lab's grading unannounced. Declarations and results are built in memory; no notebook runs."""
from __future__ import annotations

import copy
import csv
import dataclasses
import json

import pytest
from classes import result, store

from grader import REPO
from grader.author import regen
from grader.core import releases
from grader.core.results import SubmissionResult
from grader.grade import resume
from grader.report import class_folder
from grader.report.settings import Settings
from util.contract import Case, Lab, Release, Task
from util.labs import LABS


def _nb(*sources: str, release=None) -> dict:
    course = {"lab": "lab1"} | ({"release": release} if release is not None else {})
    return {"cells": [{"cell_type": "markdown", "source": s} for s in sources], "metadata": {"course": course}}


MARKER = LABS["lab1"].releases[1].marker


def test_lab_1_as_release_1_graded_it_has_no_tiny_tied_case_and_release_1s_points():
    lab = LABS["lab1"]
    assert lab.release == 3
    old = lab.as_of(1)
    assert [(t.id, t.answer_points, [c.id for c in t.cases]) for t in old.tasks] == [
        ("1.1", 6, ["resnet18 with layer1 frozen", "mobilenet_v2"]),
        ("1.2", 6, ["resnet18 float32", "tiny_grouped with a float16 stem"]),
        ("1.3", 9, ["resnet18@1x3x64x64", "tiny_grouped@2x4x16x16"]),
        ("1.4", 16, ["resnet18@1x3x224x224", "mobilenet_v3_small@1x3x160x160", "squeezenet1_1@1x3x128x128",
                     "tiny_grouped@2x4x16x16"]),
        ("1.5", 13, ["resnet18@1x3x64x64", "tiny_grouped@2x4x16x16"])]  # the declaration of release 1, to the point
    assert old.release == 1 and old.max_points == lab.max_points == 100
    assert lab.as_of(3) is lab and lab.as_of(7) is lab
    assert set(lab.added_since(1)) == {"1.1", "1.2", "1.3", "1.4", "1.5"} and lab.added_since(2) == {}
    assert lab.as_of(2).task("1.4").answer_points == 10 and lab.as_of(2).written == ()  # Q1 came with release 3
    assert lab.written_since(2) == lab.written_since(1) == ("1.Q1",) and lab.task("1.4").answer_points == 5


def test_lab_4_before_release_3_has_no_tiny_tied_case_and_keeps_each_tasks_points():
    lab = LABS["lab4"]
    for release in (1, 2):
        old = lab.as_of(release)
        assert not any("tiny_tied" in c.id for t in old.tasks for c in t.cases)
        assert [t.max_points for t in old.tasks] == [t.max_points for t in lab.tasks] == [10, 15, 35, 40]


@pytest.mark.parametrize("nb, stamped, release", [
    (_nb("text of release 2: " + MARKER, release=2), 2, 2),  # what the build writes today
    (_nb("a handout from before releases were stamped"), None, 1),  # the text shows release 1
    (_nb("unstamped, but holds " + MARKER), None, 2),  # the text shows release 2
    (_nb("stamped 1, holds " + MARKER, release=1), 1, 2),  # the text wins over an older stamp
    (_nb("stamped 1", release=1), 1, 1),
    (_nb("from a newer course", release=9), 9, 3),  # never above the lab's current release
    (_nb("a stamp that is not a number", release="2"), None, 1),
    (_nb("a stamp that is a boolean", release=True), None, 1),
])
def test_the_release_comes_from_the_stamp_and_the_text(nb, stamped, release):
    built = releases.built_from(nb, LABS["lab1"])
    assert (built.stamped, built.release) == (stamped, release)


def test_the_note_says_which_release_what_changed_and_how_it_was_graded():
    lab = LABS["lab1"]
    note = releases.note(lab, releases.built_from(_nb("old"), lab))
    assert note.startswith("Your notebook was built from release 1 of lab1 (2026-11-22); the lab is now at "
                           f"release {lab.release} ({lab.releases[-1].date}). You do not need the new handout. "
                           "You were graded as release 1 was: the hidden checks added since (tiny_tied and "
                           "tiny_tied@2x4x16x16, in tasks 1.1, 1.2, 1.3, 1.4 and 1.5) were not run")
    assert "What changed since: Release 2 (2026-11-23): The hidden models now include tiny_tied" in note
    assert "the written question added since (1.Q1) was not asked of you" in note
    assert len(note) < 2000 and "\n" not in note  # one note, whole
    assert releases.note(lab, releases.built_from(_nb(lab.releases[2].marker, release=3), lab)) is None
    newer = releases.note(lab, releases.built_from(_nb("x", release=9), lab))
    assert "release 9 of lab1" in newer and "graded as release 3" in newer


def test_a_release_that_changed_nothing_graded_says_so():
    lab = LABS["lab3"].as_of(3)  # releases 2 and 3 moved names and stated rules (4 asks written questions)
    note = releases.note(lab, releases.built_from({"cells": [], "metadata": {}}, lab))
    assert "Release 2 (2026-11-23): gemm_chain_graph and perturbed moved" in note and "Release 3" in note
    assert note.index("Nothing graded changed since release 1: you were graded as the current release grades. "
                      "What changed since: Release 2") > 0


@pytest.mark.parametrize("lab_name", list(LABS))
def test_every_earlier_releases_note_fits_one_message_with_how_it_was_graded_whole(lab_name):
    """However long the changelog grows, the note of a notebook of any earlier release fits in one message and says
    first, whole, which release it is and how it was graded; only what each later release changed is shortened."""
    from grader.core.safe_text import LIMIT_MESSAGE

    lab = LABS[lab_name]
    for release in range(1, lab.release):
        note = releases.note(lab, releases.built_from({"cells": [], "metadata": {"course": {"release": release}}},
                                                      lab))
        verdict, _, changes = note.partition(" What changed since: ")
        assert len(note) < LIMIT_MESSAGE and changes, (release, len(note))
        assert ("You were graded as" in verdict or "Nothing graded changed" in verdict) and verdict.endswith(".")
        assert [f"Release {r.number} (" in changes for r in lab.releases[release:]] == [True] * (lab.release - release)


def test_a_changelog_too_long_for_one_message_is_shortened_release_by_release():
    from dataclasses import replace

    from grader.core.safe_text import LIMIT_MESSAGE

    lab = LABS["lab1"]
    wordy = replace(lab, releases=tuple(replace(r, changes=r.changes + " More words." * 200) if r.number > 1 else r
                                        for r in lab.releases))
    note = releases.note(wordy, releases.built_from({"cells": [], "metadata": {"course": {"release": 1}}}, wordy))
    assert len(note) < LIMIT_MESSAGE and note.count("... (shortened)") == lab.release - 1
    assert "You were graded as release 1 was:" in note and "were not run" in note


@pytest.mark.parametrize("lab_name", list(LABS))
def test_every_notebook_the_build_writes_carries_the_current_release_and_every_marker(lab_name):
    lab = LABS[lab_name]
    handout = json.loads((REPO / "labs" / lab.notebook).read_text(encoding="utf-8"))
    assert handout["metadata"]["course"] == {"lab": lab_name, "release": lab.release}
    solution = json.loads((REPO / "solutions" / lab.notebook).read_text(encoding="utf-8"))
    assert releases.built_from(handout, lab).release == releases.built_from(solution, lab).release == lab.release
    for example in (REPO / "grader" / "examples" / lab_name).rglob("*.ipynb"):
        assert json.loads(example.read_text(encoding="utf-8"))["metadata"]["course"]["release"] == lab.release


def _call(fn, spec):
    return fn(spec["n"])


def _lab(*cases: Case, releases_: int = 1, answer_points: float = 4) -> Lab:
    task = Task(id="900.1", title="Squares", answer_points=answer_points, answer="an int", function="squares",
                run_case=_call, cases=cases)
    return Lab(name="lab900", title="Test", notebook="lab900.ipynb", tasks=(task,),
               releases=tuple(Release(n, f"2026-01-0{n}", f"change {n}") for n in range(1, releases_ + 1)))


def test_a_declaration_must_number_its_releases_and_name_only_declared_ones():
    with pytest.raises(ValueError, match="numbered 1, 2"):
        Lab(name="lab900", title="T", notebook="n.ipynb", tasks=(), releases=(Release(2, "2026-01-01", "x"),))
    with pytest.raises(ValueError, match=r"900.1 n=0 \(since 2\)"):
        _lab(Case("n=0", {"n": 0}, 3, since=2))


OLD = {"provenance": {"release": 1}, "graded": {"900.1": {"answer": 4, "cases": {"n=20": 6}}},
       "answers": {"900.1": 385}, "cases": {"900.1": {"n=20": 2870}}}


def _new(**cases) -> dict:
    return {"answers": {"900.1": 385}, "cases": {"900.1": {"n=20": 2870, **cases}}}


def test_regen_accepts_the_same_grading():
    assert regen.release_changes(_lab(Case("n=20", {"n": 20}, 6)), OLD, _new()) == ([], [])


def test_regen_refuses_a_hidden_case_that_names_no_newer_release():
    lab = _lab(Case("n=20", {"n": 20}, 6), Case("n=0", {"n": 0}, 3))
    [refused], announced = regen.release_changes(lab, OLD, _new(**{"n=0": 0}))
    assert announced == [] and refused.startswith("task 900.1 gains the hidden case 'n=0', which notebooks built "
                                                  "from release 1 were never told about: declare release 2")


def test_regen_takes_a_hidden_case_of_a_new_release_with_its_points_taken_from_the_answer():
    lab = _lab(Case("n=20", {"n": 20}, 6), Case("n=0", {"n": 0}, 3, since=2), releases_=2, answer_points=1)
    assert regen.release_changes(lab, OLD, _new(**{"n=0": 0})) == ([], [])


def test_regen_refuses_a_changed_value_or_points_unless_a_new_release_announces_them():
    changed = _new()
    changed["cases"]["900.1"]["n=20"] = 2871
    refused, _ = regen.release_changes(_lab(Case("n=20", {"n": 20}, 6)), OLD, changed)
    assert len(refused) == 1 and refused[0].startswith("task 900.1: the expected value of case 'n=20' changes at "
                                                       "result: a notebook built from release 1")
    refused, _ = regen.release_changes(_lab(Case("n=20", {"n": 20}, 5), answer_points=5), OLD, _new())
    assert [r.split(":")[1].strip() for r in refused] == ["a release-1 notebook's answer is worth 5 points instead of 4",
                                                           "case 'n=20' is worth 5 points instead of 6"]
    refused, announced = regen.release_changes(_lab(Case("n=20", {"n": 20}, 6), releases_=2), OLD, changed)
    assert refused == [] and announced == ["task 900.1: the expected value of case 'n=20' changes at result"]
    refused, _ = regen.release_changes(_lab(), OLD, {"answers": {"900.1": 385}, "cases": {}})
    assert refused and "loses the case 'n=20'" in refused[0]


def test_regen_refuses_and_writes_nothing(tmp_path, monkeypatch):
    lab = _lab(Case("n=20", {"n": 20}, 6), Case("n=0", {"n": 0}, 3), answer_points=1)
    path = tmp_path / "lab900.json"
    path.write_text(json.dumps(OLD))
    monkeypatch.setattr(regen, "path_for", lambda lab: path)
    monkeypatch.setattr(regen, "produce", lambda lab: copy.deepcopy(_new(**{"n=0": 0})))
    with pytest.raises(regen.ReleasedChange, match="refusing to change how released notebooks are graded"):
        regen.regenerate(lab)
    assert json.loads(path.read_text()) == OLD


def test_the_references_record_their_release_and_what_each_check_is_worth():
    refs = regen.load(LABS["lab1"])
    assert refs["provenance"]["release"] == 3
    assert refs["graded"]["1.4"] == {"answer": 5, "cases": {c.id: 6 for c in LABS["lab1"].task("1.4").cases}}


def test_the_release_rides_in_the_result_the_record_and_gradescopes_results():
    res = dataclasses.replace(result("lab900", {"900.1": 5}), release=1)
    assert SubmissionResult.from_dict(res.to_dict()).release == 1
    assert res.to_gradescope_dict()["extra_data"] == {"release": 1}
    assert "extra_data" not in result("lab900", {"900.1": 5}).to_gradescope_dict()


def _rows(path):
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_gradebooks_have_a_release_column(tmp_path):
    store(tmp_path, "amy", dataclasses.replace(result("lab900", {"900.1": 5}), release=1))
    store(tmp_path, "bob", result("lab900", {"900.1": 5}))
    class_folder.write(class_folder.build(tmp_path, Settings()))
    for name in ("gradebook.csv", "gradebook_lab900.csv"):
        assert {r["submission"]: r["release"] for r in _rows(tmp_path / name)} == {"amy": "1", "bob": ""}


def test_the_regrade_diff_says_which_release_a_notebook_was_built_from():
    previous = resume.Previous({"references": "a"}, result("lab900", {"900.1": 5}))
    now = dataclasses.replace(result("lab900", {"900.1": 0}), release=1)
    rows = [dict(zip(resume.CHANGE_HEADERS, c.row())) for c in resume.changes("amy", previous, {"references": "b"}, now)]
    assert rows[0] == {"submission": "amy", "lab": "lab900", "release": 1, "task": "900.1", "old": 5, "new": 0,
                       "change": -5, "because": "references"}
