"""Lab 11's judge of its measured cases, on recorded and synthetic measurements (no timing decides a test here).

The grader's own measurement (``judge_measure``) and the student process the judge runs the student's function
in again are replaced by fixed numbers, so each verdict here is decided by the judge's logic alone: bands, rank
correlation, the share of layers in band, the second measurement before a failure, the re-run on a drawn model,
and what a hostile saved file gets. The live measurement path is tested for
plumbing in ``test_lab11_lab.py``; the margins under load are the benchmark's (``bench_lab11_grading.py``).
"""
from __future__ import annotations

import io
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from util.contract import Tolerance
from util.labs.lab11 import judge, judge_measure
from util.labs.lab11.traces import load_trace

EXACT = Tolerance(rtol=1e-9)
PEAK = {"call": "measured", "measure": "peak", "n": 448, "runs": 10}
BANDWIDTH = {"call": "measured", "measure": "bandwidth", "mib": 48, "runs": 10}
PROFILE = {"measure": "profile", "model": "resnet18_bnstats", "shape": [1, 3, 64, 64], "runs": 10}
ACHIEVED = {"call": "measured", "measure": "achieved", "model": "resnet18_bnstats", "layer": "layer4.1.conv1",
            "sample": [512, 2, 2], "batches": [1, 8, 32], "runs": 10}


def npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def recorded_profile() -> dict[str, float]:
    """ResNet-18's per-layer times from the recorded trace (fastest call of 5 runs), in seconds."""
    best: dict[str, float] = {}
    for event in load_trace("resnet18_torch")["traceEvents"]:
        if event.get("cat") == "user_annotation" and event["name"].startswith("layer:"):
            name = event["name"][len("layer:"):]
            best[name] = min(best.get(name, math.inf), event["dur"] / 1e6)
    return best


DRAWN_PROFILE = {str(2 * i): 1e-5 * (i + 1) ** 2 for i in range(14)}
"""The grader's measurement of a drawn CNN, in these tests: 14 layers from 10 us to 2 ms."""
DRAWN_ACHIEVED = {1: 20.0, 8: 60.0, 32: 90.0}


class Grader:
    """Stands in for ``judge_measure`` and for the student process the judge runs the student's function in again:
    fixed measurements, a different one when asked to measure afresh; the re-run answers ``rerun`` (default: the
    grader's own measurement of the drawn model, a pass) and records the seeds it was asked for."""

    def __init__(self, first: float, fresh: float | None = None, profile=None, achieved=None, rerun=None, own=None):
        self.first, self.again = first, first if fresh is None else fresh
        self.profile_first = profile or recorded_profile()
        self.achieved_first = achieved or {1: 10.0, 8: 80.0, 32: 160.0}
        self.rerun, self.own = rerun, own
        self.calls: list[bool] = []
        self.seeds: list[int] = []
        self.shapes: list[list[int]] = []

    def rerun_answer(self, kind: str, request: dict, pickled: bytes, what: str):
        if "model" in request:  # the profile's own model at a drawn side: the grader's profile plays it (a pass)
            self.shapes.append(request["shape"])
            if self.own is not None:
                return self.own(request)
            return {"names": list(self.profile_first), "seconds": list(self.profile_first.values())}, ""
        self.seeds.append(request["seed"])
        if self.rerun is not None:
            return self.rerun(kind, request)
        if kind == "profile":
            return {"names": list(DRAWN_PROFILE), "seconds": list(DRAWN_PROFILE.values())}, ""
        return {"batches": list(DRAWN_ACHIEVED), "gflops": list(DRAWN_ACHIEVED.values())}, ""

    def value(self, fresh: bool) -> float:
        self.calls.append(fresh)
        return self.again if fresh else self.first

    def install(self, monkeypatch) -> "Grader":
        monkeypatch.setattr(judge_measure, "peak", lambda n, runs, fresh=False: self.value(fresh))
        monkeypatch.setattr(judge_measure, "bandwidth", lambda mib, runs, fresh=False: self.value(fresh))
        monkeypatch.setattr(judge_measure, "profile",
                            lambda model, shape, runs, fresh=False: (self.calls.append(fresh), self.profile_first)[1])
        monkeypatch.setattr(judge_measure, "achieved",
                            lambda *args, fresh=False, **kwargs: (self.calls.append(fresh), self.achieved_first)[1])
        monkeypatch.setattr(judge_measure, "drawn_profile", lambda seed, runs, fresh=False: DRAWN_PROFILE)
        monkeypatch.setattr(judge_measure, "drawn_achieved", lambda seed, batches, runs, fresh=False: DRAWN_ACHIEVED)
        monkeypatch.setattr(judge, "_reference_achieved", lambda seed, batches, runs: DRAWN_ACHIEVED)
        monkeypatch.setattr(judge, "_reference_profile",
                            lambda request: DRAWN_PROFILE if "seed" in request else self.profile_first)
        monkeypatch.setattr(judge, "_rerun", self.rerun_answer)
        seeds = iter(range(1000, 2000))
        monkeypatch.setattr(judge, "drawn_seed", lambda spec=None: next(seeds))
        monkeypatch.setattr(judge, "DRAWN_PAUSE", 0.0)
        monkeypatch.setattr(judge, "PAUSES", (0.0,) * judge.AGAIN)  # the pauses before measuring again, not waited
        return self


