"""The labs' shared toolkit: ``util.onnx_models.make_model`` (the course's opset and IR version),
``util.onnx_session`` (a quiet one-thread CPU session at a level) and ``util.artifacts.read_saved_arrays``
(a judge's saved arrays, with one message for a file it cannot read), on good input and on hostile bytes."""
from __future__ import annotations

import io
import pickle
import zipfile

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from util.artifacts import READ_FAILED, read_saved_arrays
from util.onnx_models import IR_VERSION, OPSET, make_model
from util.onnx_session import LEVELS, run, session

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
UNREADABLE = READ_FAILED.split("(")[0]
"""The start of the one message for saved arrays that cannot be read."""
F32 = TensorProto.FLOAT


def _relu_graph() -> onnx.GraphProto:
    return helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "relu",
                             [helper.make_tensor_value_info("x", F32, [2, 3])],
                             [helper.make_tensor_value_info("y", F32, [2, 3])])


def _conv_bn() -> onnx.ModelProto:
    """x (1x2x4x4) -> Conv (no bias) -> BatchNormalization -> y: the pattern ConvBNFusion folds."""
    rng = np.random.default_rng(3)
    weights = {"W": rng.standard_normal((2, 2, 1, 1)), "scale": rng.uniform(0.5, 1.5, 2), "B": rng.standard_normal(2),
               "mean": rng.standard_normal(2), "var": rng.uniform(0.5, 1.5, 2)}
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "W"], ["c"], name="conv"),
         helper.make_node("BatchNormalization", ["c", "scale", "B", "mean", "var"], ["y"], name="bn")], "conv_bn",
        [helper.make_tensor_value_info("x", F32, [1, 2, 4, 4])], [helper.make_tensor_value_info("y", F32, None)],
        [numpy_helper.from_array(value.astype(np.float32), name) for name, value in weights.items()])
    return make_model(graph)


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


# ---------------------------------------------------------------- make_model

def test_make_model_writes_the_course_opset_and_ir_version_and_onnxruntime_runs_it():
    model = make_model(_relu_graph())
    assert (model.ir_version, IR_VERSION) == (8, 8)
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 17)] and OPSET == 17
    assert not model.HasField("producer_name")
    onnx.checker.check_model(model, full_check=True)
    x = np.array([[-1, 0, 2], [3, -4, 5]], np.float32)
    assert ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0].tolist() == [[0, 0, 2], [3, 0, 5]]


def test_onnx_own_make_model_writes_an_ir_version_onnxruntime_refuses():
    """The trap make_model exists for: if onnx ever writes a version onnxruntime loads, this test says so."""
    plain = helper.make_model(_relu_graph(), opset_imports=[helper.make_opsetid("", OPSET)])
    assert plain.ir_version > 13
    with pytest.raises(Exception, match="(?i)ir version"):
        ort.InferenceSession(plain.SerializeToString(), providers=["CPUExecutionProvider"])


def test_make_model_like_another_copies_its_opset_and_ir_version_and_sets_a_producer():
    other = helper.make_model(_relu_graph(), opset_imports=[helper.make_opsetid("", 13),
                                                            helper.make_opsetid("com.microsoft", 1)])
    other.ir_version = 7
    model = make_model(_relu_graph(), producer="lab7", like=other)
    assert model.ir_version == 7 and model.producer_name == "lab7"
    assert [(o.domain, o.version) for o in model.opset_import] == [("", 13), ("com.microsoft", 1)]


def test_make_model_gives_the_bytes_helper_make_model_gave():
    """Labs moved to make_model without a byte of their graphs changing (their references hash them)."""
    by_hand = helper.make_model(_relu_graph(), opset_imports=[helper.make_opsetid("", 17)], producer_name="lab8")
    by_hand.ir_version = 8
    assert make_model(_relu_graph(), producer="lab8").SerializeToString() == by_hand.SerializeToString()


# ---------------------------------------------------------------- session and run

