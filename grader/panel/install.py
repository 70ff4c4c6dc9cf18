"""Install the course panel into a Python environment: ``python -m grader.panel.install [PREFIX]``.

``docker/setup.sh`` runs it after installing the course package, so the student image and the class server
(built on it) have the panel, and no student builds anything: it copies the prebuilt JupyterLab extension
(``grader/panel/labextension/``, committed) to ``PREFIX/share/jupyter/labextensions/<name>`` and enables the
server extension in ``PREFIX/etc/jupyter/jupyter_server_config.d/<name>.json``. ``PREFIX`` defaults to this
Python's ``sys.prefix`` (the virtual environment). Running it again replaces both.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

NAME = "ml-cost-course-panel"
"""The JupyterLab extension's name (``frontend/package.json``), and its folder under ``share/jupyter/labextensions``."""
BUILT = Path(__file__).resolve().parent / "labextension"
"""The extension as ``jlpm build:prod`` writes it (``frontend/package.json``'s ``outputDir``)."""


def install(data_dir: Path, config_dir: Path) -> list[Path]:
    """Copy the built extension into ``data_dir/labextensions`` and enable the server extension in
    ``config_dir/jupyter_server_config.d``; return the two paths written."""
    if not (BUILT / "package.json").is_file():
        raise FileNotFoundError(f"{BUILT} holds no built extension (no package.json): build it with `jlpm install && "
                                "jlpm build:prod` in grader/panel/frontend (docs/tas.md), or restore it with git")
    target = Path(data_dir) / "labextensions" / NAME
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(BUILT, target)
    config = Path(config_dir) / "jupyter_server_config.d" / f"{NAME}.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"ServerApp": {"jpserver_extensions": {"grader.panel": True}}}, indent=2) + "\n",
                      encoding="utf-8")
    return [target, config]


def main(argv: list[str]) -> int:
    prefix = Path(argv[0]) if argv else Path(sys.prefix)
    for path in install(prefix / "share" / "jupyter", prefix / "etc" / "jupyter"):
        print(f"course panel: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
