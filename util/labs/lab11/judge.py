"""Lab 11's grader-side check of its measured cases (``Task.grader_check``), against the grader's own measurement.

A measured case's ``run_case`` saved, in the graded kernel, what the student's function measured: a peak
or a bandwidth (``measure_peak`` / ``measure_bandwidth`` timed by the course's CPU-clock timer), a
per-layer profile (``profile_layers``), or achieved GFLOP/s per batch (``achieved_gflops``). Here, in the
judge process, the grader measures the same thing itself (:mod:`util.labs.lab11.judge_measure`: pinned to
one CPU, one thread, best of runs) and compares; it never compares with a number in the reference file.
Before it fails a case it measures once more and fails only if that measurement disagrees too (a
grader's unlucky moment must not cost a student points).

The bands come from the lab's noise study (``benchmarks/bench_lab11_grading.py`` runs it and prints it):
pairs of fresh processes, one unpinned as a graded kernel is and one pinned as the judge is, run at the same
time on a 2-vCPU machine at load averages of 4 to 10, each measuring with this judge's own code:

* peak and bandwidth on the CPU clock: best-of-10 values spread 1.29x (peak) and 1.08x (bandwidth) across
  processes; graded within :data:`BAND` = [0.5, 2] of the grader's (worst margin seen: 1.55). On the wall
  clock the bandwidth's best of 10 spread 1.8x to 3.5x, which is why the graded timer is the CPU clock;
* per-layer profiles at batch 1 (minimum of 10 profiled runs, wall clock as profilers measure): Spearman
  between two processes' profiles >= 0.94 (ResNet-18) and 0.98 (MobileNetV2), every layer within 1.54x,
  totals within 1.19x; graded: Spearman >= :data:`MIN_SPEARMAN` (0.8), the total within :data:`BAND`, and at
  least :data:`MIN_LAYERS_IN_BAND` of the layers within :data:`BAND` (worst margin 1.19; a roofline
  *prediction* passed off as a measurement keeps a Spearman near 0.8 but has under 55 % of its layers in
  band). At batch 2 and 4 the totals of two processes differed up to 3.9x (a call of several ms is rarely
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

import math
from typing import Any, Mapping

import numpy as np

from util.artifacts import read_saved_arrays
from util.contract import Tolerance

BAND = (0.5, 2.0)
"""Student's measurement / grader's measurement, for the peak, the bandwidth and per-layer times."""
CONV_BAND = (1 / 3, 3.0)
"""Student's / grader's achieved GFLOP/s of one conv at one batch (see the module's docstring)."""
MIN_SPEARMAN = 0.8
"""Smallest rank correlation accepted between the student's per-layer profile and the grader's."""
MIN_LAYERS_IN_BAND = 0.75
"""Share of the layers whose time must be within :data:`BAND` of the grader's."""
UNITS = {"peak": "GFLOP/s", "bandwidth": "GB/s"}


def check(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Problems with a case's saved measurement (empty: it passes); an exact case passes here."""
    if spec.get("measure") is None:
        return []
    problems, _ = _assess(spec, data, fresh=False)
    if problems and not _invalid(problems):
        problems, _ = _assess(spec, data, fresh=True)  # measured again before a case fails
    return _strip(problems)


def assess(spec: Mapping[str, Any], data: bytes, *, fresh: bool = False) -> tuple[list[str], dict[str, float]]:
    """The problems with a measured case and the figures they were decided on (ratios, correlation, and
    ``margin``: how far, as a factor, the worst of them is inside its band; below 1 it is outside).
    ``fresh`` makes the grader measure again instead of reusing its measurement."""
    problems, figures = _assess(spec, data, fresh=fresh)
    return _strip(problems), figures


def _assess(spec: Mapping[str, Any], data: bytes, *, fresh: bool) -> tuple[list[str], dict[str, float]]:
    measure = spec.get("measure")
    if measure in UNITS:
        return _machine(spec, data, fresh)
    if measure == "profile":
        return _profile(spec, data, fresh)
    if measure == "achieved":
        return _achieved(spec, data, fresh)
    return [f"the grader does not know the measurement {str(measure)[:40]!r}"], {}


_INVALID = "INVALID: "


def _invalid(problems: list[str]) -> bool:
    return any(p.startswith(_INVALID) for p in problems)


def _strip(problems: list[str]) -> list[str]:
    return [p.removeprefix(_INVALID) for p in problems]


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
    figures = {"student": float(value[0]), "grader": grader, "ratio": ratio, "margin": _band_margin(ratio, BAND)}
    if figures["margin"] >= 1:
        return [], figures
    return [f"{what}({size}) measured {value[0]:.3g} {unit}, {ratio:.2f}x what the grader measured on its own "
            f"(best of {spec['runs']} on one CPU, one thread); it must be within {BAND[0]:g}x to {BAND[1]:g}x: "
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


def _profile(spec, data, fresh) -> tuple[list[str], dict[str, float]]:
    from util.labs.lab11 import judge_measure

    arrays, problems = read_saved_arrays(data, expected=["names", "seconds"])
    if problems:
        return [_INVALID + p for p in problems], {}
    names, seconds = arrays["names"], arrays["seconds"]
    if names.dtype.kind != "U" or names.ndim != 1 or seconds.shape != names.shape or not _positive(seconds):
        return [_INVALID + "profile_layers must return {layer name: seconds} with a positive, finite number of "
                f"seconds for each layer; found {names.size} names and seconds {seconds.reshape(-1)[:3].tolist()}"], {}
    grader = judge_measure.profile(spec["model"], spec["shape"], spec["runs"], fresh=fresh)
    found = dict(zip(names.tolist(), seconds.tolist()))
    missing, extra = [n for n in grader if n not in found], [n for n in found if n not in grader]
    if missing or extra or len(found) != len(names):
        return [_INVALID + f"profile_layers returned {len(names)} layer names; the model has {len(grader)} Conv2d and "
                f"Linear layers" + (f", missing {missing[:3]}" if missing else "")
                + (f", not layers: {extra[:3]}" if extra else "") + " (use the module names of model.named_modules())"], {}
    mine = np.array([found[n] for n in grader])
    theirs = np.array(list(grader.values()))
    rho = spearman(mine, theirs)
    total = float(mine.sum() / theirs.sum())
    ratios = mine / theirs
    within = float(np.mean((ratios >= BAND[0]) & (ratios <= BAND[1])))
    figures = {"spearman": rho, "total_ratio": total, "layers_in_band": within,
               "margin": min(rho / MIN_SPEARMAN, _band_margin(total, BAND), within / MIN_LAYERS_IN_BAND)}
    problems = []
    if rho < MIN_SPEARMAN:
        problems.append(f"your per-layer times rank the layers unlike the grader's own profile (Spearman {rho:.3f}, "
                        f"at least {MIN_SPEARMAN:g} needed): warm up first and take each layer's best of the runs")
    if not BAND[0] <= total <= BAND[1]:
        problems.append(f"your per-layer times add up to {total:.2f}x the grader's (within {BAND[0]:g}x to "
                        f"{BAND[1]:g}x needed): report seconds, the best of the runs")
    if within < MIN_LAYERS_IN_BAND:
        problems.append(f"only {within:.0%} of your layer times are within {BAND[0]:g}x to {BAND[1]:g}x of the "
                        f"grader's ({MIN_LAYERS_IN_BAND:.0%} needed): measure each layer, do not predict it")
    return problems, figures


def _achieved(spec, data, fresh) -> tuple[list[str], dict[str, float]]:
    from util.labs.lab11 import judge_measure

    arrays, problems = read_saved_arrays(data, expected=["batches", "gflops"])
    if problems:
        return [_INVALID + p for p in problems], {}
    batches, gflops = arrays["batches"].reshape(-1), arrays["gflops"].reshape(-1)
    wanted = [int(b) for b in spec["batches"]]
    if batches.dtype.kind not in "iu" or batches.tolist() != wanted or gflops.shape != batches.shape \
            or not _positive(gflops):
        return [_INVALID + f"achieved_gflops must return {{batch: GFLOP/s}} for the batches {wanted}, each a positive, "
                f"finite number; found batches {batches[:5].tolist()}"], {}
    grader = judge_measure.achieved(spec["model"], spec["layer"], spec["sample"], wanted, spec["runs"], fresh=fresh)
    ratios = {b: float(g) / grader[b] for b, g in zip(wanted, gflops.tolist())}
    figures = {f"ratio@{b}": r for b, r in ratios.items()}
    figures["margin"] = min(_band_margin(r, CONV_BAND) for r in ratios.values())
    bad = [b for b, r in ratios.items() if not CONV_BAND[0] <= r <= CONV_BAND[1]]
    if not bad:
        return [], figures
    b = bad[0]
    return [f"achieved_gflops at batch {b} is {ratios[b]:.2f}x what the grader measured for {spec['layer']} "
            f"({grader[b]:.3g} GFLOP/s, best of {spec['runs']}); it must be within {CONV_BAND[0]:.2g}x to "
            f"{CONV_BAND[1]:g}x: count the MACs of the whole batch, 2 FLOPs each"], figures
