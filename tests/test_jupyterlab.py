"""JupyterLab for real: the student image's own command starts a server that serves the labs.

The server is started with the arguments of the student image's ``CMD`` (docker/Dockerfile), on a
free loopback port with a token instead of 0.0.0.0:8888, so a broken flag there fails here.
"""
from __future__ import annotations

import base64
import contextlib
import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest
from webdriver import browser  # noqa: F401 (a fixture)

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT = 90
"""Seconds the server may take to answer (about 3 s on an idle machine)."""


def _image_cmd() -> list[str]:
    spec = importlib.util.spec_from_file_location("image_files", REPO / "docker" / "image_files.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    [cmd] = {s.name: s for s in module.stages()}["student"].all("CMD")
    return json.loads(cmd.args)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(url: str, token: str | None = None, method: str = "GET", body: dict | None = None, timeout: float = 30):
    """(status, headers, parsed JSON or text); never follows redirects; ``timeout``: seconds for the answer."""
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if token:
        req.add_header("Authorization", f"token {token}")
    try:
        with urllib.request.build_opener(NoRedirect).open(req, timeout=timeout) as resp:
            status, headers, raw = resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as err:
        status, headers, raw = err.code, err.headers, err.read()
    text = raw.decode("utf-8", "replace")
    try:
        return status, headers, json.loads(text) if text else None
    except ValueError:
        return status, headers, text


@contextlib.contextmanager
def _jupyterlab(root: Path, tmp_path: Path, extra: tuple[str, ...] = ()):
    """JupyterLab started with the student image's CMD, rooted at ``root``: yields (base URL, token, process)."""
    port, token = _free_port(), secrets.token_hex(16)
    argv = []
    for arg in _image_cmd():
        if arg.startswith("--ip="):
            arg = "--ip=127.0.0.1"
        elif arg.startswith("--port="):
            arg = f"--port={port}"
        elif arg.startswith("--ServerApp.root_dir="):
            arg = f"--ServerApp.root_dir={root}"
        elif arg.startswith("--LabApp.app_settings_dir="):  # /course/docker/jupyter in the image
            arg = f"--LabApp.app_settings_dir={REPO / 'docker' / 'jupyter'}"
        argv.append(arg)
    argv[0] = str(Path(sys.executable).with_name("jupyter"))
    argv += [f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0", *extra]
    if os.geteuid() == 0:  # CI containers run tests as root; the image itself runs as "student"
        argv.append("--allow-root")
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_DATA_DIR": str(tmp_path / "data"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"), "IPYTHONDIR": str(tmp_path / "ipython"),
           "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "ws")}
    log = (tmp_path / "jupyter.log").open("w")
    process = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail(f"jupyter lab exited with {process.returncode}:\n{(tmp_path / 'jupyter.log').read_text()[-3000:]}")
            try:
                if _request(f"{base}/api/status", token)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"jupyter lab did not answer in {START_TIMEOUT} s:\n"
                            f"{(tmp_path / 'jupyter.log').read_text()[-3000:]}")
            time.sleep(0.25)
        yield base, token, process
    finally:
        if process.poll() is None:  # the test did not stop it: end the whole process group
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        log.close()


@pytest.fixture()
def server(tmp_path):
    """A running JupyterLab rooted at the repository: yields (base URL, token, process)."""
    with _jupyterlab(REPO, tmp_path) as running:
        yield running


def _port_open(base: str) -> bool:
    host, port = base.removeprefix("http://").split(":")
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, int(port))) == 0


