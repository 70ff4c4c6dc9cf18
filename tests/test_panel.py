"""The course panel (grader/panel/): its server extension's JSON API on a real JupyterLab started as the student
image starts it (tests/test_jupyterlab.py's helper), with the panel installed the way docker/setup.sh installs it
(grader.panel.install); then the panel itself in headless Chromium: a task checked from it fails on the handout
and passes once the student has fixed it and saved.

Checks run a whole notebook through ``python -m grader check`` (about 10 s each for this lab on an idle machine).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path

import nbformat
import pytest
from test_jupyterlab import _jupyterlab, _request
from webdriver import browser  # noqa: F401 (a fixture)

from grader.panel.handlers import ROUTE, PanelError, resolve
from grader.panel.install import NAME, install
from grader.panel.state import NOT_CHECKED
from util.labs import LABS

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "build" / "artifacts"
LAB = LABS["lab1"]
NOTEBOOK = Path(LAB.notebook).name
WEIGHT_BYTES_FIX = "    return sum(p.numel() * p.element_size() for p in model.parameters())"
"""Task 1.2's one line of solution (solutions/'s), in place of its stub's ``raise NotImplementedError``."""
CHECK_TIMEOUT = 240
"""Seconds for one check from the browser (about 10 s when idle)."""


def _course(tmp: Path) -> Path:
    """A server root holding the lab's handout, a notebook of no lab, and a link to a notebook outside it."""
    root = tmp / "course"
    (root / "labs").mkdir(parents=True)
    shutil.copy(REPO / "labs" / LAB.notebook, root / "labs" / NOTEBOOK)
    nbformat.write(nbformat.v4.new_notebook(), str(root / "labs" / "scratch.ipynb"))
    shutil.copy(REPO / "labs" / LAB.notebook, tmp / "outside.ipynb")
    (root / "labs" / "link.ipynb").symlink_to(tmp / "outside.ipynb")
    return root


def _fix(path: Path, stub: str, fix: str) -> None:
    """Replace the line ``stub`` of a code cell of the saved notebook ``path`` by ``fix``, as a student's edit."""
    nb = nbformat.read(str(path), as_version=4)
    [cell] = [c for c in nb.cells if c.cell_type == "code" and stub in c.source]
    cell.source = "\n".join(fix if stub in line else line for line in cell.source.split("\n"))
    time.sleep(0.01)  # a later modification time than the last check's
    nbformat.write(nb, str(path))


def test_install_puts_the_built_extension_and_the_server_config_where_jupyter_looks(tmp_path):
    extension, config = install(tmp_path / "share" / "jupyter", tmp_path / "etc" / "jupyter")
    assert extension == tmp_path / "share" / "jupyter" / "labextensions" / NAME
    built = json.loads((extension / "package.json").read_text())
    assert built["name"] == NAME and built["jupyterlab"]["_build"]["load"].startswith("static/remoteEntry.")
    assert (extension / built["jupyterlab"]["_build"]["load"]).is_file()
    assert json.loads(config.read_text()) == {"ServerApp": {"jpserver_extensions": {"grader.panel": True}}}
    assert config.parent.name == "jupyter_server_config.d"
    source = json.loads((REPO / "grader" / "panel" / "frontend" / "package.json").read_text())
    pinned = {**source["dependencies"], **source["devDependencies"]}
    assert pinned and all(v[0].isdigit() for v in pinned.values()), pinned  # exact versions, no ^ or ~
    assert (REPO / "grader" / "panel" / "frontend" / "yarn.lock").is_file()
    # the build copies the source's package.json and adds its _build: another one means it was not rebuilt
    assert {**built, "jupyterlab": {k: v for k, v in built["jupyterlab"].items() if k != "_build"}} == source
    assert sorted(p.name for p in (extension / "static").iterdir() if p.name.startswith("remoteEntry.")) == \
        [Path(built["jupyterlab"]["_build"]["load"]).name]  # no stale bundle of an earlier build left beside it


