"""The class server's start on a busy machine: every wait sized for load, and a start that says which part
did not come up and what to do.

CI once failed at a load of 5 to 6 because configurable-http-proxy took longer than JupyterHub's fixed 15 s to
answer. These tests make the machine busy on purpose (:func:`busy`: CPU burners, a known number, each ending itself
after a bounded time and ended by the test) and check:

* ``docker/hub/hub_ready.py`` (what ``hub.sh start`` runs): parts answering late under load are waited for, in the
  hub's order; a part that never answers, or a hub that stops, is named with its log lines and what to do (no
  Docker needed: the parts are played by small servers);
* ``docker/hub/patient_proxy.py``: a real JupyterHub 6.1.1 whose proxy answers only after 25 s (beyond JupyterHub's
  own limit) starts with it, and fails without it. Marked ``hub``: it runs in the hub's image (CI's step 4), or with
  ``COURSE_HUB_PYTHON`` naming a Python that has the hub's packages and ``configurable-http-proxy`` on ``PATH``.

``tests/test_hub.py`` restarts the real class server with students' servers running under the same burners.
"""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HUB_DIR = REPO / "docker" / "hub"
sys.path.insert(0, str(HUB_DIR))
import hub_ready  # noqa: E402

BURNER = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"
CI_LOG = """[I 2026-11-30 10:02:11.482 JupyterHub proxy:787] Starting proxy @ http://127.0.0.1:35269/
[C 2026-11-30 10:02:21.517 JupyterHub app:3872] Failed to start proxy
    TimeoutError: Server at 127.0.0.1:8001 didn't respond in 10 seconds
"""
"""The lines a failed CI run logged, as the hub's log would hold them."""


@contextlib.contextmanager
def busy(load: int = 6, seconds: float = 300):
    """``load`` CPU burners (processes spinning at full speed) for the block: each ends itself after ``seconds`` at
    most, and all are killed when the block ends, passed or not."""
    burners = [subprocess.Popen([sys.executable, "-c", BURNER.format(seconds=seconds)]) for _ in range(load)]
    try:
        yield burners
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Part(BaseHTTPRequestHandler):
    """A part of the hub: answers ``status`` (a callable of the path)."""

    status = staticmethod(lambda path: 200)

    def do_GET(self):  # noqa: N802
        code = self.status(self.path)
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def _serving(port: int, status=lambda path: 200, after: float = 0.0):
    """An HTTP server on ``port`` from ``after`` seconds on, for the block."""
    servers = []

    def start():
        time.sleep(after)
        server = ThreadingHTTPServer(("127.0.0.1", port), type("P", (_Part,), {"status": staticmethod(status)}))
        servers.append(server)
        server.serve_forever(poll_interval=0.05)

    thread = threading.Thread(target=start, daemon=True)
    thread.start()
    try:
        yield
    finally:
        deadline = time.monotonic() + after + 5
        while not servers and time.monotonic() < deadline:
            time.sleep(0.05)
        for server in servers:
            server.shutdown()
            server.server_close()


def _urls():
    public, api, handin = _free_port(), _free_port(), _free_port()
    return public, api, handin, [f"http://127.0.0.1:{p}" for p in (public, api, handin)]


FAKE_HUB = """
import sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
public, api, handin = map(int, sys.argv[1:4])
started = time.monotonic()
def handler(status):
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(status(self.path)); self.send_header("Content-Length", "0"); self.end_headers()
        def log_message(self, *a):
            pass
    return H
def serve(port, after, status):
    time.sleep(after)
    ThreadingHTTPServer(("127.0.0.1", port), handler(status)).serve_forever()
# the proxy's port first (503 for the hub until it is routed), then the hub's API, the hand-in receiver, the route
routed = lambda path: 200 if time.monotonic() - started > 4 else 503
for port, after, status in ((public, 1, routed), (api, 2, lambda p: 200), (handin, 3, lambda p: 401)):
    threading.Thread(target=serve, args=(port, after, status), daemon=True).start()
time.sleep(120)
"""


