#!/usr/bin/env python3
"""The class server's hand-in receiver: a student's lab, copied with its time into the collection the
instructor grades (docs/hub.md, "Collecting and grading").

JupyterHub runs it as a service (``docker/hub/jupyterhub_config.py``; on Kubernetes the values file in
``docker/hub/k8s/``). A student's ``handin labN`` (``docker/hub/handin.py``, in the student's server)
posts the lab's files here with the server's own JupyterHub token; this service asks the hub whose
token it is and writes the files, and only them, into that student's entry:

    COLLECTION/alice/lab1_pytorch_analysis.ipynb            a notebook lab
    COLLECTION/alice/lab4_libtorch/lab4_libtorch.ipynb      a lab with support files: its folder
    COLLECTION/alice/lab4_libtorch/cpp/...
    COLLECTION/.earlier/alice/20261126T140312Z/lab1_...     the hand-in it replaced, kept
    COLLECTION/.receipts/alice.json                         every hand-in: time, files, bytes, SHA-256

``python -m grader grade COLLECTION`` grades it as any class folder (the hidden folders are not
submissions). **The hand-in's time is this service's clock** at receipt, set as the modification time of
every file it writes: the grader's late days read that time (``grader/report/late.py``), and a student
cannot choose it. A second hand-in of a lab replaces the first, which moves to ``.earlier/`` (the newest
``MAX_EARLIER`` of each lab are kept there).

What a student sends cannot reach anything but their own entry of that lab: the student is the token's
owner (never a name the request gives), user and lab names must be plain (``USER``, ``LAB``), every
path must lie inside the lab's entry, named as the course names labs (``labN_topic.ipynb``, or
``labN_topic/`` holding ``labN_topic.ipynb``), with no ``..``, no hidden or control-character names;
files are created fresh in a staging folder (never following a link) and renamed into place. Sizes are
bounded (``MAX_FILES``, ``MAX_BYTES``). Students' containers never mount the collection.

Standard library only: it runs with the hub's Python, wherever that is.

    python3 handin_service.py --collection DIR [--listen HOST:PORT]   # the hub passes its API address
"""
from __future__ import annotations

import argparse
import base64
import binascii
import fcntl
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

USER = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
"""A student's name as a folder of the collection (JupyterHub lowercases names; ``docker/hub`` takes
them from the roster, which it checks against this too)."""
LAB = re.compile(r"lab[0-9]{1,4}")
ENTRY = re.compile(r"(lab[0-9]{1,4})_[A-Za-z0-9_-]{1,100}(\.ipynb)?")
"""A lab's entry, as the course names them: ``labN_topic.ipynb`` or a folder ``labN_topic/``."""
MAX_FILES = 2000
MAX_BYTES = 64 * 2**20
"""Bytes of files in one hand-in (the grader refuses notebooks over 32 MiB)."""
MAX_BODY = MAX_BYTES * 4 // 3 + 2**20
"""The request's largest body: the files in base64, and their names."""
MAX_NAME_BYTES = 255
MAX_DEPTH = 16
MAX_EARLIER = 10
"""Earlier hand-ins kept per student and lab (the oldest go first): with ``MAX_BYTES``, what one student can make
the collection hold is bounded (11 hand-ins of each lab)."""
HIDDEN = (".earlier", ".incoming", ".receipts")
"""The collection's own folders (hidden: ``python -m grader grade`` takes no submission from them)."""


class HandinError(ValueError):
    """The hand-in is refused; the message says why, in the student's words."""


@dataclass(frozen=True)
class Receipt:
    """One hand-in, as stored in ``.receipts/USER.json`` and shown to the student."""

    user: str
    lab: str
    entry: str
    """The entry's name in the student's folder (``lab1_pytorch_analysis.ipynb``, ``lab4_libtorch``)."""
    time: str
    """When it was received (ISO 8601, UTC): the modification time of every file written."""
    files: int
    bytes: int
    sha256: str
    """SHA-256 of the notebook file as received (``sha256sum`` of the student's saved notebook)."""
    replaced: str | None
    """The path, in the collection, where the hand-in it replaced is kept; ``None`` for a first one."""


