"""What a student who copies does to hide it, applied to a notebook's code cells: for the similarity tests
(``tests/test_similarity.py``) and benchmark (``benchmarks/bench_similarity.py``).

``rename`` gives every local name (assigned variables, arguments, the notebook's own functions) another one;
``reorder`` reverses the top-level definitions of each cell; ``recomment`` drops every comment and writes
others; ``respace`` adds blank lines and spaces. Each keeps the code valid Python.
"""
from __future__ import annotations

import ast
import builtins
import io
import json
import random
import tokenize
from pathlib import Path

KEEP = set(dir(builtins)) | {"self", "torch", "np", "math", "dist", "plt", "os", "F", "nn"}


def _names(code: str) -> set[str]:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        elif isinstance(node, ast.arg):
            found.add(node.arg)
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("_"):
            found.add(node.name)
    return found - KEEP


def _tokens(code: str):
    return list(tokenize.generate_tokens(io.StringIO(code).readline))


def rename(cells: list[str], rng: random.Random) -> list[str]:
    """Every local name of the cells (one mapping for all, so the code still runs) renamed."""
    names = sorted(set().union(*(_names(c) for c in cells)) if cells else set())
    mapping = {n: f"{rng.choice(['v', 'tmp', 'my', 'x', 'val'])}_{n[::-1].strip('_')}{rng.randint(0, 99)}"
               for n in names}
    out = []
    for code in cells:
        try:
            toks = _tokens(code)
        except (tokenize.TokenError, IndentationError, SyntaxError):
            out.append(code)
            continue
        out.append(tokenize.untokenize([(t.type, mapping.get(t.string, t.string)) if t.type == tokenize.NAME
                                        else (t.type, t.string) for t in toks]))
    return out


def reorder(cells: list[str]) -> list[str]:
    """The top-level statements of each cell holding two definitions or more, definitions reversed."""
    out = []
    for code in cells:
        try:
            tree = ast.parse(code)
        except SyntaxError:
            out.append(code)
            continue
        defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        if len(defs) < 2:
            out.append(code)
            continue
        lines = code.splitlines()
        chunks = ["\n".join(lines[n.lineno - 1 - len(n.decorator_list):n.end_lineno]) for n in defs]
        rest = [n for n in tree.body if n not in defs]
        others = ["\n".join(lines[n.lineno - 1:n.end_lineno]) for n in rest]
        out.append("\n\n\n".join(chunks[::-1] + others) + "\n")
    return out


def recomment(cells: list[str], rng: random.Random) -> list[str]:
    """Every comment dropped; a comment of the copier's own before some lines."""
    out = []
    for code in cells:
        lines = []
        for line in code.splitlines():
            stripped = line.split("#")[0].rstrip() if "#" in line and "'" not in line and '"' not in line else line
            if stripped.strip() and rng.random() < 0.2:
                indent = stripped[: len(stripped) - len(stripped.lstrip())]
                lines.append(f"{indent}# step {rng.randint(1, 9)}: {rng.choice(['here we go', 'my idea', 'ok'])}")
            if stripped.strip() or not line.strip():
                lines.append(stripped)
        out.append("\n".join(lines) + "\n")
    return out


def respace(cells: list[str], rng: random.Random) -> list[str]:
    """Blank lines between statements and spaces after commas."""
    out = []
    for code in cells:
        lines = []
        for line in code.splitlines():
            lines.append(line.replace(", ", " ,  ") if '"' not in line and "'" not in line else line)
            if rng.random() < 0.3:
                lines.append("")
        out.append("\n".join(lines) + "\n")
    return out


def disguise(cells: list[str], seed: int, how: tuple[str, ...] = ("rename", "reorder", "recomment", "respace")
             ) -> list[str]:
    """``cells`` with each of ``how`` applied, in that order."""
    rng = random.Random(seed)
    for step in how:
        cells = {"rename": lambda c: rename(c, rng), "reorder": reorder, "recomment": lambda c: recomment(c, rng),
                 "respace": lambda c: respace(c, rng)}[step](cells)
    return cells


def rewrite(source: Path, dest: Path, change, *, only: set[str] | None = None) -> Path:
    """Copy the notebook ``source`` to ``dest`` with ``change(list of code cells) -> list of code cells`` applied
    to its code cells (those not in ``only``, the handout's, when given: a copier edits what they wrote)."""
    nb = json.loads(source.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code" and
            (only is None or "".join(c["source"]).strip() not in only)]
    for cell, text in zip(code, change(["".join(c["source"]) for c in code])):
        cell["source"] = text
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    return dest
