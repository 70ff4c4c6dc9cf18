"""The reference answers a submission is judged against: where they are stored and how they are read.

They are produced only by running the solution (``python -m grader regen``, :mod:`grader.author.regen`)
and stored as ``grader/references/<lab>.json``, outside ``util/`` so no graded kernel can read them.
``$COURSE_REFERENCE_DIR`` moves that folder (tests grade their own small labs with it). A term with a secret of
its own (``--term FILE``, :func:`util.hidden.use_term`) has references of its own, made by ``python -m grader regen
--term FILE`` and kept beside the secret, in ``references-<fingerprint>/`` (the fingerprint names the secret without
revealing it), never in the course's repository.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from grader import REPO
from util.contract import Lab
from util.hidden import TERM_ENV, term_fingerprint, term_secret

REFERENCE_ENV = "COURSE_REFERENCE_DIR"
"""Set to a folder to read and write references there instead of ``grader/references/``."""


def reference_dir() -> Path:
    """The folder holding every lab's reference file: ``$COURSE_REFERENCE_DIR``, else this term's (beside its
    secret), else the course's own."""
    if os.environ.get(REFERENCE_ENV):
        return Path(os.environ[REFERENCE_ENV])
    secret = term_secret()
    if secret is not None:
        return Path(os.environ[TERM_ENV]).parent / f"references-{term_fingerprint(secret)}"
    return REPO / "grader" / "references"


def path_for(lab: Lab) -> Path:
    """The reference file of ``lab``."""
    return reference_dir() / f"{lab.name}.json"


def load(lab: Lab) -> dict[str, Any]:
    """The committed references of ``lab``, with a clear error when they were never generated."""
    path = path_for(lab)
    if not path.exists():
        shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        term = f" --term {os.environ[TERM_ENV]}" if os.environ.get(TERM_ENV) else ""
        raise FileNotFoundError(f"{shown} does not exist: run `python -m grader regen --lab {lab.name}{term}`")
    return json.loads(path.read_text(encoding="utf-8"))