@pytest.mark.parametrize("spec", [PEAK, BANDWIDTH])
def test_a_machine_number_passes_within_the_band_and_fails_outside(monkeypatch, spec):
    grader = Grader(100.0).install(monkeypatch)
    for student, verdict in ((100.0, []), (34.0, []), (290.0, []), (33.0, "0.33x"), (305.0, "3.05x")):
        problems = judge.check(spec, npz(value=np.float64(student)), EXACT)
        assert (problems == []) if verdict == [] else (len(problems) == 1 and verdict in problems[0]), (student, problems)
    assert grader.calls.count(True) == 2 * judge.AGAIN == 4  # each failure was measured again first, twice
    assert "within 1/3x to 3x" in judge.check(PEAK, npz(value=np.float64(10.0)), EXACT)[0]


def test_the_grader_measures_again_before_it_fails_a_case(monkeypatch):
    grader = Grader(first=400.0, fresh=110.0).install(monkeypatch)  # an unlucky first measurement of its own
    assert judge.check(PEAK, npz(value=np.float64(100.0)), EXACT) == []
    assert grader.calls == [False, True]
    problems, figures = judge.assess(PEAK, npz(value=np.float64(100.0)))
    assert problems and figures["ratio"] == pytest.approx(1 / 4) and figures["margin"] < 1


def test_an_exact_case_of_a_measured_task_is_left_to_the_reference(monkeypatch):
    grader = Grader(100.0).install(monkeypatch)
    for spec in ({"script_ns": [1, 2], "runs": 1, "warmup": 1}, {"call": "spearman", "a": [1], "b": [2]}):
        assert judge.check(spec, b"anything at all", EXACT) == []
    assert grader.calls == []


@pytest.mark.parametrize("data, found", [
    (b"", "it is empty"),
    (b"not a zip", "not an .npz"),
    (npz(gflops=np.float64(1.0)), "named ['gflops']"),
    (npz(value=np.array([1.0, 2.0])), "expected one positive, finite number"),
    (npz(value=np.float64(np.nan)), "expected one positive, finite number"),
    (npz(value=np.float64(-3.0)), "expected one positive, finite number"),
    (npz(value=np.array("100")), "expected one positive, finite number"),
])
def test_a_hostile_machine_file_gets_one_message_and_no_second_measurement(monkeypatch, data, found):
    grader = Grader(100.0).install(monkeypatch)
    problems = judge.check(PEAK, data, EXACT)
    assert len(problems) == 1 and found in problems[0] and not problems[0].startswith("INVALID"), problems
    assert True not in grader.calls


