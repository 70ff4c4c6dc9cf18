"""The course's labs, one folder each: this registry finds them; nothing outside a lab folder names a lab.

A lab is a package ``util/labs/labN/`` holding everything that belongs to it alone:

* ``tasks.py``: ``LAB``, the one declaration of its tasks (:class:`util.contract.Lab`), each stating what its
  hidden cases are worth but not what they are;
* ``cases.py``: ``CASES``, its hidden cases (task id -> :class:`util.contract.Case` s), and ``cases_data/`` for
  any file a case reads: grader-only, attached to ``LAB`` here wherever they can be read (:meth:`Lab.with_cases`);
* ``public_checks.py``: what ``check("N.M")`` tests (:class:`util.contract.Check`);
* ``judge.py``: grader-side checks of the files its hidden cases save (``Task.grader_check``), if any,
  and ``judge_*.py`` helpers only they use;
* ``mistakes.py``: ``MISTAKES``, its example submissions (:class:`util.contract.Mistake`);
* ``rubrics.py``: ``RUBRICS``, how its written questions are marked (:mod:`util.rubric`), if it asks any;
* ``surface.py``: what its released handouts import from the course library (``NAMES``) and the names
  that have moved since (``MOVED``, old place -> new place), collected in :data:`MOVED` so that an old
  name keeps resolving (:mod:`util.moved`);
* helpers only it uses.

The hidden cases, the judges, the mistakes and the rubrics are grader-only (:data:`GRADER_ONLY`): graded
kernels do not see them and the student copies leave them out; a kernel receives a case's input only when the
grader runs it (:mod:`util.hidden`), and a judge process sees its lab's judges only.

Adding ``util/labs/labN/`` (and ``solutions/labN_*.ipynb``) is all it takes for the course, the
grader and the tests to pick a lab up. ``$COURSE_LAB_DIRS`` (folders separated by ``os.pathsep``)
adds folders holding more ``labN/`` packages, imported as top-level packages: tests use it to grade
small labs of their own, in worker processes and sandboxed kernels too.
"""
from __future__ import annotations

import ast
import fnmatch
import functools
import importlib
import json
import os
import re
import sys
from pathlib import Path
from types import ModuleType

from util.contract import Lab, Task

HERE = Path(__file__).resolve().parent
LAB_DIRS_ENV = "COURSE_LAB_DIRS"
"""Extra folders of lab packages (for tests), separated by ``os.pathsep``."""
GRADER_ONLY = ("mistakes.py", "judge*", "cases*", "rubric*")
"""Files (and folders) of a lab folder that graded kernels never see and students never get: the
mistakes quote the solution, a judge may hold a reference implementation of what a task asks
(a course emulator, a float64 fold), the hidden cases (``cases.py``, ``cases_data/``) are the inputs
the notebook never shows, and a rubric says what a written answer must contain. Glob patterns on the
file or folder name."""
RUBRICS = "rubric*"
"""The :data:`GRADER_ONLY` pattern of a lab's rubrics (``rubrics.py``): read by the marking tools and the
class's reports only; no judge process sees them, and editing one regrades nothing (points come from the
rubric when the class's files are built)."""
_NAME = re.compile(r"lab(\d+)")


def extra_dirs() -> list[Path]:
    """The folders named by ``$COURSE_LAB_DIRS`` that exist."""
    return [Path(p).resolve() for p in os.environ.get(LAB_DIRS_ENV, "").split(os.pathsep) if p and Path(p).is_dir()]


class LabClash(ValueError):
    """Two lab folders take one lab number (a zero-padded number counts as the same)."""


def _packages() -> dict[str, str]:
    """Lab name -> importable package name, in course order (by number).

    Raises :class:`LabClash` when two folders take one number: the course's own (``util/labs/``)
    and an extra folder's (a test lab, ``$COURSE_LAB_DIRS``) above all, which in-process would
    otherwise shadow the course's lab and in a spawned worker fail later and further away. Test
    labs are numbered from 900, outside any course's range (``tests/tinylab.py``)."""
    found: dict[int, tuple[str, Path]] = {}
    for root in [HERE, *extra_dirs()]:
        for sub in sorted(root.iterdir()):
            match = _NAME.fullmatch(sub.name)
            if not match or not (sub / "tasks.py").is_file():
                continue
            number = int(match.group(1))
            if number in found:
                kind = "a course lab" if found[number][1].parent == HERE else "another lab"
                raise LabClash(f"two labs take number {number}: {sub} and {found[number][1]} ({kind}); "
                               f"give the one in {root} a number no other lab folder has"
                               + (" (test labs are numbered from 900)" if root != HERE else ""))
            found[number] = (f"util.labs.{sub.name}" if root == HERE else sub.name, sub)
        if root != HERE and str(root) not in sys.path:
            sys.path.append(str(root))
    return {path.name: package for _, (package, path) in sorted(found.items())}


