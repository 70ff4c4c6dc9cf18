"""The course's images, built and run for real: the student image as a student meets it, the grader image
grading the example class in its sandbox, Compose, and what no image students get may hold.

``docker/build_images.sh --keep-engine`` builds the images (``.ci/run`` does, then runs these tests and
``docker/engine.sh stop``). The tests are marked ``images`` and left out of a plain ``python -m pytest``
(``pyproject.toml``'s addopts); run them with ``python -m pytest -m images``. Without a Docker engine or
the images they skip, saying what to run; with ``COURSE_IMAGES_REQUIRED=1`` (CI's images step) they fail.

They run as root on CI: the student image's user is 1000:1000 (the build's default), so the labs/ folder
a test mounts is handed to those ids first, as a student's own folder would be theirs.
"""
from __future__ import annotations

import csv
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from webdriver import browser, inked_fraction  # noqa: F401 (a fixture)

from util.labs import LABS, grader_only_paths

REPO = Path(__file__).resolve().parent.parent
DOCKER = os.environ.get("COURSE_DOCKER", "/usr/bin/docker")
STUDENT = os.environ.get("COURSE_STUDENT_IMAGE", "ml-cost-course:student")
GRADER = os.environ.get("COURSE_GRADER_IMAGE", "ml-cost-course:grader")
DEPS = f"{STUDENT.split(':')[0]}:deps"
BUILD_ARGS = REPO / "build" / "images" / "build_args"
"""The arguments docker/build_images.sh built with (one per line): a build with them finds its stages cached."""
SANDBOX_OPTIONS = ("--security-opt", "seccomp=unconfined", "--security-opt", "systempaths=unconfined")
"""What bubblewrap in the grader container needs (measured; docs/images.md)."""
ARTIFACTS = REPO / "build" / "artifacts"
START_TIMEOUT = 120
"""Seconds JupyterLab in a container may take to answer (1.5 s measured on an idle machine)."""

pytestmark = [pytest.mark.images, pytest.mark.xdist_group("images")]
"""One xdist group (one student container for the module); the grader image's test adds a group of its own,
so under ``-n 2`` its minutes of grading run beside the rest."""

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_docker  # noqa: E402  (the solution-region reader and the image_files loader)


