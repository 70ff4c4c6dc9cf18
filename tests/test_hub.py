"""The class server for real (docs/hub.md): ``docker/hub/hub.sh start`` with the course's student image, two
students from the roster signing up and in with headless Chromium, the handouts pulled with a lab's nbgitpuller
link, lab 1's first cells and a ``check`` run, a hand-in from each (one from a notebook cell, ``!handin lab1``; one
from the course panel's button, its receipt shown there, then again from a terminal), a course update pulled, and
the collection graded with the grader image: both rows in the gradebook, with the hand-ins' late days; neither
student can read the other's volume or reach the other's server or the host's other ports (tried from the
student's terminal).

Marked ``hub`` and left out of a plain ``python -m pytest``; CI runs it with the images' tests
(``python -m pytest -m "images or hub"``), once ``docker/hub/hub.sh build`` has built the hub's two images on the
student image. Without an
engine or the images it skips, saying what to run; with ``COURSE_IMAGES_REQUIRED=1`` it fails instead.

What it measures (a student's server ready after sign-in, the memory of an idle and a busy student's container)
goes to ``build/artifacts/hub.txt`` and the screenshots to ``build/artifacts/hub_*.png``.
"""
from __future__ import annotations

import base64
import csv
import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from webdriver import browser  # noqa: F401 (a fixture)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_images  # noqa: E402  (docker(), require(), the sandbox options, opening a lab in JupyterLab)
from test_images import DOCKER, GRADER, SANDBOX_OPTIONS, STUDENT, docker, require  # noqa: E402

from grader.author import publish, release  # noqa: E402
from util.labs import LABS  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
HUB_SH = REPO / "docker" / "hub" / "hub.sh"
HUB_IMAGE = os.environ.get("COURSE_HUB_HUB_IMAGE", "ml-cost-course:hub")
SINGLEUSER = os.environ.get("COURSE_HUB_IMAGE", "ml-cost-course:hub-student")
ARTIFACTS = REPO / "build" / "artifacts"
NAME = "hubtest"
"""The test hub's container, network and volume prefix: beside a class server (course-hub) that may be running."""
SUBNET, GATEWAY = "172.31.78.0/24", "172.31.78.1"
PASSWORDS = {"alice": "alice-" + secrets.token_hex(6), "bob": "bob-" + secrets.token_hex(6)}
LAB1 = LABS["lab1"]
TASK_CELL, CHECK_CELL = "35b8fff5", "check-1-1"
"""Lab 1's task 1.1 cell (``count_parameters``) and the cell that runs its public checks."""
LAB_OPEN_TIMEOUT = 240
"""Seconds for a link to pull the handouts and open lab 1 with its kernel idle (3 s measured when idle)."""
READY_TIMEOUT = 180
"""Seconds from a sign-in to JupyterLab in the student's server (5-8 s measured on a quiet machine)."""

