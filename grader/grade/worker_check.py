"""What a cluster worker must have to grade like the instructor's machine, and the check that refuses one that does not.

A worker grades with its own copy of the course, so before it is given a submission its copy is
compared with the instructor's (the grader's process), part by part:

* ``python``: the same Python (major.minor);
* ``versions``: every package pinned in ``requirements.txt`` at the same installed version (torch
  and onnxruntime decide numbers; dask and distributed must speak the same protocol);
* ``code``: the same course code, file by file (``grader/``, ``util/``, and each graded lab's folder
  and shared modules): the same commit;
* ``references``: the same reference file for each lab graded, by SHA-256;
* ``sandbox``: bubblewrap usable there, unless the class is graded with ``--no-sandbox``.

:func:`problems` says what differs in an instructor's words; a worker with any problem is refused
and never given a submission (:mod:`grader.grade.cluster`).
"""
from __future__ import annotations

import hashlib
import platform
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from grader import REPO
from grader.execute import confinement
from grader.judge import references
from util import labs

REQUIREMENTS = REPO / "requirements.txt"


@dataclass(frozen=True)
class Facts:
    """One machine's copy of the course, as far as grading depends on it."""

    python: str
    """``major.minor``, e.g. ``3.11``."""
    versions: dict[str, str]
    """Pinned package -> installed version (``missing`` when not installed)."""
    code: dict[str, str]
    """Course source file (relative path) -> SHA-256."""
    references: dict[str, str]
    """Lab -> SHA-256 of its reference file (``missing`` when there is none)."""
    sandbox: str | None
    """``None`` when bubblewrap works there, else why not."""


def pinned_packages(requirements: Path = REQUIREMENTS) -> list[str]:
    """The package names ``requirements.txt`` pins (``name==version`` lines)."""
    names = []
    for line in requirements.read_text(encoding="utf-8").splitlines():
        match = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*==", line)
        if match:
            names.append(match.group(1))
    return names


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _code(lab_names: list[str]) -> dict[str, str]:
    files = {p.relative_to(REPO).as_posix(): p for folder in ("grader", "util")
             for p in (REPO / folder).rglob("*.py") if "__pycache__" not in p.parts}
    for name in lab_names:  # a lab outside the repository (a test lab) is named by its folder
        lab = labs.get_lab(name)
        root = labs.folder(lab)
        for path in labs.source_files(lab):
            key = (path.relative_to(REPO) if path.is_relative_to(REPO) else
                   Path(name) / path.relative_to(root)).as_posix()
            files[key] = path
    return {key: _sha256(path) for key, path in sorted(files.items())}


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "missing"


def facts(lab_names: list[str], packages: list[str], *, sandbox: bool) -> Facts:
    """This machine's facts for grading ``lab_names`` (bubblewrap probed only when ``sandbox``)."""
    refs = {}
    for name in lab_names:
        try:
            path = references.path_for(labs.get_lab(name))
            refs[name] = _sha256(path) if path.is_file() else "missing"
        except KeyError:
            refs[name] = "unknown lab"
    try:
        code = _code(lab_names)
    except KeyError as exc:  # a lab this copy of the course does not have
        code = {"<labs>": str(exc)}
    return Facts(python=".".join(platform.python_version_tuple()[:2]),
                 versions={p: _version(p) for p in packages}, code=code, references=refs,
                 sandbox=confinement.unavailable_reason() if sandbox else None)


def problems(expected: Facts, found: Facts) -> list[str]:
    """What differs between the instructor's ``expected`` facts and a worker's ``found`` ones, one
    phrase each (empty: the worker grades exactly as the instructor's machine would)."""
    out = []
    if found.python != expected.python:
        out.append(f"Python {found.python} (the grader: {expected.python})")
    versions = [f"{p} {found.versions.get(p, 'missing')} (the grader: {v})"
                for p, v in expected.versions.items() if found.versions.get(p) != v]
    if versions:
        out.append("other package versions: " + ", ".join(versions))
    for lab, digest in expected.references.items():
        there = found.references.get(lab, "missing")
        if there != digest:
            out.append(f"no references for {lab}" if there in ("missing", "unknown lab") else
                       f"different references for {lab} (sha256 {there[:12]}, the grader's {digest[:12]}: "
                       "stale or edited)")
    differ = sorted(f for f in set(expected.code) | set(found.code) if expected.code.get(f) != found.code.get(f))
    if differ:
        out.append("different course code (another commit?): " + ", ".join(differ[:4])
                   + (f" and {len(differ) - 4} more files" if len(differ) > 4 else ""))
    if found.sandbox is not None:
        out.append(f"no usable bubblewrap{found.sandbox}")
    return out


def remedy(found_problems: list[str]) -> str:
    """What to do about a refused worker."""
    text = ("install the course there from the grader's commit (docker/setup.sh, or the grader image) with the "
            "same grader/references/, then restart the worker")
    if any(p.startswith("no usable bubblewrap") for p in found_problems):
        text += ("; for bubblewrap: apt-get install bubblewrap and allow user namespaces (or grade with "
                 "--no-sandbox, without isolation)")
    return text


def check_here(expected: Facts, lab_names: list[str], sandbox: bool) -> list[str]:
    """Run on a worker (``client.run``): its problems against ``expected``."""
    return problems(expected, facts(lab_names, list(expected.versions), sandbox=sandbox))
