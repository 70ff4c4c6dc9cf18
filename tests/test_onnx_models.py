"""util.onnx_models: deterministic exports, the hand-built graph, and load_onnx's error messages."""
from __future__ import annotations

import hashlib
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from util import onnx_models
from util.onnx_models import OnnxModelError, export_torchvision, load_onnx, tensor_bytes, tiny_shape_graph

REPO = Path(__file__).resolve().parents[1]


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_two_exports_are_byte_identical():
    first = export_torchvision("mobilenet_v2", cache=False).SerializeToString()
    second = export_torchvision("mobilenet_v2", cache=False).SerializeToString()
    cached = export_torchvision("mobilenet_v2").SerializeToString()
    assert first == second
    assert cached == first


def test_export_is_identical_in_a_fresh_process():
    code = ("import hashlib; from util.onnx_models import export_torchvision; print(hashlib.sha256("
            "export_torchvision('tiny_grouped', input_shape=(1, 4, 16, 16), cache=False)"
            ".SerializeToString()).hexdigest())")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    here = export_torchvision("tiny_grouped", input_shape=(1, 4, 16, 16), cache=False)
    assert out.stdout.strip() == hashlib.sha256(here.SerializeToString()).hexdigest()


def test_mobilenet_v2_graph_keeps_batchnorm_and_is_fully_shaped():
    model = load_onnx(export_torchvision("mobilenet_v2"))
    counts = Counter(node.op_type for node in model.graph.node)
    assert counts == {"Constant": 70, "Conv": 52, "BatchNormalization": 52, "Clip": 35, "Add": 10,
                      "GlobalAveragePool": 1, "Flatten": 1, "Gemm": 1}
    assert [value.name for value in model.graph.input] == ["input"]
    assert model.ir_version == onnx_models.IR_VERSION
    assert len(model.graph.value_info) == 221           # every intermediate tensor has a type
    sizes = tensor_bytes(model)
    assert sizes["input"] == 3 * 224 * 224 * 4
    assert sizes["output"] == 1000 * 4
    assert sum(sizes[init.name] for init in model.graph.initializer) == 4 * (3_504_872 + 2 * 17_056)


def test_exported_resnet18_runs_in_onnxruntime_like_torch():
    import torch

    from util.models import build_model, example_input

    x = example_input((1, 3, 224, 224))
    got = _session(export_torchvision("resnet18")).run(None, {"input": x.numpy()})[0]
    with torch.no_grad():
        want = build_model("resnet18")(x).numpy()
    assert got.shape == (1, 1000)
    assert np.abs(got - want).max() < 1e-4


def test_cache_serves_the_second_call(tmp_path, monkeypatch):
    monkeypatch.setenv(onnx_models.CACHE_ENV, str(tmp_path))
    first = export_torchvision("tiny_grouped", input_shape=(1, 4, 8, 8))
    monkeypatch.setattr(onnx_models, "_export", lambda *args: pytest.fail("exported twice"))
    second = export_torchvision("tiny_grouped", input_shape=(1, 4, 8, 8), path=tmp_path / "copy.onnx")
    assert second.SerializeToString() == first.SerializeToString()
    assert len(list(tmp_path.glob("tiny_grouped_1x4x8x8_op17_*.onnx"))) == 1
    assert (tmp_path / "copy.onnx").read_bytes() == first.SerializeToString()


def test_tiny_shape_graph_runs_and_holds_int64_tensors():
    model = load_onnx(tiny_shape_graph())
    ops = {node.op_type for node in model.graph.node}
    assert {"Constant", "Shape", "Gather", "Reshape", "Concat"} <= ops
    assert model.ir_version == 8
    int64 = [v.name for v in [*model.graph.value_info, *model.graph.output]
             if v.type.tensor_type.elem_type == onnx.TensorProto.INT64]
    assert sorted(int64) == ["lead", "lead_axes", "minus_one", "new_shape", "padded_shape", "pads"]
    sizes = tensor_bytes(model)
    assert (sizes["pads"], sizes["new_shape"], sizes["six"], sizes["flat"]) == (64, 24, 4, 1008)

    x = np.linspace(-3, 3, 120, dtype=np.float32).reshape(2, 3, 4, 5)
    y, new_shape = _session(model).run(None, {"x": x})
    weight = onnx.numpy_helper.to_array(model.graph.initializer[0])
    proj = np.pad(x, [(0, 0), (0, 0), (1, 1), (1, 1)], mode="reflect").reshape(2, 3, 42) @ weight
    summed = np.minimum(proj, 6) + proj
    assert new_shape.dtype == np.int64 and new_shape.tolist() == [2, 3, -1]
    np.testing.assert_allclose(y, np.where(summed > 0, summed, 0.1 * summed), rtol=1e-5, atol=1e-6)


def test_load_onnx_names_a_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="there is no file .*missing.onnx"):
        load_onnx(tmp_path / "missing.onnx")


@pytest.mark.parametrize("content", [b"print('not a model')\n", b""])
def test_load_onnx_rejects_a_file_that_is_not_onnx(tmp_path, content):
    path = tmp_path / "model.onnx"
    path.write_bytes(content)
    with pytest.raises(OnnxModelError, match="is not an ONNX model"):
        load_onnx(path)


def test_load_onnx_asks_for_shape_inference(tmp_path):
    model = tiny_shape_graph()
    del model.graph.value_info[:]
    onnx.save(model, tmp_path / "bare.onnx")
    with pytest.raises(OnnxModelError, match=r"11 of the 15 tensors .*onnx\.shape_inference\.infer_shapes"):
        load_onnx(tmp_path / "bare.onnx")
    assert len(load_onnx(onnx.shape_inference.infer_shapes(model, data_prop=True)).graph.value_info) == 11


def test_load_onnx_refuses_symbolic_dimensions():
    relu = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 3])])
    with pytest.raises(OnnxModelError, match="'N'.*fixed input shape"):
        load_onnx(onnx.helper.make_model(relu))