def docker(*args: str, timeout: float = 120, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """``docker ARGS`` with the engine's client; raises with its output when ``check`` and it fails."""
    done = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout, **kwargs)
    if check and done.returncode != 0:
        raise AssertionError(f"docker {' '.join(args[:3])} ... exited {done.returncode}:\n"
                             f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


def _unavailable(reason: str) -> None:
    if os.environ.get("COURSE_IMAGES_REQUIRED"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def require(*images: str) -> None:
    """Skip (fail with COURSE_IMAGES_REQUIRED) unless an engine answers and ``images`` are built."""
    if not Path(DOCKER).exists() or subprocess.run([DOCKER, "info"], capture_output=True).returncode != 0:
        _unavailable(f"no Docker engine answers ({DOCKER} info): start one with docker/engine.sh start, "
                     "build the images with docker/build_images.sh")
    for image in images:
        if subprocess.run([DOCKER, "image", "inspect", image], capture_output=True).returncode != 0:
            _unavailable(f"no image {image}: build it with docker/build_images.sh --keep-engine")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, token: str | None = None, method: str = "GET", body: dict | None = None):
    """(status, headers, body text) of one request; errors are answers too."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if token:
        req.add_header("Authorization", f"token {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.headers, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read().decode("utf-8", "replace")


def _wait_for_api(base: str, token: str, container: str, deadline_s: float = START_TIMEOUT) -> float:
    """Seconds until JupyterLab's /api/status answers 200; fails with the container's log otherwise."""
    started = time.monotonic()
    while time.monotonic() - started < deadline_s:
        try:
            if _get(f"{base}/api/status", token)[0] == 200:
                return time.monotonic() - started
        except OSError:
            pass
        if docker("inspect", "-f", "{{.State.Running}}", container, check=False).stdout.strip() == "false":
            break
        time.sleep(0.25)
    logs = docker("logs", container, check=False)
    pytest.fail(f"JupyterLab in {container} did not answer on {base} within {deadline_s} s:\n"
                f"{(logs.stdout + logs.stderr)[-3000:]}")


def _image_ids(image: str) -> tuple[int, int]:
    out = docker("run", "--rm", "--entrypoint", "id", image, "-u").stdout, \
        docker("run", "--rm", "--entrypoint", "id", image, "-g").stdout
    return int(out[0]), int(out[1])


def _labs_folder(dest: Path, uid: int, gid: int) -> Path:
    """A student's labs/ folder (the handouts), owned by the image user's ids as a student's own would be."""
    labs = Path(shutil.copytree(REPO / "labs", dest / "labs",
                                ignore=shutil.ignore_patterns("outputs", "build", ".ipynb_checkpoints")))
    for path in [labs, *labs.rglob("*")]:
        os.chown(path, uid, gid)
    return labs


# ---------------------------------------------------------------- what no image students get holds

def _course_files(image: str, dest: Path) -> list[str]:
    """Extract the image's /course (without its virtual environment) into ``dest``; its files, relative."""
    tar = dest / "course.tar"
    with tar.open("wb") as handle:
        subprocess.run([DOCKER, "run", "--rm", "--entrypoint", "tar", image, "-C", "/course", "--exclude=./.venv",
                        "-cf", "-", "."], stdout=handle, check=True, timeout=300)
    with tarfile.open(tar) as archive:
        archive.extractall(dest / "course", filter="data")
    return sorted(p.relative_to(dest / "course").as_posix() for p in (dest / "course").rglob("*") if p.is_file())


SECRET_PATHS = re.compile(r"(^|/)(solutions|grader/references|grader/examples)(/|$)|^/course/(tests|benchmarks)(/|$)"
                          r"|/util/labs/lab\d+/(judge[^/]*|mistakes\.py)$")
"""Paths no image students get may have, anywhere in its file system (a lab's grader-only files are
``util.labs.GRADER_ONLY``: ``mistakes.py`` and ``judge*``)."""


@pytest.mark.parametrize("image", [STUDENT, DEPS])
def test_no_image_students_get_holds_a_solution_reference_example_or_grader_only_file(image, tmp_path):
    """On the built image's own file system: no secret path anywhere (``find /``), and the course's files are
    the students' copy's, none of them with solution code or a reference answer. The shared ``deps`` stage
    lies under both images, the grader's too: it holds the two files it installs from, nothing else."""
    require(image)
    listing = docker("run", "--rm", "--user", "root", "--entrypoint", "find", image, "/", "-xdev", "(", "-path", "/proc", "-o",
                     "-path", "/sys", ")", "-prune", "-o", "-print", timeout=300).stdout.splitlines()
    assert len(listing) > 10_000 and "/course/.venv/bin/python" in listing   # the whole file system was listed
    assert [p for p in listing if SECRET_PATHS.search(p)] == []
    assert SECRET_PATHS.search("/course/util/labs/lab7/judge_emulator.py")   # the pattern does see them
    assert SECRET_PATHS.search("/course/grader/references/lab1.json")

    files = _course_files(image, tmp_path)
    if image == DEPS:
        assert files == ["docker/setup.sh", "requirements.txt"]
        return
    secret = tuple(p.relative_to(REPO).as_posix() for p in grader_only_paths())
    assert len(secret) >= 8 and not [f for f in files if f.startswith(secret)]
    json_files = [f for f in files if f.endswith(".json")]
    assert "docker/jupyter/overrides.json" in json_files and not [f for f in json_files if not test_docker.public_json(f)]
    regions = test_docker._solution_regions()
    assert len(regions) >= 20
    for name in files:
        text = (tmp_path / "course" / name).read_text(encoding="utf-8", errors="replace")
        if name.startswith("labs/"):
            assert "BEGIN SOLUTION" not in text, f"{name} carries a solution marker"
        for region in regions:
            found = [line for line in region if line in text]
            assert len(found) * 2 < len(region), f"{name} in {image} contains solution code: {found[:3]}"
    # exactly the files docker/image_files.py computes for the students' copy, plus the editable install's record
    copy = REPO / "build" / "images" / "student-copy"
    if copy.is_dir():
        computed = test_docker.image_files.image_files("student", dockerfile=copy / "docker" / "Dockerfile", context=copy)
        expected = {str(Path(p).relative_to("/course")) for p in computed}
        assert {f for f in files if not f.startswith("ml_cost_course.egg-info/")} == expected


def test_the_student_target_refuses_the_repository_as_its_context():
    """Built from this repository instead of the students' copy, the student image stops at its check and
    names what it found (before anything is installed)."""
    require(DEPS)
    if not BUILD_ARGS.is_file():
        _unavailable(f"no {BUILD_ARGS.relative_to(REPO)}: build the images with docker/build_images.sh")
    args = BUILD_ARGS.read_text().splitlines()
    done = subprocess.run([DOCKER, "build", "--progress=plain", *args, "-f", str(REPO / "docker" / "Dockerfile"),
                           "--target", "student", "-t", "course-images-test:refused", str(REPO)],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "DOCKER_BUILDKIT": "1"})
    log = done.stdout + done.stderr
    assert done.returncode != 0, log[-2000:]
    assert re.search(r"\[deps 3/3\] RUN docker/setup.sh --requirements-only /course/.venv\n(#\d+ sha256:\w+\n)?#\d+ CACHED",
                     log), log[-3000:]   # the shared stage came from the cache: nothing was installed
    assert "the student image must not hold solutions, references, example submissions" in log
    for found in ("/course/grader/references", "/course/grader/examples", "/course/util/labs/lab3/judge.py"):
        assert found in log, found
    assert "docker/setup.sh /course/.venv\n" not in log.split("must not hold")[0]   # stopped before installing
    assert subprocess.run([DOCKER, "image", "inspect", "course-images-test:refused"], capture_output=True).returncode != 0


