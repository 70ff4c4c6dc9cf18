"""Answers as JSON: turning a student's result into plain JSON values, and where they are written.

Answers are exported one file per task (``<output dir>/<task id>.json``), written atomically, so a
notebook that raises halfway keeps everything it exported before. No pickle: JSON only.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from util.atomic import write_atomic

OUTPUT_DIR_ENV = "COURSE_OUTPUT_DIR"
"""The grader points this variable at a scratch folder; students get ``./outputs/<lab>/``."""


MAX_DEPTH = 32
"""Deepest nesting of lists and dicts an answer may have (the course's answers nest at most 6 levels);
the grader reads no deeper."""


class AnswerError(TypeError):
    """An answer holds a value that cannot be exported as JSON."""


def to_jsonable(value: Any, path: str = "answer", depth: int = 0) -> Any:
    """Convert ``value`` to plain JSON types (dict, list, str, int, float, bool, None).

    Understands tuples, ``torch.Size``, tensors and numpy arrays (as nested lists), numpy and torch
    scalars, dtypes (as their name) and dataclasses. Anything else raises :class:`AnswerError` naming
    where in the answer the odd value sits, e.g. ``answer['by_type']['Conv2d']``; so does nesting
    deeper than :data:`MAX_DEPTH` levels and an integer of over 4,000 digits.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if value.bit_length() > 13_000:
            raise AnswerError(f"{path} is an integer of over 4,000 digits; JSON readers refuse it")
        return int(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise AnswerError(f"{path} is {value}; JSON cannot hold NaN or infinity")
        return float(value)
    if isinstance(value, (Mapping, list, tuple)) and depth >= MAX_DEPTH:
        raise AnswerError(f"{path} is nested more than {MAX_DEPTH} levels deep; the grader reads at most {MAX_DEPTH}")
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, (str, int)):
                raise AnswerError(f"{path} has a key of type {type(key).__name__}; use str keys")
            out[str(key)] = to_jsonable(item, f"{path}[{key!r}]", depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [to_jsonable(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses
        return to_jsonable(dataclasses.asdict(value), path, depth)
    module = type(value).__module__
    if module.startswith("torch"):
        import torch
        if isinstance(value, torch.dtype):
            return str(value).removeprefix("torch.")
        if isinstance(value, torch.Tensor):
            return to_jsonable(value.detach().cpu().tolist(), path, depth)
    if module.startswith("numpy"):
        import numpy as np
        if isinstance(value, np.ndarray):
            return to_jsonable(value.tolist(), path, depth)
        if isinstance(value, np.generic):
            return to_jsonable(value.item(), path, depth)
        if isinstance(value, np.dtype):
            return str(value)
    raise AnswerError(f"{path} is a {type(value).__module__}.{type(value).__qualname__}, which cannot "
                      "be exported; convert it to int, float, str, list or dict")


def output_dir(lab_name: str) -> Path:
    """Where this notebook's answers go: ``$COURSE_OUTPUT_DIR`` if set, else ``./outputs/<lab>/``."""
    root = os.environ.get(OUTPUT_DIR_ENV)
    return Path(root) if root else Path.cwd() / "outputs" / lab_name


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as JSON atomically (:func:`util.atomic.write_atomic`): readers see the old file
    or the new one, never half. The file gets the mode ``open()`` would give it (0644 under the usual umask)."""
    write_atomic(path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode("utf-8"))


def write_answer(directory: Path, task_id: str, value: Any) -> Path:
    """Export one task's answer (already JSON-able) as ``<directory>/<task_id>.json``."""
    path = directory / f"{task_id}.json"
    write_json(path, {"task": task_id, "value": value})
    return path


def read_answers(directory: Path) -> dict[str, Any]:
    """Every answer exported to ``directory``: task id -> value. Unreadable files are skipped."""
    answers: dict[str, Any] = {}
    if not directory.is_dir():
        return answers
    for path in sorted(directory.glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            answers[str(record["task"])] = record["value"]
        except (ValueError, KeyError, TypeError, RecursionError):
            continue
    return answers
