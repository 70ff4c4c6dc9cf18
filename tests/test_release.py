"""``python -m grader release DIR``: the students' copy holds nothing secret, the student image can be
built from it alone, and a lab runs from it with the commands its README gives, from the copy's
``labs/`` as from its root.

The copy is used in place with this environment's packages and the copy first on ``sys.path``
(``PYTHONPATH``): a fresh virtual environment would download about 6 GB. The README reports a
fresh-venv run done by hand.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from grader import REPO
from grader.author import handouts, release
from grader.author.markers import ANY
from util import labs
from util.answers import OUTPUT_DIR_ENV
from util.labs import LABS

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_docker  # noqa: E402  (its solution-region reader and the image_files loader)

SECRET = ("solutions/", "grader/references/", "grader/examples/", "tests/", "benchmarks/", ".git/")


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("release") / "course"
    assert release.main(dest=dest) == 0
    return dest


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_the_copy_holds_nothing_secret(copy):
    files = _files(copy)
    assert [f for f in files if f.startswith(SECRET) or f.endswith("mistakes.py")] == []
    grader_only = [p.relative_to(REPO).as_posix() for p in labs.grader_only_paths()]
    assert grader_only and not [f for f in files if f.startswith(tuple(grader_only))]  # judges, mistakes
    assert not [f for f in files if f.endswith(".json") and not test_docker.public_json(f)]
    assert "util/labs/lab14/compiled_public.json" in files  # the notebook reads it
    regions = test_docker._solution_regions()
    assert len(regions) >= 20
    for name in files:
        text = (copy / name).read_text(encoding="utf-8", errors="replace")
        if name.startswith("labs/"):
            assert not ANY.search(text), f"{name} carries a solution marker"
        for region in regions:
            found = [line for line in region if line in text]
            assert len(found) * 2 < len(region), f"{name} contains solution code: {found[:3]}"


def test_the_copy_holds_what_students_need(copy):
    files = set(_files(copy))
    labs = {p.relative_to(REPO).as_posix() for p in (REPO / "labs").rglob("*")
            if p.is_file() and not {"outputs", "build", ".ipynb_checkpoints"} & set(p.parts)}
    assert labs <= files and "labs/README.md" in files
    assert {f"util/labs/{name}/tasks.py" for name in LABS} <= files
    for needed in ("requirements.txt", "pyproject.toml", "docker/setup.sh", "docker/Dockerfile", "docker/compose.yaml",
                   ".dockerignore", "docker/jupyter/overrides.json", "grader/selfcheck.py", "grader/__main__.py"):
        assert needed in files, needed
    assert (copy / "README.md").read_text(encoding="utf-8") == handouts.release_readme()
    assert os.stat(copy / "docker" / "setup.sh").st_mode & stat.S_IXUSR  # README runs it as docker/setup.sh


def test_the_student_image_builds_from_the_copy_alone(copy):
    """Every COPY source of the student target exists in the copy, and the image holds nothing secret."""
    files = test_docker.image_files.image_files("student", dockerfile=copy / "docker" / "Dockerfile", context=copy)
    sources = set(files.values())
    assert "labs/lab1_pytorch_analysis.ipynb" in sources and "README.md" in sources
    assert not [s for s in sources if s.startswith(SECRET) or s.endswith("mistakes.py")
                or (s.startswith("util/labs/") and "/judge" in s)]


def test_release_refuses_a_folder_that_holds_anything(tmp_path, capsys):
    (tmp_path / "old.txt").write_text("an older copy")
    assert release.main(dest=tmp_path) == 1
    assert "not an empty folder" in capsys.readouterr().err
    assert _files(tmp_path) == ["old.txt"]


def _readme_commands(text: str) -> list[str]:
    """The commands of the README's bash blocks, comments dropped, continuation lines joined."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip():
                commands.append(re.sub(r"\s+", " ", line.split("  #")[0]).strip())
    return commands


def test_the_copy_readme_gives_the_set_up_and_check_commands(copy):
    commands = _readme_commands((copy / "README.md").read_text(encoding="utf-8"))
    assert commands[:3] == ["docker/setup.sh", ". .venv/bin/activate", "jupyter lab labs/"]
    assert "python -m grader check lab1" in commands
    build = next(c for c in commands if c.startswith("docker build"))
    assert "--target student" in build and "--build-arg UID=$(id -u) --build-arg GID=$(id -g) ." in build


def _run_in_copy(copy: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(copy)}   # the copy first on sys.path, as its editable install would be
    env.pop(OUTPUT_DIR_ENV, None)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.notebook