# ---------------------------------------------------------------- the student image, as a student meets it

@dataclass(frozen=True)
class Student:
    """A running student container."""

    name: str
    """The container's name."""
    base: str
    """JupyterLab's URL on the host's loopback."""
    token: str
    """JupyterLab's token."""
    labs: Path
    """The host folder mounted at /course/labs."""
    netron_port: int
    """The host's loopback port published to the container's netron port (8081)."""
    uid: int
    """The image user's uid (the build's UID)."""
    gid: int
    """The image user's gid (the build's GID)."""


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    """The student image run as its README says (ports on 127.0.0.1, labs/ mounted), with a known token."""
    require(STUDENT)
    uid, gid = _image_ids(STUDENT)
    labs = _labs_folder(tmp_path_factory.mktemp("student"), uid, gid)
    cmd = json.loads(docker("image", "inspect", "-f", "{{json .Config.Cmd}}", STUDENT).stdout)
    token, port, netron_port = secrets.token_hex(16), _free_port(), _free_port()
    name = f"course-images-test-{secrets.token_hex(4)}"
    docker("run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:8888", "-p", f"127.0.0.1:{netron_port}:8081",
           "-v", f"{labs}:/course/labs", STUDENT, *cmd, f"--IdentityProvider.token={token}",
           "--LabApp.expose_app_in_browser=True")
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for_api(base, token, name)
        yield Student(name, base, token, labs, netron_port, uid, gid)
    finally:
        docker("rm", "-f", name, check=False)


def test_jupyterlab_answers_on_loopback_only_and_serves_the_labs(student):
    """The server answers on the published loopback port, with the token only, runs as the student user, and
    lists the mounted labs/; the container publishes nothing on other addresses."""
    assert (student.uid, student.gid) == (1000, 1000)   # the build's default: CI builds as root without UID/GID
    assert _get(f"{student.base}/api/status")[0] == 403
    status, _, text = _get(f"{student.base}/api/contents/labs", student.token)
    assert status == 200
    names = {item["name"] for item in json.loads(text)["content"]}
    assert {"lab1_pytorch_analysis.ipynb", "README.md"} <= names
    ports = docker("port", student.name).stdout
    assert all(line.split(" -> ")[1].startswith("127.0.0.1:") for line in ports.splitlines()), ports
    assert docker("exec", student.name, "id", "-un").stdout.strip() == "student"


def test_a_file_saved_into_the_mounted_labs_belongs_to_the_builds_ids(student):
    """Saving from JupyterLab (its contents API, as the editor does) writes into the host's labs/ as the image's
    user: the file is the student's, with the build's UID and GID."""
    path = "labs/saved_in_the_container.ipynb"
    notebook = {"type": "notebook", "content": {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}}
    status, _, text = _get(f"{student.base}/api/contents/{path}", student.token, "PUT", notebook)
    assert status in (200, 201), text
    saved = student.labs / "saved_in_the_container.ipynb"
    assert json.loads(saved.read_text())["nbformat"] == 4
    assert (saved.stat().st_uid, saved.stat().st_gid) == (student.uid, student.gid) == (1000, 1000)