def test_the_students_copy_and_image_take_the_built_extension_not_its_build_inputs():
    from grader.author.release import student_files

    files = student_files()
    built = {p for p in files if p.startswith("grader/panel/labextension/")}
    assert "grader/panel/labextension/package.json" in built and any(p.endswith(".js") for p in built)
    assert not [p for p in files if "node_modules" in p or p.startswith("grader/panel/frontend/lib/")]
    assert "grader/panel/install.py" in files and "docker/setup.sh" in files


def test_resolve_refuses_paths_outside_the_root(tmp_path):
    root = _course(tmp_path)
    assert resolve(root, f"labs/{NOTEBOOK}") == (root / "labs" / NOTEBOOK).resolve()
    for path, status in (("../outside.ipynb", 403), (str(tmp_path / "outside.ipynb"), 403), ("labs/link.ipynb", 403),
                         ("labs/../../outside.ipynb", 403), ("labs/none.ipynb", 404), ("labs", 404), ("", 400)):
        with pytest.raises(PanelError) as raised:
            resolve(root, path)
        assert raised.value.status == status, path


@contextlib.contextmanager
def _served(root: Path, tmp: Path, patch: pytest.MonkeyPatch, extra: tuple[str, ...] = ()):
    """_jupyterlab's server importing the panel from this checkout (whatever the environment's editable install
    points to): (base URL, token)."""
    patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    with _jupyterlab(root, tmp, extra) as (base, token, _):
        yield base, token


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """JupyterLab with the panel installed, rooted at a course folder: (root, base URL, token)."""
    tmp = tmp_path_factory.mktemp("panel")
    root = _course(tmp)
    install(tmp / "data", tmp / "config")  # _jupyterlab's JUPYTER_DATA_DIR and JUPYTER_CONFIG_DIR
    with pytest.MonkeyPatch.context() as patch, _served(root, tmp, patch) as (base, token):
        yield root, f"{base}/{ROUTE}", token


def test_the_state_lists_the_lab_as_declared_and_refuses_what_is_not_a_lab_under_the_root(server):
    root, api, token = server
    status, _, state = _request(f"{api}/state?path=labs/{NOTEBOOK}", token)
    assert status == 200, state
    assert (state["lab"], state["path"], state["handin"]) == (LAB.name, f"labs/{NOTEBOOK}", False)
    assert [(t["id"], t["points"], t["status"], t["exported"]) for t in state["tasks"]] == \
        [(t.id, t.max_points, NOT_CHECKED, False) for t in LAB.tasks]
    scored = [q for q in LAB.written if q.points]
    assert [(w["id"], w["status"], w["words"]) for w in state["written"]] == [(q.id, "missing", 0) for q in scored]
    assert state["progress"] == {"tasks": len(LAB.tasks), "exported": 0, "passing": 0, "points": 0,
                                 "total_points": LAB.max_points, "written": len(scored), "written_answered": 0}

    assert _request(f"{api}/state?path=labs/{NOTEBOOK}")[0] == 403  # no token
    for path, code in (("../outside.ipynb", 403), ("labs/link.ipynb", 403), ("labs/scratch.ipynb", 404),
                       ("labs/none.ipynb", 404)):
        status, _, answer = _request(f"{api}/state?path={path}", token)
        assert (status, set(answer)) == (code, {"error"}), (path, answer)
    status, _, answer = _request(f"{api}/check", token, "POST", {"path": f"labs/{NOTEBOOK}", "task": "9.9"})
    assert status == 400 and LAB.tasks[0].id in answer["error"]
    status, _, answer = _request(f"{api}/handin", token, "POST", {"path": f"labs/{NOTEBOOK}"})
    assert status == 409 and "not a server of the class server" in answer["error"]


