"""What students read, for every lab (generic: a new lab is checked without an edit here).

* No student-facing text names a file, folder, module or document the students' copy lacks. The
  texts: every notebook in ``labs/``, ``labs/README.md``, the copy's README, the public checks'
  names and hints (``check(...)`` prints them), and the docstrings of every ``util`` module a lab
  notebook imports (``help()`` shows them). The copy: ``grader.author.release.student_files``.
* Student-facing text shows only ``python -m grader`` commands that work in the copy.
* Every lab notebook opens with ``# Lab N: <its declared title>`` and a points table that agrees
  with the declaration, and states every task's tolerance in that task's section.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

from grader import REPO
from grader.author import handouts, release
from grader.core import notebook
from util.labs import LABS

COPY_FILES = set(release.student_files()) | {"README.md"}
COPY_FOLDERS = {"/".join(Path(f).parts[:i]) for f in COPY_FILES for i in range(1, len(Path(f).parts))}
RUNTIME = ("outputs/", "build/", "cpp/build", "/tmp/")
"""Paths that exist only once something has run: answers, export caches, the C++ build folder."""
EXTENSIONS = {"py", "ipynb", "json", "md", "txt", "cpp", "h", "sh", "yaml", "toml", "onnx", "pt", "csv", "cfg"}
DOCUMENT_WORDS = ("FACTS", "STYLE", "DESIGN", "NOTES", "CHANGELOG", "CONTRIBUTING", "TODO")
"""Words that name a course document (FACTS.md, ...): one may be named only if the copy has it."""
CODE_SPAN = re.compile(r"``([^`]+)``|`([^`\n]+)`")
PATH_TOKEN = re.compile(r"(?<![\w.:/@-])(?:\./)?((?:[A-Za-z_][\w.*-]*/)+(?:[\w.*-]*))")
MODULE_TOKEN = re.compile(r"\b((?:util|grader)(?:\.[A-Za-z_]\w*)+)")
GRADER_COMMAND = re.compile(r"python -m grader (\w+)")


def _lab_notebooks() -> list[Path]:
    return sorted(p for p in (REPO / "labs").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def _imported_util_modules() -> set[str]:
    """The util modules the lab notebooks import (and ``util`` itself)."""
    found = {"util"}
    for path in _lab_notebooks():
        for cell in notebook.read(path).cells:
            if cell.cell_type == "code":
                found |= set(re.findall(r"^\s*(?:from|import)\s+(util(?:\.\w+)*)", cell.source, re.M))
    return found


def _module_file(name: str) -> Path | None:
    base = REPO / Path(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _docstrings(path: Path) -> list[str]:
    """The module's docstring and those of its public functions and classes (what help() shows)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = [ast.get_docstring(tree) or ""]
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
            out.append(ast.get_docstring(node) or "")
    return out


def student_texts() -> dict[str, tuple[str, Path]]:
    """Where -> (text, the folder relative paths in it start from) for everything students read."""
    texts: dict[str, tuple[str, Path]] = {}
    for path in _lab_notebooks():
        rel = path.relative_to(REPO)
        for index, cell in enumerate(notebook.read(path).cells):
            if cell.cell_type == "markdown":
                texts[f"{rel} cell {index}"] = (cell.source, rel.parent)
    texts["labs/README.md"] = ((REPO / "labs" / "README.md").read_text(encoding="utf-8"), Path("labs"))
    texts["the copy's README.md"] = (handouts.release_readme(), Path("."))
    for name, lab in LABS.items():
        for task in lab.tasks:
            for check in task.checks:
                texts[f"{name} check {check.name!r}"] = (f"`{check.name}` `{check.hint}`", Path("labs"))
    for module in sorted(_imported_util_modules()):
        path = _module_file(module)
        assert path is not None, f"a lab notebook imports {module}, which is not in the repository"
        texts[f"help({module})"] = ("\n".join(_docstrings(path)), Path("."))
    return texts


def _exists(token: str, base: Path) -> bool:
    token = token.removeprefix("./")
    if token.startswith(RUNTIME) or any(f"/{prefix}" in f"/{token}" for prefix in ("outputs/", "cpp/build")):
        return True
    names = [token.replace("labN", name) for name in LABS] if "labN" in token else [token]
    for name in names:
        for root in (Path("."), base, Path("labs")):
            candidate = (root / name).as_posix().rstrip("/")
            pattern = re.compile(re.escape(candidate).replace(r"\*", "[^/]*") + r"\Z")
            if any(pattern.match(f) for f in COPY_FILES | COPY_FOLDERS):
                return True
    return False