def test_netron_answers_on_its_published_port(student):
    """``util.netron_view.show`` in the container (as a notebook calls it) serves on 0.0.0.0:8081, which the
    host reaches on its published loopback port, with the course's handler (the cookie notice answered)."""
    script = ("import onnx, time\nfrom onnx import helper, TensorProto\n"
              "x = helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 4])\n"
              "y = helper.make_tensor_value_info('y', TensorProto.FLOAT, [1, 4])\n"
              "graph = helper.make_graph([helper.make_node('Relu', ['x'], ['y'])], 'tiny', [x], [y])\n"
              "from util.netron_view import show\nshow(helper.make_model(graph))\ntime.sleep(600)\n")
    docker("exec", "-d", student.name, "python", "-c", script)
    deadline, answer = time.monotonic() + 60, None
    while time.monotonic() < deadline:
        try:
            answer = _get(f"http://127.0.0.1:{student.netron_port}/")
            break
        except OSError:
            time.sleep(0.5)
    assert answer is not None, "netron did not answer on its published port within 60 s"
    status, headers, page = answer
    assert status == 200 and "<title>Netron</title>" in page
    assert (headers.get("Set-Cookie") or "").startswith("consent=")


def _task_lines(output: str) -> dict[str, tuple[int, int]]:
    """``Task 1.4 (MACs): 6/6 public checks passed`` lines: task id -> (passed, checks)."""
    return {m[1]: (int(m[2]), int(m[3])) for m in re.finditer(r"^Task (\S+) \(.*\): (\d+)/(\d+) public checks passed",
                                                               output, re.M)}


@pytest.mark.parametrize("notebook", ["handout", "solution"])
def test_check_lab1_in_the_container(notebook, tmp_path):
    """``python -m grader check lab1`` in the student container, on a bind-mounted labs/: the handout fails
    every task (exit 1), the solution in its place passes every task (exit 0)."""
    require(STUDENT)
    uid, gid = _image_ids(STUDENT)
    labs = _labs_folder(tmp_path, uid, gid)
    lab = LABS["lab1"]
    if notebook == "solution":
        target = labs / lab.notebook
        shutil.copy(REPO / "solutions" / lab.notebook, target)
        os.chown(target, uid, gid)
    done = docker("run", "--rm", "-v", f"{labs}:/course/labs", "-w", "/course/labs", STUDENT,
                  "python", "-m", "grader", "check", "lab1", timeout=900, check=False)
    tasks = _task_lines(done.stdout)
    assert set(tasks) == {t.id for t in lab.tasks}, done.stdout[-3000:] + done.stderr[-2000:]
    if notebook == "solution":
        assert done.returncode == 0 and all(passed == checks > 0 for passed, checks in tasks.values()), done.stdout
        assert f"{len(lab.tasks)}/{len(lab.tasks)} tasks pass all their public checks" in done.stdout
    else:
        assert done.returncode == 1 and all(passed == 0 < checks for passed, checks in tasks.values()), done.stdout
        assert f"0/{len(lab.tasks)} tasks pass all their public checks" in done.stdout


LAB_OPEN_TIMEOUT = 180
"""Seconds for the page to load, the kernel to start and JupyterLab to settle (about 10 s when idle)."""
THEME_FAILED = "Stylesheet failed to load"
"""JupyterLab's dialog when its theme's CSS does not arrive. Seen once, with this 2-core machine at a load
of 9 (other sessions' tests beside the grader image's): the page is then opened once more, as a student
would reload it, and the first screenshot is kept. Any other dialog fails the test."""
LAB_STATE = """
    const app = window.jupyterapp, widget = app && app.shell.currentWidget;
    const session = widget && widget.sessionContext && widget.sessionContext.session;
    const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
    const rect = panel ? panel.getBoundingClientRect() : null;
    return {kernel: session && session.kernel ? session.kernel.status : null,
            path: widget && widget.context ? widget.context.path : null,
            dirty: widget && widget.context ? widget.context.model.dirty : null,
            title: (document.querySelector('.jp-NotebookPanel .jp-RenderedMarkdown h1') || {}).textContent || null,
            toasts: Array.from(document.querySelectorAll('.Toastify__toast'), (t) => t.textContent),
            dialogs: Array.from(document.querySelectorAll('.jp-Dialog'), (d) => d.textContent),
            rect: rect ? {x: rect.x, y: rect.y, width: rect.width, height: rect.height} : null};"""


