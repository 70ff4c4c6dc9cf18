"""Lab 6's grader-side judges, named by the tasks' ``grader_check`` (``tasks.py``).

Each is a pure function of the case's ``spec``, the bytes the student's kernel saved for it and
the task's tolerance, and returns the problems found (empty: the case passes). They load the
models themselves (``zoo.load``), draw their own inputs and run onnxruntime in the grader's process,
so nothing the student's kernel patched (numpy, onnxruntime, the course's helpers) reaches a verdict.
The bytes are untrusted: arrays are read without pickle, names as JSON, and every shape, range
and name is checked before use.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from util.contract import Tolerance

BASELINE_SEED = 20240601
"""Seed of the grader's own random inputs (task 6.3's baseline)."""




def check_search(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 6.3: the grader replays the student's search (``search_input``, as the case saved it) in a
    student process, with a seed of its own, serving every call of its error function itself and
    refusing past the budget; the input the replay returns must be in shape and range, and its error at
    least ``RATIO`` times the median error of ``BASELINE_INPUTS`` uniform random inputs the grader draws."""
    import numpy as np

    from util.artifacts import read_saved_arrays
    from util.labs.lab6 import zoo
    from util.labs.lab6.search import BASELINE_INPUTS, RATIO, ErrorFunction, baseline
    from util.student_process import ChannelError, StudentProcess

    arrays, problems = read_saved_arrays(data, expected=("x", "search"))
    if problems:
        return problems
    from util.judging import secret

    shape, budget = zoo.SHAPES[spec["model"]], int(spec["budget"])
    replay_seed = secret.seed("lab6", "6.3 replay", spec["model"], bits=31)  # the notebook's run had the case's own
    model = zoo.load(spec["model"])
    served = ErrorFunction(model, shape, spec["low"], spec["high"], budget)
    x = None
    try:
        with StudentProcess.start("util.labs.lab6.search_harness:serve", max_data=1 << 24, seconds=100) as student:
            student.send({"search": [list(shape), spec["low"], spec["high"], budget, replay_seed]},
                         data=arrays["search"].tobytes())
            while x is None:
                reply, body = student.receive(timeout=90)
                if "evaluate" in reply:
                    if served.calls >= budget:
                        student.send({"refused": "budget"})
                        continue
                    try:
                        candidate = np.frombuffer(body, dtype=np.float32).reshape(shape)
                        student.send({"error": float(served(candidate))})
                    except ValueError as exc:
                        student.send({"refused": str(exc)[:300]})
                elif "result" in reply:
                    got, x = reply["result"], np.frombuffer(body, dtype=np.float32)
                    if (not isinstance(got, list) or not all(isinstance(n, int) and n >= 0 for n in got)
                            or int(np.prod(got)) != x.size):
                        return [f"the replayed search returned {x.size} values; expected an input of shape {list(shape)}"]
                    x = x.reshape(got)
                else:
                    return [f"replayed by the grader, search_input raised {str(reply.get('raised'))[:250]}"]
    except ChannelError as exc:
        return [f"the grader's replay of search_input failed: {exc}"]
    checker = ErrorFunction(model, shape, spec["low"], spec["high"], BASELINE_INPUTS + 1)
    try:
        x = checker.validate(x)
    except ValueError as exc:
        return [str(exc)]
    error = checker(x)
    median = baseline(checker, BASELINE_SEED)
    ratio = error / median if median else float("inf")
    if not ratio >= RATIO:
        return [f"the input's error is {error:.2g}, {ratio:,.1f}x the median of {BASELINE_INPUTS} uniform random "
                f"inputs ({median:.2g}); at least {RATIO}x is needed (found by the grader's replay of your search "
                f"with its own seed, within {budget} calls)"]
    return []


def _names(data: bytes) -> tuple[list[str] | None, list[str]]:
    from util.labs.lab6.passes import CANDIDATES

    try:
        names = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None, ["the saved pass list is not JSON"]
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        return None, ["the saved pass list is not a list of names"]
    unknown = [name for name in names if name not in CANDIDATES]
    if unknown:
        return None, [f"{unknown[0]!r} is not one of the candidate passes: onnxruntime would silently ignore it"]
    if len(set(names)) != len(names):
        return None, ["the pass list names a pass twice"]
    return names, []


def check_isolation(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 6.5: the saved pass names are candidates, **sufficient** (EXTENDED with them disabled is
    bitwise equal to DISABLE_ALL on the case's input) and **1-minimal** (without any one of them it is not)."""
    from util.labs.lab6 import runtime, zoo

    names, problems = _names(data)
    if names is None:
        return problems
    model, feeds = zoo.load(spec["model"]), zoo.feeds(spec["model"], spec["seed"])
    reference = runtime.outputs(model, feeds)
    if not runtime.same_bits(runtime.outputs(model, feeds, "EXTENDED", names), reference):
        return [f"not sufficient: with {names or 'no pass'} disabled, EXTENDED still differs from DISABLE_ALL"]
    for name in names:
        rest = [other for other in names if other != name]
        if runtime.same_bits(runtime.outputs(model, feeds, "EXTENDED", rest), reference):
            problems.append(f"not 1-minimal: without {name!r} the rest is still sufficient")
    return problems