def test_a_check_fails_on_the_handout_and_passes_once_the_saved_file_is_fixed(server):
    root, api, token = server
    path = root / "labs" / NOTEBOOK
    status, _, state = _request(f"{api}/check", token, "POST", {"path": f"labs/{NOTEBOOK}", "task": "1.2"}, CHECK_TIMEOUT)
    assert status == 200, state
    [task] = [t for t in state["tasks"] if t["id"] == "1.2"]
    assert task["status"] == "failed" and task["check"]["passed"] < task["check"]["checks"], task
    assert "Task 1.2" in task["check"]["report"] and not task["stale"]

    _fix(path, "Implement task 1.2", WEIGHT_BYTES_FIX)
    [task] = [t for t in _request(f"{api}/state?path=labs/{NOTEBOOK}", token)[2]["tasks"] if t["id"] == "1.2"]
    assert task["stale"] and task["status"] == "failed"
    status, _, state = _request(f"{api}/check", token, "POST", {"path": f"labs/{NOTEBOOK}", "task": "1.2"}, CHECK_TIMEOUT)
    [task] = [t for t in state["tasks"] if t["id"] == "1.2"]
    assert task["status"] == "passed" and task["check"]["passed"] == task["check"]["checks"] > 0, task
    assert state["progress"]["passing"] == 1 and state["progress"]["points"] == LAB.tasks[1].max_points
    assert state["progress"]["exported"] == 0  # the checker runs in a scratch folder: it exports nothing beside the file


def test_a_written_answer_reads_as_saved(server):
    root, api, token = server
    path = root / "labs" / NOTEBOOK
    [question] = [q for q in LAB.written if q.points]
    nb = nbformat.read(str(path), as_version=4)
    [cell] = [c for c in nb.cells if c.cell_type == "markdown" and c.source.startswith(f"#### Answer to {question.label}")]
    words = question.words[0] + 1
    cell.source = cell.source.split("\n")[0] + "\n\n" + " ".join(["word"] * words)
    nbformat.write(nb, str(path))
    state = _request(f"{api}/state?path=labs/{NOTEBOOK}", token)[2]
    assert [(w["status"], w["words"]) for w in state["written"]] == [("passed", words)]
    assert state["progress"]["written_answered"] == 1


def test_on_the_class_server_hand_in_runs_handin_for_the_lab_and_answers_its_receipt(tmp_path):
    """With the class server's variables set and a ``handin`` program on PATH (here one that records its arguments
    and prints a receipt: the real one and its service are tested by tests/test_hub_handin.py), the state offers
    hand-in and POST handin runs ``handin <lab>``, answering what it printed."""
    root = _course(tmp_path)
    programs = tmp_path / "bin"
    programs.mkdir()
    handin = programs / "handin"
    handin.write_text('#!/bin/sh\necho "$@" > "$HANDIN_ARGS"\necho "handed in $1: 1 file, 1234 bytes"\n')
    handin.chmod(0o755)
    install(tmp_path / "data", tmp_path / "config")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{programs}{os.pathsep}{os.environ['PATH']}")
        patch.setenv("COURSE_HANDIN_URL", "http://127.0.0.1:9/handin")
        patch.setenv("JUPYTERHUB_API_TOKEN", "not-a-token")
        patch.setenv("HANDIN_ARGS", str(tmp_path / "args"))
        with _served(root, tmp_path, patch) as (base, token):
            api = f"{base}/{ROUTE}"
            assert _request(f"{api}/state?path=labs/{NOTEBOOK}", token)[2]["handin"] is True
            status, _, answer = _request(f"{api}/handin", token, "POST", {"path": f"labs/{NOTEBOOK}"})
            assert (status, answer) == (200, {"handed_in": True, "receipt": f"handed in {LAB.name}: 1 file, 1234 bytes\n"})
            assert _request(f"{api}/handin", token, "POST", {"path": "../outside.ipynb"})[0] == 403
    assert (tmp_path / "args").read_text() == f"{LAB.name}\n"


