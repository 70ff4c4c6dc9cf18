"""Files a hidden case leaves for the grader: the models a student's function built.

Some tasks return something JSON cannot hold, such as an ONNX model. The grader must judge such a
model in its own process, not in the student's kernel, so the case saves it as a file in the
answers folder and returns only its name. The file name is derived from the case's input, so the
grader finds the file without trusting anything the kernel says about it.
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


def save_model(model: Any, spec: Mapping[str, Any], lab_name: str, function: str) -> dict[str, str]:
    """Save the ``onnx.ModelProto`` that ``function`` returned for case ``spec``; return ``{"saved": name}``.

    Raises ``TypeError`` (which the grader reports as the case's error) when ``model`` is not a model.
    """
    import onnx

    if not isinstance(model, onnx.ModelProto):
        raise TypeError(f"{function}() must return an onnx.ModelProto, not a {type(model).__name__}")
    folder = files_dir(lab_name)
    folder.mkdir(parents=True, exist_ok=True)
    name = case_file(spec)
    (folder / name).write_bytes(model.SerializeToString())
    return {"saved": name}