def _check_part(part: str, path: str) -> None:
    if part in ("", ".", "..") or part.startswith("."):
        raise HandinError(f"{path!r}: every part of a path must be a plain name (not empty, '.', '..' or hidden)")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in part) or "\\" in part:
        raise HandinError(f"{path!r}: a name holds a control character or a backslash")
    if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise HandinError(f"{path[:80]!r}...: a name is longer than {MAX_NAME_BYTES} bytes")
    try:
        part.encode("utf-8")
    except UnicodeEncodeError:
        raise HandinError(f"{path!r}: a name is not valid UTF-8") from None


def check(user: str, lab: str, files: dict[str, bytes]) -> str:
    """The entry's name when the hand-in may be stored; raises :class:`HandinError` saying why not."""
    if not isinstance(user, str) or not USER.fullmatch(user):
        raise HandinError(f"the user name {user!r} cannot name a folder of the collection; ask your instructor")
    if not isinstance(lab, str) or not LAB.fullmatch(lab):
        raise HandinError(f"{lab!r} is not a lab's name: write labN, e.g. lab1")
    if not files:
        raise HandinError(f"nothing to hand in for {lab}")
    if len(files) > MAX_FILES:
        raise HandinError(f"{len(files)} files: a hand-in holds at most {MAX_FILES}")
    total = sum(len(data) for data in files.values())
    if total > MAX_BYTES:
        raise HandinError(f"{total / 2**20:.1f} MiB: a hand-in holds at most {MAX_BYTES // 2**20} MiB")
    entries = set()
    for path in files:
        if not isinstance(path, str) or path.startswith("/"):
            raise HandinError(f"{path!r}: paths are relative to your labs/ folder")
        parts = path.split("/")
        if len(parts) > MAX_DEPTH:
            raise HandinError(f"{path!r}: nested more than {MAX_DEPTH} folders deep")
        for part in parts:
            _check_part(part, path)
        entries.add(parts[0])
    if len(entries) != 1:
        raise HandinError(f"a hand-in of {lab} holds one notebook or one lab folder; found {sorted(entries)}")
    [entry] = entries
    match = ENTRY.fullmatch(entry)
    if not match or match.group(1) != lab:
        raise HandinError(f"{entry!r} is not {lab}'s notebook or folder (named {lab}_topic.ipynb or {lab}_topic/)")
    if entry.endswith(".ipynb"):
        if set(files) != {entry}:
            raise HandinError(f"{entry} is a notebook: a hand-in of it holds that one file")
    elif f"{entry}/{entry}.ipynb" not in files:
        raise HandinError(f"the folder {entry}/ holds no {entry}.ipynb: hand in the lab's folder with its notebook")
    names = set(files)
    for path in files:   # a file and a folder of one name: "a/b" and "a/b/c"
        parts = path.split("/")
        for depth in range(1, len(parts)):
            if "/".join(parts[:depth]) in names:
                raise HandinError(f"{'/'.join(parts[:depth])!r} is both a file and a folder of this hand-in")
    return entry


def _stamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def _real_folder(path: Path) -> None:
    """Make ``path`` a folder (not a link) or raise: the collection's own folders, never a student's doing."""
    try:
        path.mkdir(mode=0o755, exist_ok=True)
    except FileExistsError:
        pass
    if path.is_symlink() or not path.is_dir():
        raise RuntimeError(f"{path} is not a folder (a link or a file): the collection was changed by hand")


def _receipts(collection: Path, user: str) -> list[dict]:
    path = collection / ".receipts" / f"{user}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []


def _write_json(path: Path, value) -> None:
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(value, handle, indent=1)
    os.chmod(temp, 0o644)
    os.replace(temp, path)