def test_jupyterlab_serves_a_lab_notebook_then_stops(server):
    base, token, process = server

    assert _request(f"{base}/api/status")[0] == 403  # no token, no access
    status, _, info = _request(f"{base}/api/status", token)
    assert status == 200 and info["started"]

    status, headers, _ = _request(f"{base}/", token)  # the image's default URL opens the labs folder
    assert status == 302 and headers["Location"].split("?")[0].endswith("/lab/tree/labs")
    status, _, page = _request(f"{base}/lab", token)
    assert status == 200 and "JupyterLab" in page

    status, _, listing = _request(f"{base}/api/contents/labs", token)
    assert status == 200 and "lab1_pytorch_analysis.ipynb" in {item["name"] for item in listing["content"]}

    status, _, model = _request(f"{base}/api/contents/labs/lab1_pytorch_analysis.ipynb?content=1", token)
    assert status == 200 and model["type"] == "notebook"
    on_disk = nbformat.read(str(REPO / "labs" / "lab1_pytorch_analysis.ipynb"), as_version=4)
    assert [c["source"] for c in model["content"]["cells"]] == [c.source for c in on_disk.cells]
    assert model["content"]["metadata"]["course"]["lab"] == "lab1"

    status, _, kernel = _request(f"{base}/api/kernels", token, "POST", {"name": "python3"})
    assert status == 201 and kernel["name"] == "python3"
    assert _request(f"{base}/api/kernels/{kernel['id']}", token, "DELETE")[0] == 204

    assert _request(f"{base}/api/shutdown", token, "POST")[0] == 200
    process.wait(timeout=30)
    assert process.returncode is not None
    deadline = time.monotonic() + 10
    while _port_open(base) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _port_open(base)


# ---------------------------------------------------------------- as a student sees it, in a browser

LAB_OPEN_TIMEOUT = 120
"""Seconds for the page to load, the kernel to start and JupyterLab to settle (about 10 s when idle)."""


def test_a_student_opens_a_lab_the_notebook_stays_unmodified_no_pop_up_and_its_figure_shows(browser, tmp_path):
    """The course image's JupyterLab, a lab with a figure (lab 3's tile grid) opened in Chromium: once the
    kernel is idle the notebook is not marked modified, no "Jupyter news?" notification appears, and the
    figure attachment is rendered (the attachment's PNG, at its own width)."""
    root = tmp_path / "course"
    shutil.copytree(REPO / "labs", root / "labs", ignore=shutil.ignore_patterns("outputs", "build", ".ipynb_checkpoints"))
    name = "lab3_gemm_tiling.ipynb"
    with _jupyterlab(root, tmp_path, ("--LabApp.expose_app_in_browser=True",)) as (base, token, _):
        browser.open(f"{base}/lab/tree/labs/{name}?token={token}")
        deadline, state = time.monotonic() + LAB_OPEN_TIMEOUT, {}
        idle_since = None
        while time.monotonic() < deadline:
            state = browser.script("""
                const app = window.jupyterapp, widget = app && app.shell.currentWidget;
                const session = widget && widget.sessionContext && widget.sessionContext.session;
                return {kernel: session && session.kernel ? session.kernel.status : null,
                        dirty: widget && widget.context ? widget.context.model.dirty : null,
                        toasts: Array.from(document.querySelectorAll('.Toastify__toast'), (t) => t.textContent),
                        images: Array.from(document.querySelectorAll('.jp-RenderedMarkdown img'),
                                           (i) => [i.naturalWidth, i.getAttribute('src').slice(0, 22)])};""")
            if state["kernel"] == "idle":
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since > 5 and state["images"]:  # give late metadata updates time
                    break
            time.sleep(0.5)
        else:
            pytest.fail(f"the lab did not settle in {LAB_OPEN_TIMEOUT} s: {state}")
    assert state["dirty"] is False, "opening the lab marked it modified (its kernel metadata differs)"
    assert state["toasts"] == []
    [cell] = [c for c in nbformat.read(str(root / "labs" / name), as_version=4).cells if c.get("attachments")]
    [png] = [base64.b64decode(bundle["image/png"]) for bundle in cell.attachments.values()]
    width = struct.unpack(">I", png[16:20])[0]   # the PNG header's width
    assert state["images"] == [[width, "data:image/png;base64,"]] and width > 500
