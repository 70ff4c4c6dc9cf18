"""Lab 7's grader-side checks, named by the tasks' ``grader_check`` (``tasks.py``).

Each is ``check(spec, data, tolerance, returned) -> [problems]`` (empty: the case passes), a pure function of
the case's input, the bytes the student's kernel saved and what the case returned there, run in the grader's
own process. What a case returns (the counts the grader compares with the reference) is computed in the kernel,
beside the student's code, so each check recomputes it from the saved file and requires the two to agree:
otherwise a model that is right for the judge (the float32 original, valid and exact) could be saved while the
kernel reports the counts of another (a broken conversion's). The bytes are
untrusted: models are parsed with onnx, arrays loaded without pickle, lists parsed as JSON and
validated. The original model, its inputs and the course emulator are rebuilt here from the spec.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

import numpy as np

NUMBERS = 1e-2
"""A converted model's emulated outputs must be within this much of the float32 outputs, relative to
the largest of them (the default conversions measured 2e-5 to 1.5e-3; a wrong wiring is off by O(1))."""
EMULATOR = 1e-4
"""The student's emulated outputs against the course emulator's, relative to the largest of them: a
correct emulator agrees bit for bit here; one that skips the rounding of intermediate results is off by
about 1e-3 on ResNet-18 (measured), and by inf on the overflowing graphs."""


def _returned_problems(returned: Any, found: Any, what: str) -> list[str]:
    """What the case returned in the kernel (``returned``, compared with the reference afterwards) against the same
    summary computed here from the saved file (``found``): they must be equal, or the returned counts describe some
    other model than the one judged (a summary computed beside the student's code, in the kernel)."""
    if returned is None:
        return []
    found = json.loads(json.dumps(found))
    if returned == found:
        return []
    if isinstance(returned, dict) and isinstance(found, dict):
        key = next((k for k in found if returned.get(k) != found[k]), next(iter(set(returned) - set(found)), None))
        detail = f" ({key!r}: returned {str(returned.get(key))[:60]}, the saved file gives {str(found.get(key))[:60]})"
    else:
        detail = ""
    return [f"what this case returned is not {what} of the file it saved{detail}: the grader reads both from what "
            "your function returned; do not change the course's helpers"]


def _relative(actual: np.ndarray, expected: np.ndarray) -> float:
    scale = float(np.abs(expected).max()) if expected.size else 0.0
    return float(np.abs(actual.astype(np.float64) - expected).max()) / (scale or 1.0) if expected.size else 0.0


def check_converted(spec: Mapping[str, Any], data: bytes, tolerance: Any = None, returned: Any = None) -> list[str]:
    """Tasks 7.2 and 7.3: a valid model with the original float32 interface that computes the same thing, whose
    summary is the one the case returned (``returned``: the counts compared with the reference)."""
    import onnx
    from onnx import TensorProto

    from util.labs.lab7.graphs import build, feeds_for
    from util.labs.lab7.judge_emulator import emulate
    from util.labs.lab7.summary import summarize
    from util.onnx_session import run, session

    try:
        model = onnx.load_from_string(data)
    except Exception as exc:  # noqa: BLE001 - protobuf raises several kinds
        return [f"the saved file is not an ONNX model ({type(exc).__name__})"]
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:  # noqa: BLE001
        return [f"onnx.checker.check_model(full_check=True) fails: {str(exc).splitlines()[0][:200]}"]
    try:
        onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as exc:  # noqa: BLE001
        return [f"strict shape inference fails: {str(exc).splitlines()[0][:200]} (a Cast missing or of the wrong type?)"]
    original = build(spec)
    problems = []
    for kind, want, have in (("input", original.graph.input, model.graph.input),
                             ("output", original.graph.output, model.graph.output)):
        want_io = [(v.name, v.type.tensor_type.elem_type) for v in want]
        have_io = [(v.name, v.type.tensor_type.elem_type) for v in have]
        if want_io != have_io:
            problems.append(f"graph {kind}s are {have_io}; expected the original's {want_io} "
                            f"(names kept, element type {TensorProto.FLOAT} = float32)")
    if problems:
        return problems
    problems = _returned_problems(returned, summarize(model), "the summary (summarize)")
    if problems:
        return problems
    try:
        session(model)
    except Exception as exc:  # noqa: BLE001
        return [f"onnxruntime cannot load the model: {str(exc).splitlines()[0][:200]}"]
    feeds = feeds_for(spec)
    expected, actual = run(original, feeds), emulate(model, feeds)
    for name, value in expected.items():
        error = _relative(actual[name], value) if actual[name].shape == value.shape else float("inf")
        if not error <= NUMBERS:
            problems.append(f"output {name!r} under the float16 emulator is {error:.2g} (relative to its largest value) "
                            f"away from the float32 model's; expected at most {NUMBERS:g}")
    return problems


def check_emulated(spec: Mapping[str, Any], data: bytes, tolerance: Any = None, returned: Any = None) -> list[str]:
    """Task 7.4: the saved outputs equal the course emulator's (inf/NaN in the same places, values within 1e-4),
    and their row counts are those the case returned."""
    from util.artifacts import read_saved_arrays
    from util.labs.lab7.graphs import all_fp16, build, feeds_for
    from util.labs.lab7.judge_emulator import emulate
    from util.labs.lab7.summary import row_counts

    model = build(spec)
    if spec.get("all_fp16"):
        model = all_fp16(model)
    arrays, problems = read_saved_arrays(data, expected=[output.name for output in model.graph.output])
    if problems:
        return problems
    problems = _returned_problems(returned, {name: row_counts(value) for name, value in sorted(arrays.items())},
                                  "the row counts (row_counts)")
    if problems:
        return problems
    expected = emulate(model, feeds_for(spec))
    for name, want in expected.items():
        have = arrays[name]
        if have.shape != want.shape or not np.issubdtype(have.dtype, np.floating):
            problems.append(f"output {name!r} is {have.dtype} {list(have.shape)}; expected float {list(want.shape)}")
            continue
        have = have.astype(np.float64)
        for what, test in (("NaN", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
            if not np.array_equal(test(have), test(want)):
                problems.append(f"output {name!r} has {int(test(have).sum())} {what} values; float16 storage gives "
                                f"{int(test(want).sum())}, in other places or not at all")
        finite = np.isfinite(want) & np.isfinite(have)
        if not problems and finite.any():
            error = _relative(have[finite], want[finite].astype(np.float64))
            if not error <= EMULATOR:
                problems.append(f"output {name!r} differs from float16 storage by {error:.2g} relative to its largest "
                                f"value; expected at most {EMULATOR:g} (is every float16 result rounded?)")
    return problems


def check_fp32_list(spec: Mapping[str, Any], data: bytes, tolerance: Any = None, returned: Any = None) -> list[str]:
    """Task 7.5: the fp32 list is sufficient and 1-minimal under the course emulator (and as long as the case said)."""
    from util.labs.lab7.graphs import build, feeds_for
    from util.labs.lab7.judge_emulator import close, emulate_assignment
    from util.onnx_session import run

    try:
        names = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return ["the saved list is not JSON"]
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return ["the saved value is not a list of node names"]
    problems = _returned_problems(returned, {"fp32_nodes": len(names)}, "the length")
    if problems:
        return problems
    model = build(spec)
    known = [node.name for node in model.graph.node]
    unknown = [n for n in names if n not in known]
    if unknown or len(set(names)) != len(names):
        return [f"the list names {unknown[:3] or 'a node twice'}; expected distinct names of the graph's nodes"]
    feeds = feeds_for(spec)
    reference = run(model, feeds)
    rtol, atol = spec["rtol"], spec["atol"]
    if not close(emulate_assignment(model, names, feeds), reference, rtol, atol):
        return [f"not sufficient: with {len(names)} node(s) in float32 the emulated outputs are not within "
                f"rtol={rtol:g}, atol={atol:g} of float32"]
    for name in names:
        if close(emulate_assignment(model, [n for n in names if n != name], feeds), reference, rtol, atol):
            return [f"not 1-minimal: the list still works without one of its {len(names)} nodes"]
    return []
