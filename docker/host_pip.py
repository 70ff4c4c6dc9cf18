"""The host's pip settings, carried into ``docker build`` so the images install the way the host does.

A build has none of the host's files or environment: its ``pip install`` would not trust an
intercepting proxy's CA and would not see a local wheel folder or package index. This reads the
host's pip settings (the ``pip.conf`` files pip reads, then ``$PIP_*``, which win) and writes them
as build arguments, which docker/Dockerfile declares in the stages that run pip (they do not stay
in the images' environment)::

    python3 docker/host_pip.py args --port 38417     # NAME=value lines for --build-arg
    python3 docker/host_pip.py folders               # the local folders those arguments name
    python3 docker/host_pip.py serve --port 38417    # serve them on 127.0.0.1 (until killed)

What is carried, and how:

* ``index-url``, ``extra-index-url``, ``find-links``: URLs as they are; a local folder (a path or a
  ``file://`` URL) becomes ``http://127.0.0.1:PORT<path>``, which ``serve`` answers, so the build
  (run with ``--network host``) reads it without copying gigabytes into the build context. A local
  index ``.../simple`` is served from its parent folder, where such mirrors keep the files its pages
  link to (``../../files/...``). A folder that does not exist is left out (pip would ignore it too).
* ``cert``: the image's own bundle, ``/etc/ssl/certs/ca-certificates.crt``, which holds the host's
  extra CAs (docker/base_image.sh adds them); also set when the host has such CAs and no ``cert``,
  since pip in the official Python images trusts only certifi's bundle.
* ``trusted-host``, ``default-timeout`` (``timeout``): as they are.

Anything else in the host's settings is named on stderr as not carried. Build arguments stay out of the
images' environment but show in ``docker history``, so a URL holding a user name or password is refused.
"""
from __future__ import annotations

import argparse
import configparser
import functools
import http.server
import os
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

CARRIED = {"index-url": "PIP_INDEX_URL", "extra-index-url": "PIP_EXTRA_INDEX_URL", "find-links": "PIP_FIND_LINKS",
           "trusted-host": "PIP_TRUSTED_HOST", "cert": "PIP_CERT", "default-timeout": "PIP_DEFAULT_TIMEOUT"}
"""pip setting -> the build argument docker/Dockerfile declares for it."""
ALIASES = {"timeout": "default-timeout"}
IGNORED = {"disable-pip-version-check", "no-cache-dir", "progress-bar"}
"""Settings the Dockerfile sets itself (its ENV), or that change nothing about what is installed."""
LOCAL_URLS = ("index-url", "extra-index-url", "find-links")
IMAGE_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
EXTRA_CAS = Path("/usr/local/share/ca-certificates")
SECTIONS = ("global", "install")
"""pip reads [global], then the command's own section, which wins."""


def config_files() -> list[Path]:
    """The pip.conf files pip reads, in its order (later files win): global, user, site, $PIP_CONFIG_FILE."""
    if os.environ.get("PIP_CONFIG_FILE") == os.devnull:
        return []
    xdg_dirs = os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(os.pathsep)
    home = Path.home()
    xdg_home = Path(os.environ.get("XDG_CONFIG_HOME", home / ".config"))
    files = [Path(d) / "pip" / "pip.conf" for d in xdg_dirs if d] + [Path("/etc/pip.conf")]
    files += [home / ".pip" / "pip.conf", xdg_home / "pip" / "pip.conf"]
    if os.environ.get("VIRTUAL_ENV"):
        files.append(Path(os.environ["VIRTUAL_ENV"]) / "pip.conf")
    if os.environ.get("PIP_CONFIG_FILE"):
        files.append(Path(os.environ["PIP_CONFIG_FILE"]))
    return [f for f in files if f.is_file()]


def settings(environ: dict[str, str] | None = None, files: list[Path] | None = None) -> dict[str, str]:
    """The host's pip settings for ``pip install``: setting name (``find-links``) -> value."""
    environ = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for path in config_files() if files is None else files:
        parser = configparser.RawConfigParser()
        parser.read(path, encoding="utf-8")
        for section in SECTIONS:
            if parser.has_section(section):
                for key, value in parser.items(section):
                    key = key.replace("_", "-")
                    out[ALIASES.get(key, key)] = " ".join(value.split())
    for name, value in environ.items():
        if name.startswith("PIP_") and name != "PIP_CONFIG_FILE":
            key = name[4:].lower().replace("_", "-")
            out[ALIASES.get(key, key)] = " ".join(value.split())
    return out


