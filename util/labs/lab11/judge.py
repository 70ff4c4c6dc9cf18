"""Lab 11's grader-side check of its measured cases (``Task.grader_check``), against the grader's own measurement.

A measured case's ``run_case`` saved, in the graded kernel, what the student's function measured: a peak
or a bandwidth (``measure_peak`` / ``measure_bandwidth`` timed by the course's CPU-clock timer), a
per-layer profile (``profile_layers``), or achieved GFLOP/s per batch (``achieved_gflops``). Here, in the
judge process, the grader measures the same thing itself (:mod:`util.labs.lab11.judge_measure`: pinned to
one CPU, one thread, best of runs) and compares; it never compares with a number in the reference file.
Before it fails a case it measures again, up to :data:`AGAIN` more times after a pause (:data:`PAUSES`), and fails
only if every measurement disagrees (a grader's unlucky moment on a busy machine must not cost a student points:
graded two at a time beside a test suite, one measurement in a few dozen fell outside its band on the solution).

**Run again on a model no recording answers.** A number the kernel saved could have been read from a recording
instead of measured: the lab ships ResNet-18's traces, a hidden case hands the kernel MobileNetV2's, and a
notebook can keep what it measured in an earlier run. So for a profile and for achieved GFLOP/s the case also
saved the student's function itself (pickled by value), and the judge runs it again in a student process
(:mod:`util.labs.lab11.measure_harness`, pinned to the judge's CPU) on a CNN or a convolution made from a seed
drawn for this assessment (:func:`drawn_seed`; :func:`util.labs.lab11.machine.drawn_cnn` and
:func:`~util.labs.lab11.machine.drawn_conv`), then measures the same model itself while every process of the
student's is stopped, and compares the two as above, with tighter criteria this pairing allows: the profile needs
:data:`MIN_DRAWN_IN_BAND` of its layers in band and :data:`MIN_DRAWN_SHAPE` of them within :data:`BAND` of its
median ratio (its shape); the convolution's GFLOP/s must be within :data:`DRAWN_CONV_BAND`. Both comparisons must
pass. The convolution is measured for the grader by the course's own method in a second process started as the
student's is (:func:`_reference_achieved`), both with a steady heap
(:func:`util.labs.lab11.machine.steady_heap`): measured in the judge process instead, one drawn convolution's
GFLOP/s stood 1.6x apart on this machine for as long as both processes lived, and a CI machine saw 4x; and the
comparison runs up to :data:`DRAWN_ROUNDS` rounds, each side keeping its best. The measurement again before a
failure uses the same drawn model. A machine number (peak, bandwidth) is not run again: it is the same whatever the workload's details, so a number measured in another run stays
within the band (the fixed-timer case grades its arithmetic exactly).

The bands come from the lab's noise study (``benchmarks/bench_lab11_grading.py`` runs it and prints it):
pairs of fresh processes, one unpinned as a graded kernel is and one pinned as the judge is, run at the same
time on a 2-vCPU machine at load averages of 4 to 10, each measuring with this judge's own code:

* peak and bandwidth on the CPU clock: best-of-10 values spread 1.29x (peak) and 1.08x (bandwidth) across
  processes; graded within :data:`MACHINE_BAND` = [1/3, 3] of the grader's (within [0.5, 2], the worst margin
  seen was 1.55). On the wall
  clock the bandwidth's best of 10 spread 1.8x to 3.5x, which is why the graded timer is the CPU clock;
* per-layer profiles at batch 1 (minimum of 10 profiled runs, wall clock as profilers measure): Spearman
  between two processes' profiles >= 0.94 (ResNet-18) and 0.98 (MobileNetV2), every layer within 1.54x,
  totals within 1.19x; graded: Spearman >= :data:`MIN_SPEARMAN` (0.8), the total within
  :data:`PROFILE_TOTAL_BAND` = [1/3, 3], and at least :data:`MIN_LAYERS_IN_BAND` of the layers within
  :data:`BAND`, as measured or brought to the grader's scale (worst margin 1.19; a roofline *prediction* passed
  off as a measurement keeps a Spearman near 0.8 but has under 55 % of its layers in band either way; a kernel
  that measured while its core was shared is slower throughout, up to 1.96x seen, and keeps its proportions:
  :data:`PROFILE_TOTAL_BAND`). At batch 2 and 4 the totals of two processes differed up to 3.9x (a call of several ms is rarely
  left alone by a busy core in 10 runs): those are not graded;
* one conv's achieved GFLOP/s (CPU clock, best of 10): up to 2.24x apart at batch 1, where its 9 MB of
  weights stream through caches that neighbours share; graded within :data:`CONV_BAND` = [1/3, 3] (worst
  margin 1.73).

Graded 20 times, two gradings at a time (load averages 5.4 to 7.9), the solution lost no point; the worst
margins, judged again right after each grading, were 1.67 (peak), 1.87 (bandwidth), 1.19 and 1.23 (the two
profiles) and 1.77 (achieved GFLOP/s).

An exact case of the same task (``best_time`` on a scripted clock, a rank correlation, a table) saved its
value only because every case of a task with a grader check saves a file: the reference decides it, and
this check passes it.
"""
from __future__ import annotations

