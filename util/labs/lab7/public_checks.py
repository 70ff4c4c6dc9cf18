"""Lab 7's public checks (``check("7.2")``): what the notebook states, on the toy graph it shows, never a
hidden case's input. ``CHECKS[task id]`` is attached to each task's ``checks=`` in ``tasks.py``.

The toy is ``x -> MatMul -> Softmax -> MatMul -> y`` (``graphs.toy``); the notebook counts its casts by hand.
"""
from __future__ import annotations

from util.checks import equal, first, has_keys, is_int
from util.contract import Check

DTYPES = ("float16", "float32")


def _toy():
    from util.labs.lab7.graphs import toy

    return toy()


def _default():
    from util.labs.lab7.lists import lists_for

    return lists_for({"lists": "default"}, None)


def _lpnorm(p: int | None):
    """``x -> MatMul -> LpNormalization``, ``p`` set or (None) left to its ONNX default of 2."""
    import numpy as np
    from onnx import helper, numpy_helper

    from util.labs.lab7.graphs import _model, _value

    attrs = {"axis": -1} if p is None else {"axis": -1, "p": p}
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
             helper.make_node("LpNormalization", ["h"], ["y"], name="lpnorm", **attrs)]
    weight = numpy_helper.from_array(np.eye(4, dtype=np.float32), "W")
    return _model(nodes, "lpnorm", [_value("x", [2, 4])], [_value("y", [2, 4])], [weight])


def _summary(fn):
    from util.labs.lab7.summary import summarize

    return summarize(fn(_toy(), _default()))


def _toy_io(fn) -> str | None:
    model = fn(_toy(), _default())
    found = [(v.name, v.type.tensor_type.elem_type) for v in [*model.graph.input, *model.graph.output]]
    return equal(found, [("x", 1), ("y", 1)], "the converted toy's graph inputs and outputs (name, elem_type)")


def _single_cast_pair(fn) -> str | None:
    import numpy as np
    from onnx import TensorProto, helper

    from util.labs.lab7.graphs import _model, _value

    nodes = [helper.make_node("Cast", ["x"], ["h"], name="to_half", to=TensorProto.FLOAT16),
             helper.make_node("Cast", ["h"], ["y"], name="to_float", to=TensorProto.FLOAT)]
    model = _model(nodes, "cast_pair", [_value("x", [3])], [_value("y", [3])], [])
    out = fn(model, {"x": np.array([70000.0, 1.0, 1 / 3], np.float32)})
    found = [float(v) for v in np.asarray(out["y"])] if isinstance(out, dict) and "y" in out else out
    return equal(found, [float("inf"), 1.0, float(np.float32(np.float16(1 / 3)))],
                 "emulate_fp16 of Cast(to float16) -> Cast(to float32) on [70000, 1, 1/3]")


def _toy_fp32_exact(fn) -> str | None:
    import numpy as np

    from util.labs.lab7.summary import run

    feeds = {"x": np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)}
    out, ref = fn(_toy(), feeds), run(_toy(), feeds)
    same = isinstance(out, dict) and "y" in out and np.array_equal(np.asarray(out["y"]), ref["y"])
    return None if same else "emulate_fp16 of the float32 toy (no float16 tensor at all) differs from onnxruntime's output"


def _nothing_to_fix(fn) -> str | None:
    import numpy as np

    from util.labs.lab7.lists import all_fp16_lists

    feeds = {"x": np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)}
    return equal(fn(_toy(), feeds, all_fp16_lists(_toy()), rtol=1e-2, atol=1e-3), [],
                 "auto_fp32 on the toy, whose float16 outputs are within tolerance")


