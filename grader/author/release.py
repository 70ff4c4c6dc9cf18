"""``python -m grader release DIR``: the students' copy of the course, and nothing else.

The copy holds the files of the student image (``docker/Dockerfile``'s ``student`` target, its
``COPY`` lines and ``.dockerignore``, listed by ``docker/image_files.py``), so one list decides what
students get, with or without Docker: the lab notebooks (``labs/``, with ``labs/README.md``),
``util/``, the grader's code (for ``python -m grader check``; never ``grader/references/`` or
``grader/examples/``), the requirements and ``docker/setup.sh``; minus every lab's grader-only
files (``util.labs.GRADER_ONLY``: the mistakes, which quote the solutions, and the judges, which may
hold a reference implementation). Build the student image from the copy, not from this repository,
whose context still holds the judges (the grader image needs them). Added to those: what building that image *from the copy*
needs (``docker/Dockerfile``, ``docker/compose.yaml``, ``.dockerignore``), and a ``README.md``
written for students (:mod:`grader.author.handouts`) in place of this repository's.

``tests/test_release.py`` proves the copy holds no solution, reference or example and that a lab
runs from it; publish the folder (a repository, a zip) as it is.
"""
from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path, PurePosixPath

from grader import REPO
from grader.author import handouts
from util import labs

IMAGE_ROOT = PurePosixPath("/course")
"""Where the student image puts the course (the Dockerfile's WORKDIR)."""
FOR_THE_IMAGE = ("docker/Dockerfile", "docker/compose.yaml", ".dockerignore")
"""Files the image does not hold but building it from the copy needs."""
NEVER = ("solutions/", "grader/references/", "grader/examples/", "tests/", "benchmarks/")
"""Repository folders the copy never takes, whatever the student target's ``COPY`` lines would take from
here: it copies the grader's code as one folder, whose references and example submissions stay here (the
Dockerfile's student stage refuses a build context that holds them)."""


def _image_files():
    spec = importlib.util.spec_from_file_location("image_files", REPO / "docker" / "image_files.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _grader_only(source: str) -> bool:
    """Whether a repository file is one of a lab's grader-only files (mistakes, judges)."""
    path = (REPO / source).resolve()
    for lab in labs.LABS.values():
        root = labs.folder(lab)
        if path.is_relative_to(root) and labs.grader_only(path.relative_to(root)):
            return True
    return False


def student_files() -> dict[str, str]:
    """Path in the copy -> path in this repository, for every file the copy takes from here: the student
    target's files less the labs' grader-only files and the folders in :data:`NEVER`.

    ``README.md`` is absent: the copy gets the students' README (:func:`handouts.release_readme`).
    """
    files = {}
    for image_path, source in _image_files().image_files("student").items():
        if not _grader_only(source) and not source.startswith(NEVER):
            files[PurePosixPath(image_path).relative_to(IMAGE_ROOT).as_posix()] = source
    files.update({name: name for name in FOR_THE_IMAGE})
    files.pop("README.md", None)
    return dict(sorted(files.items()))


def release(dest: Path) -> list[Path]:
    """Write the students' copy into ``dest`` (which must not exist or be empty); return its files."""
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise FileExistsError(f"{dest} exists and is not an empty folder; give a new folder (the copy is "
                              "written whole, never merged into an older one)")
    if dest.resolve().is_relative_to(REPO.resolve() / "labs") or dest.resolve() == REPO.resolve():
        raise ValueError(f"{dest} is inside the course's own labs/ or is its root; write the copy elsewhere "
                         "(e.g. build/student)")
    written = []
    for target, source in student_files().items():
        path = dest / target
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / source, path)
        written.append(path)
    readme = dest / "README.md"
    readme.write_text(handouts.release_readme(), encoding="utf-8")
    return sorted([*written, readme])


def main(*, dest: Path) -> int:
    """``python -m grader release DIR``: write the copy and say what it holds."""
    try:
        files = release(dest)
    except (FileExistsError, ValueError) as exc:
        print(f"release: {exc}", file=sys.stderr)
        return 1
    tops: dict[str, int] = {}
    for path in files:
        top = path.relative_to(dest).parts[0]
        tops[top] = tops.get(top, 0) + 1
    notebooks = sum(1 for p in files if p.suffix == ".ipynb")
    print(f"wrote the students' copy to {dest}: {len(files)} files, {notebooks} lab notebooks "
          f"({', '.join(f'{top} {count}' for top, count in sorted(tops.items()))}); no solutions, references "
          "or example submissions. Students start with its README.md.")
    return 0
