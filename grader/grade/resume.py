"""Resumable grading: a submission already graded against the same inputs is not graded again.

Each graded submission's folder gets ``grading.json``, written last (so its presence means the
other files are complete): the result and the *key* it was graded under. The key hashes
everything that can change a score:

* ``notebook``: the submitted file's bytes;
* ``references``: the lab's reference file;
* ``grader``: what decides a score: ``util/`` (the declarations and everything the kernel runs),
  the lab's folder and declared modules (its judges included), the grader's comparison and scoring
  modules (``grader/judge/``), and the support folders the lab copies next to the notebook. Changes to
  the rest of ``grader/`` (the command line, the executor) do not regrade a class: ``--force`` does;
* ``limits``: the time, memory, process, file-size and output limits.

A rerun skips a submission whose key is unchanged and regrades it when any part changed;
:func:`changes` then lists the tasks whose score moved, with the parts that changed (the regrade diff).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import REPO
from grader.execute.limits import Limits
from grader.judge import references
from grader.report.results import SubmissionResult
from util import labs
from util.answers import write_json
from util.contract import Lab

RECORD = "grading.json"
"""File name of the record in each submission's result folder."""


def _hash_files(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(REPO) if path.is_relative_to(REPO) else path).encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"<missing>")
        digest.update(b"\0")
    return digest.hexdigest()


SCORING_MODULES = ("grader/judge",)
"""The grader-side code that turns exports into points."""


def _code_files(lab: Lab) -> list[Path]:
    files = sorted((REPO / "util").rglob("*.py"))  # the declarations and everything the kernel runs
    files += labs.source_files(lab)  # the lab's folder (its judges too) and its shared modules
    for module in SCORING_MODULES:
        files += sorted((REPO / module).rglob("*.py"))
    for folder in getattr(lab, "support", ()) or ():  # folders a lab copies next to the notebook
        root = Path(folder) if Path(folder).is_absolute() else REPO / folder
        files += sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
    return files


def key(path: Path, lab: Lab, limits: Limits) -> dict[str, str]:
    """The key ``path`` is graded under, part by part (see the module's docstring)."""
    try:
        notebook = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        notebook = f"unreadable: {exc.__class__.__name__}"
    return {
        "lab": lab.name,
        "notebook": notebook,
        "references": _hash_files([references.path_for(lab)]),
        "grader": _hash_files(_code_files(lab)),
        "limits": hashlib.sha256(json.dumps(limits.to_dict(), sort_keys=True).encode()).hexdigest(),
    }


@dataclass(frozen=True)
class Previous:
    """What an earlier run stored for a submission."""

    key: dict[str, str]
    result: SubmissionResult


def load(folder: Path) -> Previous | None:
    """The stored record in ``folder``, or ``None`` if there is none (or it cannot be read)."""
    try:
        data = json.loads((folder / RECORD).read_text(encoding="utf-8"))
        return Previous(data["key"], SubmissionResult.from_dict(data["result"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save(folder: Path, grading_key: dict[str, str], result: SubmissionResult) -> None:
    """Store the record (call after every other result file is written)."""
    write_json(folder / RECORD, {"key": grading_key, "result": result.to_dict()})


def changed_parts(old: dict[str, str], new: dict[str, str]) -> list[str]:
    """Which parts of the key differ, e.g. ``["references"]``."""
    return [part for part in new if old.get(part) != new[part]]


@dataclass(frozen=True)
class Change:
    """One task whose score changed on a regrade."""

    submission: str
    lab: str
    task: str
    old: float
    new: float
    because: str
    """The key parts that changed, e.g. ``references`` or ``notebook, grader``."""

    def row(self) -> list[Any]:
        return [self.submission, self.lab, self.task, f"{self.old:g}", f"{self.new:g}",
                f"{self.new - self.old:+g}", self.because]


CHANGE_HEADERS = ["submission", "lab", "task", "old", "new", "change", "because"]


def changes(name: str, previous: Previous, new_key: dict[str, str], result: SubmissionResult) -> list[Change]:
    """Tasks whose score differs between ``previous`` and ``result`` (and the total, as ``total``)."""
    because = ", ".join(changed_parts(previous.key, new_key)) or "forced regrade"
    old_scores = {t.task_id: t.score for t in previous.result.tasks}
    out = [Change(name, result.lab, t.task_id, old_scores.get(t.task_id, 0.0), t.score, because)
           for t in result.tasks if old_scores.get(t.task_id) != t.score]
    if out:
        out.append(Change(name, result.lab, "total", previous.result.score, result.score, because))
    return out