CHECKS: dict[str, tuple[Check, ...]] = {
    "7.1": (
        Check("ResNet-18: every node classified, 69 nodes",
              lambda a: first(equal(isinstance(a, dict), True, "the answer is a dict"),
                              equal(len(a), 69, "the number of nodes"),
                              equal(sorted(set(a.values())) <= list(DTYPES), True, "every value is 'float16' or 'float32'")),
              "one entry per node, keyed by node.name"),
        Check("the toy classifies as float16, float32, float16",
              lambda fn: equal(fn(_toy(), _default()), {"mm1": "float16", "softmax": "float32", "mm2": "float16"},
                               "node_dtypes(toy, DEFAULT_LISTS)"),
              "MatMul is a target op, Softmax a float32 op", calls_function=True),
        Check("LpNormalization without p is float32 (the ONNX default p is 2)",
              lambda fn: equal(fn(_lpnorm(None), _default()), {"mm": "float16", "lpnorm": "float32"},
                               "node_dtypes(MatMul -> LpNormalization)"),
              "an attribute a node leaves out has its default: onnx.defs.get_schema(op, 17).attributes[name].default_value",
              calls_function=True),
        Check("LpNormalization with p=1 follows its float16 input",
              lambda fn: equal(fn(_lpnorm(1), _default()), {"mm": "float16", "lpnorm": "float16"},
                               "node_dtypes(MatMul -> LpNormalization p=1)"),
              "a conditional op whose condition fails follows its activation inputs (here the MatMul's float16 output)",
              calls_function=True),
    ),
    "7.2": (
        Check("the toy needs 6 casts, 4 of them to float16 (hand count)",
              lambda fn: equal({k: _summary(fn)[k] for k in ("casts", "casts_to_fp16", "nodes")},
                               {"casts": 6, "casts_to_fp16": 4, "nodes": 9}, "summarize(convert(toy))"),
              "x and W1 to float16, m1 back for Softmax, p and W2 to float16, y back to float32", calls_function=True),
        Check("graph inputs and outputs keep their names and stay float32", _toy_io,
              "cast a graph input after it and a float16 graph output back before it", calls_function=True),
        Check("ResNet-18: the summary adds up",
              lambda a: first(has_keys(a, ("nodes", "casts", "casts_to_fp16", "fp16_nodes", "param_bytes", "output_dtypes")),
                              is_int(a["casts"], "casts"),
                              equal(a["nodes"] - a["casts"], 69, "nodes - casts (the original's nodes)"),
                              equal(a["output_dtypes"], ["float32"], "output_dtypes")),
              "a conversion only adds Cast nodes"),
    ),
    "7.3": (
        Check("the toy with its parameters in float16: 4 casts",
              lambda fn: equal({k: _summary(fn)[k] for k in ("casts", "param_bytes")},
                               {"casts": 4, "param_bytes": 56}, "summarize(convert_fp16_params(toy))"),
              "W1 (4x4) and W2 (4x3) are read only by float16 MatMuls: 28 values x 2 bytes", calls_function=True),
        Check("ResNet-18: float16 parameters take fewer bytes",
              lambda a: first(has_keys(a, ("casts", "fp16_initializers", "param_bytes_before", "param_bytes_after")),
                              equal(a["param_bytes_after"] < a["param_bytes_before"], True, "after < before"),
                              equal(a["param_bytes_after"] >= a["param_bytes_before"] // 2, True, "after >= before / 2")),
              "each float16 initializer takes half its float32 bytes"),
    ),
    "7.4": (
        Check("a Cast pair rounds like float16: 70000 -> inf", _single_cast_pair,
              "round every float16 value through Cast(to=FLOAT16) -> Cast(to=FLOAT)", calls_function=True),
        Check("a float32 graph is left alone", _toy_fp32_exact,
              "only float16 tensors are rounded; float32 ones run as they are", calls_function=True),
        Check("frag in float16: rows counted",
              lambda a: first(has_keys(a, ("zero_rows", "nonfinite_rows", "onnxruntime_zero_rows")),
                              equal(0 <= a["zero_rows"] <= 16, True, "0 <= zero_rows <= 16"),
                              equal(a["onnxruntime_zero_rows"], 0, "onnxruntime_zero_rows (stated in the notebook)")),
              "frag's output has 16 rows"),
    ),
    "7.5": (
        Check("nothing to keep in float32 when float16 is fine", _nothing_to_fix,
              "test the empty list first: when it passes, return []", calls_function=True),
        Check("frag: names of frag's nodes, in graph order",
              lambda a: first(equal(isinstance(a, list) and all(isinstance(n, str) for n in a), True,
                                    "the answer is a list of names"),
                              equal([n for n in ("/MatMul", "/Mul", "/ReduceSum", "/Sqrt", "/Div", "/MatMul_1") if n in a],
                                    list(a), "the names, in frag's node order")),
              "names of frag's nodes, each once, in the order of model.graph.node"),
    ),
}