def test_a_finished_lab_checks_from_the_copys_labs_folder_and_from_its_root(copy, tmp_path):
    """A student who finished lab 1 (the solution in place of the handout) runs the README's command in the
    terminal JupyterLab opens in labs/, and in the copy's root: both find the notebook and pass."""
    copy = Path(shutil.copytree(copy, tmp_path / "course"))
    shutil.copy(REPO / "solutions" / "lab1_pytorch_analysis.ipynb", copy / "labs" / "lab1_pytorch_analysis.ipynb")
    where = _run_in_copy(copy, copy / "labs", "-c", "import grader, util; print(grader.__file__, util.__file__)")
    assert where.stdout.split() == [str(copy / "grader" / "__init__.py"), str(copy / "util" / "__init__.py")]

    inside = _run_in_copy(copy, copy / "labs", "-m", "grader", "check", "lab1")
    assert inside.returncode == 0, inside.stdout + inside.stderr
    assert f"checking {copy / 'labs' / 'lab1_pytorch_analysis.ipynb'}" in inside.stdout
    assert "5/5 tasks pass all their public checks" in inside.stdout

    root = _run_in_copy(copy, copy, "-m", "grader", "check", "lab1", "--task", "1.4")
    assert root.returncode == 0, root.stdout + root.stderr
    assert "Task 1.4 (MACs): 7/7 public checks passed" in root.stdout  # 6 checks and its written Q1, answered
    assert "Task 1.1" not in root.stdout and "1/1 tasks pass all their public checks" in root.stdout


COURSE_LABS = [name for name in LABS if labs.PACKAGES[name].startswith("util.labs.")]
FROM_THE_COPY_EVERY_RUN = ("lab1", "lab15")
"""Run from the copy on every test run: a notebook alone (1), another lab's modules imported (15); a folder of support
files beside it (8) and shipped recordings and hidden data files only the grader holds (11) under ``-m slow``.
The others take the same paths, under ``-m slow``: whether every lab's imports ship is also checked from the
sources on every run (``tests/test_layout.py``, ``tests/test_hidden_cases.py``). Lab 4 (C++ sources beside the
notebook, a minute and a half: two builds) is among them: that every file of ``labs/`` ships, its ``cpp/`` included,
is checked on every run (``test_the_copy_holds_what_students_need``), and its handout's C++ builds from ``labs/`` in
``tests/test_labs.py``."""


def test_the_copy_holds_every_course_module_each_lab_imports_and_its_public_files(copy):
    """What ``-m slow`` shows by running every lab from the copy, checked from the sources on every run: each lab's
    folder but its grader-only files, and every course module it or its solution imports, are in the copy."""
    for name in COURSE_LABS:
        lab = LABS[name]
        root = labs.folder(lab)
        public = [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and not labs.grader_only(p.relative_to(root))]
        wanted = {p.resolve().relative_to(REPO).as_posix() for p in [*public, *labs.imported_sources(lab)]}
        missing = sorted(path for path in wanted if not (copy / path).is_file())
        assert public and missing == [], (name, missing)


@pytest.mark.notebook
@pytest.mark.parametrize("lab_name", [pytest.param(name, marks=() if name in FROM_THE_COPY_EVERY_RUN else pytest.mark.slow)
                                      for name in COURSE_LABS])
def test_each_lab_runs_from_the_copy_as_handed_out_and_once_finished(copy, tmp_path, lab_name):
    """Every lab runs from the students' copy alone: the handout as released (each task's public checks
    say which task to implement) and the same lab finished (the solution's notebook and support files in
    its place) passing every public check: the copy holds everything a lab's notebook and checks need."""
    lab = LABS[lab_name]
    copy = Path(shutil.copytree(copy, tmp_path / "course"))
    count = len(lab.tasks)

    handout = _run_in_copy(copy, copy / "labs", "-m", "grader", "check", lab_name)
    assert handout.returncode == 1, handout.stdout + handout.stderr
    assert f"0/{count} tasks pass all their public checks" in handout.stdout, handout.stdout[-3000:]
    for task in lab.tasks:
        assert f"Implement task {task.id}:" in handout.stdout, (task.id, handout.stdout[-3000:])

    where = Path(lab.notebook).parent
    shutil.copy(REPO / "solutions" / lab.notebook, copy / "labs" / lab.notebook)
    for support in lab.support:
        shutil.copytree(REPO / "solutions" / where / support, copy / "labs" / where / support, dirs_exist_ok=True)
    finished = _run_in_copy(copy, copy / "labs", "-m", "grader", "check", lab_name)
    assert finished.returncode == 0, finished.stdout[-3000:] + finished.stderr[-3000:]
    assert f"{count}/{count} tasks pass all their public checks" in finished.stdout