# ---------------------------------------------------------------- as a student sees it, in a browser

PANEL_STATE = """
const app = window.jupyterapp, widget = app && app.shell.currentWidget;
const rows = Array.from(document.querySelectorAll('#course-panel [data-task]'));
return {kernel: widget && widget.sessionContext && widget.sessionContext.session && widget.sessionContext.session.kernel
                ? widget.sessionContext.session.kernel.status : null,
        tasks: rows.map((r) => [r.dataset.task, r.dataset.status, r.querySelector('button').textContent]),
        progress: (document.querySelector('#course-panel .jp-CoursePanel-progress') || {}).textContent || null,
        error: (document.querySelector('#course-panel .jp-CoursePanel-error') || {}).textContent || null};"""


def _wait(browser, until, timeout: float, what: str) -> dict:
    deadline, state = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        try:
            state = browser.script(PANEL_STATE)
        except AssertionError as err:  # the page is navigating (JupyterLab reloading): not yet
            state = {"error": str(err)}
        if "tasks" in state and until(state):
            return state
        time.sleep(0.5)
    pytest.fail(f"{what}: not within {timeout} s: {state}")


def _task(state: dict, task: str) -> tuple[str, str]:
    [(status, button)] = [(s, b) for t, s, b in state["tasks"] if t == task]
    return status, button


def _check_from_the_panel(browser, task: str) -> dict:
    browser.script(f"document.querySelector('#course-panel [data-task=\"{task}\"] button').click();")
    _wait(browser, lambda s: _task(s, task)[1] == "checking...", 30, "the check button did not start a check")
    return _wait(browser, lambda s: _task(s, task)[1] == "Check", CHECK_TIMEOUT, f"task {task}'s check did not end")


def test_a_student_checks_a_task_from_the_panel_fixes_it_and_sees_it_pass(browser, tmp_path):
    """Lab 1's handout in JupyterLab with the panel installed as docker/setup.sh installs it: the panel lists the
    lab's tasks; task 1.2 checked from it fails; the student writes the function in the notebook's editor and
    checks again (the panel saves the notebook first), and the task passes. A screenshot goes to build/artifacts."""
    root = tmp_path / "course"
    (root / "labs").mkdir(parents=True)
    shutil.copy(REPO / "labs" / LAB.notebook, root / "labs" / NOTEBOOK)
    install(tmp_path / "data", tmp_path / "config")
    with pytest.MonkeyPatch.context() as patch, \
            _served(root, tmp_path, patch, ("--LabApp.expose_app_in_browser=True",)) as (base, token):
        browser.open(f"{base}/lab/tree/labs/{NOTEBOOK}?token={token}")
        _wait(browser, lambda s: s["kernel"] is not None, 120, "the lab did not open")
        browser.script("window.jupyterapp.commands.execute('course-panel:open');")
        state = _wait(browser, lambda s: len(s["tasks"]) == len(LAB.tasks), 60, "the panel did not list the tasks")
        assert [t for t, _, _ in state["tasks"]] == [t.id for t in LAB.tasks]
        assert {s for _, s, _ in state["tasks"]} == {NOT_CHECKED}
        assert state["progress"].startswith(f"0/{len(LAB.tasks)} tasks pass")

        state = _check_from_the_panel(browser, "1.2")
        assert _task(state, "1.2")[0] == "failed" and state["error"] is None, state

        fixed = browser.script(f"""
            const cells = window.jupyterapp.shell.currentWidget.content.model.cells;
            for (let i = 0; i < cells.length; i++) {{
              const shared = cells.get(i).sharedModel, source = shared.getSource();
              if (source.includes('Implement task 1.2')) {{
                shared.setSource(source.split('\\n').map((l) => l.includes('Implement task 1.2') ? {json.dumps(WEIGHT_BYTES_FIX)} : l).join('\\n'));
                return true;
              }}
            }}
            return false;""")
        assert fixed
        state = _check_from_the_panel(browser, "1.2")
        assert _task(state, "1.2")[0] == "passed" and state["error"] is None, state
        assert state["progress"].startswith(f"1/{len(LAB.tasks)} tasks pass their public checks "
                                           f"({LAB.tasks[1].max_points:g} of {LAB.max_points:g} points)"), state
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / "course_panel.png").write_bytes(browser.screenshot())
    saved = nbformat.read(str(root / "labs" / NOTEBOOK), as_version=4)
    assert any(WEIGHT_BYTES_FIX in c.source for c in saved.cells)  # the panel saved the fix before checking