def _open_lab(browser, url: str) -> tuple[bool, dict]:
    """Open ``url`` and wait until the notebook's kernel has been idle for 5 s: (settled, JupyterLab's state)."""
    browser.open(url)
    deadline, state, idle_since = time.monotonic() + LAB_OPEN_TIMEOUT, {}, None
    while time.monotonic() < deadline:
        state = browser.script(LAB_STATE)
        if any(THEME_FAILED in dialog for dialog in state["dialogs"]):
            return False, state
        if state["kernel"] == "idle" and state["title"]:
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since > 5:   # give late notifications and metadata updates time
                return True, state
        time.sleep(0.5)
    return False, state


def test_a_student_opens_lab1_in_chromium(student, browser):
    """Headless Chromium opens lab 1 from the container's JupyterLab: the notebook is shown with its title,
    its kernel goes idle, nothing is marked modified and no pop-up or dialog shows. The screenshot is kept as
    ``build/artifacts/student_jupyterlab.png``."""
    name = LABS["lab1"].notebook
    url = f"{student.base}/lab/tree/labs/{name}?token={student.token}"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    png = ARTIFACTS / "student_jupyterlab.png"
    settled, state = _open_lab(browser, url)
    if any(THEME_FAILED in dialog for dialog in state["dialogs"]):
        (ARTIFACTS / "student_jupyterlab_first_try.png").write_bytes(browser.screenshot())
        warnings.warn(f"JupyterLab's theme did not load at the first try ({state['dialogs']}); opened it again",
                      stacklevel=2)
        settled, state = _open_lab(browser, url)
    png.write_bytes(browser.screenshot())
    assert settled, f"lab 1 did not settle in {LAB_OPEN_TIMEOUT} s (screenshot: {png}): {state}"
    assert state["path"] == f"labs/{name}" and state["title"].startswith("Lab 1")
    if state["dirty"] is not False:   # JupyterLab rewrote the kernel metadata the build wrote
        python = docker("exec", student.name, "python", "--version").stdout.split()[-1]
        pytest.fail(f"opening lab 1 marked it modified: the image's Python is {python}, the handouts' metadata "
                    "records 3.11.7 (grader/notebook.py KERNEL_METADATA); see docs/images.md, 'What failed'")
    assert state["toasts"] == [] and state["dialogs"] == []
    assert state["rect"]["width"] > 600 and state["rect"]["height"] > 400
    assert inked_fraction(png, state["rect"]) > 0.01   # the notebook's text is drawn, not a blank panel


# ---------------------------------------------------------------- Compose, as docs/images.md starts it

def test_compose_starts_the_student_image_as_documented(tmp_path):
    """``docker-compose -f docker/compose.yaml up`` (Compose v1, Debian 12's 1.29.2) in a students' copy: the
    image docker/build_images.sh built answers on 127.0.0.1:8888 with the token it prints, serving the copy's
    labs/; ``down`` removes it."""
    require(STUDENT)
    compose = shutil.which("docker-compose")
    if compose is None:
        _unavailable("needs Compose v1 (Debian: apt-get install docker-compose; .ci/run installs it)")
    if STUDENT != "ml-cost-course:student":
        pytest.skip("docker/compose.yaml names ml-cost-course:student")
    for port in (8888, 8081):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                pytest.fail(f"port {port} is taken on 127.0.0.1: the compose file publishes 8888 and 8081")
    uid, gid = _image_ids(STUDENT)
    copy = tmp_path / "course"
    (copy / "docker").mkdir(parents=True)
    shutil.copy(REPO / "docker" / "compose.yaml", copy / "docker" / "compose.yaml")
    _labs_folder(copy, uid, gid)
    project = f"courseimagestest{secrets.token_hex(3)}"
    env = {**os.environ, "COURSE_UID": str(uid), "COURSE_GID": str(gid)}
    argv = [compose, "-f", "docker/compose.yaml", "-p", project]
    try:
        up = subprocess.run([*argv, "up", "-d"], cwd=copy, env=env, capture_output=True, text=True, timeout=300)
        assert up.returncode == 0, up.stdout + up.stderr
        [container] = docker("ps", "-q", "--filter", f"label=com.docker.compose.project={project}").stdout.split()
        token = None
        for _ in range(240):
            token = re.search(r"token=([0-9a-f]+)", docker("logs", container, check=False).stderr)
            if token:
                break
            time.sleep(0.5)
        assert token, docker("logs", container, check=False).stderr[-3000:]
        _wait_for_api("http://127.0.0.1:8888", token[1], container)
        status, _, text = _get("http://127.0.0.1:8888/api/contents/labs", token[1])
        assert status == 200 and "lab1_pytorch_analysis.ipynb" in {i["name"] for i in json.loads(text)["content"]}
    finally:
        down = subprocess.run([*argv, "down"], cwd=copy, env=env, capture_output=True, text=True, timeout=300)
    assert down.returncode == 0, down.stdout + down.stderr
    assert docker("ps", "-aq", "--filter", f"label=com.docker.compose.project={project}").stdout.strip() == ""


