"""Deterministic ONNX models for the labs: exported torchvision models and a small hand-built graph.

Nothing is downloaded. Exports are cached under ``build/onnx/`` in the repository (ignored by git),
keyed by model name, input shape, opset and the versions of everything that shapes the graph, so
a second call costs a file read instead of an export. ``help(export_torchvision)`` tells you more.

``make_model`` is how every hand-built graph of the course becomes a model: it writes the course's
opset (:data:`OPSET`) and IR version (:data:`IR_VERSION`) so that onnxruntime loads it, or copies them
from another model. ``load_onnx`` is the loader the labs use: it explains what is wrong with a path or a
model in plain words instead of a protobuf traceback.

Its users: the notebooks (``export_torchvision``, ``load_onnx``, ``tensor_bytes``) and every lab folder
that builds or exports a graph: ``make_model`` is the one place a hand-built graph gets its opset and
IR version.
"""
from __future__ import annotations

import hashlib
import io
import math
import os
import warnings
from importlib import metadata
from pathlib import Path

import onnx
from onnx import TensorProto, helper, numpy_helper

from util import export_cache, moved

__getattr__ = moved.attributes(__name__)
"""Functions a lab has since taken into its folder still resolve from here, for notebooks built from a
handout released before (``util.moved``; each lab's ``surface.py`` says what moved where)."""

OPSET = 17
"""Opset of every model the course exports (onnxruntime 1.31 runs it; all ops used are stable there)."""
IR_VERSION = 8
"""IR version matching opset 17. onnx 1.23's ``make_model`` writes 14, which onnxruntime 1.31 refuses."""
DEFAULT_SHAPE = (1, 3, 224, 224)
"""Batch size 1: every shape in the exported graph is then static, so every tensor has a byte size."""
CACHE_ENV = export_cache.KINDS["onnx"]
"""Set this variable to keep the export cache somewhere other than ``<repo>/build/onnx``."""
_FORMAT = 1
"""Bump when the export recipe below changes in a way the source hash would not catch."""


class OnnxModelError(ValueError):
    """A file or model that cannot be analysed as it is; the message says what to do about it."""


# ---------------------------------------------------------------- export and cache

def _cache_key(name: str, shape: tuple[int, ...], opset: int, fold: bool = False) -> str:
    """File stem that changes whenever anything that shapes the exported bytes changes."""
    versions = [metadata.version(pkg) for pkg in ("torch", "torchvision", "onnx")]
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for part in [*versions, str(_FORMAT)]:
        digest.update(part.encode())
    for source in (here / "models.py", here / "onnx_models.py"):
        digest.update(source.read_bytes())
    folded = "_folded" if fold else ""
    return f"{name}{folded}_{'x'.join(map(str, shape))}_op{opset}_{digest.hexdigest()[:12]}"


def _export(name: str, shape: tuple[int, ...], opset: int, fold: bool = False) -> onnx.ModelProto:
    """Export ``util.models.build_model(name)`` and return the shape-inferred graph.

    Exporter choice: the TorchScript exporter (``dynamo=False``; deprecated but working in the
    pinned torch 2.14.1). It is about 10x faster than the dynamo exporter here (0.3 s vs 4 s for
    MobileNetV2), names nodes after the module path (``/features/features.1/conv/conv.1/Conv``),
    and is byte-for-byte reproducible. The dynamo exporter only yields a clean graph through its
    onnxscript optimizer, and that optimizer folds BatchNorm into Conv.

    ``do_constant_folding=False`` keeps BatchNormalization as its own node; ``fold=True`` exports with
    constant folding, which merges every BatchNormalization that follows a Conv into it (eval mode). ``keep_initializers_as_inputs=True`` stops the exporter from de-duplicating
    equal initializers (every fresh BN has the same zeros and ones), which it would otherwise do
    by inserting ``Identity`` nodes that make weights look like activations; the initializers
    are then removed from the graph inputs again, as IR >= 4 allows.
    """
    import torch

    from util.models import build_model

    model = build_model(name)
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # the legacy exporter's DeprecationWarning
        torch.onnx.export(model, (torch.zeros(shape),), buffer, dynamo=False, opset_version=opset,
                          input_names=["input"], output_names=["output"],
                          do_constant_folding=fold, keep_initializers_as_inputs=True)
    proto = onnx.load_from_string(buffer.getvalue())
    weights = {init.name for init in proto.graph.initializer}
    inputs = [value for value in proto.graph.input if value.name not in weights]
    del proto.graph.input[:]
    proto.graph.input.extend(inputs)
    return onnx.shape_inference.infer_shapes(proto, strict_mode=True, data_prop=True)