def _is_file_path(token: str) -> bool:
    last = token.rstrip("/").rsplit("/", 1)[-1]
    return token.endswith("/") or last.rsplit(".", 1)[-1] in EXTENSIONS and "." in last


def _module_resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = _module_file(".".join(parts[:cut]))
        if path is not None:
            if path.relative_to(REPO).as_posix() not in COPY_FILES:
                return False
            rest = parts[cut:]
            if not rest:
                return True
            source = path.read_text(encoding="utf-8")
            return bool(re.search(rf"^\s*(def|class)\s+{rest[0]}\b|^{rest[0]}\s*[:=]", source, re.M))
    return False


def missing_references() -> list[str]:
    problems = []
    for where, (text, base) in student_texts().items():
        spans = [a or b for a, b in CODE_SPAN.findall(text)]
        for span in spans:
            for token in PATH_TOKEN.findall(span):
                if _is_file_path(token) and not _exists(token, base):
                    problems.append(f"{where}: `{token}` is not in the students' copy")
            for dotted in MODULE_TOKEN.findall(span):
                if not _module_resolves(dotted.rstrip(".")):
                    problems.append(f"{where}: `{dotted}` is not a module or name in the students' copy")
        for word in DOCUMENT_WORDS:
            if re.search(rf"\b{word}\b", text) and not any(Path(f).stem == word for f in COPY_FILES):
                problems.append(f"{where}: names the document {word}, which the students' copy does not hold")
    return problems


def test_no_student_facing_text_names_a_file_the_copy_lacks():
    assert missing_references() == []


def test_the_reference_check_finds_what_the_issue_found():
    """The check itself catches a leaked path, a missing module and a course document."""
    text = ("see `benchmarks/bench_lab3_tiling.py`, `util.labs.lab3.nothing_here` and FACTS; "
            "`util/labs/labN/tasks.py`, `outputs/lab1/1.1.json`, `cpp/build/analyzer` and `util.netron_view.show` exist")
    original = student_texts
    try:
        globals()["student_texts"] = lambda: {"sample": (text, Path("labs"))}
        found = missing_references()
    finally:
        globals()["student_texts"] = original
    assert found == ["sample: `benchmarks/bench_lab3_tiling.py` is not in the students' copy",
                     "sample: `util.labs.lab3.nothing_here` is not a module or name in the students' copy",
                     "sample: names the document FACTS, which the students' copy does not hold"]


def test_students_are_shown_only_grader_commands_that_work_in_their_copy():
    used = {(where, command) for where, (text, _) in student_texts().items()
            for command in GRADER_COMMAND.findall(text)}
    assert {command for _, command in used} == {"check"}, sorted(used)


@pytest.mark.parametrize("lab_name", list(LABS))
def test_each_notebook_opens_with_its_title_and_a_points_table(lab_name):
    lab = LABS[lab_name]
    first = notebook.read(REPO / "labs" / lab.notebook).cells[0].source
    number = lab_name.removeprefix("lab")
    assert first.splitlines()[0] == f"# Lab {number}: {lab.title}"
    rows = {m.group(1): float(m.group(2)) for m in re.finditer(r"^\|\s*(\d+\.\d+)\s*\|.*\|\s*(\d+(?:\.\d+)?)\s*\|$",
                                                              first, re.M)}
    assert rows == {t.id: t.max_points for t in lab.tasks}
    assert f"python -m grader check {lab_name}" in "\n".join(c.source for c in notebook.read(REPO / "labs" / lab.notebook).cells)


def _tolerance_words(value: float) -> set[str]:
    mantissa, exponent = f"{value:.0e}".split("e")
    return {f"{value:g}", f"{mantissa}e{int(exponent)}", f"{mantissa}e{exponent}", f"10^{int(exponent)}"}


@pytest.mark.parametrize("lab_name", list(LABS))
def test_each_task_with_a_tolerance_states_it_in_its_section(lab_name):
    lab = LABS[lab_name]
    nb = notebook.read(REPO / "labs" / lab.notebook)
    sections: dict[str, str] = {}
    for cell, task in zip(nb.cells, notebook.cell_tasks(nb)):
        if task is not None and cell.cell_type == "markdown":
            sections[task] = sections.get(task, "") + cell.source + "\n"
    for task in lab.tasks:
        for value in (task.tolerance.rtol, task.tolerance.atol):
            if value:
                assert any(word in sections[task.id] for word in _tolerance_words(value)), \
                    f"task {task.id} is graded {task.tolerance.describe()}; its section never says so"


