"""Every lab's solution passes its public checks in the student container, as a student would run them there.

``tests/test_images.py`` checks lab 1 on every CI run (the handout failing every task, the solution passing every
one). This module repeats the solution's half for every other lab, under ``-m slow`` (before a release: each lab's
packages, models and compiled parts as the student image has them, not as this machine does). Needs the student
image (``docker/build_images.sh``); without it, it skips as the images' tests do.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_images  # noqa: E402  (docker(), require(), the student's labs folder, the task lines)
from test_images import STUDENT, docker, require  # noqa: E402

from grader import REPO  # noqa: E402
from util.labs import LABS  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("images")]


def _with_solution(labs: Path, notebook: str, uid: int, gid: int) -> None:
    """Put the solution of ``notebook`` (a folder lab's whole folder: its C++ or kernel sources too) into the
    student's ``labs``, owned as the student's own files are."""
    top = Path(notebook).parts[0]
    source = REPO / "solutions" / top
    if source.is_dir():
        shutil.copytree(source, labs / top, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("outputs", "build", ".ipynb_checkpoints"))
    else:
        shutil.copy(source, labs / top)
    for path in [labs / top, *(labs / top).rglob("*")]:
        os.chown(path, uid, gid)


@pytest.mark.parametrize("lab_name", [name for name in LABS if name != "lab1"])
def test_every_labs_solution_passes_its_checks_in_the_student_container(lab_name, tmp_path):
    """``python -m grader check labN`` in the student container on a bind-mounted labs/ holding lab N's solution:
    every task is listed and passes all its public checks (exit 0)."""
    require(STUDENT)
    lab = LABS[lab_name]
    uid, gid = test_images._image_ids(STUDENT)
    labs = test_images._labs_folder(tmp_path, uid, gid)
    _with_solution(labs, lab.notebook, uid, gid)
    done = docker("run", "--rm", "-v", f"{labs}:/course/labs", "-w", "/course/labs", STUDENT,
                  "python", "-m", "grader", "check", lab_name, timeout=1800, check=False)
    tasks = test_images._task_lines(done.stdout)
    assert set(tasks) == {t.id for t in lab.tasks}, done.stdout[-3000:] + done.stderr[-2000:]
    assert done.returncode == 0 and all(passed == checks for passed, checks in tasks.values()), \
        done.stdout[-3000:] + done.stderr[-2000:]
    assert f"{len(lab.tasks)}/{len(lab.tasks)} tasks pass all their public checks" in done.stdout