pytestmark = [pytest.mark.hub, pytest.mark.xdist_group("images")]
"""In the images' group: CI runs ``-m "images or hub"`` at once, the grader image's grading (minutes, a group of its
own) on one worker, and this test and the images' other tests on the other."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """The class server started with ``hub.sh start`` (a roster of alice and bob), stopped and purged after."""
    require(STUDENT, GRADER)
    for image in (HUB_IMAGE, SINGLEUSER):
        if subprocess.run([DOCKER, "image", "inspect", image], capture_output=True).returncode != 0:
            test_images._unavailable(f"no image {image}: build it with docker/hub/hub.sh build")
    folder = tmp_path_factory.mktemp("hub")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)   # the screenshots and figures go there (a fresh checkout has none)
    roster = folder / "roster.csv"
    roster.write_text("student_id,name,email\nalice,Alice Archer,alice@example.edu\nbob,Bob Baker,bob@example.edu\n")
    port = _free_port()
    env = {**os.environ, "COURSE_HUB_NAME": NAME, "COURSE_HUB_SUBNET": SUBNET, "COURSE_HUB_PORT": str(port),
           "COURSE_HUB_STATE": str(folder / "state"), "COURSE_HUB_CULL": "0",
           "COURSE_HUB_SINGLEUSER_ARGS": "--LabApp.expose_app_in_browser=True"}
    subprocess.run([str(HUB_SH), "stop", "--purge"], env=env, capture_output=True, timeout=300)   # a crashed run's
    started = time.monotonic()
    done = subprocess.run([str(HUB_SH), "start", "--roster", str(roster)], env=env, capture_output=True, text=True,
                          timeout=900)
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        yield {"url": f"http://127.0.0.1:{port}", "state": folder / "state", "env": env, "folder": folder,
               "start_s": time.monotonic() - started, "log": done.stderr}
    finally:
        logs = docker("logs", NAME, check=False)
        (ARTIFACTS / "hub_jupyterhub.log").write_text(logs.stdout + logs.stderr)
        stop = subprocess.run([str(HUB_SH), "stop", "--purge"], env=env, capture_output=True, text=True, timeout=300)
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert docker("ps", "-aq", "--filter", f"network={NAME}", check=False).stdout.strip() == ""


# ---------------------------------------------------------------- driving the browser

def _wait(browser, script: str, timeout: float, what: str):
    """Poll ``script`` (JavaScript returning a value) until it is truthy (:meth:`webdriver.WebDriver.wait`); fail
    with a screenshot otherwise."""
    try:
        return browser.wait(script, what, timeout=timeout, poll=0.25)
    except AssertionError as err:
        png = ARTIFACTS / f"hub_timeout_{re.sub(r'[^a-z0-9]+', '_', what.lower())[:40]}.png"
        png.write_bytes(browser.screenshot())
        pytest.fail(f"{err} (screenshot {png})")


def _fill_and_submit(browser, fields: dict[str, str], button: str) -> None:
    browser.script("; ".join(f"document.getElementById({k!r}).value = {v!r}" for k, v in fields.items())
                   + f"; document.getElementById({button!r}).click(); return true;")


def _sign_up(browser, hub: str, user: str, password: str) -> str:
    """The sign-up page's message after signing ``user`` up."""
    browser.open(f"{hub}/hub/signup")
    _wait(browser, "return document.getElementById('signup_submit')", 30, "the sign-up page")
    _fill_and_submit(browser, {"username_input": user, "password_input": password,
                               "password_confirmation_input": password}, "signup_submit")
    return _wait(browser, "const a = document.querySelector('.alert'); return a && a.textContent.trim();", 30,
                 f"the answer to {user}'s sign-up")


def _lab_ready(user: str) -> str:
    """JavaScript: whether JupyterLab runs in ``user``'s server in this page."""
    return ("return !!(window.jupyterapp && window.jupyterapp.shell && document.querySelector('.jp-LabShell') "
            f"&& location.pathname.startsWith({f'/user/{user}/lab'!r}));")


def _sign_in(browser, hub: str, user: str, password: str) -> float:
    """Sign ``user`` in; seconds from submitting the form until JupyterLab runs in their server."""
    browser.open(f"{hub}/hub/login")
    _wait(browser, "return document.getElementById('login_submit')", 30, "the login page")
    started = time.monotonic()
    _fill_and_submit(browser, {"username_input": user, "password_input": password}, "login_submit")
    _wait(browser, _lab_ready(user), READY_TIMEOUT, f"JupyterLab in {user}'s server after signing in")
    return time.monotonic() - started


