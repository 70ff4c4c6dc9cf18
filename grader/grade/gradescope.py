"""Gradescope: build a lab's autograder zip, and the ``run_autograder`` side that grades one submission.

``python -m grader gradescope --lab labN --out build/autograder_labN.zip`` writes a zip with
``setup.sh`` (installs bubblewrap and the pinned Python packages), ``run_autograder``, the grader,
``util/`` and the lab's references. It holds no solutions and no example submissions.

On Gradescope, ``run_autograder`` runs ``python3 -m grader autograde --lab labN``, which grades the
notebook in ``/autograder/submission`` and writes ``/autograder/results/results.json``. The root
``/autograder`` can be moved with ``$GRADESCOPE_ROOT`` (the tests simulate the layout in a
temporary folder).
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from grader import REPO
from grader.execute.limits import Limits, format_size
from grader.grade.submission import _unreadable, grade_submission
from grader.judge import references
from util import labs
from util.answers import write_json
from util.contract import Lab

ROOT_ENV = "GRADESCOPE_ROOT"
DEFAULT_ROOT = Path("/autograder")

SETUP = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, when the autograder image is built.
set -euo pipefail
cd /autograder/source
apt-get update
apt-get install -y --no-install-recommends bubblewrap g++ cmake
python3 -m pip install --no-cache-dir -r requirements.txt
"""

RUN = """\
#!/usr/bin/env bash
# Gradescope runs this for every submission: grade /autograder/submission into
# /autograder/results/results.json (set GRADESCOPE_ROOT to move /autograder, e.g. to test).
set -uo pipefail
cd "$(dirname "$0")"
export PYTHONPATH="$PWD${{PYTHONPATH:+:$PYTHONPATH}}"
exec "${{PYTHON:-python3}}" -m grader autograde --lab {lab} --memory {memory} --procs {procs} --fsize {fsize}
"""


def _package_files() -> list[Path]:
    """What the autograder needs from the repository (relative paths)."""
    files = [Path("requirements.txt")]
    for folder in ("grader", "util"):
        files += sorted(p.relative_to(REPO) for p in (REPO / folder).rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts and p.name != "mistakes.py"
                        and p.relative_to(REPO).parts[:2] not in (("grader", "examples"), ("grader", "references")))
    return files


def build(lab: Lab, out: Path, limits: Limits | None = None) -> Path:
    """Write the autograder zip for ``lab`` to ``out``; returns ``out``."""
    limits = limits or Limits()
    ref = references.path_for(lab)
    if not ref.exists():
        raise FileNotFoundError(f"{ref} does not exist: run `python -m grader regen --lab {lab.name}` first")
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in (("setup.sh", SETUP), ("run_autograder", RUN.format(
                lab=lab.name, memory=limits.memory, procs=limits.procs, fsize=limits.fsize))):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16  # executable, as Gradescope requires
            archive.writestr(info, text)
        for path in _package_files():
            archive.write(REPO / path, str(path))
        archive.write(ref, str(ref.relative_to(REPO)))
    return out


def _pick_notebook(submission: Path, lab: Lab) -> Path:
    """The submitted notebook: the lab's own file name if present, else the only (or first) .ipynb.
    With none, the folder itself (graded 0, with a message listing what was submitted)."""
    notebooks = sorted(p for p in submission.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    named = [p for p in notebooks if p.name == lab.notebook]
    return (named or notebooks or [submission])[0]


def autograde(lab: Lab, root: Path | None = None, limits: Limits | None = None) -> dict:
    """Grade ``<root>/submission`` and write ``<root>/results/results.json``; returns its content."""
    root = Path(root or os.environ.get(ROOT_ENV) or DEFAULT_ROOT)
    submission, results = root / "submission", root / "results"
    results.mkdir(parents=True, exist_ok=True)
    path = _pick_notebook(submission, lab)
    with tempfile.TemporaryDirectory() as scratch:
        try:
            result = grade_submission(path, lab, Path(scratch) / "graded", limits=limits)
        except Exception as exc:  # never leave Gradescope without a results.json
            result = _unreadable(path, lab, f"the autograder failed ({type(exc).__name__}: {exc}); "
                                            "tell your instructors")
        data = result.to_gradescope_dict()
        feedback = Path(scratch) / "graded" / "feedback.md"
        if feedback.exists():
            shutil.copy(feedback, results / "feedback.md")
    write_json(results / "results.json", data)
    return data


def main_build(*, lab: Lab, out: Path, limits: Limits) -> int:
    """``python -m grader gradescope``."""
    try:
        path = build(lab, out, limits)
    except FileNotFoundError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 1
    print(f"{path}: Gradescope autograder for {lab.name} (memory {format_size(limits.memory)} per "
          "submission; choose a Gradescope machine with more). Upload it as a zip autograder.")
    return 0


def main_autograde(*, lab: Lab, root: Path | None, limits: Limits) -> int:
    """``python -m grader autograde`` (what ``run_autograder`` calls)."""
    data = autograde(lab, root, limits)
    print(f"score {data['score']:g}; results in {(root or os.environ.get(ROOT_ENV) or DEFAULT_ROOT)}/results/")
    return 0