def export_torchvision(name: str, path: str | os.PathLike | None = None, opset: int = OPSET, *,
                       input_shape: tuple[int, ...] | list[int] = DEFAULT_SHAPE,
                       cache: bool = True, fold_batchnorm: bool = False) -> onnx.ModelProto:
    """Export a course model to ONNX and return it with every tensor's shape inferred.

    ``name`` is any model of ``util.models`` (``"mobilenet_v2"``, ``"resnet18"``, ...), built with
    seeded weights (nothing is downloaded) in eval mode. BatchNormalization stays a separate node
    unless ``fold_batchnorm`` (then each one after a Conv is folded into it, as exporters do by default).
    The input is called ``input`` (``input_shape``, default 1x3x224x224), the output ``output``.

    If ``path`` is given, the model is also written there. Exports are cached in
    ``<repo>/build/onnx/``; ``cache=False`` forces a fresh export. Two exports of the same model
    are byte-identical.

    >>> model = export_torchvision("mobilenet_v2")
    >>> len(model.graph.node)
    222
    """
    shape = tuple(int(d) for d in input_shape)
    file_name = f"{_cache_key(name, shape, opset, fold_batchnorm)}.onnx"
    found = export_cache.find("onnx", file_name) if cache else None
    if found is not None:
        data = found.read_bytes()
    else:
        data = _export(name, shape, opset, fold_batchnorm).SerializeToString()
        if cache:
            export_cache.store("onnx", file_name, data, stale=file_name.rsplit("_", 1)[0] + "_*.onnx")
    if path is not None:
        Path(path).write_bytes(data)
    return onnx.load_from_string(data)


# ---------------------------------------------------------------- hand-built graphs

def make_model(graph: onnx.GraphProto, *, producer: str | None = None,
               like: onnx.ModelProto | None = None) -> onnx.ModelProto:
    """A model holding ``graph``, with the course's opset (17) and IR version (8).

    Use it instead of ``onnx.helper.make_model``, which writes IR version 14: onnxruntime 1.31
    refuses to load anything above 13 ("Unsupported model IR version"). ``like=other_model`` copies
    ``other_model``'s opset imports and IR version instead, for a graph rebuilt from another model's
    nodes. ``producer`` sets ``producer_name`` (left unset by default). Shapes are not inferred:
    call ``onnx.shape_inference.infer_shapes`` on the result if you need them.

    >>> from onnx import TensorProto, helper
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    >>> model = make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
    >>> model.ir_version, model.opset_import[0].version
    (8, 17)
    """
    opsets = like.opset_import if like is not None else [helper.make_opsetid("", OPSET)]
    extra = {} if producer is None else {"producer_name": producer}
    model = helper.make_model(graph, opset_imports=opsets, **extra)
    model.ir_version = like.ir_version if like is not None else IR_VERSION
    return model


def tiny_shape_graph() -> onnx.ModelProto:
    """A 13-node graph that computes a shape at run time, as exported graphs often do.

    ``x`` (float32, 2x3x4x5) is reflect-padded to 2x3x6x7, then reshaped to 2x3x42 with a shape
    built by ``Shape -> Gather -> Concat`` from int64 tensors, multiplied by a 42x8 weight, clipped
    (``Clip`` with its optional ``min`` left out), added to its unclipped self and passed through
    LeakyRelu. Outputs: ``y`` (float32, 2x3x8) and ``new_shape`` (int64, ``[2, 3, -1]``).
    """
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64

    def constant(name: str, value, dtype) -> onnx.NodeProto:
        return helper.make_node("Constant", [], [name], name=f"const_{name}",
                                value=numpy_helper.from_array(_array(value, dtype), name))

    nodes = [
        constant("pads", [0, 0, 1, 1, 0, 0, 1, 1], i64),
        helper.make_node("Pad", ["x", "pads"], ["padded"], name="pad", mode="reflect"),
        helper.make_node("Shape", ["padded"], ["padded_shape"], name="shape"),
        constant("lead_axes", [0, 1], i64),
        helper.make_node("Gather", ["padded_shape", "lead_axes"], ["lead"], name="gather", axis=0),
        constant("minus_one", [-1], i64),
        helper.make_node("Concat", ["lead", "minus_one"], ["new_shape"], name="concat", axis=0),
        helper.make_node("Reshape", ["padded", "new_shape"], ["flat"], name="reshape"),
        helper.make_node("MatMul", ["flat", "weight"], ["proj"], name="matmul"),
        constant("six", 6.0, f32),
        helper.make_node("Clip", ["proj", "", "six"], ["clipped"], name="clip"),
        helper.make_node("Add", ["clipped", "proj"], ["summed"], name="add"),
        helper.make_node("LeakyRelu", ["summed"], ["y"], name="leaky_relu", alpha=0.1),
    ]
    weight = numpy_helper.from_array(
        _array([(i % 7 - 3) / 8 for i in range(42 * 8)], f32).reshape(42, 8), "weight")
    graph = helper.make_graph(
        nodes, "tiny_shape_graph",
        inputs=[helper.make_tensor_value_info("x", f32, [2, 3, 4, 5])],
        outputs=[helper.make_tensor_value_info("y", f32, [2, 3, 8]),
                 helper.make_tensor_value_info("new_shape", i64, [3])],
        initializer=[weight])
    model = make_model(graph, producer="util.onnx_models")
    return onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)