@pytest.mark.parametrize("level, expected", [
    ("disable_all", ort.GraphOptimizationLevel.ORT_DISABLE_ALL),
    ("basic", ort.GraphOptimizationLevel.ORT_ENABLE_BASIC),
    ("EXTENDED", ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED),
    ("all", ort.GraphOptimizationLevel.ORT_ENABLE_ALL),
])
def test_a_session_has_one_thread_no_warnings_and_the_level_asked_for(level, expected):
    options = session(make_model(_relu_graph()), level).get_session_options()
    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (1, 1)
    assert options.log_severity_level == 3
    assert options.graph_optimization_level == expected
    assert LEVELS == ("disable_all", "basic", "extended", "all")


def test_an_unknown_level_is_refused_with_the_levels_named():
    with pytest.raises(ValueError, match="unknown optimisation level 'fast'; use one of disable_all, basic"):
        session(make_model(_relu_graph()), "fast")


def test_disabled_optimizers_are_switched_off_and_the_optimised_graph_is_saved(tmp_path):
    model = _conv_bn()
    fused, kept = tmp_path / "fused.onnx", tmp_path / "kept.onnx"
    session(model, "extended", save_to=fused)
    session(model.SerializeToString(), "extended", disabled=["ConvBNFusion"], save_to=kept)
    assert [n.op_type for n in onnx.load(str(fused)).graph.node] == ["Conv"]
    assert [n.op_type for n in onnx.load(str(kept)).graph.node] == ["Conv", "BatchNormalization"]


def test_a_profiled_session_writes_a_trace_under_its_prefix_with_one_event_per_node_run(tmp_path):
    import json

    profiled = session(make_model(_relu_graph()), profile_prefix=tmp_path / "relu")
    assert not session(make_model(_relu_graph())).get_session_options().enable_profiling
    for _ in range(3):
        profiled.run(None, {"x": np.ones((2, 3), np.float32)})
    trace = profiled.end_profiling()
    assert trace.startswith(str(tmp_path / "relu"))
    events = json.loads(open(trace).read())
    nodes = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    assert len(nodes) == 3 and {e["args"]["op_name"] for e in nodes} == {"Relu"}


def test_run_gives_every_output_by_name_in_graph_order_from_a_model_or_its_bytes():
    graph = helper.make_graph([helper.make_node("Neg", ["x"], ["b"]), helper.make_node("Relu", ["x"], ["a"])], "two",
                              [helper.make_tensor_value_info("x", F32, [3])],
                              [helper.make_tensor_value_info("b", F32, [3]), helper.make_tensor_value_info("a", F32, [3])])
    model = make_model(graph)
    x = np.array([-1, 0, 2], np.float32)
    for given_model in (model, model.SerializeToString()):
        found = run(given_model, {"x": x})
        assert list(found) == ["b", "a"]
        assert found["b"].tolist() == [1, 0, -2] and found["a"].tolist() == [0, 0, 2]
    assert run(_conv_bn(), {"x": np.ones((1, 2, 4, 4), np.float32)}, "all")["y"].shape == (1, 2, 4, 4)


# ---------------------------------------------------------------- read_saved_arrays

def test_saved_arrays_are_read_back_exactly():
    arrays = {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "n": np.array(7, np.int64),
              "s": np.array(["conv1", "bn1"]), "raw": np.frombuffer(b"\x7fELF", np.uint8)}
    found, problems = read_saved_arrays(_npz(**arrays), expected=["x", "n", "s", "raw"])
    assert problems == [] and sorted(found) == ["n", "raw", "s", "x"]
    for name, value in arrays.items():
        assert found[name].dtype == value.dtype and found[name].tobytes() == value.tobytes()


def test_arrays_under_other_names_are_refused_with_both_lists():
    assert read_saved_arrays(_npz(x=np.zeros(2), y=np.zeros(2)), expected=["x"]) == (None, [
        "the arrays saved for this case are named ['x', 'y']; the grader expected exactly ['x']: "
        "return one array for each of these names and no other"])
    many = {f"a{i:02}": np.zeros(1) for i in range(20)}
    (problem,) = read_saved_arrays(_npz(**many), expected=["x"])[1]
    assert "'a07', ... (20 in all)" in problem and len(problem) < 400


