"""Grading submissions: run each notebook, score it, write its results and the class gradebook.

Per submission, ``<out>/<name>/`` gets ``results.json`` (Gradescope's schema), ``answers.json``
(task id -> exported value), ``cases.json`` (what the student's functions returned on the hidden
inputs; for disputes, never shown to students) and ``executed.ipynb``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from grader import artifacts, notebook, references
from grader.results import ANSWER, CheckResult, SubmissionResult, TaskResult
from grader.run import run_notebook
from grader.score import score
from util.answers import write_json
from util.contract import Lab
from util.tasks import get_lab


def _unreadable(path: Path, lab: Lab, message: str) -> SubmissionResult:
    """Every task missing, with the reason: a bad file must not stop the class's grading."""
    tasks = tuple(TaskResult(t.id, t.title, tuple(
        [CheckResult(ANSWER, "missing", 0, t.points, message)]
        + [CheckResult(c.id, "missing", 0, c.points, message, c.hidden) for c in t.cases])) for t in lab.tasks)
    return SubmissionResult(str(path), lab.name, tasks, 0.0, "crash", (message,))


def resolve_lab(path: Path, lab_name: str | None) -> Lab:
    """The lab to grade ``path`` against: ``lab_name`` if given, else the notebook's own metadata."""
    if lab_name:
        return get_lab(lab_name)
    try:
        nb = notebook.read(path)
    except ValueError:  # unreadable: still graded (as 0, with the reason) if its name tells the lab
        nb = None
    found = notebook.lab_name(nb, path)
    if not found:
        raise ValueError(f"{path}: cannot tell which lab this is (no course.lab metadata and the file name "
                         "does not start with labN); pass --lab")
    return get_lab(found)


def grade_submission(path: Path, lab: Lab, out_dir: Path | None = None, *, cell_timeout: int | None = None,
                     notebook_timeout: int | None = None) -> SubmissionResult:
    """Grade one notebook against ``lab``; write its files under ``out_dir`` when given.

    The time limits default to the lab's declared ``cell_timeout`` and ``notebook_timeout``.
    """
    refs = references.load(lab)
    try:
        nb = notebook.read(path)
    except (FileNotFoundError, ValueError) as exc:
        result = _unreadable(path, lab, str(exc))
        if out_dir:
            write_json(out_dir / "results.json", result.to_gradescope_dict())
        return result
    run = run_notebook(nb, lab, cell_timeout=cell_timeout, notebook_timeout=notebook_timeout)
    tasks = score(lab, refs, run.answers, run.cases, run.execution, artifacts.verdicts(lab, run.cases, run.files))
    notes = tuple(e.describe() for e in run.execution.errors if e.task != "hidden")
    if run.execution.status != "completed":
        notes += (run.execution.message,)
    result = SubmissionResult(str(path), lab.name, tasks, run.execution.seconds, run.execution.status, notes)
    if out_dir:
        write_json(out_dir / "results.json", result.to_gradescope_dict())
        write_json(out_dir / "answers.json", run.answers)
        write_json(out_dir / "cases.json", run.cases)
        (out_dir / "executed.ipynb").write_text(notebook.dumps(run.notebook), encoding="utf-8")
        artifacts.save_files(run.files, out_dir / "files")  # the models the grader judged, for disputes
    return result


def find_notebooks(paths: Iterable[Path]) -> list[Path]:
    """Notebooks named directly or found under folders, sorted, checkpoints skipped."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
        else:
            found.append(path)
    return found


def output_names(paths: list[Path]) -> list[str]:
    """A distinct folder name per submission: ``alice__lab1`` when two files share a name."""
    if not paths:
        return []
    stems = [p.stem for p in paths]
    if len(set(stems)) == len(stems):
        return stems
    common = Path(os.path.commonpath([str(p.resolve().parent) for p in paths]))
    return ["__".join(p.resolve().relative_to(common).with_suffix("").parts) for p in paths]


def _grade_one(path: Path, lab_name: str, out_dir: Path, limits: dict) -> SubmissionResult:
    return grade_submission(path, get_lab(lab_name), out_dir, **limits)


def main(*, paths: list[Path], out: Path, lab: str | None = None, feedback: bool = False,
         progress: bool = True, cell_timeout: int | None = None, notebook_timeout: int | None = None,
         jobs: int = 1) -> int:
    """``python -m grader grade``: grade every notebook, print the gradebook, write the files."""
    import sys

    from tqdm import tqdm

    from grader import gradebook

    notebooks = find_notebooks(paths)
    missing = [p for p in notebooks if not p.exists()]
    if missing or not notebooks:
        print("grader: nothing to grade: " + (", ".join(map(str, missing)) + " not found" if missing
                                              else "no .ipynb files under " + ", ".join(map(str, paths))),
              file=sys.stderr)
        return 2
    results, skipped, work = [], [], []
    for name, path in zip(output_names(notebooks), notebooks):
        try:
            work.append((name, path, resolve_lab(path, lab).name))
        except (ValueError, KeyError, FileNotFoundError) as exc:
            skipped.append(f"{path}: {exc}")
    limits = {"cell_timeout": cell_timeout, "notebook_timeout": notebook_timeout}
    bar = tqdm(total=len(work), desc="grading", unit="notebook", disable=not progress, file=sys.stderr)
    if jobs <= 1:
        for name, path, lab_name in work:
            bar.set_postfix_str(name)
            results.append((name, grade_submission(path, get_lab(lab_name), out / name, **limits)))
            bar.update()
    else:  # one kernel per worker; kernels use one thread each (util.setup), so jobs ~ cores
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {pool.submit(_grade_one, path, lab_name, out / name, limits): name
                       for name, path, lab_name in work}
            done = {}
            for future in as_completed(futures):
                done[futures[future]] = future.result()
                bar.update()
        results = [(name, done[name]) for name, _, _ in work]
    bar.close()
    print(gradebook.render(results))
    gradebook.write_csv(out / "gradebook.csv", results)
    if feedback:
        for name, result in results:
            print(f"\n== {name}: {result.score:g}/{result.max_score:g}")
            for note in result.notes:
                print(f"   note: {note}")
            for task in result.tasks:
                print("   " + task.output().replace("\n", "\n   "))
    print(f"\nPer-submission results.json, answers.json and executed notebooks: {out}/<submission>/; "
          f"gradebook: {out / 'gradebook.csv'}")
    for line in skipped:
        print(f"grader: not graded: {line}", file=sys.stderr)
    return 1 if skipped else 0
