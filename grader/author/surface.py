"""Which course-library names a handout uses, and whether its lab has recorded them.

A handout (a notebook in ``labs/`` and its support files) uses a ``util`` name when a code cell imports
it (``from util.<module> import <name>`` is ``"util.<module>:<name>"``, ``import util.<module>`` is
``"util.<module>"``) or reaches it as ``util.<module>.<name>``, or when its text names one (Markdown
cells, comments in support files).
Each lab records the names its released handouts use (``util/labs/labN/surface.py``, ``NAMES``; the old
places of names that moved, ``MOVED``); ``python -m grader build --check`` fails when a handout uses one
that is not recorded, so that every name a student's notebook can hold stays resolvable
(:mod:`util.moved`). ``tests/test_surface.py`` also reads every earlier handout in the repository's
history.
"""
from __future__ import annotations

import ast
import re
from typing import Iterable

from util import labs
from util.contract import Lab

PROSE = re.compile(r"(?<![\w.])util(?:\.[A-Za-z_]\w*)+")
"""``util.<module>.<name>`` in text (not ``importlib.util.find_spec``)."""


def dotted(name: str) -> str:
    """``"util.<module>:<name>"`` -> ``"util.<module>.<name>"``: how text names it."""
    return name.replace(":", ".")


def _code_names(source: str) -> set[str]:
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]  # magics
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return set(PROSE.findall(source))  # a cell a student broke: what it names, as text
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "util" and not node.level:
            found |= {f"{node.module}:{alias.name}" for alias in node.names if alias.name != "*"}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "util"}
        elif isinstance(node, ast.Attribute):  # util.<module>.<name> (and, walked too, util.<module>)
            parts, value = [], node
            while isinstance(value, ast.Attribute):
                parts.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id == "util":
                found.add(".".join(["util", *reversed(parts)]))
    return found


def notebook_names(nb: dict) -> set[str]:
    """The ``util`` names a notebook (as JSON, sources as text or lists of lines) uses."""
    found: set[str] = set()
    for cell in nb.get("cells", ()):
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        found |= _code_names(source) if cell.get("cell_type") == "code" else set(PROSE.findall(source))
    return found


def text_names(text: str) -> set[str]:
    """The ``util`` names a support file (C++, CMake) mentions."""
    return set(PROSE.findall(text))


def current(name: str) -> str:
    """Where ``name`` is now, as text names it: an old place a lab recorded as moved (``util.labs.MOVED``)
    becomes the new one (``util.<module>.<name>`` of a moved module ``util.<module>`` included)."""
    name = dotted(name)
    for old, new in sorted(labs.MOVED.items(), key=lambda item: -len(item[0])):
        old = dotted(old)
        if name == old or name.startswith(old + "."):
            return dotted(new) + name[len(old):]
    return name


def unrecorded(lab: Lab, names: Iterable[str]) -> list[str]:
    """Those of ``names`` whose current place (:func:`current`) ``lab``'s surface does not record
    (``NAMES``), compared as text names them (``util.<module>.<name>``).

    A name reached through a longer one counts (``util.<module>`` when ``util.<module>:<name>`` is
    recorded: the module must exist for ``<name>`` to)."""
    recorded = {dotted(n) for n in labs.surface(lab)}
    prefixes = {"util"} | {r.rsplit(".", cut)[0] for r in recorded for cut in range(1, r.count("."))}
    return sorted(n for n in set(names) if current(n) not in recorded | prefixes)