import functools
import hashlib
import math
import time
from typing import Any, Mapping

import numpy as np

from util.artifacts import read_saved_arrays
from util.contract import Tolerance

BAND = (0.5, 2.0)
"""Student's measurement / grader's measurement, for per-layer times."""
MACHINE_BAND = (1 / 3, 3.0)
"""The same for the peak and the bandwidth. Their arithmetic is graded exactly by the fixed-timer cases, so the
measured case only has to show a real measurement on this machine through the given timer: the band is wide
enough for a number the kernel measured in a moment of contention (the memory bus shared with a neighbour
grading beside it), which [0.5, 2] was not once in a few dozen gradings beside the test suite."""
CONV_BAND = (1 / 3, 3.0)
"""Student's / grader's achieved GFLOP/s of one conv at one batch (see the module's docstring)."""
DRAWN_CONV_BAND = (0.5, 2.0)
"""The same on the convolution the grader draws (:func:`util.labs.lab11.machine.drawn_conv`), measured by the
student's ``achieved_gflops`` in a student process pinned to the judge's CPU, one after the other: at load averages
of 14 to 20 on 2 cores the solution's ratios stayed within 0.57x to 1.76x over 40 drawn convolutions; numbers
measured once on another layer (ResNet-18's layer4.1.conv1) fell outside on about four in five."""
PROFILE_TOTAL_BAND = (1 / 3, 3.0)
"""Student's / grader's total of the profile the graded kernel measured (of a model the case names). That profile
was taken once, in the kernel, and measuring again cannot change it: a kernel that measured while another program
shared its core is slower throughout, with its proportions kept (graded beside a second grading and four busy
processes on 2 cores, at load averages of 4 to 5: the solution's MobileNetV2 profile stood 1.7x to 1.96x the
grader's in total, every layer within 0.5x to 2x of the median ratio, Spearman 0.91; with :data:`BAND` it failed
every time it was judged again). So its total, like the machine's numbers, needs only to be a measurement of this
machine, and its layers may be in band once brought to the grader's scale; the profile the grader runs again on the
CNN it draws is compared with :data:`BAND` (the two are measured one after the other, so the same moment's load
weighs on both)."""
MIN_SPEARMAN = 0.8
"""Smallest rank correlation accepted between the student's per-layer profile and the grader's."""
MIN_LAYERS_IN_BAND = 0.75
"""Share of the layers whose time must be within :data:`BAND` of the grader's: in the profile the kernel measured,
either as measured or once divided by the median ratio of the student's times to the grader's (the same scale)."""
MIN_DRAWN_IN_BAND = 0.85
"""The same share on the CNN the grader draws (:func:`util.labs.lab11.machine.drawn_cnn`: 14 to 18 layers, none
of them tiny, so a measurement has them all in band; a cost model fitted to a recording has some far off)."""
MIN_DRAWN_SHAPE = 0.9
"""On the drawn CNN, the share of layers whose ratio (student's / grader's time) is within :data:`BAND` of the
median ratio: the profile's shape, whatever the load did to both profiles' scale. Measured at load averages of
14 to 18 on 2 cores, every layer of the solution's profiles was within 0.58x to 1.16x of its median ratio; a cost
model fitted to the shipped ResNet-18 trace had 11 % to 47 % of its layers outside."""
RERUN_TOTAL_BAND = (2 / 3, 1.5)
"""Student's / grader's total of a profile the grader ran again, its own measurement interleaved with the student's
function's (:func:`_interleaved_profile`): both in processes started alike, on the same core, one after the other,
each keeping its best per layer over the rounds. An honest profile stands within about 1.2x there, at load averages
of 5 to 6 too; a profile three times the truth, or a recording of another input, is outside."""
RERUN_SIDES = (128, 144, 160)
"""The input sides a profile's own model is run again at (the case measures it at 64): there a recording of the
case's input adds up to 0.53x (ResNet-18) and 0.55x (MobileNetV2) of the grader's measurement at 128 pixels, less
at 144 and 160 (a layer's fixed costs do not grow with the pixels)."""
PROFILE_ROUNDS = 3
"""Rounds of an interleaved profile comparison, while it fails (see :data:`RERUN_TOTAL_BAND`)."""
UNITS = {"peak": "GFLOP/s", "bandwidth": "GB/s"}
PAUSES = (1.0, 3.0)
"""Seconds to wait before each measurement again (:data:`AGAIN` of them): a burst of load on the machine passes."""
AGAIN = len(PAUSES)
DRAWN_ROUNDS = 3
"""Rounds of the drawn convolution's comparison in one assessment, while it fails: in each, the student's
``achieved_gflops`` runs again, then the grader measures, and each side keeps its best GFLOP/s per batch over every
round of the grading (with :data:`PAUSES`, up to ``3 x DRAWN_ROUNDS``): noise only ever lowers a best-of, so a
burst of load on the machine during one side's turn does not decide the case, while a number that no measurement
of this convolution gives stays out of band however often it is asked for."""
DRAWN_PAUSE = 0.5
"""Seconds between two such rounds."""
_drawn_best: dict[tuple[int, str], tuple[dict[int, float], dict[int, float]]] = {}
"""Per (seed, the function's digest): the best GFLOP/s per batch of the student's re-runs and of the grader's
measurements so far in this check (:func:`check` starts it afresh)."""