PACKAGES: dict[str, str] = _packages()
"""Lab name -> the package that holds it (``util.labs.labN``)."""


def _with_cases(package: str) -> Lab:
    """The lab declared in ``package.tasks``, with the hidden cases of ``package.cases`` attached where that
    grader-only module can be read (the grader); without them elsewhere (the students' copy has no such file,
    and a graded kernel reads it as empty)."""
    lab = importlib.import_module(f"{package}.tasks").LAB
    try:
        module = importlib.import_module(f"{package}.cases")
    except ModuleNotFoundError as exc:
        if exc.name != f"{package}.cases":
            raise
        return lab
    cases = getattr(module, "CASES", None)
    return lab if cases is None else lab.with_cases(cases)


LABS: dict[str, Lab] = {name: _with_cases(package) for name, package in PACKAGES.items()}
"""Every lab by name, in course order (with its hidden cases where they can be read: :meth:`Lab.has_cases`)."""
for _name, _lab in LABS.items():
    if _lab.name != _name:
        raise ValueError(f"{PACKAGES[_name]}.tasks declares a lab called {_lab.name!r}; its folder says {_name!r}")


def get_lab(name: str) -> Lab:
    """The lab called ``name`` (``"labN"``), or a ``KeyError`` listing the labs there are."""
    try:
        return LABS[name]
    except KeyError:
        raise KeyError(f"no lab {name!r}; the labs are {', '.join(LABS)}") from None


def find_task(task_id: str) -> tuple[Lab, Task]:
    """The lab and task for an id such as ``"N.M"``."""
    for lab in LABS.values():
        for task in lab.tasks:
            if task.id == task_id:
                return lab, task
    known = ", ".join(t.id for lab in LABS.values() for t in lab.tasks)
    raise KeyError(f"there is no task {task_id!r}; the tasks are {known}")


def folder(lab: Lab) -> Path:
    """The folder of ``lab``'s package."""
    return Path(importlib.import_module(PACKAGES[lab.name]).__file__).resolve().parent


