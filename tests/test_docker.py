"""The Docker images, checked without a Docker engine (``tests/test_images.py`` builds and runs them).

``docker/image_files.py`` computes, from the Dockerfile's COPY lines and ``.dockerignore``, every
file each target puts into its image; these tests prove the student image, built from the students'
copy (``python -m grader release``) as docker/build_images.sh builds it, holds no solution and no
reference, and that the images install exactly what the README and CI install.
"""
from __future__ import annotations

import importlib.util
import json
import re
import shlex
import sys
from pathlib import Path

import nbformat
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from grader.author.markers import ANY
from util.labs import grader_only_paths

REPO = Path(__file__).resolve().parent.parent
DOCKER = REPO / "docker"


def _load_image_files():
    spec = importlib.util.spec_from_file_location("image_files", DOCKER / "image_files.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


image_files = _load_image_files()
STAGES = {stage.name: stage for stage in image_files.stages()}


@pytest.fixture(scope="module")
def student_copy(tmp_path_factory) -> Path:
    """The students' copy, the student image's build context."""
    from grader.author import release

    dest = tmp_path_factory.mktemp("release") / "course"
    release.release(dest)
    return dest


@pytest.fixture(scope="module")
def student_files(student_copy) -> dict[str, str]:
    """Image path -> path in the students' copy, for every file the student target copies from it."""
    return image_files.image_files("student", dockerfile=student_copy / "docker" / "Dockerfile", context=student_copy)


@pytest.fixture(scope="module")
def grader_files() -> dict[str, str]:
    return image_files.image_files("grader")


def _chain(target: str):
    return image_files.lineage(list(STAGES.values()), target)


REGION_BEGIN = re.compile(r"^\s*(//\s*)?### BEGIN SOLUTION\s*$")
REGION_END = re.compile(r"^\s*(//\s*)?### END SOLUTION\s*$")
SOURCES = ("*.ipynb", "*.cpp", "*.h", "*.py")


def _sources(path: Path) -> list[str]:
    """A solution file's code: each code cell of a notebook, or the whole text of a source file."""
    if path.suffix == ".ipynb":
        return [c.source for c in nbformat.read(str(path), as_version=4).cells if c.cell_type == "code"]
    return [path.read_text(encoding="utf-8")]


def _solution_regions() -> list[set[str]]:
    """The distinctive lines of each solution region under solutions/ (lines the given code never has)."""
    regions, given = [], set()
    files = sorted(p for pattern in SOURCES for p in (REPO / "solutions").rglob(pattern) if "build" not in p.parts)
    for path in files:
        for source in _sources(path):
            region = None
            for line in source.splitlines():
                if REGION_BEGIN.match(line):
                    region = set()
                elif REGION_END.match(line):
                    regions.append(region)
                    region = None
                elif region is not None:
                    region.add(line.strip())
                else:
                    given.add(line.strip())
    return [kept for r in regions if (kept := {line for line in r - given if len(line) >= 20})]


# ---------------------------------------------------------------- what the student image holds

def test_student_image_holds_no_solution_reference_or_example(student_files):
    sources = set(student_files.values())
    forbidden = [s for s in sources if s.startswith(("solutions/", "grader/references/", "grader/examples/",
                                                     "tests/", "benchmarks/")) or s.endswith("/mistakes.py")]
    assert forbidden == []
    json_files = sorted(s for s in sources if s.endswith(".json"))
    assert [s for s in json_files if not public_json(s)] == [], "no JSON file (references, answers) belongs there"
    assert "docker/jupyter/overrides.json" in json_files and "grader/panel/labextension/package.json" in json_files


def public_json(path: str) -> bool:
    """Whether a JSON file may be in a student's copy: JupyterLab's settings, the course panel's extension
    (its package metadata and licences), and a lab's public data named ``*_public.json`` (lab 14's compiler
    figures for the notebook). References, answers and hidden cases are JSON too and never are."""
    return (path.startswith(("docker/jupyter/", "grader/panel/labextension/", "grader/panel/frontend/"))
            or re.fullmatch(r"util/labs/lab\d+/[a-z0-9_]+_public\.json", path) is not None)


def test_no_student_file_contains_solution_code(student_files, student_copy):
    """No file holds half or more of any solution region's lines (one generic line may recur in util/)."""
    regions = _solution_regions()
    assert len(regions) >= 20  # the solutions (notebooks and lab 4's C++) really have code to leak
    for source in sorted(set(student_files.values())):
        text = (student_copy / source).read_text(encoding="utf-8", errors="replace")
        if source.startswith("labs/"):
            assert not ANY.search(text), f"{source} carries a solution marker"
        for region in regions:
            found = [line for line in region if line in text]
            assert len(found) * 2 < len(region), f"{source} contains solution code: {found[:3]}"


def test_student_image_has_the_labs_and_what_they_import(student_files):
    sources = set(student_files.values())
    labs = {p.relative_to(REPO).as_posix() for p in (REPO / "labs").glob("*.ipynb")}
    assert labs and labs <= sources
    secret = [p.relative_to(REPO).as_posix() for p in grader_only_paths()]  # mistakes, judges
    util = {p.relative_to(REPO).as_posix() for p in (REPO / "util").rglob("*.py") if "__pycache__" not in p.parts}
    util = {f for f in util if not f.startswith(tuple(secret))}
    assert len(util) > 20 and util <= sources
    assert not [s for s in sources if s.startswith(tuple(secret))]
    grader = {p.relative_to(REPO).as_posix() for p in (REPO / "grader").rglob("*.py")
              if "__pycache__" not in p.parts and p.parts[len(REPO.parts) + 1] != "examples"}
    assert grader <= sources  # python -m grader check imports across the grader's subpackages (one COPY)
    for needed in ("requirements.txt", "pyproject.toml", "README.md", "docker/setup.sh", "grader/selfcheck.py",
                   "grader/cli.py", "grader/__main__.py"):
        assert needed in sources
    # pip install -e . finds the packages pyproject.toml includes: their __init__.py must be there
    include = re.search(r'include = \[(.*?)\]', (REPO / "pyproject.toml").read_text()).group(1)
    for package in re.findall(r'"(\w+)"', include):
        assert f"{package}/__init__.py" in sources, package
    assert student_files["/course/labs/lab1_pytorch_analysis.ipynb"] == "labs/lab1_pytorch_analysis.ipynb"


def test_grader_image_has_everything_the_grader_needs(grader_files):
    sources = set(grader_files.values())
    for folder, pattern in (("solutions", "*.ipynb"), ("grader/references", "*.json"), ("labs", "*.ipynb")):
        expected = {p.relative_to(REPO).as_posix() for p in (REPO / folder).glob(pattern)}
        assert expected and expected <= sources, folder
    assert "grader/examples/lab1/flops_as_macs.ipynb" in sources


def test_dockerignore_keeps_local_state_out(tmp_path):
    patterns = image_files.ignore_patterns(REPO)
    for path in (".venv/bin/python", ".git/HEAD", "build/onnx/a.onnx", "labs/outputs/lab1/1.1.json",
                 "util/__pycache__/x.pyc", "labs/.ipynb_checkpoints/a.ipynb", "ml_cost_course.egg-info/PKG-INFO",
                 "labs/lab4_libtorch/cpp/build/analyzer", "labs/lab4_libtorch/googlenet.pt"):
        assert image_files.is_ignored(path, patterns), path
    for path in ("labs/lab1_pytorch_analysis.ipynb", "util/models.py", "grader/references/lab1.json", "grader/author/build.py",
                 "labs/lab4_libtorch/cpp/CMakeLists.txt"):
        assert not image_files.is_ignored(path, patterns), path


def test_copy_globs_stay_in_one_folder_as_docker_does():
    regex = image_files.glob_regex("grader/*.py")
    assert regex.match("grader/cli.py") and not regex.match("grader/examples/lab1.py")
    assert image_files.glob_regex("**/outputs").match("labs/outputs")
    assert image_files.glob_regex("**/outputs").match("outputs")


_NAMES = st.sampled_from(["a", "b", "build", "x.py", "y.onnx", ".venv", "keep"])
_TREES = st.lists(st.lists(_NAMES, min_size=1, max_size=4), min_size=1, max_size=12)
_PATTERNS = st.lists(st.sampled_from([".venv", "**/build", "a", "a/b", "**/*.onnx", "*/x.py", "b/**", "!a/keep",
                                      "!**/build/x.py", "!keep", "a/*", "?"]), max_size=5)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(trees=_TREES, patterns=_PATTERNS)
@example(trees=[["a", "keep"], ["a", "x.py"]], patterns=["a", "!a/keep"])  # an ignored folder, a file let back
@example(trees=[["b", "build", "x.py"], ["b", "build", "y.onnx"]], patterns=["**/build", "!**/build/x.py"])
@example(trees=[[".venv", "a", "x.py"], ["keep"]], patterns=[".venv", "**/*.onnx"])
def test_the_context_walk_sends_exactly_the_files_the_patterns_keep(tmp_path_factory, trees, patterns):
    """The walk skips ignored folders (the repository's .venv alone holds tens of thousands of files) yet sends
    exactly the files that matching every file against .dockerignore sends, with ``!`` lines or without them."""
    root = tmp_path_factory.mktemp("context")
    for parts in trees:
        folder = root.joinpath(*parts[:-1])
        if any(p.is_file() for p in [folder, *folder.parents] if root in p.parents):
            continue  # a file already stands where this path needs a folder
        folder.mkdir(parents=True, exist_ok=True)
        if not folder.joinpath(parts[-1]).is_dir():
            folder.joinpath(parts[-1]).write_text("x")
    every = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    expected = sorted((rel for rel in every if not image_files.is_ignored(rel, patterns)), key=lambda rel: rel.split("/"))
    assert image_files._context_files(root, patterns) == expected


# ---------------------------------------------------------------- how the images are made

def test_base_image_is_pinned_to_an_exact_tag():
    """The base is a build argument (docker/base_image.sh gives a stand-in where no registry answers) whose
    default is the exact official tag."""
    bases = [s.base for s in STAGES.values() if s.base not in STAGES]
    assert bases == ["python:3.11.7-slim-bookworm"]
    assert "FROM ${BASE} AS base" in (DOCKER / "Dockerfile").read_text()
    for base in bases:
        assert re.fullmatch(r"[\w./-]+:\d+\.\d+\.\d+[\w.-]*(@sha256:[0-9a-f]{64})?", base), base


def _shell_blocks(markdown: str) -> list[str]:
    """The fenced code blocks of ``markdown`` marked bash, sh or console, or not marked."""
    blocks, current, language = [], None, ""
    for line in markdown.splitlines():
        if line.startswith("```"):
            if current is None:
                current, language = [], line[3:].strip()
            else:
                if language in ("", "bash", "sh", "console"):
                    blocks.append("\n".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def test_both_images_install_with_the_one_setup_script_the_readme_and_ci_use():
    """The pinned packages are installed once, in the stage both images are built on; each image then runs
    the whole script (the packages are there: it installs the course itself)."""
    assert [s.name for s in _chain("student")][:2] == [s.name for s in _chain("grader")][:2] == ["base", "deps"]
    [deps_run] = [i.args for i in STAGES["deps"].all("RUN")]
    assert deps_run == "docker/setup.sh --requirements-only /course/.venv"
    assert {i.args for i in STAGES["deps"].all("COPY")} == {"requirements.txt ./", "docker/setup.sh docker/"}
    for target in ("student", "grader"):
        runs = [i.args for i in STAGES[target].all("RUN")]
        assert [r for r in runs if "setup.sh" in r] == ["docker/setup.sh /course/.venv"], target
        runs = [i.args for stage in _chain(target) for i in stage.all("RUN")]
        assert not any("pip install" in r for r in runs), "install Python packages only through docker/setup.sh"
    setup = (DOCKER / "setup.sh").read_text()
    assert re.search(r"pip install [^\n]*-r requirements\.txt -e \.", setup)
    # --requirements-only: the same install without the course itself (-e .), then stop
    assert re.search(r'ONLY_REQUIREMENTS" \]; then\n\s+"\$VENV/bin/python" -m pip install --progress-bar off '
                     r'-r requirements\.txt\n\s+exit 0\n', setup)
    readme = "\n".join(path.read_text() for path in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])
    ci = (REPO / ".ci" / "run").read_text()
    assert "docker/setup.sh" in readme and "docker/setup.sh" in ci
    blocks = _shell_blocks(readme)  # what a reader runs (prose may name optional tools, e.g. dask-jobqueue)
    images = _shell_blocks((REPO / "docs" / "images.md").read_text())
    for name, text in (("README.md and docs/", "\n".join(blocks)), ("docs/images.md", "\n".join(images)), (".ci/run", ci)):
        commands = [line.split("#")[0] for line in text.splitlines()]
        assert not any("pip install" in c for c in commands), f"{name} installs packages outside docker/setup.sh"
    assert len(blocks) > 10  # the README's command blocks were found


def test_toolchains_lab4_needs_and_the_grader_sandbox():
    def apt(target):
        return " ".join(i.args for stage in _chain(target) for i in stage.all("RUN") if "apt-get install" in i.args)
    for target in ("student", "grader"):
        assert {"g++", "cmake"} <= set(apt(target).split()), target
    assert "bubblewrap" in apt("grader").split()
    assert "bubblewrap" not in apt("student").split()


def test_images_run_as_a_user_other_than_root_who_cannot_change_the_packages():
    """The last USER is not root, and every RUN comes before it: the virtual environment belongs to root, so
    neither a student nor a graded notebook (run as the grader's user) can change what is installed."""
    for target in ("student", "grader"):
        users = [i.args for stage in _chain(target) for i in stage.all("USER")]
        assert users and users[-1] not in ("root", "0"), target
        [last_user] = STAGES[target].all("USER")
        assert all(r.line < last_user.line for r in STAGES[target].all("RUN")), target


def _student_ports() -> set[int]:
    return {int(p) for i in STAGES["student"].all("EXPOSE") for p in i.args.split()}


def test_student_image_exposes_the_ports_the_readme_publishes():
    from grader.author.handouts import release_readme

    assert _student_ports() == {8888, 8081}
    readme = release_readme()   # the students' README (python -m grader release)
    published = {int(p) for p in re.findall(r"-p 127\.0\.0\.1:(\d+):\1", readme)}
    assert published == _student_ports()
    compose = (DOCKER / "compose.yaml").read_text()
    assert {int(p) for p in re.findall(r'"127\.0\.0\.1:(\d+):\1"', compose)} == _student_ports()
    images = (REPO / "docs" / "images.md").read_text()
    assert {int(p) for p in re.findall(r"-p 127\.0\.0\.1:(\d+):\1", images)} == _student_ports()
    env = " ".join(i.args for i in STAGES["student"].all("ENV"))
    assert "NETRON_HOST=0.0.0.0" in env and "NETRON_PORT=8081" in env


def test_student_image_starts_jupyterlab_on_8888():
    [cmd] = STAGES["student"].all("CMD")
    argv = json.loads(cmd.args)
    assert argv[:2] == ["jupyter", "lab"] and "--port=8888" in argv and "--ip=0.0.0.0" in argv


def test_student_image_turns_off_jupyter_news_with_settings_it_holds(student_files):
    """The CMD points JupyterLab's app settings at docker/jupyter/, which the image holds: no news pop-up."""
    [cmd] = STAGES["student"].all("CMD")
    [folder] = [a.split("=", 1)[1] for a in json.loads(cmd.args) if a.startswith("--LabApp.app_settings_dir=")]
    assert student_files[f"{folder}/overrides.json"] == "docker/jupyter/overrides.json"
    overrides = json.loads((DOCKER / "jupyter" / "overrides.json").read_text())
    assert overrides["@jupyterlab/apputils-extension:notification"] == {"fetchNews": "false", "checkForUpdates": False}
    assert "--LabApp.news_url=None" in json.loads(cmd.args)


def test_student_image_user_takes_the_hosts_ids_from_build_arguments():
    """A bind-mounted labs/ belongs to the host's user: the image's user gets its uid and gid (build args),
    so the container may write there and what it writes stays the student's."""
    args = dict(i.args.split("=") for i in STAGES["student"].all("ARG") if "=" in i.args)
    assert args == {"UID": "1000", "GID": "1000"}
    [useradd] = [i.args for i in STAGES["student"].all("RUN") if "useradd" in i.args]
    assert '--uid "$UID"' in useradd and '--gid "$GID"' in useradd and '--gid "$GID" student' in useradd
    assert "--non-unique" in useradd  # a host gid the base image already uses (macOS: 20) still works
    # root's ids (a build as root with $(id -u)) would make a second root account JupyterLab refuses to run as
    assert useradd.startswith('if [ "$UID" = 0 ] || [ "$GID" = 0 ]; then') and "exit 1" in useradd.split("fi")[0]
    compose = (DOCKER / "compose.yaml").read_text()
    assert "UID: ${COURSE_UID:-1000}" in compose and "GID: ${COURSE_GID:-1000}" in compose
    from grader.author.handouts import release_readme
    readme = release_readme()
    assert "--build-arg UID=$(id -u) --build-arg GID=$(id -g)" in readme and "COURSE_UID" in readme


def test_ci_installs_what_the_browser_sandbox_and_image_tests_need():
    ci = (REPO / ".ci" / "run").read_text().replace("\\\n", " ")
    apt = " ".join(line for line in ci.splitlines() if "apt-get" in line and "install" in line)
    for package in ("chromium", "chromium-driver", "bubblewrap", "g++", "cmake", "docker.io", "docker-compose",
                    "debootstrap"):
        assert package in shlex.split(apt), package
