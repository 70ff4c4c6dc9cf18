"""References come only from the solution, carry provenance, and are fresh."""
import copy
import json

import pytest

from grader.author import regen
from grader.judge.references import REFERENCE_ENV
from util.labs import LABS

pytestmark = pytest.mark.notebook
LAB_NAMES = [name for name, lab in LABS.items() if lab.tasks]


@pytest.mark.parametrize("lab_name", LAB_NAMES)
def test_references_cover_every_task_and_case_with_provenance(lab_name):
    lab = LABS[lab_name]
    refs = regen.load(lab)
    assert set(refs["answers"]) == {t.id for t in lab.tasks}
    assert {t: set(c) for t, c in refs["cases"].items()} == {t.id: {c.id for c in t.cases} for t in lab.tasks if t.cases}
    prov = refs["provenance"]
    assert prov["source_sha256"] == regen.source_hash(lab)
    assert prov["packages"]["torch"] == "2.14.1" and prov["python"].startswith("3.11")


@pytest.mark.parametrize("lab_name", LAB_NAMES)
def test_committed_references_are_fresh(lab_name):
    """Made from today's solution, lab sources and pins. That a new run reproduces them is what
    ``test_labs.py::test_solution_gets_full_marks`` shows: it grades a fresh run of the solution
    against them, within each task's tolerance (``regen --check`` does both in one command)."""
    assert regen.check(LABS[lab_name], rerun=False) == []


def _check_with(monkeypatch, tmp_path, edit):
    """regen.check() on an edited copy of lab1.json, with the solution run stubbed by the real file."""
    lab = LABS["lab1"]
    committed = regen.load(lab)
    fresh = {"answers": committed["answers"], "cases": committed["cases"]}
    edited = copy.deepcopy(committed)
    edit(edited)
    monkeypatch.setenv(REFERENCE_ENV, str(tmp_path))
    (tmp_path / "lab1.json").write_text(json.dumps(edited))
    monkeypatch.setattr(regen, "produce", lambda lab: fresh)
    return regen.check(lab)


def test_check_notices_a_reference_value_the_solution_does_not_produce(tmp_path, monkeypatch):
    def edit(refs):
        refs["cases"]["1.4"]["resnet18@1x3x224x224"]["total"] += 1
    [reason] = _check_with(monkeypatch, tmp_path, edit)
    assert "task 1.4 differs at refs['cases']['resnet18@1x3x224x224']['total']" in reason


def test_check_notices_an_edited_solution_and_other_package_versions(tmp_path, monkeypatch):
    def edit(refs):
        refs["provenance"]["source_sha256"] = "0" * 64
        refs["provenance"]["packages"]["torch"] = "2.13.0"
    reasons = _check_with(monkeypatch, tmp_path, edit)
    assert len(reasons) == 2
    assert "changed since the references were made" in reasons[0]
    assert "torch is 2.14.1 here but the references were made with 2.13.0" in reasons[1]


def test_known_googlenet_figures():
    answers = regen.load(LABS["lab1"])["answers"]
    assert answers["1.1"]["total"] == 6_624_904
    assert answers["1.2"]["float32"] == 26_499_616
    assert answers["1.4"]["ptflops"]["total"] == 1_513_907_448
    assert answers["1.4"]["ptflops"]["by_type"] == {"Conv2d": 1_497_352_192, "Linear": 1_025_000,
                                                    "BatchNorm2d": 6_452_320, "MaxPool2d": 2_875_712,
                                                    "AdaptiveAvgPool2d": 50_176}
    assert answers["1.4"]["own"]["total"] == answers["1.4"]["tools"]["flop_counter_mode"] == 1_497_352_192 + 1_024_000
