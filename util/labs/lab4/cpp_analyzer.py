"""Running the Lab 4 C++ analyzer from Python and reading its JSON.

The notebook (and the grader's hidden cases) call one :class:`Analyzer`::

    analyzer = Analyzer("cpp")                       # the C++ project next to the notebook
    analyzer.build()                                 # compile; incremental after the first time
    analyzer(model_path, (1, 3, 224, 224), "weights")  # -> {"tensors": ..., "parameters": ..., "bytes": ...}

The analyzer binary prints one line of JSON with every part (``weights``, ``activations``,
``macs``) and the error of each part that threw; a call returns one part or raises
:class:`AnalyzerError` with that part's error, so a stub in task 4.3 does not cost task 4.1.
Each (model, shape) is run once per build and the JSON is reused for the other parts.
"""
from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

from util.labs.lab4.cpp_build import (
    BuildResult,
    CppBuildError,
    build,
    source_fingerprint,
)

PARTS = ("weights", "activations", "macs")
"""What the analyzer reports, one per C++ task (4.1, 4.2, 4.3)."""
RUN_TIMEOUT = 120
"""Seconds one analyzer run may take."""


class AnalyzerError(RuntimeError):
    """The analyzer ran but did not deliver: it crashed, printed no JSON, or the part threw."""


def parse_output(stdout: str) -> dict[str, Any]:
    """The analyzer's JSON: the last non-empty line of ``stdout`` (debug prints above it are ignored)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise AnalyzerError("the analyzer printed nothing on stdout; it must end by printing its JSON line")
    try:
        data = json.loads(lines[-1])
    except ValueError as exc:
        raise AnalyzerError(f"the analyzer's last line of output is not JSON ({exc}): {lines[-1][:200]!r}. "
                            "Print debugging output to std::cerr, not std::cout") from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict) \
            or not isinstance(data.get("errors"), dict):
        raise AnalyzerError("the analyzer's JSON has no 'results' and 'errors' objects: "
                            "do not change main() in scaffold.cpp")
    return data


def _signal_name(code: int) -> str:
    try:
        return f"signal {-code}, {signal.Signals(-code).name}"
    except ValueError:
        return f"signal {-code}"


class Analyzer:
    """The C++ analyzer in ``source_dir``: builds it on demand and runs it on TorchScript files.

    Calling it builds first when needed (a no-op when nothing changed). A failed build is
    remembered until a source file changes, so the cells after it fail at once with the same
    compiler message instead of recompiling.
    """

    def __init__(self, source_dir: str | Path = "cpp", build_dir: str | Path | None = None) -> None:
        self.source_dir = Path(source_dir).resolve()
        self.build_dir = Path(build_dir).resolve() if build_dir else None
        self._built: tuple[str, BuildResult] | None = None
        self._failed: tuple[str, CppBuildError] | None = None
        self._runs: dict[tuple[str, str, tuple[int, ...]], dict[str, Any]] = {}

    def build(self) -> BuildResult:
        """Compile if any source changed since the last build; raise ``CppBuildError`` if it fails."""
        fingerprint = source_fingerprint(self.source_dir) if self.source_dir.is_dir() else ""
        if self._failed and self._failed[0] == fingerprint:
            raise self._failed[1]
        if self._built and self._built[0] == fingerprint and self._built[1].binary.exists():
            return self._built[1]
        try:
            result = build(self.source_dir, self.build_dir)
        except CppBuildError as exc:
            self._failed = (fingerprint, exc)
            raise
        self._failed, self._built = None, (fingerprint, result)
        self._runs.clear()
        return result

    def run(self, model_path: str | Path, input_shape: tuple[int, ...] | list[int]) -> dict[str, Any]:
        """Every part's result and error for one model: ``{"input_shape", "results", "errors"}``."""
        binary = self.build().binary
        path = Path(model_path).resolve()
        if not path.exists():
            raise FileNotFoundError(f"no TorchScript file at {path}")
        shape = tuple(int(d) for d in input_shape)
        key = (self._built[0], str(path), shape)
        if key not in self._runs:
            command = [str(binary), str(path), ",".join(map(str, shape))]
            try:
                done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT)
            except subprocess.TimeoutExpired:
                raise AnalyzerError(f"the analyzer ran longer than {RUN_TIMEOUT} s on {path.name}") from None
            if done.returncode != 0:
                what = (f"crashed ({_signal_name(done.returncode)})" if done.returncode < 0
                        else f"failed (exit code {done.returncode})")
                tail = "\n".join(done.stderr.strip().splitlines()[-15:])
                raise AnalyzerError(f"the analyzer {what} on {path.name}" + (f":\n{tail}" if tail else ""))
            self._runs[key] = parse_output(done.stdout)
        return self._runs[key]

    def __call__(self, model_path: str | Path, input_shape: tuple[int, ...] | list[int], part: str) -> Any:
        """One part (``weights``, ``activations`` or ``macs``) of the analysis of ``model_path``."""
        if part not in PARTS:
            raise ValueError(f"unknown part {part!r}; the analyzer reports {', '.join(PARTS)}")
        data = self.run(model_path, input_shape)
        if part in data["errors"]:
            raise AnalyzerError(f"{part}: {data['errors'][part]}")
        if part not in data["results"]:
            raise AnalyzerError(f"the analyzer reported nothing for {part!r}")
        return data["results"][part]