def _zip(**members: bytes) -> bytes:
    """A zip archive of ``members``, the same bytes whenever it is made (a fixed date, as ``np.savez`` writes): the
    bytes name the tests they parametrize, and xdist's workers must collect the same names."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return buffer.getvalue()


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


@pytest.mark.parametrize("data, why", [
    (b"", "it is empty"),
    (b"garbage", "it is not an .npz (zip) archive"),
    (pickle.dumps({"x": np.zeros(2)}), "it is not an .npz (zip) archive"),
    (_npy(np.zeros(2)), "it is not an .npz (zip) archive"),                      # one .npy, not an archive
    (_npz(x=np.zeros(2))[:60], "it cannot be read: BadZipFile"),                 # cut short
    (_npz(x=np.array([{"a": 1}], dtype=object)), "an array in it holds Python objects"),
    (_zip(**{"x": b"hello"}), "its entry 'x' is not a .npy array"),
    (_zip(**{"x.npy": b"\x93NUMPY\x01\x00garbage"}), "it cannot be read"),
])
def test_a_file_that_is_not_saved_arrays_gets_the_one_message(data, why):
    arrays, problems = read_saved_arrays(data, expected=["x"])
    assert arrays is None and len(problems) == 1
    assert problems[0].startswith(UNREADABLE) and f"({why}" in problems[0]
    assert "do not write into the answers folder's files/ yourself" in problems[0]


def test_a_pickle_inside_the_archive_is_never_unpickled(tmp_path):
    witness = tmp_path / "unpickled"

    class Payload:
        def __reduce__(self):
            return (open, (str(witness), "w"))

    arrays, problems = read_saved_arrays(_npz(x=np.array([Payload()], dtype=object)))
    assert arrays is None and "Python objects" in problems[0]
    assert not witness.exists()


@SETTINGS
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_give_the_one_message_and_never_raise(data):
    arrays, problems = read_saved_arrays(data)
    if arrays is None:
        assert len(problems) == 1 and problems[0].startswith(UNREADABLE)
    else:  # bytes that happen to be an archive (an empty zip is one): plain arrays only
        assert problems == [] and all(isinstance(v, np.ndarray) and v.dtype != object for v in arrays.values())


def test_an_empty_archive_holds_no_arrays():
    assert read_saved_arrays(_npz()) == ({}, [])
    assert read_saved_arrays(_npz(), expected=["x"])[1][0].startswith("the arrays saved for this case are named []")


@SETTINGS
@given(st.integers(min_value=0, max_value=400), st.binary(min_size=1, max_size=8))
def test_a_damaged_archive_is_read_or_refused_but_never_raises(where, patch):
    good = _npz(x=np.arange(12, dtype=np.float32).reshape(3, 4), y=np.array([1, 2], np.int64))
    damaged = good[:where] + patch + good[where + len(patch):]
    arrays, problems = read_saved_arrays(damaged, expected=["x", "y"])
    assert (arrays is None) == bool(problems) and len(problems) <= 1
    if arrays is not None:
        assert all(isinstance(value, np.ndarray) and value.dtype != object for value in arrays.values())


NAMES = st.text(st.characters(codec="ascii", categories=["L", "N"]), min_size=1, max_size=12).filter(
    lambda name: name != "file")   # np.savez's own first parameter


@SETTINGS
@given(st.dictionaries(NAMES, st.lists(st.floats(allow_nan=False, width=32), max_size=5), min_size=1, max_size=5),
       st.sets(NAMES, max_size=3))
def test_any_saved_arrays_come_back_and_any_other_names_are_refused(values, other):
    arrays = {name: np.array(value, np.float32) for name, value in values.items()}
    found, problems = read_saved_arrays(_npz(**arrays), expected=list(arrays))
    assert problems == [] and {n: v.tolist() for n, v in found.items()} == {n: v.tolist() for n, v in arrays.items()}
    if other != set(arrays):
        assert read_saved_arrays(_npz(**arrays), expected=other)[1][0].startswith("the arrays saved for this case")