FUNCTION = np.frombuffer(b"a pickled function", dtype=np.uint8)
"""What a case saves of the student's function (the judge hands it to a student process; never unpickled here)."""


def profile_file(times: dict[str, float]) -> bytes:
    return npz(names=np.array(list(times), dtype=str), seconds=np.array(list(times.values()), dtype=np.float64),
               function=FUNCTION)


def test_a_profile_like_the_graders_passes_even_when_slower_throughout(monkeypatch):
    grader = Grader(0.0).install(monkeypatch)
    base = grader.profile_first
    noisy = {name: t * (1.3 if i % 2 else 0.8) for i, (name, t) in enumerate(base.items())}
    assert judge.check(PROFILE, profile_file(noisy), EXACT) == []
    problems, figures = judge.assess(PROFILE, profile_file(noisy))
    assert problems == [] and figures["spearman"] > 0.9 and figures["layers_in_band"] == 1.0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scale=st.floats(0.45, 2.3), jitter=st.lists(st.floats(0.8, 1.25), min_size=21, max_size=21))
def test_a_profile_measured_while_the_core_was_shared_passes_at_any_scale_of_this_machine(monkeypatch, scale, jitter):
    """The kernel measured once, and a grader measuring again cannot change what it saved: a kernel that shared its
    core measured every layer slower (1.7x to 1.96x in total seen under load) with its proportions kept. Any scale
    from 0.45x to 2.3x passes with every layer off by up to 1.25x more (the total stays within 1/3x to 3x), whatever
    share of the layers that puts outside 0.5x to 2x of the grader's times."""
    Grader(0.0).install(monkeypatch)
    base = recorded_profile()
    slower = {name: t * scale * j for (name, t), j in zip(base.items(), jitter)}
    problems, figures = judge.assess(PROFILE, profile_file(slower))
    assert problems == [] and figures["shape_in_band"] == 1.0, (problems, figures)
    assert figures["total_ratio"] == pytest.approx(sum(slower.values()) / sum(base.values()))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scale=st.one_of(st.floats(1e-4, 0.66), st.floats(1.51, 1e4)))
def test_a_profile_off_this_machines_scale_fails_on_its_total_when_run_again(monkeypatch, scale):
    """Proportions kept, but a total no measurement of this machine gives (three times the truth, ms for s, a sum
    of the runs for their best, a recording of another input): the kernel's profile is judged on its shape only,
    and passes; run again by the grader on the case's model at a side it drew, beside its own measurement, the
    total is judged within 0.67x to 1.5x, and fails, saying what it was."""
    base = recorded_profile()
    scaled = {name: t * scale for name, t in base.items()}
    grader = Grader(0.0, own=lambda request: ({"names": list(scaled), "seconds": list(scaled.values())}, "")) \
        .install(monkeypatch)
    problems = judge.check(PROFILE, profile_file(scaled), EXACT)
    assert problems and all(p.startswith("run again by the grader on resnet18_bnstats at ") for p in problems)
    assert any(f"add up to {scale:.2f}x the grader's (within 0.67x to 1.5x needed)" in p for p in problems), problems
    side = grader.shapes[0][-1]
    assert side in judge.RERUN_SIDES and grader.shapes[0] == [1, 3, side, side]
    assert all(shape == grader.shapes[0] for shape in grader.shapes)  # the same draw, measured again


def test_the_side_a_profile_is_run_again_at_is_drawn_from_the_grading_secret():
    from util.judging import secret

    sides = set()
    for _ in range(12):
        secret.renew()
        seed = judge.drawn_seed(PROFILE)
        assert seed == judge.drawn_seed(dict(PROFILE)) and 0 <= seed < 2 ** 31  # the same within one grading
        sides.add(judge.drawn_side(seed))
    assert sides <= set(judge.RERUN_SIDES) and len(sides) > 1 and 64 not in judge.RERUN_SIDES