def _array(values, dtype: int):
    import numpy as np
    return np.asarray(values, dtype=helper.tensor_dtype_to_np_dtype(dtype))


# ---------------------------------------------------------------- loading and sizes

def load_onnx(path_or_model: str | os.PathLike | onnx.ModelProto) -> onnx.ModelProto:
    """Load an ONNX model (a path or a ``ModelProto``) and check it can be analysed.

    Raises ``FileNotFoundError`` for a missing path and ``OnnxModelError`` (a ``ValueError``) for
    a file that is not an ONNX model, or for a model in which some tensor has no known shape and
    element type (run ``onnx.shape_inference.infer_shapes`` on it first) or has a dimension that
    is not a fixed number (export with a fixed input shape).
    """
    if isinstance(path_or_model, onnx.ModelProto):
        model = path_or_model
    else:
        path = Path(path_or_model)
        if not path.exists():
            where = "" if path.is_absolute() else f" (relative to {Path.cwd()})"
            raise FileNotFoundError(f"there is no file {str(path)!r}{where}; check the path, "
                                    "or export a model with export_torchvision")
        if path.is_dir():
            raise OnnxModelError(f"{str(path)!r} is a folder, not an .onnx file")
        try:
            model = onnx.load(str(path))
        except Exception as err:             # protobuf's DecodeError and friends
            raise OnnxModelError(f"{str(path)!r} is not an ONNX model (it cannot be parsed: "
                                 f"{type(err).__name__}); is it the right file?") from None
        if not model.graph.node or not model.opset_import:
            raise OnnxModelError(f"{str(path)!r} is not an ONNX model (it holds no graph nodes "
                                 "or no opset); is it the right file?")
    _check_shapes(model)
    return model


def _check_shapes(model: onnx.ModelProto) -> None:
    graph = model.graph
    known = {v.name: v.type for v in [*graph.input, *graph.output, *graph.value_info]}
    weights = {init.name for init in graph.initializer}
    used = dict.fromkeys(name for node in graph.node for name in [*node.input, *node.output] if name)
    missing = [n for n in used if n not in weights
               and (n not in known or not known[n].tensor_type.elem_type
                    or not known[n].tensor_type.HasField("shape"))]
    if missing:
        raise OnnxModelError(
            f"{len(missing)} of the {len(used)} tensors the nodes use have no shape information "
            f"(e.g. {', '.join(repr(n) for n in missing[:3])}); run "
            "model = onnx.shape_inference.infer_shapes(model) and load that model instead")
    for name, type_ in known.items():
        dims = type_.tensor_type.shape.dim
        unknown = [d.dim_param or "?" for d in dims if not d.HasField("dim_value")]
        if name not in weights and unknown:
            raise OnnxModelError(f"tensor {name!r} has a dimension that is not a fixed number "
                                 f"({unknown[0]!r}); byte sizes need static shapes: export with a "
                                 "fixed input shape (dynamic_axes=None)")


def tensor_bytes(model: onnx.ModelProto) -> dict[str, int]:
    """Bytes of every named tensor of the graph: inputs, outputs, initializers, ``value_info``.

    Bytes are ``product of the dims x element size`` (a 0-d tensor has one element; a 0 dim gives
    0 bytes); int64 counts 8 bytes, float32 4, float16 2, bool 1. The model must have passed
    ``load_onnx``'s checks. Tasks 2.3 and 2.4 receive these sizes, so that a slip in your own
    task 2.2 sizes does not cost you twice; use them to check your inspector.
    """
    graph = model.graph
    sizes: dict[str, int] = {}
    for value in [*graph.input, *graph.output, *graph.value_info]:
        tensor = value.type.tensor_type
        sizes[value.name] = _nbytes([d.dim_value for d in tensor.shape.dim], tensor.elem_type)
    for init in graph.initializer:
        sizes[init.name] = _nbytes(list(init.dims), init.data_type)
    return sizes


def _nbytes(dims: list[int], elem_type: int) -> int:
    return math.prod(dims) * helper.tensor_dtype_to_np_dtype(elem_type).itemsize