# ---------------------------------------------------------------- the grader image

def _gradebooks(folder: Path) -> dict[str, list[list[str]]]:
    """Each gradebook CSV of a grading run's folder: file name -> rows (header first)."""
    return {p.name: list(csv.reader(p.open(newline="", encoding="utf-8"))) for p in sorted(folder.glob("gradebook*.csv"))}


def _sample() -> list[str]:
    """One example submission per lab (a notebook, or a folder for a folder lab), the first by name whose name no
    other lab's example shares (so it keeps its name graded alone), among those CI's main job grades
    (:func:`grader.author.build.every_run_paths`), as paths inside the repository."""
    from grader.author.build import every_run_paths

    graded = set(every_run_paths())
    entries = [p for lab in sorted((REPO / "grader" / "examples").iterdir()) if lab.is_dir()
               for p in sorted(lab.iterdir()) if p in graded]
    names = [p.stem for p in entries]
    chosen: dict[str, str] = {}
    for path in entries:
        if names.count(path.stem) == 1:
            chosen.setdefault(path.parent.name, path.relative_to(REPO).as_posix())
    return list(chosen.values())


def _rows(books: dict[str, list[list[str]]], names: set[str]) -> dict[str, list[list[str]]]:
    """Each gradebook's header and the rows of the submissions ``names``."""
    return {book: [rows[0]] + sorted(r for r in rows[1:] if r and r[0] in names) for book, rows in books.items()}


@pytest.mark.xdist_group("grader")   # minutes of grading: its own group, beside the student tests on the other worker
def test_the_grader_image_grades_the_example_class_in_its_sandbox_as_outside(tmp_path):
    """``grade`` in the grader container, run with the options docs/images.md gives, on one example submission of
    every lab, uses bubblewrap (not the no-sandbox fallback) and gives those submissions exactly the rows grading
    the whole class outside it gave them (CI's main job's ``build/gradebook`` when there is one; else graded here
    outside too). One per lab: every lab's machinery runs in the image, in a quarter of the whole class's time."""
    require(GRADER)
    sample = _sample()
    assert len(sample) == len([p for p in (REPO / "grader" / "examples").iterdir() if p.is_dir()]) >= 16
    inside = tmp_path / "inside"
    inside.mkdir()
    os.chown(inside, *_image_ids(GRADER))
    done = docker("run", "--rm", *SANDBOX_OPTIONS, "-v", f"{inside}:/out", GRADER,
                  "grade", *sample, "-j", "2", "--out", "/out/gradebook", "--no-progress", timeout=3000,
                  check=False)
    assert "sandbox: bubblewrap" in done.stderr and "WITHOUT a sandbox" not in done.stderr, done.stderr[-3000:]
    assert "isolation: bubblewrap" in done.stderr and "user namespace" in done.stderr
    inside_books = _gradebooks(inside / "gradebook")
    names = {Path(p).stem for p in sample}
    assert {r[0] for r in inside_books["gradebook.csv"][1:]} == names, done.stdout[-2000:] + done.stderr[-2000:]

    outside = REPO / "build" / "gradebook"
    if not (outside / "gradebook.csv").is_file():
        outside = tmp_path / "outside"
        graded = subprocess.run([sys.executable, "-m", "grader", "grade", *sample, "-j", "2", "--out", str(outside),
                                 "--no-progress"], cwd=REPO, capture_output=True, text=True, timeout=3000)
        assert (outside / "gradebook.csv").is_file(), graded.stderr[-3000:]
    outside_books = _gradebooks(outside)
    assert sorted(inside_books) == sorted(outside_books)
    assert len(inside_books) == 1 + len({p.parent.name for p in (REPO / "grader" / "examples").glob("*/*")})
    assert _rows(inside_books, names) == _rows(outside_books, names)
