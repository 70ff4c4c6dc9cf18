"""Files a hidden case leaves for the grader: the models, arrays or libraries a student's function built.

Some tasks return something JSON cannot hold (an ONNX model), or something whose verdict the kernel
must not decide (whether two tensors are close: the student's code runs in that kernel and could
patch ``allclose``). Such a case saves the thing as a file in the answers folder and returns only
its name; the grader judges the file in its own process (``Task.grader_check``). The file name is
derived from the case's input, so the grader finds the file without trusting anything the kernel
says about it.

Its users: the labs' ``run_case`` functions in the kernel (``save_model``, ``save_arrays``,
``save_file``, in each lab's ``tasks.py``), the labs' grader-side judges (``read_saved_arrays``, in each
lab's ``judge.py``), and the grader, which finds each case's file by its name (``grader/judge/artifacts.py``).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from util.answers import output_dir

FILES_DIR = "files"
"""Sub-folder of the answers folder that holds the saved files (``<answers>/files/<name>``)."""


def _digest(value: Any) -> str:
    if isinstance(value, (bytes, bytearray)):  # a file a hidden case reads, by its content
        return "sha256:" + hashlib.sha256(bytes(value)).hexdigest()
    raise TypeError(f"a case's spec holds a {type(value).__name__}, which names no file")


def case_file(spec: Mapping[str, Any], suffix: str = ".onnx") -> str:
    """The file name a case with input ``spec`` saves to, e.g. ``case-1f3a...onnx`` (a file the spec holds
    counts by its content)."""
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=_digest)
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


READ_FAILED = ("the file saved for this case is not the .npz of arrays the course saves after your function "
               "returns ({why}); the grader reads numeric arrays only and never unpickles anything: do not write "
               "into the answers folder's files/ yourself, and run the notebook again from the top")
"""The one message every judge gives for saved arrays it cannot read; ``{why}`` says what was found."""
WRONG_NAMES = ("the arrays saved for this case are named {found}; the grader expected exactly {expected}: "
               "return one array for each of these names and no other")
"""The message for readable arrays under other names than the judge expects."""


def read_saved_arrays(data: bytes, expected: Iterable[str] | None = None) -> tuple[dict[str, Any] | None, list[str]]:
    """The arrays a case saved with :func:`save_arrays`, read for a judge: ``(arrays, problems)``.

    ``arrays`` maps each name to a numpy array and ``problems`` is empty; or ``arrays`` is ``None``
    and ``problems`` holds one sentence for the student saying what was expected, what was found and
    what to do. The bytes may be anything (they come from the student's kernel): nothing is unpickled,
    and every entry must be a plain numeric array. With ``expected``, the names must be exactly those.

    A judge uses it as::

        arrays, problems = read_saved_arrays(data, expected=["x"])
        if problems:
            return problems
    """
    arrays, why = _read_npz(bytes(data))
    if arrays is None:
        return None, [READ_FAILED.format(why=why)]
    if expected is not None and set(arrays) != set(expected):
        return None, [WRONG_NAMES.format(found=_listed(arrays), expected=_listed(expected))]
    return arrays, []


def _read_npz(data: bytes) -> tuple[dict[str, Any] | None, str]:
    """The arrays of an ``.npz`` archive, or ``None`` and what is wrong with it."""
    import io

    import numpy as np

    if not data:
        return None, "it is empty"
    if not data.startswith(b"PK"):
        return None, "it is not an .npz (zip) archive"
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as found:
            arrays = {key: found[key] for key in found.files}
    except Exception as exc:  # noqa: BLE001 - zipfile, zlib and numpy raise many kinds on hostile bytes
        # (MemoryError included: a hostile header can declare an array of terabytes)
        if isinstance(exc, ValueError) and "allow_pickle" in str(exc):
            return None, "an array in it holds Python objects"
        return None, f"it cannot be read: {_first_line(exc)}"
    strange = [key for key, value in arrays.items() if not isinstance(value, np.ndarray)]
    if strange:
        return None, f"its entry {strange[0][:40]!r} is not a .npy array"
    return arrays, ""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:120]}" if text else type(exc).__name__


def _listed(names: Iterable[str], most: int = 8) -> str:
    """``['a', 'b']``, sorted, with at most ``most`` names shown."""
    names = sorted(str(name) for name in names)
    shown = ", ".join(repr(name[:40]) for name in names[:most])
    return f"[{shown}{f', ... ({len(names)} in all)' if len(names) > most else ''}]"