def part(lab: Lab, name: str) -> ModuleType | None:
    """The module ``name`` of ``lab``'s folder (``part(lab, "mistakes")``), or ``None`` if it has none."""
    package = PACKAGES[lab.name]
    try:
        return importlib.import_module(f"{package}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{package}.{name}":
            raise
        return None


def surface(lab: Lab) -> tuple[str, ...]:
    """Every name ``lab``'s released handouts import or tell students to call, in its current place
    (``"module:name"``, or ``"module"``): its ``surface.py``'s ``NAMES`` (empty if it has none)."""
    module = part(lab, "surface")
    return tuple(getattr(module, "NAMES", ())) if module is not None else ()


def _moved() -> dict[str, str]:
    """Old place -> new place for every name a lab moved (each ``surface.py``'s ``MOVED``).

    A module is named ``"util.<module>"``, an attribute ``"util.<module>:<name>"``; only the course
    library's names move (``util.``). Two labs that move one old name to two places are refused."""
    found: dict[str, tuple[str, str]] = {}
    for name, lab in LABS.items():
        module = part(lab, "surface")
        for old, new in getattr(module, "MOVED", {}).items():
            if not old.startswith("util.") or (":" in old) != (":" in new):
                raise ValueError(f"{PACKAGES[name]}.surface: MOVED[{old!r}] = {new!r}: both must be util "
                                 "modules (\"util.<module>\") or both attributes (\"util.<module>:<name>\")")
            if old in found and found[old][0] != new:
                raise ValueError(f"{old} is moved to {found[old][0]} by {found[old][1]} and to {new} by {name}")
            found[old] = (new, name)
    return {old: new for old, (new, _) in found.items()}


MOVED: dict[str, str] = _moved()
"""Old place -> new place of every name a released handout imports that has moved since (from each lab's
``surface.py``); :mod:`util.moved` resolves the old ones."""


def grader_only(path: Path) -> bool:
    """Whether ``path`` (inside a lab folder) is one of the :data:`GRADER_ONLY` files or inside such a folder."""
    return any(fnmatch.fnmatch(part, pattern) for part in path.parts for pattern in GRADER_ONLY)


PLUMBING = ("util/__init__.py", "util/answers.py", "util/atomic.py", "util/checks.py", "util/contract.py",
            "util/display.py", "util/export_cache.py", "util/moved.py", "util/netron_view.py", "util/rubric.py",
            "util/selfcheck.py", "util/submit.py", "util/written.py")
"""Course modules that store, check, show or move a lab's values and compute none (relative to the
repo root): a change to one of them leaves every lab's references fresh. Every other ``util`` module a
lab imports is one of its sources (:func:`source_files`)."""


@functools.lru_cache(maxsize=4096)
def _imports(source: str) -> frozenset[str]:
    """Every absolute module name ``source`` imports, at any depth (``from a import b`` gives ``a`` and ``a.b``).

    Memoised by the text itself (a changed file is new text): the grader asks for every submission's key, and each
    key reads the same few dozen course modules (0.25 s of parsing per key before)."""
    names: set[str] = set()
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a solution cell being edited: it imports nothing yet
        return frozenset()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(names)


def _code_cells(notebook: Path) -> list[str]:
    """The code cells of ``notebook``, each as Python source (magics and shell lines left out)."""
    cells = json.loads(notebook.read_text(encoding="utf-8")).get("cells", [])
    return ["\n".join(line for line in "".join(cell.get("source", "")).splitlines()
                      if not line.lstrip().startswith(("%", "!")))
            for cell in cells if cell.get("cell_type") == "code"]


def imported_sources(lab: Lab) -> list[Path]:
    """The course modules (``util/*.py`` and other labs' modules, not its own folder's, not :data:`PLUMBING`)
    that ``lab``'s folder and its solution import, directly or through other course modules (plumbing
    included: ``from util import setup`` brings in the seeds; a serving lab imports the transformer lab's TinyGPT): found
    by reading their imports, so a lab never forgets one."""
    repo = HERE.parent.parent
    sources = [p.read_text(encoding="utf-8") for p in sorted(folder(lab).rglob("*.py"))
               if "__pycache__" not in p.parts and not is_rubric(p.relative_to(folder(lab)))]  # rubrics mark, after
    solution = repo / "solutions" / lab.notebook
    if solution.is_file():
        sources += _code_cells(solution)
    found: dict[Path, None] = {}
    while sources:
        for name in sorted(_imports(sources.pop())):
            parts = name.split(".")
            if parts[0] != "util" or parts[1:3] == ["labs", lab.name] or parts[1:] == ["labs"]:
                continue  # its own folder is counted whole; another lab's module it imports counts as a source
            if parts[1:2] == ["labs"] and len(parts) > 3 and grader_only(Path(*parts[3:])):
                continue  # another lab's judges or cases: never a source of this lab
            path = repo.joinpath(*parts)
            path = path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"
            if path.is_file() and path not in found:
                found[path] = None
                sources.append(path.read_text(encoding="utf-8"))
    return sorted(path for path in found if str(path.relative_to(repo)) not in PLUMBING)


def source_files(lab: Lab) -> list[Path]:
    """Every source file whose change can change ``lab``'s references: its folder, the course modules it
    and its solution import (:func:`imported_sources`) and the other files it declares (``shared_sources``).

    The mistakes are left out (they make the example submissions, not the references), and so are the
    surface (it records names, and an old name is the very object at its new place) and the rubrics (they
    mark written answers, which no reference holds); judges are in."""
    root = folder(lab)
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                   and p.name not in ("mistakes.py", "surface.py") and not is_rubric(p.relative_to(root)))
    files += imported_sources(lab)
    repo = HERE.parent.parent
    for module in lab.shared_sources:
        path = repo / module
        files += sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts) if path.is_dir() else [path]
    return list(dict.fromkeys(files))


