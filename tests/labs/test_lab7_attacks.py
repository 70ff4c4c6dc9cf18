"""Lab 7's judges against students who read them, each attack beside a control that plays the same
wrong answer straight.

Class 1, a rule kept in state the student's code shares. Tasks 7.2 and 7.3 are graded twice: the counts their
hidden cases return (``summarize`` of the converted model, computed in the graded kernel) against the references,
and the saved model by the judge (valid, the original interface, numerically close to float32 under the course's
emulator). The counts were computed by course code in the kernel, beside the student's code, and the judge never
saw them: a student whose conversion has the right structure but breaks the model (here: one Cast reads the wrong
tensor) could return the original float32 model, which the judge accepts (valid, exact), while a ``summarize``
replaced in the kernel reported the broken conversion's counts, the reference's: 20 of 20 points on 7.2.

Now every lab 7 judge takes what the case returned (``returned``: the grader passes it on, ``grader.judge.artifacts``)
and recomputes it from the saved file; they must agree.

* honest: the solution's ``convert``: passes;
* control: the broken conversion, played straight: fails (the judge's checks), before and now;
* attack: the float32 original saved, the broken conversion's counts returned: passed before, fails now.

Judged in the grader's judge process, as whoever runs the tests (root in CI) and as an unprivileged grader.

Classes 2-4 and 6 do not occur in lab 7's judges: they run no student code and time nothing, judge on models and
inputs they build from the spec with the course emulator (a grader-only file, the core's class 6), and read no
recording.
"""
from __future__ import annotations

import onnx
import pytest
from judged_files import judge_files, save_case

from grader.author.solution import solution_namespace
from grader.execute import confinement
from util.labs import get_lab
from util.labs.lab7 import judge
from util.labs.lab7 import summary as course_summary

LAB = get_lab("lab7")
CASES = [c.id for c in LAB.task("7.2").cases]
walls = pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab7", ("7.1", "7.2", "7.3"))


def broken(solution):
    """The solution's conversion with one Cast to float16 reading the graph's first input instead of its tensor:
    the same nodes, Casts and types (the same counts), a model that no longer computes the original's function."""
    def convert(model, lists, excluded_names=()):
        converted = solution["convert"](model, lists, excluded_names)
        cast = next(node for node in converted.graph.node if node.op_type == "Cast"
                    and any(a.name == "to" and a.i == onnx.TensorProto.FLOAT16 for a in node.attribute)
                    and node.input[0] != converted.graph.input[0].name)
        cast.input[0] = converted.graph.input[0].name
        return converted
    return convert


def attack(solution, monkeypatch):
    """The original float32 model returned (for the judge), the broken conversion's counts reported by a
    ``summarize`` replaced in the kernel (for the reference), as a notebook cell before the hidden cases could."""
    wrong, real, stash = broken(solution), course_summary.summarize, {}
    monkeypatch.setattr(course_summary, "summarize", lambda converted: stash.pop("counts", None) or real(converted))

    def convert(model, lists, excluded_names=()):
        stash["counts"] = real(wrong(model, lists, excluded_names))
        return model
    return convert


def test_the_attack_returns_the_references_counts_and_saves_a_model_the_old_checks_accept(solution, monkeypatch,
                                                                                          tmp_path):
    from grader.judge import references

    refs = references.load(LAB)["cases"]["7.2"]
    for case_id in CASES:
        with monkeypatch.context() as kernel:
            spec, data, value = save_case("lab7", "7.2", case_id, attack(solution, kernel), tmp_path)
        assert value == refs[case_id], case_id                       # the reference's counts
        assert judge.check_converted(spec, data) == [], case_id      # without what it returned: nothing to see
        [problem] = judge.check_converted(spec, data, returned=value)
        assert problem.startswith("what this case returned is not the summary (summarize) of the file it saved")
        _, broken_data, broken_value = save_case("lab7", "7.2", case_id, broken(solution), tmp_path)
        assert broken_value == refs[case_id]                         # the control's counts are right too
        assert judge.check_converted(spec, broken_data, returned=broken_value)   # and the judge fails its model


def _saved(solution, monkeypatch, tmp_path):
    saved = {}
    for name in ("honest", "control", "attack"):
        for case_id in CASES:
            with monkeypatch.context() as kernel:
                function = {"honest": solution["convert"], "control": broken(solution),
                            "attack": attack(solution, kernel)}[name]
                spec, data, value = save_case("lab7", "7.2", case_id, function, tmp_path)
            saved[f"{name}/{case_id}"] = ("7.2", spec, data, value)
    return saved


def _assert_verdicts(verdicts):
    for case_id in CASES:
        assert verdicts[f"honest/{case_id}"] == [], case_id
        control = verdicts[f"control/{case_id}"]
        assert control and not control[0].startswith("what this case returned"), (case_id, control)
        [problem] = verdicts[f"attack/{case_id}"]
        assert problem.startswith("what this case returned is not the summary (summarize) of the file it saved ("), \
            (case_id, problem)


@walls
def test_a_summary_from_beside_the_students_code_earns_nothing_in_the_graders_judge(solution, monkeypatch, tmp_path):
    _assert_verdicts(judge_files("lab7", _saved(solution, monkeypatch, tmp_path), tmp_path))


@walls
def test_the_same_as_an_unprivileged_grader(solution, monkeypatch, tmp_path):
    _assert_verdicts(judge_files("lab7", _saved(solution, monkeypatch, tmp_path), tmp_path, as_user=True))


def test_the_other_judges_bind_what_their_cases_return(solution, tmp_path):
    """7.3, 7.4 and 7.5 too: what the case returned must be what the saved file gives."""
    ns = solution_namespace("lab7", ("7.1", "7.2", "7.3", "7.4", "7.5"))
    for task_id, function in (("7.3", ns["convert_fp16_params"]), ("7.4", ns["emulate_fp16"]),
                              ("7.5", ns["auto_fp32"])):
        task = LAB.task(task_id)
        case = task.cases[0]
        spec, data, value = save_case("lab7", task_id, case.id, function, tmp_path)
        check = getattr(judge, task.grader_check.split(":")[1])
        assert check(spec, data, returned=value) == [], task_id
        lie = {**value, next(iter(value)): "another"} if isinstance(value, dict) else value
        assert check(spec, data, returned=lie)[0].startswith("what this case returned is not"), task_id
