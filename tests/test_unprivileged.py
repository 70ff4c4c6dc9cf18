"""The walls hold when an ordinary user runs the grader, too (tests/test_walls.py runs them as
whoever runs the tests: root in CI). A small class is graded by ``python -m grader grade`` run as
uid 4242, an unprivileged user without an account; the kernels then run in a user namespace of the
sandbox's, with no capability and no way to create another.

As root the test drops to that user with ``setpriv``; folders on the way to Python, this repository
or the class that such a user may not enter (``/root`` is 0700) are shown to it through a private
mount namespace (bubblewrap, run as root, with a tmpfs over them and the needed folders bound back).
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from test_walls import ENV_CHECK, REMOUNT, SECRET
from tinylab import FOLDER, GOOD_1, GOOD_2, notebook, standard, write

from grader import REPO
from grader.execute import confinement

USER = 4242
pytestmark = pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")

def _outside(root: Path) -> str:
    """A cell that fails unless the grader's files, the class and the results are out of its reach."""
    return f"""\
import os
found = {{}}
for path in [{str(REPO / 'grader' / 'references')!r}, {str(REPO / 'solutions')!r}, {str(root / 'class')!r}]:
    found[path] = os.path.exists(path)
for path in [{str(REPO / 'util' / '_hostile.txt')!r}, {str(root / 'out' / '_hostile.txt')!r},
             {str(root / '_hostile.txt')!r}]:
    try:
        open(path, 'w').write('x')
        found[path] = True
    except OSError:
        found[path] = False
assert not any(found.values()), found"""


def _blocked(path: Path) -> Path | None:
    """The highest folder on the way to ``path`` that others may not enter, or ``None``."""
    for parent in [*reversed(path.parents), path]:
        if parent.is_dir() and not os.stat(parent).st_mode & 0o001:
            return parent
    return None


def _as_user(command: list[str], needed: list[Path], env: dict[str, str], *, stdout=None,
             stderr=None, input: str | None = None) -> subprocess.CompletedProcess:
    """Run ``command`` as :data:`USER`; as root, through a mount namespace that lets it reach ``needed``.
    Its output is captured, or goes to the open files ``stdout`` and ``stderr`` when given; ``input`` is its
    standard input."""
    streams = {"stdout": stdout, "stderr": stderr} if stdout is not None else {"capture_output": True}
    if input is not None:
        streams["input"] = input
    if os.geteuid() != 0:
        return subprocess.run(command, text=True, env=env, cwd=REPO, timeout=600, **streams)
    drop = ["setpriv", f"--reuid={USER}", f"--regid={USER}", "--clear-groups", "--inh-caps=-all", "--"]
    hidden = {b for b in map(_blocked, needed) if b is not None}
    if not hidden:
        return subprocess.run(drop + command, text=True, env=env, cwd=REPO, timeout=600, **streams)
    harness = ["bwrap", "--dev-bind", "/", "/", "--die-with-parent"]
    for top in sorted(hidden):
        harness += ["--perms", "0755", "--tmpfs", str(top)]
        for path in needed:
            if top in path.parents or path == top:
                made = [p for p in reversed(path.parents) if top in p.parents]
                for parent in made:
                    harness += ["--perms", "0755", "--dir", str(parent)]
                harness += ["--bind", str(path), str(path)]
    return subprocess.run(harness + ["--"] + drop + command, text=True, env=env, cwd=REPO, timeout=600, **streams)


@pytest.fixture(scope="module")
def graded_by_a_user():
    root = Path(tempfile.mkdtemp(prefix="walls-user-"))
    try:
        good = notebook(("md", "## Task 900.1: First (5 points)"), GOOD_1, ("md", "## Task 900.2: Second (5 points)"),
                        GOOD_2)
        for name, nb in {"remount": standard(REMOUNT), "outside": standard(_outside(root)),
                         "environment": standard(ENV_CHECK), "z_next": good}.items():
            write(nb, root / "class" / name / "lab900.ipynb")
        (root / "references").mkdir()
        (root / "references" / "lab900.json").write_text(json.dumps(
            {"lab": "lab900", "answers": {"900.1": 41, "900.2": 42}, "cases": {}, "provenance": {}}))
        (root / "home").mkdir()
        if os.geteuid() == 0:
            for path in [root, *root.rglob("*")]:
                os.chown(path, USER, USER)
        env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(root / "home"), "USER": "grader",
               "COURSE_LAB_DIRS": str(FOLDER), "COURSE_REFERENCE_DIR": str(root / "references"),
               "COURSE_TEST_SECRET": SECRET, "LANG": "C.UTF-8"}
        needed = [Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), REPO, root]
        done = _as_user([sys.executable, "-m", "grader", "grade", str(root / "class"), "--lab", "lab900",
                         "--out", str(root / "out"), "--no-progress", "--timeout", "60", "--cell-timeout", "20"],
                        needed, env)
        rows = {}
        if (root / "out" / "gradebook.csv").exists():
            with (root / "out" / "gradebook.csv").open() as handle:
                rows = {row["submission"]: row for row in csv.DictReader(handle)}
        yield done, rows, root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_an_ordinary_user_grades_the_class_with_the_walls_up(graded_by_a_user):
    done, rows, root = graded_by_a_user
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sandbox: bubblewrap" in done.stderr  # the sandbox ran, in a user namespace
    assert {name: (row["total"], row["max"]) for name, row in rows.items()} == {
        name: ("10", "10") for name in ("remount__lab900", "outside__lab900", "environment__lab900", "z_next__lab900")}
    assert not (REPO / "util" / "_hostile.txt").exists() and not list(root.rglob("_hostile.txt"))
    written = [p for p in (root / "out").rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert written == []
