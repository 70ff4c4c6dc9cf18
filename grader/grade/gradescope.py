"""Gradescope: build a lab's autograder zip, and the ``run_autograder`` side that grades one submission.

``python -m grader gradescope --lab labN --out build/autograder_labN.zip`` writes a zip with
``setup.sh`` (bubblewrap, g++, cmake, and a Python 3.11 virtual environment at ``/autograder/venv``
with the pinned requirements, or a build that fails saying why: see ``gradescope_setup.sh``),
``run_autograder``, the grader, ``util/`` and the lab's references. It holds no solutions and no
example submissions. The limits given to ``gradescope`` (time, memory, processes, files, output)
are written into ``run_autograder``.

On Gradescope, ``run_autograder`` runs ``/autograder/venv/bin/python -m grader autograde --lab labN``,
which grades the notebook in ``/autograder/submission`` and writes
``/autograder/results/results.json`` (and ``feedback.md`` / ``feedback.html`` beside it). When a
student uploads several notebooks, one is graded (the one named like the lab's notebook, else the
first by name) and the results say which, and why. Nothing a student sees names a path of the
grader's machine. The root ``/autograder`` can be moved with ``$GRADESCOPE_ROOT`` (the tests
simulate the layout in a temporary folder).
"""
from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

from grader import REPO
from grader.core.limits import Limits
from grader.grade.submission import grade_submission, unreadable
from grader.judge import references
from grader.report import feedback
from grader.report.settings import DIAGNOSED, SUMMARY
from util.answers import write_json
from util.contract import Lab

ROOT_ENV = "GRADESCOPE_ROOT"
DEFAULT_ROOT = Path("/autograder")

SETUP = Path(__file__).with_name("gradescope_setup.sh")
"""The zip's ``setup.sh``: a Python 3.11 virtual environment with the pinned requirements, or a loud failure."""

VENV = "/autograder/venv"
"""Where ``setup.sh`` puts the virtual environment ``run_autograder`` grades with."""

RUN = """\
#!/usr/bin/env bash
# Gradescope runs this for every submission (from /autograder, where it copies this script): grade
# $GRADESCOPE_ROOT/submission (default /autograder/submission) into results/results.json, with the
# virtual environment setup.sh made ($PYTHON overrides it, e.g. to test).
set -uo pipefail
ROOT="${{GRADESCOPE_ROOT:-/autograder}}"
cd "$ROOT/source"
PYTHON="${{PYTHON:-{venv}/bin/python}}"
if [ ! -x "$PYTHON" ]; then
    echo "run_autograder: $PYTHON does not exist: setup.sh did not finish; rebuild the autograder" >&2
    exit 1
fi
export PYTHONPATH="$PWD${{PYTHONPATH:+:$PYTHONPATH}}"
exec "$PYTHON" -m grader autograde --lab {lab} {limits}{feedback}
"""


def _package_files() -> list[Path]:
    """What the autograder needs from the repository (relative paths)."""
    files = [Path("requirements.txt")]
    for folder in ("grader", "util"):
        files += sorted(p.relative_to(REPO) for p in (REPO / folder).rglob("*")
                        if p.is_file() and "__pycache__" not in p.parts and p.name != "mistakes.py"
                        and p.relative_to(REPO).parts[:2] not in (("grader", "examples"), ("grader", "references")))
    return files


def limit_flags(limits: Limits) -> str:
    """The ``autograde`` flags that carry every one of ``limits`` (time limits only when set)."""
    flags = [f"--memory {limits.memory}", f"--procs {limits.procs}", f"--fsize {limits.fsize}",
             f"--disk {limits.disk}", f"--max-output {limits.output}", f"--max-notebook-output {limits.notebook_output}",
             f"--max-notebook {limits.notebook_size}",
             f"--max-saved-files {limits.saved_files}", f"--max-saved-file {limits.saved_file}",
             f"--max-saved {limits.saved_total}", f"--keep-saved {limits.kept_saved}"]
    if limits.notebook_timeout:
        flags.append(f"--timeout {limits.notebook_timeout}")
    if limits.cell_timeout:
        flags.append(f"--cell-timeout {limits.cell_timeout}")
    if limits.judge_timeout:
        flags.append(f"--judge-timeout {limits.judge_timeout}")
    return " ".join(flags)