def check(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Problems with a case's saved measurement (empty: it passes); an exact case passes here."""
    if spec.get("measure") is None:
        return []
    _drawn_best.clear()
    seed = drawn_seed(spec)
    problems, _ = _assess(spec, data, fresh=False, seed=seed)
    for pause in PAUSES:  # measured again (the same model) before it fails
        if not problems or _invalid(problems):
            break
        time.sleep(pause)
        problems, _ = _assess(spec, data, fresh=True, seed=seed)
    return _strip(problems)


def assess(spec: Mapping[str, Any], data: bytes, *, fresh: bool = False,
           seed: int | None = None) -> tuple[list[str], dict[str, float]]:
    """The problems with a measured case and the figures they were decided on (ratios, correlation, and
    ``margin``: how far, as a factor, the worst of them is inside its band; below 1 it is outside).
    ``fresh`` makes the grader measure again instead of reusing its measurement; ``seed`` chooses the model
    a profile or an achieved GFLOP/s is run again on (default: drawn afresh, :func:`drawn_seed`). Runs in a
    judge process, or under ``grader.judge.isolated.serving()`` (it starts a student process)."""
    _drawn_best.clear()
    problems, figures = _assess(spec, data, fresh=fresh, seed=drawn_seed(spec) if seed is None else seed)
    return _strip(problems), figures


def _assess(spec: Mapping[str, Any], data: bytes, *, fresh: bool, seed: int) -> tuple[list[str], dict[str, float]]:
    measure = spec.get("measure")
    if measure in UNITS:
        return _machine(spec, data, fresh)
    if measure == "profile":
        return _profile(spec, data, fresh, seed)
    if measure == "achieved":
        return _achieved(spec, data, fresh, seed)
    return [f"the grader does not know the measurement {str(measure)[:40]!r}"], {}


_INVALID = "INVALID: "


def _invalid(problems: list[str]) -> bool:
    return any(p.startswith(_INVALID) for p in problems)


def _strip(problems: list[str]) -> list[str]:
    return [p.removeprefix(_INVALID) for p in problems]


def _band_text(band: tuple[float, float]) -> str:
    """``"0.5x to 2x"``, ``"1/3x to 3x"``: a lower bound below one half as the fraction it is."""
    low = f"1/{round(1 / band[0])}" if band[0] < 0.5 and math.isclose(1 / band[0], round(1 / band[0])) \
        else f"{band[0]:.2g}"
    return f"{low}x to {band[1]:g}x"


def _band_margin(ratio: float, band: tuple[float, float]) -> float:
    """How far inside ``band`` the ratio is, as a factor (1: on the edge; below 1: outside)."""
    return min(ratio / band[0], band[1] / ratio) if ratio > 0 else 0.0


def _positive(values: np.ndarray) -> bool:
    return values.dtype.kind == "f" and values.size > 0 and bool(np.all(np.isfinite(values)) and np.all(values > 0))


def _machine(spec, data, fresh) -> tuple[list[str], dict[str, float]]:
    from util.labs.lab11 import judge_measure

    arrays, problems = read_saved_arrays(data, expected=["value"])
    if problems:
        return [_INVALID + p for p in problems], {}
    value = arrays["value"].reshape(-1)
    what, unit = ("measure_peak", "GFLOP/s") if spec["measure"] == "peak" else ("measure_bandwidth", "GB/s")
    if value.size != 1 or not _positive(value):
        return [_INVALID + f"{what} returned {value[:3].tolist()}; expected one positive, finite number of {unit}"], {}
    if spec["measure"] == "peak":
        grader = judge_measure.peak(spec["n"], spec["runs"], fresh=fresh)
        size = f"n={spec['n']}"
    else:
        grader = judge_measure.bandwidth(spec["mib"], spec["runs"], fresh=fresh)
        size = f"mib={spec['mib']}"
    ratio = float(value[0]) / grader
    figures = {"student": float(value[0]), "grader": grader, "ratio": ratio, "margin": _band_margin(ratio, MACHINE_BAND)}
    if figures["margin"] >= 1:
        return [], figures
    return [f"{what}({size}) measured {value[0]:.3g} {unit}, {ratio:.2f}x what the grader measured on its own "
            f"(best of {spec['runs']} on one CPU, one thread); it must be within {_band_text(MACHINE_BAND)}: "
            f"count {'2 n^3 FLOPs' if spec['measure'] == 'peak' else 'the bytes read and written'}, convert to "
            f"{unit} (1e9), and time only through the timer you are given"], figures


def spearman(a, b) -> float:
    """Spearman's rank correlation (Pearson's on ranks, ties given their average rank); 0 when one is constant."""
    def ranks(values) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        order = np.argsort(values, kind="stable")
        out = np.empty(len(values))
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            out[order[i:j + 1]] = (i + j) / 2 + 1
            i = j + 1
        return out

    ra, rb = ranks(a), ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denominator = math.sqrt(float((ra * ra).sum() * (rb * rb).sum()))
    return float((ra * rb).sum() / denominator) if denominator else 0.0


def drawn_seed(spec: Mapping[str, Any] | None = None) -> int:
    """The seed of the model the grader runs the student's function on again (and of the input side a profile's own
    model is run again at): drawn from the grading secret for this case (:mod:`util.judging.secret`), the same within
    one grading and another in the next, never written anywhere a submission can read, so no recording made before
    the grading can answer it."""
    import json

    from util.judging import secret

    return secret.seed("lab11", "drawn", json.dumps(dict(spec or {}), sort_keys=True), bits=31)


def drawn_side(seed: int) -> int:
    """The input side a profile's own model (ResNet-18, MobileNetV2) is run again at, from ``seed``: one of
    :data:`RERUN_SIDES`, none of them the case's 64, so no recording of the case's input answers it."""
    import random

    return random.Random(int(seed) ^ 0x5EED).choice(RERUN_SIDES)


_processes: dict[str, Any] = {}
"""The student processes of this judge process: ``"student"`` runs the student's functions again (one for all its
cases), ``"reference"`` the course's own measurement of a drawn convolution, started the same way."""
RERUN_SECONDS = 60.0
"""How long one re-run may take in the student process (a profile of 10 passes of a drawn CNN: under a second)."""


def _rerun(kind: str, request: dict, pickled: bytes, what: str) -> tuple[dict | None, str]:
    """``(answer, problem)``: the student's function (``pickled``) run by :mod:`util.labs.lab11.measure_harness`
    on the request (``kind`` ``"profile"`` or ``"achieved"``) in a student process on this judge's CPU; the
    answer is untrusted data, ``None`` with a problem when there is none."""
    reply, problem = _ask("student", {kind: request}, pickled)
    if reply is None:
        return None, f"the grader could not run {what} again on a model of its own ({problem})"
    if "raised" in reply:
        return None, _INVALID + f"run again by the grader on a model of its own, {what} raised {str(reply['raised'])[:250]}"
    return reply, ""


def _ask(who: str, header: dict, pickled: bytes) -> tuple[dict | None, str]:
    """Send one request to the ``"student"`` process (the student's functions) or the ``"reference"`` one (the
    course's own, :func:`_reference_achieved`), started on this judge's CPU when there is none (once more if it
    died); ``(reply, "")`` or ``(None, why)``."""
    from util.labs.lab11 import judge_measure
    from util.student_process import ChannelError, StudentProcess

    cpu = judge_measure.pin()
    for attempt in range(2):
        try:
            if _processes.get(who) is None:
                _processes[who] = StudentProcess.start("util.labs.lab11.measure_harness:serve", cpu=cpu,
                                                       max_data=1 << 16, seconds=600)
            _processes[who].send({"load": True}, data=pickled)  # loaded before the request exists there
            reply, _ = _processes[who].receive(timeout=RERUN_SECONDS)
            if reply.get("loaded") is not True:
                return reply, ""
            _processes[who].send(header)
            reply, _ = _processes[who].receive(timeout=RERUN_SECONDS)
            return reply, ""
        except ChannelError as exc:
            if _processes.get(who) is not None:
                _processes[who].close()
            _processes[who] = None
            if attempt or "time allowed" in str(exc):
                return None, str(exc)
    return None, "no answer"


def _reference_achieved(seed: int, batches: list[int], runs: int) -> dict[int, float] | None:
    """``{batch: GFLOP/s}`` of the drawn convolution (``seed``) measured by the course's own method
    (:func:`util.labs.lab11.judge_measure.reference_gflops`) in a process started exactly as the student's is (the
    same confinement, harness, warm-up and CPU) while the student's is stopped: what a student process measures
    depends on its surroundings (its memory's layout, the cgroup and sandbox it runs in), so the grader measures
    in the same surroundings, not in its own judge process. ``None`` when that process gave no answer."""
    with _quiet_student():
        reply, _ = _ask("reference", {"achieved": {"seed": seed, "batches": batches, "runs": runs}},
                        _reference_pickled())
    if reply is None or reply.get("batches") != batches or len(reply.get("gflops") or []) != len(batches):
        return None
    return dict(zip(batches, reply["gflops"]))


@functools.lru_cache(maxsize=2)
def _reference_pickled(name: str = "reference_gflops") -> bytes:
    """The course's own measurement ``name`` of :mod:`util.labs.lab11.judge_measure` (``reference_gflops`` or
    ``reference_profile``), pickled by value (a student process cannot import a judge's module), once per judge
    process."""
    import cloudpickle

    from util.labs.lab11 import judge_measure

    cloudpickle.register_pickle_by_value(judge_measure)
    try:
        return cloudpickle.dumps(getattr(judge_measure, name))
    finally:
        cloudpickle.unregister_pickle_by_value(judge_measure)


def _quiet_student():
    """While the judge measures: every process of the student's stopped (``SIGSTOP``), if there is one."""
    import contextlib

    @contextlib.contextmanager
    def quiet():
        paused = False
        student = _processes.get("student")
        if student is not None:
            try:
                student.pause()
                paused = True
            except Exception:  # noqa: BLE001 - a gone process cannot disturb the measurement
                pass
        try:
            yield
        finally:
            if paused:
                try:
                    student.resume()
                except Exception:  # noqa: BLE001
                    pass

    return quiet()


def _profile(spec, data, fresh, seed) -> tuple[list[str], dict[str, float]]:
    """A profile case: the profile the kernel measured, judged on its shape (:func:`_profile_problems` with
    ``either_scale``, no total: that profile was measured once, under whatever load the kernel had); then the
    student's ``profile_layers`` run again by the grader on the case's model at an input side drawn for this grading
    and on a CNN drawn for it, each against the grader's own measurement interleaved with it
    (:func:`_interleaved_profile`), where the total is judged too, in :data:`RERUN_TOTAL_BAND`."""
    from util.labs.lab11 import judge_measure

    arrays, problems = read_saved_arrays(data, expected=["names", "seconds", "function"])
    if problems:
        return [_INVALID + p for p in problems], {}
    names, seconds = arrays["names"], arrays["seconds"]
    if names.dtype.kind != "U" or names.ndim != 1 or seconds.shape != names.shape or not _positive(seconds):
        return [_INVALID + "profile_layers must return {layer name: seconds} with a positive, finite number of "
                f"seconds for each layer; found {names.size} names and seconds {seconds.reshape(-1)[:3].tolist()}"], {}
    if arrays["function"].dtype != np.uint8 or arrays["function"].ndim != 1:
        return [_INVALID + "the case saved no profile_layers for the grader to run again"], {}
    grader = judge_measure.profile(spec["model"], spec["shape"], spec["runs"], fresh=fresh)
    problems, figures = _profile_problems(names.tolist(), seconds.tolist(), grader, "", total_band=None,
                                          either_scale=True)
    if _invalid(problems):
        return problems, figures
    pickled, runs = arrays["function"].tobytes(), int(spec["runs"])
    side = drawn_side(seed)
    shape = [int(spec["shape"][0]), int(spec["shape"][1]), side, side]
    for request, where, key in (
            ({"model": str(spec["model"]), "shape": shape, "runs": runs},
             f"run again by the grader on {spec['model']} at {side}x{side} pixels, ", "own"),
            ({"seed": seed, "runs": runs}, "run again by the grader on a CNN it drew for this grading, ", "drawn")):
        again, more = _interleaved_profile(request, pickled, where, fresh)
        figures.update({f"{key}_{name}": value for name, value in more.items() if name != "margin"})
        figures["margin"] = min(figures.get("margin", math.inf), more.get("margin", 0.0))
        problems += again
        if _invalid(again):
            break
    return problems, figures


def _interleaved_profile(request: dict, pickled: bytes, where: str, fresh: bool) -> tuple[list[str], dict[str, float]]:
    """The student's ``profile_layers`` run again on ``request``'s model (a course model at a shape, or the CNN a
    seed draws) in the student process, then the grader's own profile of the same model in a process started the same
    way (:func:`_reference_profile`, the student's stopped), for up to :data:`PROFILE_ROUNDS` rounds while they
    disagree, each side keeping its fastest time per layer: the total within :data:`RERUN_TOTAL_BAND`,
    :data:`MIN_DRAWN_IN_BAND` of the layers within :data:`BAND` and :data:`MIN_DRAWN_SHAPE` of them within it of the
    median ratio."""
    from util.labs.lab11 import judge_measure

    mine: dict[str, float] = {}
    theirs: dict[str, float] = {}
    problems: list[str] = []
    figures: dict[str, float] = {}
    for round_ in range(PROFILE_ROUNDS):
        reply, problem = _rerun("profile", request, pickled, "profile_layers")
        if reply is None:
            return [problem], figures
        names, seconds = reply.get("names"), reply.get("seconds")
        if not isinstance(names, list) or not isinstance(seconds, list) or len(names) != len(seconds) \
                or not all(isinstance(n, str) for n in names) \
                or not all(isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t > 0
                           for t in seconds):
            return [_INVALID + f"{where}profile_layers did not return {{layer name: seconds}} with a positive, finite "
                    "number of seconds for each layer"], figures
        grader = _reference_profile(request)
        if grader is None:  # the course's own process gave no answer: the judge's own measurement instead
            with _quiet_student():
                grader = judge_measure.drawn_profile(request["seed"], request["runs"], fresh=fresh or round_ > 0) \
                    if "seed" in request else judge_measure.profile(request["model"], request["shape"],
                                                                    request["runs"], fresh=fresh or round_ > 0)
        found = dict(zip(names, seconds))
        if len(found) == len(names) and set(found) == set(grader):
            mine = {n: min(float(found[n]), mine.get(n, math.inf)) for n in grader}
            theirs = {n: min(float(grader[n]), theirs.get(n, math.inf)) for n in grader}
            names, seconds, grader = list(mine), list(mine.values()), theirs
        problems, figures = _profile_problems(names, seconds, grader, where, MIN_DRAWN_IN_BAND, MIN_DRAWN_SHAPE,
                                              total_band=RERUN_TOTAL_BAND)
        if not problems or _invalid(problems):
            break
        if round_ + 1 < PROFILE_ROUNDS:
            time.sleep(DRAWN_PAUSE)
    return problems, figures


def _reference_profile(request: dict) -> dict[str, float] | None:
    """``{layer: seconds}`` of ``request``'s model measured by the course's own profile
    (:func:`util.labs.lab11.judge_measure.reference_profile`) in a process started exactly as the student's is, while
    the student's is stopped (see :func:`_reference_achieved`); ``None`` when that process gave no answer."""
    with _quiet_student():
        reply, _ = _ask("reference", {"profile": request}, _reference_pickled("reference_profile"))
    names, seconds = (reply or {}).get("names"), (reply or {}).get("seconds")
    if not isinstance(names, list) or not isinstance(seconds, list) or len(names) != len(seconds) or not names:
        return None
    return dict(zip(names, seconds))


def _profile_problems(names: list, seconds: list, grader: dict[str, float], where: str,
                      min_in_band: float = MIN_LAYERS_IN_BAND, min_shape: float = 0.0, *,
                      total_band: tuple[float, float] | None = BAND, either_scale: bool = False) -> tuple[list[str], dict[str, float]]:
    """The student's profile ``names``/``seconds`` against the grader's ``{layer: seconds}``: the layers, the
    rank correlation, the total (within ``total_band``; ``None``: not judged), the share of layers within :data:`BAND` (at least
    ``min_in_band``) and the share within :data:`BAND` of the median ratio (at least ``min_shape``); with
    ``either_scale``, ``min_in_band`` is met by either share (a profile measured while the core was shared is slower
    throughout and keeps its proportions); ``where`` starts each sentence."""
    found = dict(zip(names, seconds))
    missing, extra = [n for n in grader if n not in found], [n for n in found if n not in grader]
    if missing or extra or len(found) != len(names):
        return [_INVALID + f"{where}profile_layers returned {len(names)} layer names; the model has {len(grader)} "
                "Conv2d and Linear layers" + (f", missing {missing[:3]}" if missing else "")
                + (f", not layers: {extra[:3]}" if extra else "") + " (use the module names of model.named_modules())"], {}
    mine = np.array([found[n] for n in grader], dtype=np.float64)
    theirs = np.array(list(grader.values()), dtype=np.float64)
    rho = spearman(mine, theirs)
    total = float(mine.sum() / theirs.sum())
    ratios = mine / theirs
    within = float(np.mean((ratios >= BAND[0]) & (ratios <= BAND[1])))
    relative = ratios / float(np.median(ratios))
    shape = float(np.mean((relative >= BAND[0]) & (relative <= BAND[1])))
    in_band = max(within, shape) if either_scale else within
    figures = {"spearman": rho, "total_ratio": total, "layers_in_band": within, "shape_in_band": shape,
               "margin": min(rho / MIN_SPEARMAN, _band_margin(total, total_band) if total_band else math.inf,
                             in_band / min_in_band,
                             shape / min_shape if min_shape else math.inf)}
    problems = []
    if rho < MIN_SPEARMAN:
        problems.append(f"{where}your per-layer times rank the layers unlike the grader's own profile (Spearman "
                        f"{rho:.3f}, at least {MIN_SPEARMAN:g} needed): warm up first and take each layer's best of the runs")
    if total_band is not None and not total_band[0] <= total <= total_band[1]:
        problems.append(f"{where}your per-layer times add up to {total:.2f}x the grader's (within {_band_text(total_band)} "
                        "needed): report seconds, the best of the runs")
    if in_band < min_in_band:
        problems.append(f"{where}only {within:.0%} of your layer times are within {BAND[0]:g}x to {BAND[1]:g}x of the "
                        + (f"grader's, and {shape:.0%} once brought to its scale (divided by their median ratio to the "
                           "grader's)" if either_scale else "grader's")
                        + f" ({min_in_band:.0%} needed): measure each layer, do not predict it")
    if shape < min_shape:
        problems.append(f"{where}only {shape:.0%} of your layer times keep the proportions of the grader's (within "
                        f"{BAND[0]:g}x to {BAND[1]:g}x of your times' median ratio to the grader's; {min_shape:.0%} "
                        "needed): measure each layer, do not predict it")
    return problems, figures


def _achieved(spec, data, fresh, seed) -> tuple[list[str], dict[str, float]]:
    from util.labs.lab11 import judge_measure

    arrays, problems = read_saved_arrays(data, expected=["batches", "gflops", "function"])
    if problems:
        return [_INVALID + p for p in problems], {}
    batches, gflops = arrays["batches"].reshape(-1), arrays["gflops"].reshape(-1)
    wanted = [int(b) for b in spec["batches"]]
    if batches.dtype.kind not in "iu" or batches.tolist() != wanted or gflops.shape != batches.shape \
            or not _positive(gflops):
        return [_INVALID + f"achieved_gflops must return {{batch: GFLOP/s}} for the batches {wanted}, each a positive, "
                f"finite number; found batches {batches[:5].tolist()}"], {}
    if arrays["function"].dtype != np.uint8 or arrays["function"].ndim != 1:
        return [_INVALID + "the case saved no achieved_gflops for the grader to run again"], {}
    grader = judge_measure.achieved(spec["model"], spec["layer"], spec["sample"], wanted, spec["runs"], fresh=fresh)
    problems, figures = _achieved_problems(wanted, gflops.tolist(), grader, f"for {spec['layer']}", "")
    from util.labs.lab11.machine import drawn_conv

    layer, _ = drawn_conv(seed)
    kind = "depthwise " if layer.groups == layer.in_channels > 1 else f"{layer.groups}-group " if layer.groups > 1 else ""
    what = f"for a {kind}{layer.in_channels}->{layer.out_channels} {layer.kernel_size[0]}x{layer.kernel_size[1]} convolution"
    best = (seed, hashlib.sha256(arrays["function"].tobytes()).hexdigest())
    for round_ in range(DRAWN_ROUNDS):
        reply, problem = _rerun("achieved", {"seed": seed, "batches": wanted, "runs": int(spec["runs"])},
                                arrays["function"].tobytes(), "achieved_gflops")
        if reply is None:
            return problems + [problem], figures
        found, values = reply.get("batches"), reply.get("gflops")
        if found != wanted or not isinstance(values, list) or len(values) != len(wanted) \
                or not all(isinstance(g, (int, float)) and not isinstance(g, bool) and math.isfinite(g) and g > 0
                           for g in values):
            return problems + [_INVALID + f"run again by the grader on a convolution of its own, achieved_gflops did "
                               f"not return {{batch: GFLOP/s}} for the batches {wanted}, each a positive, finite "
                               "number"], figures
        drawn = _reference_achieved(seed, wanted, int(spec["runs"]))
        if drawn is None:  # the course's own process gave no answer: the judge's own measurement instead
            with _quiet_student():
                drawn = judge_measure.drawn_achieved(seed, wanted, spec["runs"], fresh=fresh or round_ > 0)
        student_best, grader_best = _drawn_best.get(best, ({}, {}))
        student_best = {b: max(float(g), student_best.get(b, 0.0)) for b, g in zip(wanted, values)}
        grader_best = {b: max(drawn[b], grader_best.get(b, 0.0)) for b in wanted}
        _drawn_best[best] = student_best, grader_best
        again, more = _achieved_problems(wanted, [student_best[b] for b in wanted], grader_best, what,
                                         "run again by the grader on a convolution it drew for this grading, ",
                                         DRAWN_CONV_BAND)
        if not again:
            break
        if round_ + 1 < DRAWN_ROUNDS:
            time.sleep(DRAWN_PAUSE)
    figures.update({f"drawn_{key}": value for key, value in more.items() if key != "margin"})
    figures["margin"] = min(figures["margin"], more["margin"])
    return problems + again, figures


def _achieved_problems(batches: list[int], gflops: list, grader: dict[int, float], layer: str, where: str,
                       band: tuple[float, float] = CONV_BAND) -> tuple[list[str], dict[str, float]]:
    """The student's GFLOP/s per batch against the grader's, each within ``band``."""
    ratios = {b: float(g) / grader[b] for b, g in zip(batches, gflops)}
    figures = {f"ratio@{b}": r for b, r in ratios.items()}
    figures["margin"] = min(_band_margin(r, band) for r in ratios.values())
    bad = [b for b, r in ratios.items() if not band[0] <= r <= band[1]]
    if not bad:
        return [], figures
    b = bad[0]
    return [f"{where}achieved_gflops at batch {b} is {ratios[b]:.2f}x what the grader measured {layer} "
            f"({grader[b]:.3g} GFLOP/s, best of the runs); it must be within {band[0]:.2g}x to "
            f"{band[1]:g}x: count the MACs of the whole batch, 2 FLOPs each, and time the layer itself"], figures