def test_the_labs_readme_is_built_from_its_template_and_lists_every_lab():
    text = (REPO / "labs" / "README.md").read_text(encoding="utf-8")
    assert text == handouts.labs_readme()
    for name, lab in LABS.items():
        [row] = [line for line in text.splitlines() if line.startswith(f"| {name.removeprefix('lab')} |")]
        assert lab.title in row and all(f"{t.id} {t.title} ({t.max_points:g})" in row for t in lab.tasks)
        assert all(f"`{tool}`" in row for tool in lab.requires)
    assert "`g++`, `cmake`, `make`" in text   # lab 4's C++ toolchain is stated


def test_opening_a_lab_does_not_change_its_kernel_metadata():
    """The student copies carry what JupyterLab writes when the image's kernel starts (Python 3.11.7)."""
    dockerfile = (REPO / "docker" / "Dockerfile").read_text(encoding="utf-8")
    python = re.search(r"^ARG BASE=python:(\d+\.\d+\.\d+)", dockerfile, re.M).group(1)   # FROM ${BASE}
    assert notebook.KERNEL_METADATA["language_info"]["version"] == python
    for path in _lab_notebooks():
        meta = nbformat.read(str(path), as_version=4).metadata
        assert {k: meta.get(k) for k in notebook.KERNEL_METADATA} == notebook.KERNEL_METADATA, path


HELP = re.compile(r"help\(\s*([A-Za-z_][\w.]*)\s*\)")
GRADER_SAYS = re.compile(r"[^.\n]*\bthe grader(?:'s)? (?:also )?(?:checks|compares|verifies|judges|re-?runs|measures|"
                         r"counts|times|trains|rebuilds|evaluates|re-?quantises)\b[^.]*\.", re.I)
TASK_HEADING = re.compile(r"^##\s+Task\s+(\d+\.\d+)\b", re.M)