def test_a_check_cell_in_the_kernel_is_the_tasks_last_check_until_a_later_one(tmp_path, monkeypatch):
    """``check("1.2")`` run in the student's kernel records its result beside the notebook (outputs/lab1/checks/),
    which the panel shows as the task's last check (not made stale by a later save: it checked the kernel); a later
    check from the panel takes its place; under the grader (``$COURSE_OUTPUT_DIR`` set) nothing is recorded."""
    import torch.nn as nn

    from grader.panel.state import TaskCheck, panel_state
    from util import selfcheck
    from util.answers import OUTPUT_DIR_ENV

    root = _course(tmp_path)
    notebook = root / "labs" / NOTEBOOK
    monkeypatch.chdir(notebook.parent)   # the kernel's folder: JupyterLab starts it beside its notebook
    monkeypatch.delenv(OUTPUT_DIR_ENV, raising=False)
    namespace = {"nn": nn, "weight_bytes": lambda model: sum(p.numel() * 4 for p in model.parameters())}
    selfcheck.check("1.2", namespace)       # a float32-only answer: public checks fail
    failed = panel_state(f"labs/{NOTEBOOK}", notebook, LAB, {}, handin=False)
    [task] = [t for t in failed.tasks if t.id == "1.2"]
    assert task.status == "failed" and task.check.source == "kernel" and not task.stale, task
    assert 0 <= task.check.passed < task.check.checks and "Checked in the kernel" in task.check.report
    assert {t.status for t in failed.tasks if t.id != "1.2"} == {NOT_CHECKED}

    namespace["weight_bytes"] = lambda model: sum(p.numel() * p.element_size() for p in model.parameters())
    from util.answers import output_dir, write_answer
    from util.labs.lab1.public_checks import _googlenet_params

    params = _googlenet_params()   # what the notebook's submit("1.2", ...) exports for GoogLeNet
    write_answer(output_dir("lab1"), "1.2", {"float32": 4 * params, "float16": 2 * params, "bfloat16": 2 * params})
    selfcheck.check("1.2", namespace)
    _fix(notebook, "Implement task 1.2", WEIGHT_BYTES_FIX)   # saved afterwards: the kernel's check stays current
    [task] = [t for t in panel_state(f"labs/{NOTEBOOK}", notebook, LAB, {}, handin=False).tasks if t.id == "1.2"]
    assert (task.status, task.stale) == ("passed", False) and task.check.passed == task.check.checks > 0, task

    later = TaskCheck("failed", 0, 3, "from the panel", task.check.checked_at + 1, notebook.stat().st_mtime)
    [task] = [t for t in panel_state(f"labs/{NOTEBOOK}", notebook, LAB, {"1.2": later}, handin=False).tasks
              if t.id == "1.2"]
    assert task.check == later and task.status == "failed"

    (notebook.parent / "outputs" / "lab1" / "checks" / "1.2.json").write_text("{not json")
    assert [t.status for t in panel_state(f"labs/{NOTEBOOK}", notebook, LAB, {}, handin=False).tasks
            if t.id == "1.2"] == [NOT_CHECKED]   # an unreadable record is no record

    monkeypatch.setenv(OUTPUT_DIR_ENV, str(tmp_path / "graded"))
    selfcheck.check("1.2", namespace)
    assert not (tmp_path / "graded" / "checks").exists()
