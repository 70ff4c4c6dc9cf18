"""The grader's groups depend one way, and the unwritten rules of the code are written here.

Every ``import`` of a course module counts, those placed inside functions too: a lazy import that
only hides a cycle is still a cycle. The allowed arrows between the grader's groups are the ones
the README's "Layers" block states (this test reads them from there, so the two cannot drift).
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from grader import REPO

PACKAGES = ("grader", "util")


def _modules() -> dict[str, Path]:
    """Module name -> file, for every course module (not the generated examples)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            relative = path.relative_to(REPO)
            if "__pycache__" in relative.parts or "examples" in relative.parts:
                continue
            name = ".".join(relative.with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def imports(name: str, path: Path) -> set[str]:
    """The course modules ``name`` imports, wherever the import statement stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


GRAPH = {name: imports(name, path) for name, path in MODULES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one member (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def group(module: str) -> str:
    """The grader group a module belongs to (``execute``, ``judge``...), ``top`` for the command line
    and self-check, ``grader`` for the package's face, ``util`` for everything students import."""
    parts = module.split(".")
    if parts[0] == "util":
        return "util"
    if len(parts) == 1:
        return "grader"
    return parts[1] if (REPO / "grader" / parts[1]).is_dir() else "top"


def layers() -> dict[str, set[str]]:
    """Group -> the groups it may import, from the README's "Layers" block."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"### Layers\n.*?```\n(.*?)```", text, re.S)
    assert block, "README.md has no '### Layers' section with a fenced block"
    allowed = {}
    for line in block.group(1).splitlines():
        match = re.fullmatch(r"\s*(\w+)/?\s+imports\s+(.*?)\s*", line)
        if match:
            allowed[match.group(1)] = {g.strip().rstrip("/") for g in match.group(2).split(",")} - {"nothing"}
    return allowed


def test_the_graph_is_read_whole():
    """The reader sees imports inside functions and relative imports (a sanity check of this test)."""
    assert len(MODULES) > 80
    assert "grader.core.results" in GRAPH["grader.judge.score"]
    assert "grader.grade.batch" in GRAPH["grader.cli"]  # imported inside main(): still an arrow
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_itself_round_a_cycle():
    assert cycles(GRAPH) == []


def test_the_groups_depend_one_way_as_the_readme_says():
    allowed = layers()
    groups = {group(m) for m in MODULES if m.startswith("grader.")} - {"grader", "top"}
    assert groups == set(allowed) - {"top"}, "every group of grader/ has a line in the README's Layers block"
    wrong = sorted(f"{source} -> {target} ({group(source)} may import {', '.join(sorted(allowed[group(source)])) or 'nothing'})"
                   for source, targets in GRAPH.items() for target in targets
                   if source.startswith("grader.") and group(source) in allowed
                   and group(target) not in allowed[group(source)] | {group(source), "grader", "util"})
    assert wrong == []
    group_graph = defaultdict(set)
    for source, targets in GRAPH.items():
        for target in targets:
            if group(source) != group(target):
                group_graph[group(source)].add(group(target))
    assert cycles(dict(group_graph)) == []


def test_what_students_import_never_imports_the_grader():
    assert sorted(f"{m} -> {t}" for m, ts in GRAPH.items() if m.startswith("util") for t in ts
                  if t.startswith("grader")) == []


HEAVY = ("torch", "onnx", "onnxruntime", "torchvision", "sklearn", "matplotlib")


def _loaded_after(code: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sorted(sys.modules)))"],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_the_lab_registry_and_every_declaration_load_no_heavy_package():
    """Grader workers, the command line and the registry stay small: a lab's ``tasks.py`` and
    ``public_checks.py`` import torch or onnx inside functions only."""
    code = ("import util.labs\nfrom util.labs import LABS, part\n"
            "for lab in LABS.values():\n    part(lab, 'public_checks')\n"
            "import grader.cli, grader.grade.batch, grader.report.export")
    loaded = _loaded_after(code)
    assert sorted(m for m in loaded if m.split(".")[0] in HEAVY) == []


def test_each_lab_declares_pinned_packages_for_its_references():
    from util.labs import LABS

    pinned = {re.split(r"[=<>\[ ]", line.strip())[0].lower()
              for line in (REPO / "requirements.txt").read_text().splitlines() if line.strip() and line[0] != "#"}
    for lab in LABS.values():
        assert lab.packages, f"{lab.name} declares no packages its references depend on"
        assert set(lab.packages) <= pinned, f"{lab.name}: {set(lab.packages) - pinned} not pinned in requirements.txt"


def _docstring_names() -> list[tuple[str, str]]:
    """(module, dotted name) for every ``grader.x.y`` or ``util.x.y`` a docstring names."""
    names = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node) or ""
                names += [(module, found) for found in re.findall(r"\b((?:grader|util)(?:\.\w+)+)", doc)
                          if "labN" not in found.split(".")]  # a placeholder for any lab
    return names


def _defines(path: Path, name: str) -> bool:
    """Whether the module at ``path`` defines or imports ``name`` at its top level."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((alias.asname or alias.name).split(".")[0] == name for alias in node.names):
                return True
    return (path.parent / name).is_dir() or (path.parent / f"{name}.py").is_file()


def test_docstrings_name_modules_that_exist():
    """A docstring that names ``grader.report.classbook`` after it moved misleads its reader: every
    ``grader.x.y`` or ``util.x.y`` a docstring names is a module, or a name a module defines."""
    missing = []
    for module, name in _docstring_names():
        parts = name.split(".")
        cut = next((cut for cut in range(len(parts), 0, -1) if ".".join(parts[:cut]) in MODULES), 0)
        if cut == 0 or (cut < len(parts) and not _defines(MODULES[".".join(parts[:cut])], parts[cut])):
            missing.append(f"{module}: {name}")
    assert missing == []


@pytest.mark.parametrize("path", sorted((REPO / "tests").rglob("test_*.py")), ids=lambda p: p.name)
def test_tests_say_what_they_check_not_which_ticket_asked(path):
    """Tests describe the behaviour they check; an issue number means nothing to the next reader."""
    text = path.read_text(encoding="utf-8")
    assert re.findall(r"(?i)\b(?:issue|ticket|bug)\s*#?\d+|#\d{2,}\b(?!\w)", text) == []


def test_ci_runs_the_linter_with_the_projects_configuration():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert "ruff check ." in [line.strip() for line in ci]
    assert "[tool.ruff.lint]" in (REPO / "pyproject.toml").read_text(encoding="utf-8")
    pinned = (REPO / "requirements.txt").read_text(encoding="utf-8")
    assert re.search(r"^ruff==\d", pinned, re.M)