def test_a_profile_with_a_quarter_of_its_layers_off_fails_at_either_scale(monkeypatch):
    """Ranked alike and adding up, but 6 of 21 layers 4x too fast: under 75 % of the layers within 0.5x to 2x of the
    grader's times, as measured or brought to its scale; the message gives both shares."""
    Grader(0.0).install(monkeypatch)
    base = recorded_profile()
    names = sorted(base, key=base.get)
    off = {name: base[name] * (0.25 if name in names[-6:] else 1.0) for name in base}
    problems, figures = judge.assess(PROFILE, profile_file(off))
    assert figures["layers_in_band"] == figures["shape_in_band"] == pytest.approx(15 / 21)
    assert [p for p in problems if "do not predict it" in p] == [
        "only 71% of your layer times are within 0.5x to 2x of the grader's, and 71% once brought to its scale "
        "(divided by their median ratio to the grader's) (75% needed): measure each layer, do not predict it"]


def test_a_profile_in_another_order_or_unit_fails(monkeypatch):
    Grader(0.0).install(monkeypatch)
    base = recorded_profile()
    reversed_ranks = dict(zip(base, sorted(base.values(), reverse=True)))
    assert any("rank the layers unlike" in p for p in judge.check(PROFILE, profile_file(reversed_ranks), EXACT))
    in_ms = {name: t * 1e3 for name, t in base.items()}
    Grader(0.0, own=lambda request: ({"names": list(in_ms), "seconds": list(in_ms.values())}, "")).install(monkeypatch)
    problems = judge.check(PROFILE, profile_file(in_ms), EXACT)
    assert any("add up to 1000.00x" in p for p in problems) and any("report seconds" in p for p in problems)


def test_a_roofline_prediction_passed_off_as_a_measurement_fails(monkeypatch):
    """The recorded trace plays the grader's profile; the student returns the grader-machine predictions (the
    reference answer of 11.4), scaled so that their total matches: the ranking is close (0.80) but most layers
    are far off."""
    from grader.judge import references
    from util.labs import get_lab

    Grader(0.0).install(monkeypatch)
    base = recorded_profile()
    predicted = {row["name"]: row["seconds"] for row in references.load(get_lab("lab11"))["answers"]["11.4"]}
    scale = sum(base.values()) / sum(predicted.values())
    problems, figures = judge.assess(PROFILE, profile_file({n: t * scale for n, t in predicted.items()}))
    assert figures["layers_in_band"] < judge.MIN_LAYERS_IN_BAND and any("do not predict it" in p for p in problems)


@pytest.mark.parametrize("names, seconds, found", [
    (["conv1"], [1e-3], "returned 1 layer names; the model has 21"),
    ([f"x{i}" for i in range(21)], [1e-3] * 21, "not layers: ['x0', 'x1', 'x2']"),
    (["conv1"] * 21, [1e-3] * 21, "returned 21 layer names"),
])
def test_a_profile_with_the_wrong_layers_is_refused(monkeypatch, names, seconds, found):
    Grader(0.0).install(monkeypatch)
    problems = judge.check(PROFILE, npz(names=np.array(names, dtype=str), seconds=np.array(seconds), function=FUNCTION),
                           EXACT)
    assert len(problems) == 1 and found in problems[0], problems


def test_a_hostile_profile_file_is_refused_without_measuring_twice(monkeypatch):
    grader = Grader(0.0).install(monkeypatch)
    for data in (npz(names=np.arange(21), seconds=np.ones(21), function=FUNCTION),
                 npz(names=np.array(["a"]), seconds=np.array([np.inf]), function=FUNCTION),
                 npz(names=np.array(["a", "b"]), seconds=np.array([1.0]), function=FUNCTION), npz(seconds=np.ones(3)),
                 npz(names=np.array(list(recorded_profile())), seconds=np.ones(21)),
                 npz(names=np.array(list(recorded_profile())), seconds=np.ones(21), function=np.ones(3))):
        problems = judge.check(PROFILE, data, EXACT)
        assert len(problems) == 1 and not problems[0].startswith("INVALID"), problems
    assert True not in grader.calls


