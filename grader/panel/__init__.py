"""The course panel: a JupyterLab side panel for the open lab notebook, and the server extension behind it.

The panel (``frontend/``, TypeScript, built with JupyterLab's own tooling into ``labextension/``, which is
committed so that no student builds it) shows the open lab's tasks with their points and the result of
each task's last check, a button that checks one task, the written answers' status and the lab's progress;
on the class server, a hand-in button. Its numbers come from this server extension's JSON API
(:mod:`grader.panel.handlers`), which only ever reads the notebook's saved file: a check is
``python -m grader check`` on that file (:mod:`grader.panel.runner`), in a process of its own with a
deadline, never what a kernel or the browser says.

``docker/setup.sh`` installs both halves into the course's environment (:mod:`grader.panel.install`).
"""
from __future__ import annotations


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """How Jupyter Server finds this extension (``jpserver_extensions``: ``{"grader.panel": true}``)."""
    return [{"module": "grader.panel"}]


def _load_jupyter_server_extension(serverapp) -> None:
    """Add the panel's handlers to a running Jupyter Server."""
    from grader.panel.handlers import add_handlers

    add_handlers(serverapp)
