#!/usr/bin/env python3
"""``handin labN``: hand in a lab from your server on the class server.

Run it in a terminal of JupyterLab (File > New > Terminal), or in a notebook cell as ``!handin lab1``.
It sends the lab's notebook **as saved on disk** (save it first: Ctrl+S), and for a lab with support
files its folder (lab 4's ``cpp/``, lab 8's ``kernel/``; build products left out), from your
``~/handouts/labs/``. The class server stores it with the time it arrived, which is the time your
instructor's deadline is checked against. Handing in again replaces what you handed in before (your
instructor keeps the earlier one).

    handin lab1              # hand in lab 1
    handin --list            # what you have handed in, and when

It needs the server's own address for hand-ins (``$COURSE_HANDIN_URL``) and the server's JupyterHub token
(``$JUPYTERHUB_API_TOKEN``): the class server sets both. Standard library only, plus the course's lab
registry (``util.labs``) for each lab's notebook.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

SKIP = {"build", "__pycache__", ".ipynb_checkpoints"}
"""Folders never sent: build products and caches (the grader builds from source)."""
LABS_DIR = Path.home() / "handouts" / "labs"
"""Where the handouts' links put the labs (nbgitpuller's ``targetpath`` is ``handouts``)."""


class HandinFailed(RuntimeError):
    """Nothing was handed in; the message says why and what to do."""


def lab_paths(lab: str) -> tuple[str, tuple[str, ...]]:
    """(the notebook's path under ``labs/``, the support folders beside it) of ``lab``, from the course's registry."""
    try:
        from util.labs import LABS
    except ImportError as exc:
        raise HandinFailed(f"the course's lab registry does not import here ({exc}): run handin on the class "
                           "server, in your own server's terminal") from None
    if lab not in LABS:
        raise HandinFailed(f"{lab!r} is not a lab of this course; the labs are {', '.join(LABS)}")
    return LABS[lab].notebook, tuple(LABS[lab].support)


def collect(labs_dir: Path, notebook: str, support: tuple[str, ...]) -> tuple[dict[str, bytes], list[str]]:
    """(path under ``labs/`` -> bytes, notes): the notebook and its support folders' files. Links and hidden
    files are left out (each named in a note); a notebook that is missing or a link stops it."""
    labs_dir = Path(labs_dir)
    path = labs_dir / notebook
    if path.is_symlink() or not path.is_file():
        raise HandinFailed(f"{path} is {'a symbolic link' if path.is_symlink() else 'not there'}: open the lab's link "
                           "first (it puts the handouts in ~/handouts), and keep your work in that notebook")
    files, notes = {notebook: path.read_bytes()}, []
    for name in support:
        root = path.parent / name
        if root.is_symlink() or not root.is_dir():
            notes.append(f"{root} is missing: handed in without it")
            continue
        for folder, subfolders, names in os.walk(root):
            subfolders[:] = sorted(d for d in subfolders if d not in SKIP and not d.startswith("."))
            for file in sorted(names):
                full = Path(folder) / file
                relative = full.relative_to(labs_dir).as_posix()
                if file.startswith("."):
                    continue
                if full.is_symlink() or not full.is_file():
                    notes.append(f"left out {relative}: a link or not a plain file")
                    continue
                files[relative] = full.read_bytes()
    return files, notes


def _request(method: str, body: dict | None = None) -> dict:
    url, token = os.environ.get("COURSE_HANDIN_URL"), os.environ.get("JUPYTERHUB_API_TOKEN")
    if not url or not token:
        raise HandinFailed("this is not a server of the class server ($COURSE_HANDIN_URL or $JUPYTERHUB_API_TOKEN "
                           "is not set): hand in as your course says")
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={
        "Authorization": f"token {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        try:
            reason = json.loads(exc.read()).get("error", "")
        except ValueError:
            reason = ""
        raise HandinFailed(f"the class server refused it (HTTP {exc.code}): {reason or exc.reason}") from None
    except OSError as exc:
        raise HandinFailed(f"the class server did not answer ({exc}); try again, and tell your instructor if it "
                           "goes on") from None


def hand_in(lab: str, labs_dir: Path = LABS_DIR) -> dict:
    """Send ``lab`` from ``labs_dir``; the receipt (``docker/hub/handin_service.py``'s ``Receipt``)."""
    notebook, support = lab_paths(lab)
    files, notes = collect(labs_dir, notebook, support)
    for note in notes:
        print(f"handin: {note}", file=sys.stderr)
    return _request("POST", {"lab": lab, "files": {p: base64.b64encode(d).decode() for p, d in files.items()}})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="handin", description=__doc__.split("\n\n")[0],
                                epilog="It sends the notebook as saved on disk: save it first.")
    p.add_argument("lab", nargs="?", help="the lab to hand in: labN")
    p.add_argument("--list", action="store_true", help="list what you have handed in")
    p.add_argument("--labs", type=Path, default=LABS_DIR, help="your labs folder (default: %(default)s)")
    args = p.parse_args(argv)
    try:
        if args.list or not args.lab:
            if not args.list:
                p.error("name the lab to hand in (handin lab1), or --list")
            answer = _request("GET")
            for r in answer["handins"] or [{"lab": "nothing handed in yet", "time": "", "files": 0, "bytes": 0}]:
                print(f"{r['lab']:<6} {r['time']}  {r['files']} files, {r['bytes']:,} bytes")
            return 0
        receipt = hand_in(args.lab, args.labs)
    except HandinFailed as exc:
        print(f"handin: {exc}", file=sys.stderr)
        return 1
    again = "; it replaces your earlier hand-in (kept by your instructor)" if receipt["replaced"] else ""
    print(f"handed in {receipt['lab']} as {receipt['user']} at {receipt['time']} (UTC): {receipt['files']} "
          f"file{'s' if receipt['files'] != 1 else ''}, {receipt['bytes']:,} bytes, notebook sha256 "
          f"{receipt['sha256'][:16]}{again}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