def _pull(browser, hub: str, user: str) -> dict:
    """Open lab 1's nbgitpuller link (as ``python -m grader links`` prints it); JupyterLab's state once lab 1 is open
    and its kernel idle."""
    out = subprocess.run([sys.executable, "-m", "grader", "links", "--hub", hub, "--lab", "lab1"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    path = f"handouts/labs/{LAB1.notebook}"
    opened = f"""const s = (() => {{{test_images.LAB_STATE}}})();
        return (s.path === {path!r} && s.kernel === 'idle' && s.title) || s.dialogs.length ? s : null;"""
    for _ in range(2):
        browser.open(out.split()[1])
        _wait(browser, opened, LAB_OPEN_TIMEOUT, f"lab 1 open from its link in {user}'s JupyterLab, its kernel idle")
        time.sleep(3)   # late notifications and dialogs
        state = browser.script(test_images.LAB_STATE)
        if not any(test_images.THEME_FAILED in dialog for dialog in state["dialogs"]):
            break   # else JupyterLab's theme did not load (seen once under heavy load): open it again, as a student would
    (ARTIFACTS / f"hub_{user}_lab1.png").write_bytes(browser.screenshot())
    assert state["path"] == path and state["title"].startswith("Lab 1") and state["dialogs"] == [], state
    return state


CELLS = """const panel = window.jupyterapp.shell.currentWidget, cells = panel.content.model.cells;
const index = (id) => { for (let i = 0; i < cells.length; i++) { if (cells.get(i).id === id) return i; } return -1; };"""


def _run_through_check(browser, source: str | None) -> str:
    """Set task 1.1's cell to ``source`` (None: leave the handout's), run each cell up to and including task 1.1's
    check, one at a time as a student would (a cell that raises does not stop the next), save; the check's text."""
    if source is not None:
        browser.script(CELLS + f"cells.get(index({TASK_CELL!r})).sharedModel.setSource({source!r}); return true;")
    last = browser.script(CELLS + f"return index({CHECK_CELL!r});")
    assert last > 3, "lab 1's task 1.1 check cell is not where it was"
    for i in range(last + 1):
        browser.script(CELLS + f"""panel.content.activeCellIndex = {i};
            window.jupyterapp.commands.execute('notebook:run-cell'); return true;""")
        _wait(browser, CELLS + f"""const cell = cells.get({i});
            const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
            return cell.type !== 'code' || (cell.executionCount !== null && kernel && kernel.status === 'idle');""",
              300, f"lab 1's cell {i} run")
    text = browser.script(CELLS + f"""return cells.get({last}).outputs.toJSON()
        .map((o) => o.text || (o.data && o.data['text/plain']) || '').join('');""")
    browser.script("window.jupyterapp.commands.execute('docmanager:save'); return true;")
    _wait(browser, "const p = window.jupyterapp.shell.currentWidget; return p.context.model.dirty === false;", 60,
          "saving lab 1")
    return text


TERMINAL = """if (!window.__term) {
    window.__out = '';
    window.jupyterapp.serviceManager.terminals.startNew().then((t) => {
        t.messageReceived.connect((_, m) => { if (m.type === 'stdout') window.__out += m.content.join(''); });
        window.__term = t;
    }, (e) => { window.__termError = String(e); });
}
return window.__term ? 'ready' : (window.__termError || null);"""
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def _terminal(browser, command: str, timeout: float = 120) -> tuple[int, str]:
    """Run ``command`` in a terminal of the student's JupyterLab (one this page opened, else a new one): its exit
    status and what it printed, escapes removed. Markers printed around it (``printf``: the echoed command line
    never holds them as printed) fence the output."""
    assert _wait(browser, TERMINAL, 60, "a terminal in JupyterLab") == "ready"
    marker = secrets.token_hex(4)
    line = f"printf '__%s__\\n' B{marker}; {command}; printf '__%s__%s__\\n' E{marker} $?\n"
    browser.script(f"window.__out = ''; window.__term.send({{type: 'stdin', content: [{line!r}]}}); return true;")
    found = _wait(browser, f"const m = window.__out.match(/__E{marker}__(\\d+)__/); return m && [m[1], window.__out];",
                  timeout, f"the terminal command {command[:40]}")
    text = ANSI.sub("", found[1])
    return int(found[0]), text.split(f"__B{marker}__", 1)[1].split(f"__E{marker}__", 1)[0].strip()


KERNEL = """const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
window.__kout = null;
const future = kernel.requestExecute({code: CODE}), out = [];
future.onIOPub = (m) => { if (m.header.msg_type === 'stream') out.push(m.content.text); };
future.done.then(() => { window.__kout = out.join(''); }, (e) => { window.__kout = 'failed: ' + e; });
return true;"""


def _kernel(browser, code: str, timeout: float = 120) -> str:
    """Run ``code`` in the open notebook's kernel (as a cell would, without adding one); what it printed."""
    browser.script(KERNEL.replace("CODE", repr(code)))
    return _wait(browser, "return window.__kout;", timeout, f"the kernel running {code[:40]}")


def _memory_mib(container: str) -> float:
    """The container's memory as ``docker stats`` reports it (its cgroup's usage), in MiB."""
    usage = docker("stats", "--no-stream", "--format", "{{.MemUsage}}", container).stdout.split("/")[0].strip()
    number, unit = re.fullmatch(r"([\d.]+)\s*([KMG]iB|B)", usage).groups()
    return float(number) * {"B": 2**-20, "KiB": 2**-10, "MiB": 1, "GiB": 2**10}[unit]


def _solution_cell() -> str:
    nb = json.loads((REPO / "solutions" / LAB1.notebook).read_text(encoding="utf-8"))
    [cell] = [c for c in nb["cells"] if c.get("id") == TASK_CELL]
    return "".join(cell["source"])


# ---------------------------------------------------------------- the class

def test_two_students_pull_work_hand_in_and_are_graded_and_neither_reaches_the_other(hub, browser, tmp_path):
    url, state = hub["url"], hub["state"]
    figures = [f"hub.sh start (images built, handouts published, network, hub up): {hub['start_s']:.1f} s"]
    assert (state / "handouts.git").is_dir() and "publishing the handouts" in hub["log"]

    # --- sign-up takes the roster only
    assert "'mallory' is not on this class's roster" in _sign_up(browser, url, "mallory", "mallory-" + secrets.token_hex(6))
    for user in ("bob", "alice"):
        assert "The signup was successful" in _sign_up(browser, url, user, PASSWORDS[user])

    # --- bob: signs in, pulls lab 1, runs its first cells on the handout, writes a secret, hands in
    bob_ready = _sign_in(browser, url, "bob", PASSWORDS["bob"])
    idle_mib = _memory_mib(f"{NAME}-bob")
    started = time.monotonic()
    _pull(browser, url, "bob")
    pull_s = time.monotonic() - started
    bob_check = _run_through_check(browser, None)
    assert re.search(r"Task 1\.1 \(Parameters\): 0/\d+ public checks passed", bob_check), bob_check
    busy_mib = _memory_mib(f"{NAME}-bob")
    status, out = _terminal(browser, "echo $PATH; ls ~; (umask 077; echo bob-secret > ~/bob_secret.txt)")
    assert status == 0 and out.splitlines()[0].startswith("/course/.venv/bin:"), out   # the course's Python first
    assert "handouts" in out.split()
    out = _kernel(browser, "!handin lab1")   # from the notebook, as a cell: the kernel has the server's environment
    assert re.search(r"handed in lab1 as bob at \S+ \(UTC\): 1 file, [\d,]+ bytes", out), out
    bob_time = datetime.fromisoformat(re.search(r"at (\S+) \(UTC\)", out).group(1))
    browser.open(f"{url}/hub/logout")

    # --- alice: signs in, pulls, fills in task 1.1, runs it and its check, hands in twice
    time.sleep(1.5)   # her hand-in is at least a second after bob's: the deadline goes between them
    alice_ready = _sign_in(browser, url, "alice", PASSWORDS["alice"])
    _pull(browser, url, "alice")
    alice_check = _run_through_check(browser, _solution_cell())
    assert re.search(r"Task 1\.1 \(Parameters\): (\d+)/\1 public checks passed", alice_check), alice_check
    # her first hand-in from the course panel's button (grader/panel: POST handin runs `handin lab1`), the second
    # from a terminal, which replaces it
    browser.script("window.jupyterapp.commands.execute('course-panel:open'); return true;")
    _wait(browser, "const b = document.querySelector('#course-panel .jp-CoursePanel-handin'); "
                   "return b && !b.disabled && b.textContent === 'Hand in lab1';", 60, "the panel's hand-in button")
    assert browser.script("return document.querySelectorAll('#course-panel [data-task]').length") == len(LAB1.tasks)
    browser.script("document.querySelector('#course-panel .jp-CoursePanel-handin').click(); return true;")
    receipt = _wait(browser, "const r = document.querySelector('#course-panel .jp-CoursePanel-receipt'); "
                             "return r && r.textContent;", 180, "the panel's hand-in receipt")
    assert re.search(r"handed in lab1 as alice at \S+ \(UTC\): 1 file, [\d,]+ bytes", receipt), receipt
    (ARTIFACTS / "hub_panel_handin.png").write_bytes(browser.screenshot())
    status, out = _terminal(browser, "handin lab1 && handin --list")
    assert status == 0 and out.count("handed in lab1 as alice") == 1, out
    assert "it replaces your earlier hand-in (kept by your instructor)" in out
    alice_time = datetime.fromisoformat(re.findall(r"at (\S+) \(UTC\)", out)[-1])

    # --- neither reaches the other: bob's volume, bob's server, the host's ports, the internet
    bob_ip = docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", f"{NAME}-bob").stdout.strip()
    decoy = socket.socket()
    decoy.bind(("0.0.0.0", 0))   # a service of the host's on every address, as many are
    decoy.listen()
    port = decoy.getsockname()[1]
    probe = (f"import socket\nfor h, p in [({bob_ip!r}, 8888), ({GATEWAY!r}, {port}), ('172.17.0.1', {port}), "
             f"({GATEWAY!r}, 8081), ('1.1.1.1', 443)]:\n    s = socket.socket(); s.settimeout(4)\n"
             "    try: s.connect((h, p)); r = 'open'\n    except Exception as e: r = type(e).__name__\n    print(h, p, r)\n")
    try:
        status, out = _terminal(browser, "cat ~/bob_secret.txt; ls /home; find / -xdev -name 'bob_secret*' 2>/dev/null; "
                                         "grep -c ' /home/student ' /proc/mounts; python3 -c \"$(echo "
                                         f"{base64.b64encode(probe.encode()).decode()} | base64 -d)\"", timeout=120)
    finally:
        decoy.close()
    lines = out.splitlines()
    assert "bob_secret.txt: No such file or directory" in lines[0] and lines[1:3] == ["student", "1"], out
    reached = dict(line.rsplit(" ", 1) for line in lines[3:])
    assert reached[f"{GATEWAY} 8081"] == "open", out   # the hub's API: the one port of the host it needs
    assert reached[f"{GATEWAY} {port}"] == reached[f"172.17.0.1 {port}"] == "ConnectionRefusedError", out   # firewall
    assert reached[f"{bob_ip} 8888"] != "open" and reached["1.1.1.1 443"] != "open", out

    # --- a course update, pulled the same way. nbgitpuller merges line by line, hers winning: in the cell she edited,
    # the course's change to a line she replaced is dropped without a word; its change to a line away from her edits
    # arrives, and so does a change to another cell, and a new file
    handout = json.loads((REPO / "labs" / LAB1.notebook).read_text(encoding="utf-8"))
    LAST_MARKDOWN = [c["id"] for c in handout["cells"] if c["cell_type"] == "markdown"][-1]   # far from her edits
    real = release.release

    def updated(dest):
        files = real(dest)
        path = Path(dest) / "labs" / LAB1.notebook
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            if cell["id"] == TASK_CELL:
                assert "    # YOUR CODE HERE\n" in cell["source"]
                cell["source"] = ["# updated by the course\n", *[
                    "    # YOUR CODE HERE (count a shared tensor once)\n" if line == "    # YOUR CODE HERE\n" else line
                    for line in cell["source"]]]
            if cell["id"] == LAST_MARKDOWN:
                cell["source"] = [*cell["source"], "\n\n*Updated by the course.*"]
        path.write_text(json.dumps(nb, indent=1) + "\n", encoding="utf-8")
        (Path(dest) / "labs" / "ERRATA.md").write_text("Errata for lab 1.\n")
        return files

    release.release = updated
    try:
        update = publish.publish(state / "handouts.git")
    finally:
        release.release = real
    assert update.changed and (f"labs/{LAB1.notebook}", TASK_CELL) in update.edited_cells
    _pull(browser, url, "alice")
    status, out = _terminal(browser, "cat ~/handouts/labs/ERRATA.md; python3 -c \"import json; nb = json.load(open("
                            f"'/home/student/handouts/labs/{LAB1.notebook}')); c = {{x['id']: ''.join(x['source']) for x in "
                            f"nb['cells']}}; t = c['{TASK_CELL}']; print(t.startswith('# updated'), 'shared tensor once' in t, "
                            f"'BEGIN SOLUTION' in t, c['{LAST_MARKDOWN}'].endswith('course.*'))\"")
    assert status == 0 and out.splitlines() == ["Errata for lab 1.", "True False True True"], out

    # --- the collection: one entry each, alice's first hand-in kept aside; graded with the grader image
    collection = state / "collection"
    assert sorted(p.name for p in collection.iterdir()) == [".earlier", ".incoming", ".receipts", "alice", "bob"]
    assert [p.name for p in (collection / "alice").iterdir()] == [LAB1.notebook]
    assert len(list((collection / ".earlier" / "alice").glob(f"*/{LAB1.notebook}"))) == 1
    out_dir = tmp_path / "graded"
    out_dir.mkdir()
    os.chown(out_dir, 1000, 1000)
    (out_dir / "roster.csv").write_text((hub["folder"] / "roster.csv").read_text())
    deadline = bob_time + timedelta(seconds=1)
    assert bob_time < deadline < alice_time
    started = time.monotonic()
    graded = docker("run", "--rm", *SANDBOX_OPTIONS, "-v", f"{collection}:/submissions:ro", "-v", f"{out_dir}:/out", GRADER,
                    "grade", "/submissions", "-j", "2", "--out", "/out/gradebook", "--no-progress",
                    "--roster", "/out/roster.csv", "--deadline", f"lab1={deadline.isoformat()}", timeout=1200, check=False)
    with (out_dir / "gradebook" / "gradebook_lab1.csv").open(newline="", encoding="utf-8") as handle:
        rows = {r["student_id"]: r for r in csv.DictReader(handle)}
    assert {sid: (r["submission"], r["1.1"], r["score"], r["late days"]) for sid, r in rows.items()} == {
        "alice": (f"alice__{LAB1.notebook[:-6]}", "10", "10", "1"), "bob": (f"bob__{LAB1.notebook[:-6]}", "0", "0", "0")}, \
        graded.stdout[-3000:] + graded.stderr[-3000:]
    assert rows["alice"]["submitted"] == alice_time.isoformat(timespec="seconds")
    grade_s = time.monotonic() - started
    spawns = re.findall(r"User (\w+) took ([\d.]+) seconds to start", docker("logs", NAME, check=False).stderr)

    figures += [f"bob: signed in -> JupyterLab in his new server: {bob_ready:.1f} s (first sign-in: volume created)",
                f"alice: signed in -> JupyterLab in her new server: {alice_ready:.1f} s",
                "the hub's own count, spawn to ready: " + ", ".join(f"{user} {seconds} s" for user, seconds in spawns),
                f"lab 1's link, first time (clone, open the notebook, kernel idle): {pull_s:.1f} s",
                f"grading the collection in the grader image (2 lab 1 notebooks, -j 2): {grade_s:.1f} s",
                f"memory of a student's container: idle (JupyterLab, no kernel) {idle_mib:.0f} MiB; busy (lab 1's first "
                f"cells run, kernel alive) {busy_mib:.0f} MiB",
                f"load average at the end: {os.getloadavg()[0]:.2f}"]
    (ARTIFACTS / "hub.txt").write_text("\n".join(figures) + "\n")
    print("\n".join(figures))


def test_the_hub_restarts_at_a_load_of_6_and_the_students_servers_keep_running(hub):
    """``hub.sh start`` again (a roster change, a restart) while CPU burners keep the machine at a load of 6 or more
    (CI's hub once did not come back at a load of 5 to 6): every part of the hub answers again, and the
    students' servers the first test started run on, untouched."""
    from test_hub_start import busy

    def servers() -> list[str]:
        return sorted(docker("ps", "-q", "--filter", "label=ml-cost-course.hub=student", "--filter",
                             f"network={NAME}").stdout.split())

    before = servers()
    with busy(6, 600):
        started = time.monotonic()
        done = subprocess.run([str(HUB_SH), "start"], env=hub["env"], capture_output=True, text=True, timeout=900)
        took, load = time.monotonic() - started, os.getloadavg()[0]
    assert done.returncode == 0, done.stdout + done.stderr
    assert "restarting it to read the roster and settings again" in done.stderr
    for part in ("the proxy (configurable-http-proxy)", "the hub's API (JupyterHub)",
                 "the hand-in receiver (handin_service.py)", "the hub through the proxy"):
        assert f"hub_ready: {part}" in done.stderr, done.stderr
    with urllib.request.urlopen(f"{hub['url']}/hub/api", timeout=30) as answer:
        assert answer.status == 200 and "version" in json.loads(answer.read())
    assert servers() == before, (before, servers())
    figure = (f"hub.sh start again under 6 CPU burners (a restart; {len(before)} students' servers kept running): "
              f"{took:.1f} s, load average {load:.1f} at its end")
    with (ARTIFACTS / "hub.txt").open("a") as figures:
        figures.write(figure + "\n")
    print(figure)
