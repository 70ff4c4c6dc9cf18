"""Building the generated notebooks from the hand-edited solutions.

``solutions/<lab>.ipynb``  ->  ``labs/<lab>.ipynb``            (solution regions become stubs)
                           ->  ``grader/examples/<lab>/*.ipynb`` (one realistic mistake each)

A lab with support files (``Lab.support``, e.g. a ``cpp/`` project) is a folder,
``solutions/<folder>/<lab>.ipynb`` plus its support files: ``labs/<folder>/`` gets the notebook and
the support files with their regions stubbed (C++ stubs compile and throw), and each example
submission is a folder ``grader/examples/<lab>/<mistake>/`` holding ``<mistake>.ipynb`` and the
support files with the mistake applied. Support folders' ``build/`` sub-folders are never copied.

Every notebook the build writes carries the lab's current release (``metadata.course.release``,
:func:`stamp`): the grader grades a submission as its release was graded (:mod:`grader.core.releases`).

Each written question's answer cell is checked in the solution and generated in the students' copy from
the declaration (:mod:`grader.author.answer_cells`): the model answer never leaves ``solutions/``; the
lab's rubrics must match its written questions (:func:`util.rubric.problems`).

A lab's figures (``util/labs/labN/figures.py``, see :mod:`grader.author.figures`) are drawn and
embedded as attachments of the solution's markdown cells, so the build also rewrites the solution
notebook of a lab that has figures, and only those attachments in it.

``--check`` builds in memory and fails when a generated file is stale, a marker is unbalanced or
left behind, a committed notebook carries outputs, a task heading disagrees with the declaration,
or a figure changed without being embedded again, or a handout uses a course-library name its lab's
``surface.py`` does not record (:mod:`grader.author.surface`).
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import nbformat

from grader import REPO
from grader.author import answer_cells, figures, handouts, surface
from grader.author.markers import (
    MarkerError,
    has_markers,
    remove_markers,
    stub_cpp,
    stub_regions,
)
from grader.core import notebook
from util import labs, rubric
from util.contract import Lab, Mistake

SOLUTIONS, LABS, EXAMPLES = REPO / "solutions", REPO / "labs", REPO / "grader" / "examples"
CPP_SUFFIXES = (".cpp", ".cc", ".cxx", ".h", ".hpp")
"""Support files with C++ solution regions (``// ### BEGIN SOLUTION``); others are copied as they are."""
SKIPPED = ("build", "outputs", "__pycache__", ".ipynb_checkpoints")
"""Folder names inside support folders that are build products, never sources."""


def _rel(path: Path) -> Path:
    return path.relative_to(REPO) if path.is_relative_to(REPO) else path


@dataclass(frozen=True)
class BuildOutput:
    path: Path
    text: str


def support_files(lab: Lab, root: Path = SOLUTIONS) -> dict[str, str]:
    """The text of ``lab``'s support files under ``root``: path relative to the notebook's folder -> text."""
    folder = (root / lab.notebook).parent
    found: dict[str, str] = {}
    for name in lab.support:
        path = folder / name
        if not path.exists():
            raise ValueError(f"{_rel(path)} is missing: Lab.support of {lab.name} names it")
        files = [path] if path.is_file() else sorted(
            p for p in path.rglob("*") if p.is_file() and not set(p.relative_to(folder).parts) & set(SKIPPED))
        for file in files:
            found[file.relative_to(folder).as_posix()] = file.read_text(encoding="utf-8")
    return found


def example_path(lab: Lab, mistake: Mistake) -> Path:
    """Where the example notebook for ``mistake`` is generated (inside its own folder for folder labs)."""
    if lab.support:
        return EXAMPLES / lab.name / mistake.name / f"{mistake.name}.ipynb"
    return EXAMPLES / lab.name / f"{mistake.name}.ipynb"


def _stub_support(lab: Lab, relative: str, text: str) -> str:
    where = f"{Path(lab.notebook).parent.as_posix()}/{relative}"
    if relative.endswith(CPP_SUFFIXES):
        return stub_cpp(text, {t.id: t.title for t in lab.tasks}, where)
    if has_markers(text):
        raise MarkerError(f"{where}: solution markers in a file that is not C++ (only .cpp/.h files may have them)")
    return text


def mistakes(lab: Lab) -> tuple[Mistake, ...]:
    """The example submissions declared in ``lab``'s ``mistakes.py`` (may be none)."""
    module = labs.part(lab, "mistakes")
    return tuple(module.MISTAKES) if module is not None else ()


EVERY_RUN = 2
"""How many of each lab's example submissions (its first declared mistakes) CI's main job grades and the default test
run checks against their declared scores. The whole class (97 submissions, 27 minutes on a quiet 2-core machine) is
graded by the README's "Grade the example class" and checked by ``python -m pytest -m slow``: CI's run grew past its
90 minutes with every example graded on every run."""


def every_run(lab: Lab) -> tuple[Mistake, ...]:
    """``lab``'s examples graded on every CI run: its first :data:`EVERY_RUN` mistakes (a lab declares first the
    examples other tests read from CI's gradebook by name)."""
    return mistakes(lab)[:EVERY_RUN]


def every_run_paths() -> list[Path]:
    """What CI's main job grades (``.ci/run`` step 2): each lab's :func:`every_run` examples, as the grader takes them
    (a folder lab's submission is its folder)."""
    paths = []
    for lab in labs.LABS.values():
        for mistake in every_run(lab):
            path = example_path(lab, mistake)
            paths.append(path.parent if lab.support else path)
    return paths


def validate_solution(lab: Lab, nb: nbformat.NotebookNode) -> list[str]:
    """Problems with the solution notebook itself."""
    problems = []
    where = f"solutions/{lab.notebook}"
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count")):
            problems.append(f"{where}: cell {index} has outputs; clear them before committing "
                            "(python -m grader build --clean-solutions)")
            break
    if notebook.metadata_lab(nb) != lab.name:
        problems.append(f"{where}: its metadata names lab {notebook.metadata_lab(nb)!r}; set "
                        f'"course": {{"lab": "{lab.name}"}} in the notebook\'s metadata (the grader tells a '
                        "submission's lab by it, and the generated copies inherit it)")
    found = notebook.headings(nb)
    ids = [h[0] for h in found.values()]
    for task in lab.tasks:
        matches = [h for h in found.values() if h[0] == task.id]
        if len(matches) != 1:
            problems.append(f"{where}: expected one heading '## Task {task.id}: ...', found {len(matches)}")
            continue
        _, title, points = matches[0]
        if title != task.title or float(points) != task.max_points:
            problems.append(f"{where}: heading says 'Task {task.id}: {title} ({points} points)' but the "
                            f"declaration says '{task.title} ({task.max_points:g} points)'")
    declared = {t.id for t in lab.tasks}
    problems += [f"{where}: heading for undeclared task {i}" for i in ids if i not in declared]
    text = "\n".join(cell.source for cell in nb.cells)
    problems += [f"{where}: release {r.number}'s marker {r.marker!r} is not in the notebook (Release.marker must be "
                 "text every handout from that release on holds: it tells an unstamped notebook's release)"
                 for r in lab.releases if r.marker and r.marker not in text]
    problems += answer_cells.problems(lab, nb, where)
    problems += rubric.problems(lab, labs.rubrics(lab))
    return problems


def stamp(lab: Lab, nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Write the lab's current release into ``nb``'s metadata (``course.release``), where the grader reads
    which release a submission was built from (:mod:`grader.core.releases`)."""
    nb.metadata.setdefault("course", {})["release"] = lab.release
    return nb


def student_copy(lab: Lab, nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The lab as students get it: stubs for solution regions, no outputs, the course kernel's metadata."""
    nb = notebook.strip_outputs(copy.deepcopy(nb))
    nb.metadata.update(copy.deepcopy(notebook.KERNEL_METADATA))  # opening it in JupyterLab changes nothing
    stamp(lab, nb)
    titles = {t.id: t.title for t in lab.tasks}
    for index, (cell, task_id) in enumerate(zip(nb.cells, notebook.cell_tasks(nb))):
        if cell.cell_type == "code":
            cell.source = stub_regions(cell.source, task_id, titles.get(task_id), f"{lab.notebook} cell {index}")
        elif has_markers(cell.source):
            raise MarkerError(f"{lab.notebook} cell {index}: solution markers in a {cell.cell_type} cell")
    return answer_cells.for_students(lab, nb)


def example_copy(lab: Lab, nb: nbformat.NotebookNode, mistake: Mistake,
                 support: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """The solution with ``mistake`` applied and the markers removed, as a student would submit it.

    ``support`` (relative path -> text, see :func:`support_files`) is edited in place the same way:
    a replacement must occur exactly once in the notebook's code cells and those files together.
    """
    nb = answer_cells.for_examples(lab, stamp(lab, notebook.strip_outputs(copy.deepcopy(nb))))
    code = [c for c in nb.cells if c.cell_type == "code"]
    support = {} if support is None else support
    for old, new in mistake.replacements:
        hits = [c for c in code if old in c.source]
        files = [name for name, text in support.items() if old in text]
        total = sum(c.source.count(old) for c in hits) + sum(support[name].count(old) for name in files)
        if total != 1:
            raise ValueError(f"example {lab.name}/{mistake.name}: {old[:50]!r} occurs {total} times in "
                             f"solutions/{lab.notebook}" + (" and its support files" if lab.support else "")
                             + "; it must occur exactly once")
        if hits:
            hits[0].source = hits[0].source.replace(old, new)
        else:
            support[files[0]] = support[files[0]].replace(old, new)
    for index, cell in enumerate(code):
        cell.source = remove_markers(cell.source, f"{mistake.name} cell {index}")
    for name, text in support.items():
        support[name] = remove_markers(text, f"{mistake.name}/{name}", "cpp" if name.endswith(CPP_SUFFIXES) else "python")
    return nb


def outputs(lab: Lab) -> list[BuildOutput]:
    """Every file the build writes for ``lab``, in memory."""
    nb = notebook.read(SOLUTIONS / lab.notebook)
    problems = validate_solution(lab, nb)
    problems += figures.embed(lab, nb, f"solutions/{lab.notebook}")
    if problems:
        raise ValueError("\n".join(problems))
    out = [BuildOutput(SOLUTIONS / lab.notebook, notebook.dumps(nb))] if figures.lab_figures(lab) else []
    out.append(BuildOutput(LABS / lab.notebook, notebook.dumps(student_copy(lab, nb))))
    support = support_files(lab)
    folder = (LABS / lab.notebook).parent
    out += [BuildOutput(folder / name, _stub_support(lab, name, text)) for name, text in support.items()]
    for mistake in mistakes(lab):
        files = dict(support)
        path = example_path(lab, mistake)
        out.append(BuildOutput(path, notebook.dumps(example_copy(lab, nb, mistake, files))))
        out += [BuildOutput(path.parent / name, text) for name, text in files.items()]
    return out


def build(lab: Lab) -> list[Path]:
    """Write the generated files of ``lab``; return the paths that changed."""
    return _write(outputs(lab))


def check(lab: Lab) -> list[str]:
    """Why the committed generated files of ``lab`` are not what the build would write (empty if fresh)."""
    try:
        items = outputs(lab)
    except (ValueError, MarkerError) as exc:
        return [str(exc)]
    problems = []
    for item in items:
        rel = _rel(item.path)
        if not item.path.exists():
            problems.append(f"{rel} is missing: run `python -m grader build`")
        elif item.path.read_text(encoding="utf-8") != item.text:
            problems.append(f"{rel} is stale: run `python -m grader build`")
        elif not item.path.is_relative_to(SOLUTIONS) and has_markers(item.path.read_text(encoding="utf-8")):
            problems.append(f"{rel} still contains a solution marker")
    problems += unrecorded_names(lab, items)
    expected = {item.path for item in items}
    folder = EXAMPLES / lab.name
    if folder.is_dir():
        problems += [f"{_rel(p)} is not declared in {_rel(labs.folder(lab) / 'mistakes.py')}; delete it"
                     for p in sorted(folder.glob("*.ipynb")) if p not in expected]
        if lab.support:
            declared = {path.parent for path in expected}
            problems += [f"{_rel(p)} is not declared in {_rel(labs.folder(lab) / 'mistakes.py')}; delete it"
                         for p in sorted(folder.iterdir()) if p.is_dir() and p not in declared]
    folders = {(LABS / lab.notebook).parent} | {example_path(lab, m).parent for m in mistakes(lab)}
    for generated in sorted(folders) if lab.support else ():
        stale = [p for p in generated.rglob("*") if p.is_file() and p not in expected
                 and not set(p.relative_to(generated).parts) & set(SKIPPED)]
        problems += [f"{_rel(p)} is not generated from solutions/; delete it" for p in sorted(stale)]
    return problems


def unrecorded_names(lab: Lab, items: list[BuildOutput]) -> list[str]:
    """A problem for each course-library name the handout among ``items`` uses that ``lab``'s surface does
    not record: once released, a name must keep resolving, so it must be written down first."""
    names: set[str] = set()
    for item in items:
        if item.path.is_relative_to(LABS):
            names |= (surface.notebook_names(json.loads(item.text)) if item.path.suffix == ".ipynb"
                      else surface.text_names(item.text))
    where = _rel(labs.folder(lab) / "surface.py")
    return [f"labs/{lab.notebook} uses {name}, which {where} does not record: add its current place to NAMES "
            "(a name a released handout uses must keep resolving)" for name in surface.unrecorded(lab, names)]


def course_outputs() -> list[BuildOutput]:
    """Files the build writes for the whole course: ``labs/README.md`` (see :mod:`grader.author.handouts`)."""
    return [BuildOutput(handouts.LABS_README, handouts.labs_readme())]


def _write(items: list[BuildOutput]) -> list[Path]:
    changed = []
    for item in items:
        if not item.path.exists() or item.path.read_text(encoding="utf-8") != item.text:
            item.path.parent.mkdir(parents=True, exist_ok=True)
            item.path.write_text(item.text, encoding="utf-8")
            changed.append(item.path)
    return changed


def clean_solution(lab: Lab) -> bool:
    """Strip outputs from the solution notebook in place; True if it changed."""
    path = SOLUTIONS / lab.notebook
    before = path.read_text(encoding="utf-8")
    after = notebook.dumps(notebook.strip_outputs(notebook.read(path)))
    if after != before:
        path.write_text(after, encoding="utf-8")
    return after != before


def main(*, labs: list[Lab], check_only: bool = False, clean_solutions: bool = False) -> int:
    """``python -m grader build``: write (or with ``check_only`` verify) the generated notebooks."""
    import sys

    if clean_solutions:
        for lab in labs:
            if clean_solution(lab):
                print(f"cleared outputs in solutions/{lab.notebook}")
    if check_only:
        problems = [p for lab in labs for p in check(lab)]
        problems += [f"{_rel(item.path)} is stale: run `python -m grader build`" for item in course_outputs()
                     if not item.path.exists() or item.path.read_text(encoding="utf-8") != item.text]
        for problem in problems:
            print(f"build --check: {problem}", file=sys.stderr)
        if not problems:
            print(f"build --check: {', '.join(lab.name for lab in labs)} up to date")
        return 1 if problems else 0
    status = 0
    for lab in labs:
        try:
            changed = build(lab)
        except (ValueError, MarkerError) as exc:
            print(f"build: {lab.name}: {exc}", file=sys.stderr)
            status = 1
            continue
        for path in changed:
            print(f"wrote {_rel(path)}")
        if not changed:
            print(f"{lab.name}: up to date")
    for path in _write(course_outputs()):
        print(f"wrote {_rel(path)}")
    return status


if __name__ == "__main__":  # python -m grader.author.build: the paths .ci/run grades, one a line
    for found in every_run_paths():
        print(found.relative_to(REPO).as_posix())