def test_parts_that_answer_late_on_a_busy_machine_are_each_waited_for_in_the_hubs_order(tmp_path):
    public, api, handin, urls = _urls()
    (tmp_path / "fake_hub.py").write_text(FAKE_HUB)
    with busy(6, 120):
        started = time.monotonic()   # before the fake hub starts: its route appears 4 s after this at the earliest
        hub = subprocess.Popen([sys.executable, str(tmp_path / "fake_hub.py"), str(public), str(api), str(handin)])
        try:
            done = subprocess.run([sys.executable, str(HUB_DIR / "hub_ready.py"), "--public", urls[0], "--api", urls[1],
                                   "--handin", urls[2], "--timeout", "100", "--state-cmd", "echo running"],
                                  capture_output=True, text=True, timeout=150)
            took = time.monotonic() - started
            load = os.getloadavg()[0]
        finally:
            hub.kill()
            hub.wait()
    assert done.returncode == hub_ready.READY, done.stderr
    lines = done.stderr.splitlines()
    assert [line.split(" answered")[0] for line in lines] == [
        "hub_ready: the proxy (configurable-http-proxy)", "hub_ready: the hub's API (JupyterHub)",
        "hub_ready: the hand-in receiver (handin_service.py)",
        "hub_ready: the hub through the proxy (what students' browsers reach)"], done.stderr
    seconds = [float(line.rsplit(" after ", 1)[1].split()[0]) for line in lines]
    # in order, and not done before the route existed (the 503s of the proxy's unrouted port are no answer)
    assert seconds == sorted(seconds) and 4 <= took < 100, (seconds, took)
    print(f"4 parts up after {seconds} s (the last routed at 4 s), at a load average of {load:.1f}")


def test_a_proxy_that_never_answers_is_named_with_its_log_lines_and_what_to_do(tmp_path):
    public, api, handin, urls = _urls()
    (tmp_path / "hub.log").write_text("[I app] Running JupyterHub\n" + CI_LOG)
    lines: list[str] = []
    started = time.monotonic()
    code = hub_ready.wait(hub_ready.parts(*urls, 2), 2, "echo running", f"cat {tmp_path / 'hub.log'}", poll=0.1,
                          say=lines.append)
    assert code == hub_ready.TIMED_OUT and 2 <= time.monotonic() - started < 10
    [text] = lines
    assert text.startswith(f"the proxy (configurable-http-proxy) did not answer at {urls[0]}: not within 2 s, "
                           "the hub's container still running"), text
    assert "Failed to start proxy" in text and "Running JupyterHub" not in text   # its own lines, not the log's end
    assert f"port {public} is taken" in text and "raise COURSE_HUB_START_TIMEOUT (now 2 s)" in text


def test_a_hub_that_stops_during_its_start_is_told_apart_from_one_still_starting(tmp_path):
    public, api, handin, urls = _urls()
    (tmp_path / "hub.log").write_text(CI_LOG)
    lines: list[str] = []
    started = time.monotonic()
    code = hub_ready.wait(hub_ready.parts(*urls, 300), 300, "echo exited", f"cat {tmp_path / 'hub.log'}", poll=0.1,
                          say=lines.append)
    assert code == hub_ready.EXITED and time.monotonic() - started < 10   # not the 300 s: it stopped
    assert "the hub's container stopped (exited)" in lines[0] and "didn't respond in 10 seconds" in lines[0], lines


def test_a_hand_in_receiver_that_does_not_come_up_is_named_after_the_parts_that_did(tmp_path):
    public, api, handin, urls = _urls()
    lines: list[str] = []
    with _serving(public), _serving(api):
        code = hub_ready.wait(hub_ready.parts(*urls, 3), 3, "", "echo '[E app] Cannot connect to managed service "
                              "handin'", poll=0.1, say=lines.append)
    assert code == hub_ready.TIMED_OUT
    assert [line.split(" answered")[0] for line in lines[:2]] == [
        "hub_ready: the proxy (configurable-http-proxy)", "hub_ready: the hub's API (JupyterHub)"], lines
    assert lines[2].startswith("the hand-in receiver (handin_service.py) did not answer"), lines
    assert "Cannot connect to managed service handin" in lines[2] and "students could not hand in" in lines[2]


def test_an_error_status_is_not_an_answer_and_a_refusal_of_the_token_is():
    port = _free_port()
    part = hub_ready.Part("x", f"http://127.0.0.1:{port}/hub/api", True, hub_ready.re.compile("x"), "", exact=True)
    assert not hub_ready.answers(part, 1)   # nothing listens
    with _serving(port, lambda path: 503):
        time.sleep(0.3)
        assert not hub_ready.answers(part, 2)   # the proxy up, the hub not routed yet
    port = _free_port()
    part = hub_ready.Part("x", f"http://127.0.0.1:{port}/hub/api", True, hub_ready.re.compile("x"), "", exact=True)
    with _serving(port, lambda path: 404):
        time.sleep(0.3)
        assert not hub_ready.answers(part, 2)   # another server on the hub's port is not the hub
    port = _free_port()
    part = hub_ready.Part("x", f"http://127.0.0.1:{port}/handin", True, hub_ready.re.compile("x"), "")
    with _serving(port, lambda path: 401):
        time.sleep(0.3)
        assert hub_ready.answers(part, 2)   # the hand-in receiver answers a request without a token: it is up


# ---------------------------------------------------------------- a real JupyterHub and a slow proxy

PROXY_DELAY = 25
"""Seconds the slow proxy sleeps before it starts: beyond JupyterHub's own 15 s wait, within the patient one."""

