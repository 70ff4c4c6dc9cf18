"""Resumable grading: a submission already graded against the same inputs is not graded again.

Each graded submission keeps a record (:mod:`grader.core.records`) whose ``key`` says what it was
graded under.

The key hashes everything that can change a score:

* ``submission``: everything a submission is: the notebook's bytes and, for a lab with support
  files (a C++ lab's ``cpp/``), every file of those folders next to the notebook (not ``build/``);
* ``references``: the lab's reference file;
* ``grader``: what decides a score: ``util/`` (the declarations and everything the kernel runs),
  the lab's folder and declared modules (its judges included), the grader's comparison and scoring
  modules (``grader/judge/``), and the course's own copy of the lab's support files (``labs/<lab
  folder>/cpp/``). Changes to the rest of ``grader/`` (the command line, the executor) do not
  regrade a class: ``--force`` does; nor do the labs' rubrics (marks are scored when the class's files
  are built, :mod:`grader.mark`);
* ``limits``: the time, memory, process, file-size and output limits.

A rerun skips a submission whose key is unchanged and regrades it when any part changed;
:func:`changes` then lists the tasks whose score moved, with the parts that changed (the regrade diff).
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from grader import REPO
from grader.core.limits import Limits
from grader.core.records import Previous
from grader.core.results import SubmissionResult
from grader.judge import references
from util import labs
from util.contract import Lab

SKIPPED = ("build", "__pycache__", ".ipynb_checkpoints")
"""Folders of a support folder that are not part of a submission (the grader never copies them)."""


def _hash_files(paths: list[Path], root: Path = REPO) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(os.fsencode(path.relative_to(root) if path.is_relative_to(root) else path) + b"\0")  # any name
        try:
            if path.is_file() and not path.is_symlink():
                with open(path, "rb") as handle:  # streamed: a huge notebook is never held in memory
                    for block in iter(lambda: handle.read(1 << 20), b""):
                        digest.update(block)
            else:
                digest.update(b"<missing>")
        except OSError as exc:
            digest.update(f"<unreadable: {exc.__class__.__name__}>".encode())
        digest.update(b"\0")
    return digest.hexdigest()


SCORING_MODULES = ("grader/judge",)
"""The grader-side code that turns exports into points."""


def _folder_files(root: Path) -> list[Path]:
    """Every file under ``root`` (or ``root`` itself), links not followed, build products skipped."""
    if root.is_symlink() or not root.is_dir():
        return [root]
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED)
        out += [Path(folder) / f for f in sorted(files)]
    return out


def course_support(lab: Lab) -> list[Path]:
    """The course's own copy of the lab's support files: ``labs/<the lab's folder>/<support>``."""
    folder = REPO / "labs" / Path(lab.notebook).parent
    return [p for name in lab.support for p in _folder_files(folder / name)]


def submission_files(path: Path, lab: Lab) -> list[Path]:
    """Everything a submission is: the notebook and the lab's support folders next to it."""
    if path.is_dir() and not path.is_symlink():
        return _folder_files(path)
    return [path] + [p for name in lab.support for p in _folder_files(path.parent / name)]


def _code_files(lab: Lab) -> list[Path]:
    files = sorted(p for p in (REPO / "util").rglob("*.py")  # the declarations and everything the kernel runs,
                   if not labs.is_rubric(p.relative_to(REPO)))  # not the rubrics: they mark, after grading
    files += labs.source_files(lab)  # the lab's folder (its judges too) and its shared modules
    for module in SCORING_MODULES:
        files += sorted((REPO / module).rglob("*.py"))
    return files + course_support(lab)


def key(path: Path, lab: Lab | None, limits: Limits) -> dict[str, str]:
    """The key ``path`` is graded under, part by part (see the module's docstring); for a file whose
    lab cannot be told (``lab`` None), only what it is."""
    if lab is None:
        return {"lab": "unknown", "submission": _hash_files(_folder_files(path), path.parent)}
    return {
        "lab": lab.name,
        "submission": _hash_files(submission_files(path, lab), path.parent),
        "references": _hash_files([references.path_for(lab)]),
        "grader": _hash_files(_code_files(lab)),
        "limits": hashlib.sha256(json.dumps(limits.to_dict(), sort_keys=True).encode()).hexdigest(),
    }


def submitted_at(path: Path, lab: Lab | None) -> datetime | None:
    """When ``path`` was submitted: the newest modification time of its files (UTC)."""
    files = submission_files(path, lab) if lab is not None else _folder_files(path)
    times = []
    for file in files:
        try:
            times.append(file.lstat().st_mtime)
        except OSError:
            continue
    return datetime.fromtimestamp(max(times), timezone.utc) if times else None


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
    release: int | None = None
    """The lab release the notebook was built from (:mod:`grader.core.releases`): a loss on a notebook of
    an earlier release after the references changed is a student graded by a rule their handout lacked."""

    def row(self) -> list[Any]:
        """Numbers as numbers (``change`` is negative when points were lost)."""
        def number(value: float) -> int | float:
            return int(value) if float(value).is_integer() else round(value, 2)
        return [self.submission, self.lab, self.release if self.release is not None else "", self.task,
                number(self.old), number(self.new), number(self.new - self.old), self.because]


CHANGE_HEADERS = ["submission", "lab", "release", "task", "old", "new", "change", "because"]


def changes(name: str, previous: Previous, new_key: dict[str, str], result: SubmissionResult) -> list[Change]:
    """Tasks whose score differs between ``previous`` and ``result`` (and the total, as ``total``)."""
    because = ("grader fault before" if previous.retry else ", ".join(changed_parts(previous.key, new_key))
               or "forced regrade")
    old_scores = {t.task_id: t.score for t in previous.result.tasks}
    out = [Change(name, result.lab, t.task_id, old_scores.get(t.task_id, 0.0), t.score, because, result.release)
           for t in result.tasks if old_scores.get(t.task_id) != t.score]
    if out:
        out.append(Change(name, result.lab, "total", previous.result.score, result.score, because, result.release))
    return out