def is_rubric(path: Path) -> bool:
    """Whether ``path`` is a lab's rubrics file (or inside a rubrics folder): :data:`RUBRICS`."""
    return any(fnmatch.fnmatch(part, RUBRICS) for part in Path(path).parts)


def rubrics(lab: Lab) -> dict:
    """``lab``'s rubrics (its ``rubrics.py``'s ``RUBRICS``: question id -> :class:`util.rubric.Rubric`),
    empty when it has none. Grader-side only: the file is not in the students' copy or any sandbox."""
    module = part(lab, "rubrics")
    return dict(getattr(module, "RUBRICS", {})) if module is not None else {}


def grader_only_paths(lab: Lab | None = None) -> list[Path]:
    """The :data:`GRADER_ONLY` files and folders of every lab folder (or of ``lab``'s; topmost ones
    only): the one list every sandbox the grader starts hides, and the student copies leave out."""
    found = []
    for each in [lab] if lab is not None else LABS.values():
        root = folder(each)
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root)
            if "__pycache__" not in relative.parts and grader_only(relative) and not grader_only(relative.parent):
                found.append(path)
    return found


CACHE_PARTS = ("__pycache__",)
"""Folders of derived files (bytecode Python writes beside a module): never shown to student code, whatever
they were derived from (a judge's bytecode reads as well as the judge)."""


def _derived(relative: Path) -> bool:
    """Whether ``relative`` (a path under a shown folder) is derived or private state rather than a source: in a
    cache folder or a dot folder, a dot file, an editor's backup or autosave (``x~``, ``#x#``)."""
    return any(part in CACHE_PARTS or part.startswith(".") for part in relative.parts) or \
        relative.name.endswith("~") or (relative.name.startswith("#") and relative.name.endswith("#"))


def shown_roots() -> list[Path]:
    """The course folders student code is shown (read-only, file by file: :func:`shown_files`): ``util/`` and
    any extra lab folder (``$COURSE_LAB_DIRS``)."""
    return [HERE.parent, *extra_dirs()]


def shown_files(root: Path, reveal: tuple[Path, ...] = ()) -> list[Path]:
    """The files under ``root`` (one of :func:`shown_roots`) a sandbox shows student code: an allowlist, not a
    list of what to hide. Left out: every lab's grader-only files and folders (:data:`GRADER_ONLY`), anything
    derived or private (:data:`CACHE_PARTS`, dot files and folders, editors' backups), and any file whose bytes
    equal a grader-only file's (a copy under another name). ``reveal``: grader-only files or folders to show
    anyway (a judge process is shown its own lab's judges and cases)."""
    hidden_bytes = set()
    for path in grader_only_paths():
        for file in ([path] if path.is_file() else path.rglob("*")):
            if file.is_file() and file.stat().st_size:
                hidden_bytes.add((file.stat().st_size, _sha256(file)))
    sizes = {size for size, _ in hidden_bytes}
    shown_dirs = [Path(p).resolve() for p in reveal]
    found = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        relative = path.relative_to(root)
        if _derived(relative):
            continue
        revealed = any(path.resolve() == d or path.resolve().is_relative_to(d) for d in shown_dirs)
        size = path.stat().st_size
        if not revealed and (_grader_only_file(path) or (size in sizes and (size, _sha256(path)) in hidden_bytes)):
            continue
        found.append(path)
    return found


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _grader_only_file(path: Path) -> bool:
    """Whether ``path`` lies in a lab folder (the course's or an extra one) and is grader-only there."""
    for root in (HERE, *extra_dirs()):
        if path.is_relative_to(root):
            relative = path.relative_to(root)
            return len(relative.parts) > 1 and grader_only(Path(*relative.parts[1:]))
    return False


def course_module(module: str) -> bool:
    """Whether ``module`` is one of the course's: under ``util``, or a lab package of an extra lab folder
    (a test lab). A judge may only name such a module as a student process's harness."""
    top = module.split(".")[0]
    return bool(module) and (top == "util" or top in {p for p in PACKAGES.values() if "." not in p})


def judge_paths(lab: Lab) -> list[Path]:
    """``lab``'s own judges (its grader-only files but the mistakes and the rubrics): what its judge process
    may read."""
    return [path for path in grader_only_paths(lab)
            if path.name != "mistakes.py" and not is_rubric(path.relative_to(folder(lab)))]
