"""The profiles lab 11 ships and the one helper every per-layer profile of the lab uses.

The recorded files (``util/labs/lab11/traces/``, gzipped JSON, recorded once on the course's machine by the grader's own
profiling code and never regenerated at grading time) are what tasks 11.3 and 11.5 read, so that what they
grade is exact whatever machine runs the notebook:

* ``resnet18_1x3x64x64.torch.json.gz``: ``torch.profiler``'s Chrome trace of ResNet-18 (10 classes) on one
  64 x 64 image, one warm-up run then 5 profiled runs, each ``nn.Conv2d`` and ``nn.Linear`` call wrapped in a
  ``record_function`` named ``layer:<module name>`` (:func:`annotate_layers`);
* ``resnet18_1x3x64x64.ort.json.gz``: onnxruntime's profile of the same model (BatchNorm folded, exported by
  ``util.onnx_models.export_torchvision``) at the EXTENDED optimisation level, one thread, 6 runs;
* ``mobilenet_v2_1x3x64x64.torch.json.gz`` and ``mobilenet_v2_1x3x64x64.ort.json.gz``: the same for
  MobileNetV2, which the grader's hidden cases read: they are grader-only (never in the students' copy) and
  reach a graded kernel as bytes, only when the case runs (``util.hidden``).

:func:`load_trace` reads one; :func:`annotate_layers` labels every layer call for the profiler;
:func:`profiled_nodes` lists the nodes an onnxruntime profile timed; :func:`ort_session` and
:func:`optimized_graph` run a model in onnxruntime the course's way and show what it runs at a level.
"""
from __future__ import annotations

import contextlib
import gzip
import json
from pathlib import Path
from typing import Any, Iterator

FOLDER = Path(__file__).resolve().with_name("traces")
"""Where the recorded traces students get lie."""
HIDDEN_FOLDER = Path(__file__).resolve().with_name("cases_data")
"""Where the hidden cases' recorded traces lie, on the grader's side only."""
LAYER_PREFIX = "layer:"
"""Name prefix of the ``record_function`` around each layer call: ``layer:layer4.1.conv1``."""
KERNEL_SUFFIX = "_kernel_time"
"""Suffix of the name of the event onnxruntime writes for each node it runs: ``<node name>_kernel_time``."""
TRACES = {
    "resnet18_torch": "resnet18_1x3x64x64.torch.json.gz",
    "resnet18_ort": "resnet18_1x3x64x64.ort.json.gz",
}
"""The recorded traces students get, by short name."""
HIDDEN_TRACES = {
    "mobilenet_v2_torch": "mobilenet_v2_1x3x64x64.torch.json.gz",
    "mobilenet_v2_ort": "mobilenet_v2_1x3x64x64.ort.json.gz",
}
"""The hidden cases' recorded traces (grader-only), by short name."""


def trace_path(name: str) -> Path:
    """The file of recorded trace ``name`` (a key of :data:`TRACES`)."""
    try:
        return FOLDER / TRACES[name]
    except KeyError:
        raise KeyError(f"no recorded trace {name!r}; the traces are {', '.join(TRACES)}") from None


def load_trace(name: str | bytes) -> Any:
    """Recorded trace ``name`` (a key of :data:`TRACES`, or a trace file's gzipped bytes, as a hidden case
    receives it) as Python objects: a ``torch.profiler`` Chrome trace is a dict whose ``"traceEvents"`` list
    holds the events; an onnxruntime profile is a list of events."""
    if isinstance(name, (bytes, bytearray)):
        return json.loads(gzip.decompress(bytes(name)).decode("utf-8"))
    with gzip.open(trace_path(name), "rt", encoding="utf-8") as handle:
        return json.load(handle)


def read_json(path: str | Path) -> Any:
    """A profile file as Python objects (gzipped when its name ends in ``.gz``)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return json.load(handle)


def layer_modules(model) -> list[tuple[str, Any]]:
    """``(name, module)`` for every ``nn.Conv2d`` and ``nn.Linear`` of ``model``, in definition order."""
    from torch import nn

    return [(name, module) for name, module in model.named_modules() if isinstance(module, (nn.Conv2d, nn.Linear))]


@contextlib.contextmanager
def annotate_layers(model) -> Iterator[list[str]]:
    """While the block runs, every call of an ``nn.Conv2d`` or ``nn.Linear`` of ``model`` runs inside
    ``torch.profiler.record_function("layer:<module name>")``, so a profile shows one event per layer call
    (category ``user_annotation`` in the Chrome trace). Yields the layer names; removes its hooks on exit.

    >>> with annotate_layers(model), torch.profiler.profile() as prof:    # doctest: +SKIP
    ...     model(x)
    """
    from torch.profiler import record_function

    handles, names = [], []
    for name, module in layer_modules(model):
        def enter(mod, args, label=LAYER_PREFIX + name):
            mod._course_record = record_function(label)
            mod._course_record.__enter__()

        def leave(mod, args, output):
            record = mod.__dict__.pop("_course_record", None)
            if record is not None:
                record.__exit__(None, None, None)

        handles += [module.register_forward_pre_hook(enter), module.register_forward_hook(leave)]
        names.append(name)
    try:
        yield names
    finally:
        for handle in handles:
            handle.remove()


def profiled_nodes(profile: Any) -> dict[str, str]:
    """``{node name: op type}`` for every node an onnxruntime profile (a list of events) timed: the events of
    category ``"Node"`` whose name ends in ``_kernel_time``; the op type is the event's ``args["op_name"]``."""
    nodes = {}
    for event in profile if isinstance(profile, list) else []:
        if not isinstance(event, dict):
            continue
        name = event.get("name")
        if event.get("cat") == "Node" and isinstance(name, str) and name.endswith(KERNEL_SUFFIX):
            nodes[name[: -len(KERNEL_SUFFIX)]] = str(event.get("args", {}).get("op_name"))
    return nodes


def ort_session(model, level: str = "extended"):
    """An onnxruntime session for an ONNX model on the CPU, one thread, errors-only logging, at optimisation
    ``level`` (``"disable_all"``, ``"basic"``, ``"extended"`` or ``"all"``): the course's session, with no
    profiling. ``ort_session(model).run(None, {"input": x})`` runs it."""
    from util.onnx_session import session

    return session(model, level)


def optimized_graph(model, level: str):
    """The graph onnxruntime actually runs for ``model`` at optimisation ``level``, as an ``onnx.ModelProto``
    (its nodes, their names and op types after the rewrites of that level)."""
    import tempfile

    import onnx

    from util.onnx_session import session

    with tempfile.TemporaryDirectory(prefix="lab11-") as folder:
        path = Path(folder) / f"{level}.onnx"
        session(model, level, save_to=path)
        return onnx.load(str(path))
