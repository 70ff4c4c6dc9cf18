"""Files a hidden case leaves for the grader: the models, arrays or libraries a student's function built.

Some tasks return something JSON cannot hold (an ONNX model), or something whose verdict the kernel
must not decide (whether two tensors are close: the student's code runs in that kernel and could
patch ``allclose``). Such a case saves the thing as a file in the answers folder and returns only
its name; the grader judges the file in its own process (``Task.grader_check``). The file name is
derived from the case's input, so the grader finds the file without trusting anything the kernel
says about it.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

from util.answers import output_dir

FILES_DIR = "files"
"""Sub-folder of the answers folder that holds the saved files (``<answers>/files/<name>``)."""


def case_file(spec: Mapping[str, Any], suffix: str = ".onnx") -> str:
    """The file name a case with input ``spec`` saves to, e.g. ``case-1f3a...onnx``."""
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    return f"case-{hashlib.sha256(text.encode()).hexdigest()[:16]}{suffix}"


def files_dir(lab_name: str) -> Path:
    """Where this notebook's saved files go (inside :func:`util.answers.output_dir`)."""
    return output_dir(lab_name) / FILES_DIR


def case_stem(spec: Mapping[str, Any]) -> str:
    """The part of a case's file name that does not depend on the suffix (``case-1f3a...``)."""
    return case_file(spec, "")


def save_file(data: bytes, spec: Mapping[str, Any], lab_name: str, suffix: str) -> dict[str, str]:
    """Save ``data`` as the file of case ``spec`` (``case-<hash><suffix>``); return ``{"saved": name}``.

    One file per case: saving again replaces it, whatever its suffix was.
    """
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"the saved data must be bytes, not a {type(data).__name__}")
    folder = files_dir(lab_name)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob(case_stem(spec) + "*"):
        old.unlink()
    name = case_file(spec, suffix)
    (folder / name).write_bytes(bytes(data))
    return {"saved": name}


def save_model(model: Any, spec: Mapping[str, Any], lab_name: str, function: str) -> dict[str, str]:
    """Save the ``onnx.ModelProto`` that ``function`` returned for case ``spec``; return ``{"saved": name}``.

    Raises ``TypeError`` (which the grader reports as the case's error) when ``model`` is not a model.
    """
    import onnx

    if not isinstance(model, onnx.ModelProto):
        raise TypeError(f"{function}() must return an onnx.ModelProto, not a {type(model).__name__}")
    return save_file(model.SerializeToString(), spec, lab_name, ".onnx")


def save_arrays(arrays: Mapping[str, Any], spec: Mapping[str, Any], lab_name: str) -> dict[str, str]:
    """Save named arrays (numpy arrays or tensors) for case ``spec`` as an ``.npz``; return ``{"saved": name}``.

    Stored without pickle, so the grader can read them without running anything from the file.
    """
    import io

    import numpy as np

    plain = {}
    for key, value in arrays.items():
        if hasattr(value, "detach"):  # a torch tensor
            value = value.detach().cpu().numpy()
        array = np.asarray(value)
        if array.dtype == object:
            raise TypeError(f"array {key!r} holds Python objects; save numbers only")
        plain[str(key)] = array
    buffer = io.BytesIO()
    np.savez(buffer, **plain)
    return save_file(buffer.getvalue(), spec, lab_name, ".npz")


def load_arrays(data: bytes) -> dict[str, Any]:
    """The arrays of an ``.npz`` saved by :func:`save_arrays` (never unpickles: safe on any bytes).

    Raises ``ValueError`` for bytes that are not such a file.
    """
    import io
    import zipfile

    import numpy as np

    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as found:
            return {key: found[key] for key in found.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise ValueError(f"not an array file saved by save_arrays ({type(exc).__name__}: {exc})") from None
