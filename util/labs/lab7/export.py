"""ResNet-18 exported with constant folding (every BatchNormalization folded into its Conv), cached.

``util.onnx_models.export_torchvision`` keeps BatchNormalization as its own node; this lab also needs
the folded network, which is what ``torch.onnx.export`` gives with ``do_constant_folding=True`` in eval
mode. The export is cached next to the course's other exports (``util.export_cache``), keyed like them
by the versions and sources that shape its bytes.
"""
from __future__ import annotations

import hashlib
import io
import os
import tempfile
import warnings
from importlib import metadata
from pathlib import Path

import onnx

from util import export_cache

OPSET = 17


def _key(name: str, shape: tuple[int, ...]) -> str:
    digest = hashlib.sha256()
    for package in ("torch", "torchvision", "onnx"):
        digest.update(metadata.version(package).encode())
    util_dir = Path(__file__).resolve().parents[2]
    for source in (util_dir / "models.py", Path(__file__)):
        digest.update(source.read_bytes())
    return f"{name}_folded_{'x'.join(map(str, shape))}_op{OPSET}_{digest.hexdigest()[:12]}.onnx"


def _export(name: str, shape: tuple[int, ...]) -> bytes:
    import torch

    from util.models import build_model

    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the legacy exporter's DeprecationWarning
        torch.onnx.export(build_model(name), (torch.zeros(shape),), buffer, dynamo=False, opset_version=OPSET,
                          input_names=["input"], output_names=["output"], do_constant_folding=True,
                          keep_initializers_as_inputs=True)
    proto = onnx.load_from_string(buffer.getvalue())
    weights = {init.name for init in proto.graph.initializer}
    inputs = [value for value in proto.graph.input if value.name not in weights]
    del proto.graph.input[:]
    proto.graph.input.extend(inputs)
    return onnx.shape_inference.infer_shapes(proto, strict_mode=True, data_prop=True).SerializeToString()


def export_folded(name: str, shape: tuple[int, ...]) -> onnx.ModelProto:
    """``util.models.build_model(name)`` exported at ``shape`` with BatchNormalization folded into Conv."""
    shape = tuple(int(d) for d in shape)
    file_name = _key(name, shape)
    found = export_cache.find("onnx", file_name)
    if found is not None:
        return onnx.load_from_string(found.read_bytes())
    data = _export(name, shape)
    file = export_cache.writable_dir("onnx") / file_name
    fd, tmp = tempfile.mkstemp(dir=file.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, file)
    return onnx.load_from_string(data)