def build(lab: Lab, out: Path, limits: Limits | None = None, student_feedback: str = SUMMARY) -> Path:
    """Write the autograder zip for ``lab`` to ``out``; returns ``out``. With ``student_feedback``
    ``diagnosed``, its ``run_autograder`` adds to the results each task's explained hidden cases, shown by
    Gradescope after the due date (:func:`autograde`)."""
    limits = limits or Limits()
    ref = references.path_for(lab)
    if not ref.exists():
        raise FileNotFoundError(f"{ref} does not exist: run `python -m grader regen --lab {lab.name}` first")
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in (("setup.sh", SETUP.read_text(encoding="utf-8")),
                           ("run_autograder", RUN.format(venv=VENV, lab=lab.name, limits=limit_flags(limits),
                                              feedback=f" --student-feedback {DIAGNOSED}" if student_feedback == DIAGNOSED else ""))):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16  # executable, as Gradescope requires
            archive.writestr(info, text)
        for path in _package_files():
            archive.write(REPO / path, str(path))
        archive.write(ref, str(ref.relative_to(REPO)))
    return out


@dataclass(frozen=True)
class Pick:
    """Which file of a Gradescope submission is graded, and what the student should be told."""

    path: Path
    """The notebook graded (or the submission folder itself when it holds none)."""
    note: str | None
    """Set when the choice needs saying: several notebooks were uploaded."""


def pick_notebook(submission: Path, lab: Lab) -> Pick:
    """The submitted notebook: the lab's own file name if present, else the only (or first by name)
    ``.ipynb``; with none, the folder itself (graded 0, with a message listing what was submitted).
    With several notebooks, the note names them all and the one graded."""
    notebooks = sorted(p for p in submission.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    own_name = Path(lab.notebook).name
    named = [p for p in notebooks if p.name == own_name]
    chosen = (named or notebooks or [submission])[0]
    if len(notebooks) < 2:
        return Pick(chosen, None)
    listed = ", ".join(str(p.relative_to(submission)) for p in notebooks)
    why = f"it is named like the lab's notebook ({own_name})" if named else "it comes first by name"
    return Pick(chosen, f"you uploaded {len(notebooks)} notebooks ({listed}); only "
                        f"{chosen.relative_to(submission)} was graded, because {why}. Upload only the "
                        "notebook you want graded.")


def autograde(lab: Lab, root: Path | None = None, limits: Limits | None = None,
              student_feedback: str = SUMMARY) -> dict:
    """Grade ``<root>/submission`` and write ``<root>/results/results.json``; returns its content. Each task's
    test is the summary, visible at once; with ``student_feedback`` ``diagnosed``, each task with a failed hidden
    case gets a second test, visible after the due date (Gradescope's ``after_due_date``), explaining them
    from the diagnosis (:func:`grader.report.feedback.explained_text`). ``feedback.md`` / ``.html`` stay the
    summary: Gradescope shows results.json, and its due date is Gradescope's to apply."""
    root = Path(root or os.environ.get(ROOT_ENV) or DEFAULT_ROOT)
    submission, results = root / "submission", root / "results"
    results.mkdir(parents=True, exist_ok=True)
    pick = pick_notebook(submission, lab)
    with tempfile.TemporaryDirectory() as scratch:
        try:
            result = grade_submission(pick.path, lab, Path(scratch) / "graded", limits=limits)
        except Exception as exc:  # never leave Gradescope without a results.json
            result = unreadable(pick.path, lab, f"the autograder failed ({type(exc).__name__}: {exc}); "
                                                 "tell your instructors")
        found = feedback.read_diagnosis(Path(scratch) / "graded") if student_feedback == DIAGNOSED else {}
    if pick.note:
        result = replace(result, notes=(pick.note, *result.notes))
    result = feedback.public(result, roots=(submission, root, REPO))
    title = Path(pick.path).name if pick.path != submission else "your submission"
    (results / "feedback.md").write_text(feedback.render(title, result), encoding="utf-8")
    (results / "feedback.html").write_text(feedback.render_html(title, result), encoding="utf-8")
    roots = (submission, root, REPO)
    explained = {t.task_id: feedback.explained_text(t, found, roots) for t in result.tasks} if found else None
    data = result.to_gradescope_dict(explained)
    write_json(results / "results.json", data)
    return data


def main_build(*, lab: Lab, out: Path, limits: Limits, student_feedback: str = SUMMARY) -> int:
    """``python -m grader gradescope``."""
    try:
        path = build(lab, out, limits, student_feedback)
    except FileNotFoundError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 1
    print(f"{path}: Gradescope autograder for {lab.name} ({limits.describe()}; choose a Gradescope machine "
          "with more memory, and an autograder timeout above the notebook's). Upload it as a zip autograder.")
    return 0


def main_autograde(*, lab: Lab, root: Path | None, limits: Limits, student_feedback: str = SUMMARY) -> int:
    """``python -m grader autograde`` (what ``run_autograder`` calls)."""
    data = autograde(lab, root, limits, student_feedback)
    print(f"score {data['score']:g}; results in {(root or os.environ.get(ROOT_ENV) or DEFAULT_ROOT)}/results/")
    return 0