def test_achieved_gflops_are_judged_per_batch_in_the_conv_band(monkeypatch):
    Grader(0.0).install(monkeypatch)
    good = npz(batches=np.array([1, 8, 32]), gflops=np.array([4.0, 200.0, 400.0]),  # 0.4x, 2.5x, 2.5x: inside 1/3..3
               function=FUNCTION)
    assert judge.check(ACHIEVED, good, EXACT) == []
    per_sample = npz(batches=np.array([1, 8, 32]), gflops=np.array([10.0, 10.0, 5.0]),  # MACs of one sample only
                     function=FUNCTION)
    problems = judge.check(ACHIEVED, per_sample, EXACT)
    assert len(problems) == 1 and "at batch 8 is 0.12x" in problems[0] and "whole batch" in problems[0]
    for data in (npz(batches=np.array([1, 8]), gflops=np.array([1.0, 1.0]), function=FUNCTION),
                 npz(batches=np.array([1.0, 8.0, 32.0]), gflops=np.ones(3), function=FUNCTION)):
        assert "for the batches [1, 8, 32]" in judge.check(ACHIEVED, data, EXACT)[0]


def test_the_judges_spearman_is_the_textbook_one():
    from scipy.stats import spearmanr

    rng = np.random.default_rng(11)
    for _ in range(20):
        a, b = rng.integers(0, 6, 15), rng.integers(0, 6, 15)  # many ties
        assert judge.spearman(a, b) == pytest.approx(spearmanr(a, b).statistic, rel=1e-12)
    assert judge.spearman([1, 1, 1], [1, 2, 3]) == 0.0


def test_a_profile_read_from_a_recording_fails_when_run_again_on_a_drawn_cnn(monkeypatch):
    """The kernel's profile of ResNet-18 is the shipped trace itself (it matches the grader's profile, which the
    trace plays here), and so is what ``profile_layers`` returns when the grader runs it again on a CNN it drew:
    the layers are not that CNN's."""
    recorded = recorded_profile()
    grader = Grader(0.0, rerun=lambda kind, request: ({"names": list(recorded), "seconds": list(recorded.values())},
                                                      "")).install(monkeypatch)
    problems = judge.check(PROFILE, profile_file(recorded), EXACT)
    assert len(problems) == 1 and problems[0].startswith("run again by the grader on a CNN it drew for this grading, "
                                                         "profile_layers returned 21 layer names; the model has 14")
    assert grader.seeds == [1000] and True not in grader.calls  # an invalid answer is not measured twice


def test_a_cost_model_on_the_drawn_cnn_fails_on_its_shape(monkeypatch):
    """Times within 2x of the grader's for all but two layers, ranked alike and adding up: what a cost model fitted
    to a recording can reach (12 of 14 layers in band passes that criterion). Two layers 3x off spoil the profile's
    shape, so it fails, and the grader measures again (the same drawn CNN) before it does."""
    predicted = {name: t * (3.0 if name in ("4", "18") else 1.0) for name, t in DRAWN_PROFILE.items()}
    grader = Grader(0.0, rerun=lambda kind, request: ({"names": list(predicted), "seconds": list(predicted.values())},
                                                      "")).install(monkeypatch)
    problems = judge.check(PROFILE, profile_file(recorded_profile()), EXACT)
    assert [p.split(": ")[0] for p in problems] == [
        "run again by the grader on a CNN it drew for this grading, only 86% of your layer times keep the proportions "
        "of the grader's (within 0.5x to 2x of your times' median ratio to the grader's; 90% needed)"]
    assert grader.seeds == [1000] * (1 + judge.AGAIN) * judge.PROFILE_ROUNDS  # each assessment asks every round
    assert grader.calls == [False] + [True] * judge.AGAIN
    problems, figures = judge.assess(PROFILE, profile_file(recorded_profile()), seed=7)
    assert figures["drawn_shape_in_band"] == figures["drawn_layers_in_band"] == pytest.approx(12 / 14)
    assert figures["margin"] == pytest.approx((12 / 14) / judge.MIN_DRAWN_SHAPE) and grader.seeds[-1] == 7