HUB_CONFIG = """
import sys
sys.path.insert(0, {hub_dir!r})
from patient_proxy import PatientProxy
c = get_config()
if {patient!r}:
    c.JupyterHub.proxy_class = PatientProxy
    c.PatientProxy.start_timeout = 150
c.ConfigurableHTTPProxy.command = ["sh", "-c", 'sleep {delay}; exec configurable-http-proxy "$@"', "slow-proxy"]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api}"
c.ConfigurableHTTPProxy.pid_file = {folder!r} + "/proxy.pid"
c.JupyterHub.ip, c.JupyterHub.port = "127.0.0.1", {public}
c.JupyterHub.hub_ip, c.JupyterHub.hub_port = "127.0.0.1", {hub}
c.JupyterHub.db_url = "sqlite:///" + {folder!r} + "/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = {folder!r} + "/cookie_secret"
c.JupyterHub.authenticator_class = "dummy"
c.JupyterHub.spawner_class = "simple"
"""

RUN_HUB = """
import os, signal, subprocess, sys, time, urllib.request
hub = subprocess.Popen(["jupyterhub", "-f", sys.argv[1]], stdout=subprocess.DEVNULL, stderr=open(sys.argv[2], "w"))
deadline, answer = time.monotonic() + 200, None
while time.monotonic() < deadline and hub.poll() is None:
    try:
        answer = urllib.request.urlopen("http://127.0.0.1:{public}/hub/api", timeout=5).status
        break
    except OSError:
        time.sleep(0.5)
print("answer", answer, "exit", hub.poll(), flush=True)
hub.terminate()
hub.wait(60)
try:   # a hub that failed its start leaves its proxy running (its own session): end it, as a container's end would
    os.kill(int(open(sys.argv[3]).read()), signal.SIGKILL)
except (OSError, ValueError):
    pass
"""


def _jupyterhub(tmp_path: Path, patient: bool) -> tuple[str, str]:
    """A JupyterHub with the slow proxy (and :class:`PatientProxy` when ``patient``), run until it answers through
    its proxy or exits: (what the runner printed, the hub's log)."""
    local = os.environ.get("COURSE_HUB_PYTHON")
    folder = tmp_path / ("patient" if patient else "plain")
    folder.mkdir()
    os.chmod(folder, 0o777)
    inside = str(folder) if local else "/t"
    public, api, hub = _free_port(), _free_port(), _free_port()
    (folder / "config.py").write_text(HUB_CONFIG.format(hub_dir=str(HUB_DIR) if local else "/srv/hub", patient=patient,
                                                        delay=PROXY_DELAY, api=api, public=public, hub=hub, folder=inside))
    (folder / "run.py").write_text(RUN_HUB.format(public=public))
    args = [f"{inside}/run.py", f"{inside}/config.py", f"{inside}/hub.log", f"{inside}/proxy.pid"]
    if local:
        done = subprocess.run([local, *args], capture_output=True, text=True, timeout=400)
    else:
        import test_images

        test_images.require()
        image = os.environ.get("COURSE_HUB_HUB_IMAGE", "ml-cost-course:hub")
        if subprocess.run([test_images.DOCKER, "image", "inspect", image], capture_output=True).returncode != 0:
            test_images._unavailable(f"no image {image}: build it with docker/hub/hub.sh build")
        done = subprocess.run([test_images.DOCKER, "run", "--rm", "--network", "none", "-v", f"{folder}:/t", image,
                               "python3", *args], capture_output=True, text=True, timeout=400)
    log = (folder / "hub.log").read_text() if (folder / "hub.log").exists() else ""
    return done.stdout + done.stderr, log


@pytest.mark.hub
@pytest.mark.xdist_group("images")
def test_a_real_jupyterhub_waits_for_a_proxy_slower_than_its_own_limit_and_fails_without_the_patient_proxy(tmp_path):
    with busy(6, 300):
        started = time.monotonic()
        patient, patient_log = _jupyterhub(tmp_path, True)
        patient_s = time.monotonic() - started
        plain, plain_log = _jupyterhub(tmp_path, False)
        load = os.getloadavg()[0]
    assert "answer 200 exit None" in patient, patient + patient_log[-3000:]
    assert "did not answer within JupyterHub's own wait" in patient_log and "The proxy answered after" in patient_log
    assert patient_s >= PROXY_DELAY, patient_s
    # the control: the same proxy, JupyterHub's own wait
    assert "answer None exit 1" in plain, plain + plain_log[-3000:]
    assert "Failed to start proxy" in plain_log, plain_log[-3000:]
    print(textwrap.dedent(f"""\
        a proxy answering after {PROXY_DELAY} s, at a load average of {load:.1f}: the hub with PatientProxy answered
        through it after {patient_s:.1f} s; with JupyterHub's own wait it exited ("Failed to start proxy")"""))
