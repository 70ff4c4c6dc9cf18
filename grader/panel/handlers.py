"""The course panel's JSON API, under ``<base_url>/course-panel/``.

    GET  state?path=labs/labN_topic.ipynb     the notebook's :class:`grader.panel.state.PanelState`
    POST check   {"path": ..., "task": "N.M"}  run that task's checks on the saved file, then the state
    POST handin  {"path": ...}                 on the class server: hand the lab in (``handin labN``), its receipt

A path is relative to the server's root (``ServerApp.root_dir``) and must name a course lab's notebook
there: one outside the root (``..``, an absolute path, a link leading out) is refused with 403. Every
answer is JSON; an error is ``{"error": "..."}`` saying what was expected and what to do.
"""
from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import tornado.web
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join

from grader.panel.state import TaskCheck, panel_state

ROUTE = "course-panel"
"""Where the API lives, under the server's base URL (``frontend/src/index.ts`` asks there)."""
HANDIN_TIMEOUT = 180
"""Seconds a hand-in may take (``handin`` itself waits up to 120 s for the class server)."""


class PanelError(Exception):
    """A request the panel refuses: an HTTP status and a message in the student's words."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def resolve(root: Path, relative: str) -> Path:
    """The notebook ``relative`` names under ``root``; :class:`PanelError` when it is outside it or no notebook."""
    if not isinstance(relative, str) or not relative.strip():
        raise PanelError(400, "no notebook given: expected a notebook's path under the server's root, e.g. labs/x.ipynb")
    root = root.resolve()
    path = (root / relative).resolve()  # .resolve(): a ".." or a link that leads out of the root is out
    if Path(relative).is_absolute() or not path.is_relative_to(root):
        raise PanelError(403, f"{relative}: outside the server's root ({root}); the panel reads notebooks under it only")
    if path.suffix != ".ipynb" or not path.is_file():
        raise PanelError(404, f"{relative}: no such notebook under the server's root; save the notebook first")
    return path


def lab_of(path: Path):
    """The course lab ``path`` is a notebook of; :class:`PanelError` (404) when it is none."""
    from grader.grade.collect import resolve_lab

    try:
        return resolve_lab(path, None)
    except (FileNotFoundError, ValueError, KeyError) as exc:
        raise PanelError(404, f"{path.name} is not a lab notebook of this course ({exc})") from None


def can_hand_in() -> bool:
    """The class server's hand-in service is configured here (its address, a token, the ``handin`` program)."""
    return bool(os.environ.get("COURSE_HANDIN_URL") and os.environ.get("JUPYTERHUB_API_TOKEN")
                and shutil.which("handin"))


class _Handler(APIHandler):
    @property
    def root(self) -> Path:
        return Path(self.settings["server_root_dir"]).expanduser()

    @property
    def checks(self) -> dict[str, dict[str, TaskCheck]]:
        """Notebook path -> task id -> last check, for this server's life."""
        return self.settings.setdefault("course_panel_checks", {})

    def answer(self, status: int, body: dict) -> None:
        self.set_status(status)
        self.finish(json.dumps(body))

    def state(self, relative: str) -> dict:
        path = resolve(self.root, relative)
        lab = lab_of(path)
        key = path.relative_to(self.root.resolve()).as_posix()
        try:
            return panel_state(key, path, lab, self.checks.get(key, {}), handin=can_hand_in()).to_dict()
        except ValueError as exc:
            raise PanelError(422, str(exc)) from None

    def body(self) -> dict:
        try:
            data = json.loads(self.request.body or b"{}")
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise PanelError(400, 'expected a JSON object, e.g. {"path": "labs/x.ipynb", "task": "1.1"}')
        return data


class StateHandler(_Handler):
    @tornado.web.authenticated
    async def get(self) -> None:
        try:
            self.answer(200, self.state(self.get_argument("path", "")))
        except PanelError as exc:
            self.answer(exc.status, {"error": str(exc)})


class CheckHandler(_Handler):
    @tornado.web.authenticated
    async def post(self) -> None:
        from grader.panel.runner import run_check

        try:
            data = self.body()
            path = resolve(self.root, data.get("path", ""))
            lab = lab_of(path)
            task = data.get("task")
            if task not in {t.id for t in lab.tasks}:
                raise PanelError(400, f"{lab.name} has no task {task!r}; its tasks are {', '.join(t.id for t in lab.tasks)}")
            key = path.relative_to(self.root.resolve()).as_posix()
            self.checks.setdefault(key, {})[task] = await run_check(path, lab, task)
            self.answer(200, self.state(key))
        except PanelError as exc:
            self.answer(exc.status, {"error": str(exc)})


class HandinHandler(_Handler):
    @tornado.web.authenticated
    async def post(self) -> None:
        try:
            data = self.body()
            lab = lab_of(resolve(self.root, data.get("path", "")))
            if not can_hand_in():
                raise PanelError(409, "this server cannot hand in (it is not a server of the class server): hand in "
                                      "as your course says")
            process = await asyncio.create_subprocess_exec(shutil.which("handin"), lab.name,
                                                           stdout=asyncio.subprocess.PIPE,
                                                           stderr=asyncio.subprocess.STDOUT)
            try:
                printed, _ = await asyncio.wait_for(process.communicate(), HANDIN_TIMEOUT)
            except asyncio.TimeoutError:
                process.kill()
                await process.wait()
                raise PanelError(504, f"the hand-in took more than {HANDIN_TIMEOUT} s and was stopped; nothing may "
                                      "have been handed in: run `handin --list` in a terminal") from None
            self.answer(200, {"handed_in": process.returncode == 0, "receipt": printed.decode("utf-8", "replace")})
        except PanelError as exc:
            self.answer(exc.status, {"error": str(exc)})


def add_handlers(serverapp) -> None:
    """Register the API's three routes on ``serverapp``'s web application."""
    web_app = serverapp.web_app
    base = url_path_join(web_app.settings["base_url"], ROUTE)
    web_app.add_handlers(".*$", [(url_path_join(base, "state"), StateHandler),
                                 (url_path_join(base, "check"), CheckHandler),
                                 (url_path_join(base, "handin"), HandinHandler)])