def _bindings(nb) -> dict[str, str | None]:
    """Name -> the module it was imported from (``None``: defined in the notebook) over its code cells."""
    names: dict[str, str | None] = {}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse("\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.update({(a.asname or a.name): f"{node.module}:{a.name}" for a in node.names})
            elif isinstance(node, ast.Import):
                names.update({(a.asname or a.name).split(".")[0]: (a.asname and a.name) or a.name.split(".")[0]
                              for a in node.names})
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.setdefault(node.name, None)
            elif isinstance(node, ast.Assign):
                names.update({t.id: names.get(t.id) for t in node.targets if isinstance(t, ast.Name)})
    return names


def _resolve(dotted: str, bindings: dict[str, str | None]):
    """The object ``dotted`` names in the notebook, when it comes from an import (``None`` when the notebook
    defines it: the student's own function, whose docstring is theirs)."""
    import importlib

    root, *rest = dotted.split(".")
    origin = bindings[root]
    if origin is None:
        return None
    module, _, name = origin.partition(":")
    obj = importlib.import_module(module)
    if name:
        obj = getattr(obj, name)
    for part in rest:
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("lab_name", list(LABS))
def test_every_help_a_handout_mentions_names_something_it_imported_with_a_docstring(lab_name):
    """``help(NAME)`` in a handout must work where the student reads it: NAME imported (or defined) by the
    notebook, and its docstring must say something (not only point elsewhere)."""
    lab = LABS[lab_name]
    nb = notebook.read(REPO / "labs" / lab.notebook)
    bindings = _bindings(nb)
    problems = []
    for cell in nb.cells:
        for name in HELP.findall(cell.source):
            if name.split(".")[0] not in bindings:
                problems.append(f"help({name}): the notebook never imports or defines {name.split('.')[0]}")
                continue
            obj = _resolve(name, bindings)
            doc = (getattr(obj, "__doc__", None) or "") if obj is not None else "defined here"
            if len(doc.strip()) < 40 or re.search(r"\bsee the module", doc, re.I):
                problems.append(f"help({name}) shows too little: {doc.strip()[:80]!r}")
    assert problems == []


@pytest.mark.parametrize("lab_name", list(LABS))
def test_what_a_handout_says_the_grader_checks_is_backed_by_a_check_or_a_docstring(lab_name):
    """Each "the grader checks / compares / runs ..." sentence in a task's section is backed by something a
    student can run or read: a public check of that task (``check("N.M")``), or a name in the sentence, in
    backticks, that the notebook imported and whose docstring says how (``help(name)``)."""
    lab = LABS[lab_name]
    nb = notebook.read(REPO / "labs" / lab.notebook)
    bindings = _bindings(nb)
    text = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    starts = [(m.start(), m.group(1)) for m in TASK_HEADING.finditer(text)]
    problems = []
    for said in GRADER_SAYS.finditer(text):
        task_id = next((tid for start, tid in reversed(starts) if start <= said.start()), None)
        if task_id is None:
            continue  # the opening's general promise: backed by the task sections
        if lab.task(task_id).checks:
            continue
        named = [a or b for a, b in CODE_SPAN.findall(said.group(0))]
        backed = [n for n in named if re.fullmatch(r"[A-Za-z_][\w.]*", n) and n.split(".")[0] in bindings
                  and (getattr(_resolve(n, bindings), "__doc__", "") or "").strip()]
        if not backed:
            problems.append(f"task {task_id}: {' '.join(said.group(0).split())[:140]}")
    assert problems == []


NOTEBOOK_NAMES = {"get_ipython", "display", "In", "Out", "_", "__", "___", "exit", "quit"}
"""Names a Jupyter kernel defines beside the builtins."""


def undefined_names(nb) -> list[str]:
    """Names the handout's code cells use but never define, read in order as a student runs them: a name used at
    a cell's top level must be imported or assigned by that cell or an earlier one; a name a function or class
    body uses, by some cell of the notebook (the function may be called later). The cells the student fills in
    count as what the handout gives them (their stubs define the functions). Within one cell order is not read.
    Line magics and shell lines (``%``, ``!``) are skipped; a cell that does not parse is left to other tests."""
    import builtins
    import symtable

    def table(cell):
        source = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in cell.source.splitlines())
        try:
            return symtable.symtable(source, "<cell>", "exec")
        except SyntaxError:
            return None

    def bound(top) -> set[str]:
        return {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}

    tables = [table(cell) for cell in nb.cells if cell.cell_type == "code"]
    known = set(dir(builtins)) | NOTEBOOK_NAMES
    anywhere = known.union(*(bound(t) for t in tables if t is not None))
    problems: list[str] = []

    def nested(scope, index):
        for child in scope.get_children():
            for symbol in child.get_symbols():
                if (symbol.is_referenced() and symbol.is_global() and not symbol.is_assigned()
                        and symbol.get_name() not in anywhere):
                    problems.append(f"code cell {index}: {child.get_name()} uses {symbol.get_name()}, defined nowhere")
            nested(child, index)

    for index, top in enumerate(tables):
        if top is None:
            continue
        mine = bound(top)
        for symbol in top.get_symbols():
            name = symbol.get_name()
            if symbol.is_referenced() and name not in known and name not in mine:
                where = "a later cell" if name in anywhere else "no cell"
                problems.append(f"code cell {index}: uses {name}, which {where} defines")
        nested(top, index)
        known |= mine
    return problems


@pytest.mark.parametrize("lab_name", list(LABS))
def test_every_name_a_handouts_given_code_uses_is_defined_before_it_runs(lab_name):
    """Issue 37 (lab 10.5 reported a given cell using a name nothing defined): run top to bottom, the handout's
    cells define every name they use."""
    assert undefined_names(notebook.read(REPO / "labs" / LABS[lab_name].notebook)) == []


def test_the_undefined_name_check_finds_what_the_issue_found():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import numpy as np\nprint(n + 1)\ndef f():\n    return zz + np.pi\n"
                                          "[k for k in range(3)]\n%timeit f()"),
                nbformat.v4.new_markdown_cell("uses `undefined_in_text`"),
                nbformat.v4.new_code_cell("y = later + f()"),
                nbformat.v4.new_code_cell("later = 2\ndef g():\n    return later + y")]
    assert undefined_names(nb) == ["code cell 0: uses n, which no cell defines",
                                   "code cell 0: f uses zz, defined nowhere",
                                   "code cell 1: uses later, which a later cell defines"]