def test_achieved_gflops_typed_in_fail_on_the_drawn_convolution(monkeypatch):
    """The kernel's numbers match the grader's for ResNet-18's layer4.1.conv1 (they were measured there once);
    returned again for the convolution the grader drew, they are 2.5x off at batch 1."""
    typed = {1: 50.0, 8: 60.0, 32: 90.0}
    Grader(0.0, achieved=typed, rerun=lambda kind, request: ({"batches": list(typed), "gflops": list(typed.values())},
                                                             "")).install(monkeypatch)
    problems = judge.check(ACHIEVED, npz(batches=np.array(list(typed)), gflops=np.array(list(typed.values())),
                                         function=FUNCTION), EXACT)
    assert len(problems) == 1 and problems[0].startswith(
        "run again by the grader on a convolution it drew for this grading, achieved_gflops at batch 1 is 2.50x what "
        "the grader measured for a ")


def test_a_re_run_that_raises_or_answers_garbage_fails_with_what_happened(monkeypatch):
    recorded = recorded_profile()
    for answer, found in (((None, "run again by the grader on a model of its own, profile_layers raised ValueError: x"),
                           "profile_layers raised ValueError: x"),
                          (({"names": ["0"], "seconds": ["1"]}, ""), "did not return {layer name: seconds}")):
        Grader(0.0, rerun=lambda kind, request, answer=answer: answer).install(monkeypatch)
        problems = judge.check(PROFILE, profile_file(recorded), EXACT)
        assert len(problems) == 1 and found in problems[0], problems


STEADY_HEAP_CHILD = r'''
import ctypes, resource, sys, torch
from util.labs.lab11.machine import steady_heap
libc = ctypes.CDLL("libc.so.6")
libc.mallopt(-1, 128 << 10); libc.mallopt(-3, 128 << 10)  # glibc's thresholds as a process starts (trim, mmap)
if sys.argv[1] == "steady":
    assert steady_heap()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def layer_call():  # a layer's temporaries: 20 blocks of 0.9 MiB, all freed at the end
    blocks = [torch.ones(230_000) for _ in range(20)]
    del blocks
layer_call(); layer_call()
before = faults()
for _ in range(10):
    layer_call()
print(faults() - before)
'''


def test_a_steady_heap_reuses_freed_memory_instead_of_faulting_it_in_again():
    """The measuring processes' heap (``steady_heap``): after a warm-up, a call that allocates and frees 18 MiB
    touches no new page, where glibc's thresholds as a process starts (which then move with what it allocated
    before, so two processes differ) hand the 18 MiB back to the kernel after every call and fault it in again
    on the next."""
    import subprocess
    import sys
    from pathlib import Path

    def faults(mode: str) -> int:
        done = subprocess.run([sys.executable, "-c", STEADY_HEAP_CHILD, mode], capture_output=True, text=True,
                              timeout=120, cwd=str(Path(__file__).resolve().parents[2]))
        assert done.returncode == 0, done.stderr[-2000:]
        return int(done.stdout.split()[-1])

    # 18 MiB = 4,608 pages of 4 KiB in each call. Steady: 0 faults alone, up to 225 seen in a test run beside
    # others (the interpreter's own), under 1 % of what glibc's thresholds fault in
    glibc = faults("glibc")
    assert glibc > 10 * 18 * 256 // 2
    assert faults("steady") < glibc // 100
