"""The reference answers a submission is judged against: where they are stored and how they are read.

They are produced only by running the solution (``python -m grader regen``, :mod:`grader.author.regen`)
and stored as ``grader/references/<lab>.json``, outside ``util/`` so no graded kernel can read them.
``$COURSE_REFERENCE_DIR`` moves that folder (tests grade their own small labs with it).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from grader import REPO
from util.contract import Lab

REFERENCE_ENV = "COURSE_REFERENCE_DIR"
"""Set to a folder to read and write references there instead of ``grader/references/``."""


def reference_dir() -> Path:
    """The folder holding every lab's reference file."""
    return Path(os.environ.get(REFERENCE_ENV) or REPO / "grader" / "references")


def path_for(lab: Lab) -> Path:
    """The reference file of ``lab``."""
    return reference_dir() / f"{lab.name}.json"


def load(lab: Lab) -> dict[str, Any]:
    """The committed references of ``lab``, with a clear error when they were never generated."""
    path = path_for(lab)
    if not path.exists():
        shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        raise FileNotFoundError(f"{shown} does not exist: run `python -m grader regen --lab {lab.name}`")
    return json.loads(path.read_text(encoding="utf-8"))