def _local_path(item: str) -> Path | None:
    """The folder a find-links or index item names, if it is local (a path or a file:// URL)."""
    parsed = urlparse(item)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme == "" and item.startswith("/"):
        return Path(item)
    return None


def served_root(path: Path) -> Path:
    """The folder to serve for a local index or find-links folder: a ``.../simple`` index's parent."""
    return path.parent if path.name == "simple" else path


def host_has_extra_cas() -> bool:
    """Whether the host trusts CAs of its own (the Debian/Ubuntu folder for them holds a .crt)."""
    return EXTRA_CAS.is_dir() and any(EXTRA_CAS.rglob("*.crt"))


def build_args(port: int, found: dict[str, str] | None = None) -> tuple[dict[str, str], list[Path], list[str]]:
    """(build argument -> value, local folders to serve, notes on what was not carried)."""
    found = settings() if found is None else found
    args: dict[str, str] = {}
    folders: list[Path] = []
    notes: list[str] = []
    for key, value in found.items():
        if key in IGNORED:
            continue
        if key not in CARRIED:
            notes.append(f"pip setting {key!r} not carried into the build")
            continue
        if key in LOCAL_URLS:
            items = []
            for item in value.split():
                parsed = urlparse(item)
                if parsed.username or parsed.password:
                    raise ValueError(f"the host's pip setting {key} holds credentials ({parsed.scheme}://"
                                     f"{parsed.username}:***@{parsed.hostname}...), which a build argument would "
                                     "leave in the images' history (docker history); give the build a mirror "
                                     "without them, or build without the host's pip settings (PIP_CONFIG_FILE=/dev/null)")
                path = _local_path(item)
                if path is None:
                    items.append(item)
                elif path.is_dir():
                    root = served_root(path)
                    if root not in folders:
                        folders.append(root)
                    items.append(f"http://127.0.0.1:{port}{path.as_posix().rstrip('/')}/")
                else:
                    notes.append(f"{key} {item}: no such folder here, left out")
            if items:
                args[CARRIED[key]] = " ".join(items)
        elif key == "cert":
            args["PIP_CERT"] = IMAGE_BUNDLE
        else:
            args[CARRIED[key]] = value
    if host_has_extra_cas():
        args["PIP_CERT"] = IMAGE_BUNDLE
    return args, folders, notes


class FolderHandler(http.server.SimpleHTTPRequestHandler):
    """Files and folder listings under the allowed folders, by their absolute path; 404 elsewhere."""

    def __init__(self, *args, roots: tuple[Path, ...], **kwargs):
        self.roots = roots
        super().__init__(*args, directory="/", **kwargs)

    def translate_path(self, path: str) -> str:
        target = Path(super().translate_path(path)).resolve()
        if not any(target == root or target.is_relative_to(root) for root in self.roots):
            return "/nonexistent/outside-the-served-folders"
        return str(target)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base class's name)
        pass  # a build asks for thousands of pages


def serve(port: int, folders: list[Path]) -> None:
    """Serve ``folders`` on 127.0.0.1:``port`` until killed."""
    handler = functools.partial(FolderHandler, roots=tuple(f.resolve() for f in folders))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        print(f"host_pip.py: serving {', '.join(map(str, folders))} on http://127.0.0.1:{port}", file=sys.stderr)
        server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    """``args`` / ``folders`` / ``serve``: see the module's docstring."""
    parser = argparse.ArgumentParser(prog="python3 docker/host_pip.py",
                                     description="The host's pip settings as docker build arguments.")
    parser.add_argument("what", choices=("args", "folders", "serve"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("COURSE_PIP_PORT", "38417")),
                        help="loopback port that serves the local folders (default: %(default)s)")
    options = parser.parse_args(argv)
    try:
        args, folders, notes = build_args(options.port)
    except ValueError as exc:
        print(f"host_pip.py: {exc}", file=sys.stderr)
        return 1
    if options.what == "args":
        for note in notes:
            print(f"host_pip.py: {note}", file=sys.stderr)
        for name, value in args.items():
            print(f"{name}={value}")
    elif options.what == "folders":
        for folder in folders:
            print(folder)
    elif not folders:
        print("host_pip.py: no local folder in the host's pip settings: nothing to serve", file=sys.stderr)
        return 1
    else:
        try:
            serve(options.port, folders)
        except OSError as exc:
            print(f"host_pip.py: cannot serve on 127.0.0.1:{options.port} ({exc.strerror}); set COURSE_PIP_PORT "
                  "to a free port", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