def _forget_oldest(kept: Path, lab: str) -> None:
    """Delete ``lab``'s earlier hand-ins in ``kept`` (``.earlier/USER``) beyond the newest ``MAX_EARLIER``."""
    entries = sorted((p for p in kept.glob(f"*/{lab}_*")), key=lambda p: p.parent.name)
    for old in entries[:-MAX_EARLIER]:
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old)
        else:
            old.unlink()
        if not any(old.parent.iterdir()):
            old.parent.rmdir()


_LOCK = threading.Lock()


def hand_in(collection: Path, user: str, lab: str, files: dict[str, bytes], now: datetime | None = None) -> Receipt:
    """Store ``files`` (path in the student's ``labs/`` -> bytes) as ``user``'s hand-in of ``lab``, received at
    ``now`` (default: this machine's clock, UTC), replacing their earlier one, which is kept in ``.earlier/``.
    Raises :class:`HandinError` for what the student sent."""
    entry = check(user, lab, files)
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    stamp = now.timestamp()
    collection = Path(collection)
    for folder in (collection, *(collection / name for name in HIDDEN)):
        _real_folder(folder)
    with _LOCK, open(collection / ".incoming" / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # one hand-in at a time, across processes too
        staging = Path(tempfile.mkdtemp(prefix=f"{user}.", dir=collection / ".incoming"))
        try:
            for path, data in sorted(files.items()):
                target = staging.joinpath(*path.split("/"))
                target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.chmod(target, 0o644)
            for folder, subfolders, names in os.walk(staging / entry, topdown=False):
                for name in [*names, *subfolders]:
                    os.utime(Path(folder) / name, (stamp, stamp), follow_symlinks=False)
            if (staging / entry).is_dir():
                os.chmod(staging / entry, 0o755)
            os.utime(staging / entry, (stamp, stamp), follow_symlinks=False)

            mine = collection / user
            _real_folder(mine)
            earlier = [p for p in sorted(mine.iterdir()) if p.name == entry or p.name.startswith(f"{lab}_")]
            replaced = None
            if earlier:
                previous = [r for r in _receipts(collection, user) if r.get("lab") == lab]
                when = previous[-1]["time"] if previous else None
                kept_at = _stamp(datetime.fromisoformat(when)) if when else _stamp(
                    datetime.fromtimestamp(os.lstat(earlier[0]).st_mtime, timezone.utc))
                _real_folder(collection / ".earlier" / user)
                keep = collection / ".earlier" / user / kept_at
                count = 1
                while keep.exists():
                    count += 1
                    keep = collection / ".earlier" / user / f"{kept_at}~{count}"
                _real_folder(keep)
                for path in earlier:
                    os.rename(path, keep / path.name)
                replaced = keep.relative_to(collection).as_posix()
                _forget_oldest(collection / ".earlier" / user, lab)
            os.rename(staging / entry, mine / entry)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        notebook = entry if entry.endswith(".ipynb") else f"{entry}/{entry}.ipynb"
        receipt = Receipt(user, lab, entry, now.isoformat(timespec="seconds"), len(files),
                          sum(len(d) for d in files.values()), hashlib.sha256(files[notebook]).hexdigest(), replaced)
        _write_json(collection / ".receipts" / f"{user}.json", [*_receipts(collection, user), asdict(receipt)])
    return receipt


def handins(collection: Path, user: str) -> list[dict]:
    """The receipts of ``user``'s hand-ins, oldest first."""
    if not USER.fullmatch(user):
        return []
    return _receipts(Path(collection), user)


# ---------------------------------------------------------------- the HTTP service

def owner(token: str, api_url: str) -> str:
    """The JupyterHub user whose token ``token`` is (the hub's ``GET /user``, which any token may call);
    raises :class:`PermissionError` for a token that is not a user's."""
    request = urllib.request.Request(f"{api_url.rstrip('/')}/user", headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=15) as answer:
            model = json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        raise PermissionError(f"the hub did not accept the token (HTTP {exc.code})") from None
    if model.get("kind") != "user" or not isinstance(model.get("name"), str):
        raise PermissionError("the token is not a user's")
    return model["name"]


def decode(body: bytes) -> tuple[str, dict[str, bytes]]:
    """(lab, files) from a request's JSON body ``{"lab": "lab1", "files": {path: base64}}``."""
    try:
        request = json.loads(body)
        lab, encoded = request["lab"], request["files"]
        if not isinstance(encoded, dict):
            raise TypeError
        return lab, {path: base64.b64decode(data, validate=True) for path, data in encoded.items()}
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise HandinError('the request is not {"lab": "labN", "files": {path: base64}}') from None


class Handler(BaseHTTPRequestHandler):
    """``POST /handin`` (hand in a lab), ``GET /handin`` (the student's receipts)."""

    server_version = "course-handin/1"
    collection: Path
    api_url: str

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _user(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("token ") or not auth[6:].strip():
            self._answer(401, {"error": "no JupyterHub token: hand in from your server on the class server"})
            return None
        try:
            return owner(auth[6:].strip(), self.api_url)
        except PermissionError as exc:
            self._answer(403, {"error": str(exc)})
        except OSError as exc:
            self._answer(503, {"error": f"the hub did not answer ({exc}); try again in a minute"})
        return None

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if urlsplit(self.path).path.rstrip("/") != "/handin":
            return self._answer(404, {"error": "not found"})
        user = self._user()
        if user is not None:
            self._answer(200, {"user": user, "handins": handins(self.collection, user)})

    def do_POST(self) -> None:  # noqa: N802
        if urlsplit(self.path).path.rstrip("/") != "/handin":
            return self._answer(404, {"error": "not found"})
        try:
            length = int(self.headers.get("Content-Length", "-1"))
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            return self._answer(413 if length > MAX_BODY else 411,
                                {"error": f"a hand-in is at most {MAX_BYTES // 2**20} MiB of files"})
        body = self.rfile.read(length)
        user = self._user()
        if user is None:
            return
        try:
            lab, files = decode(body)
            receipt = hand_in(self.collection, user, lab, files)
        except HandinError as exc:
            return self._answer(400, {"error": str(exc)})
        except Exception as exc:  # the collection's own fault: the student is told to say so
            self.log_error("storing %s's hand-in failed: %r", user, exc)
            return self._answer(500, {"error": f"the hand-in could not be stored ({type(exc).__name__}); tell "
                                               "your instructor. Your notebook is unchanged"})
        self.log_message("%s handed in %s: %d files, %d bytes", user, receipt.lab, receipt.files, receipt.bytes)
        self._answer(200, asdict(receipt))


def serve(collection: Path, listen: str, api_url: str) -> None:
    """Answer hand-ins on ``listen`` (HOST:PORT) until stopped."""
    host, _, port = listen.rpartition(":")
    collection = Path(collection)
    for folder in (collection, *(collection / name for name in HIDDEN)):
        _real_folder(folder)
    handler = type("BoundHandler", (Handler,), {"collection": collection, "api_url": api_url})
    server = ThreadingHTTPServer((host.strip("[]"), int(port)), handler)
    print(f"handin_service: receiving hand-ins on http://{listen}/handin into {collection}", file=sys.stderr, flush=True)
    server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--collection", type=Path, required=True, help="the folder hand-ins are collected into")
    p.add_argument("--listen", help="HOST:PORT (default: the host and port of $JUPYTERHUB_SERVICE_URL)")
    p.add_argument("--api-url", default=os.environ.get("JUPYTERHUB_API_URL"),
                   help="the hub's API (default: $JUPYTERHUB_API_URL, which JupyterHub gives its services)")
    args = p.parse_args(argv)
    listen = args.listen or urlsplit(os.environ.get("JUPYTERHUB_SERVICE_URL", "")).netloc
    if not listen or not args.api_url:
        p.error("give --listen and --api-url (JupyterHub sets $JUPYTERHUB_SERVICE_URL and $JUPYTERHUB_API_URL)")
    serve(args.collection, listen, args.api_url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
