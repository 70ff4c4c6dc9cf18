"""The class server's hand-ins without Docker (docs/hub.md): ``docker/hub/handin_service.py`` stores what a student
sends in their own entry only, with its time, replacing and keeping the earlier one; ``docker/hub/handin.py`` sends
the lab's files from the student's labs folder; the collection grades with ``python -m grader grade``, late days
from the hand-in's time; ``docker/hub/roster.py`` reads who may sign up. tests/test_hub.py does it all for real."""
from __future__ import annotations

import csv
import importlib.util
import json
import os
import sys
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tinylab import GOOD_1, GOOD_2, export, notebook, registered, write

from grader.core.limits import Limits
from grader.grade import batch
from grader.report.late import file_time

REPO = Path(__file__).resolve().parent.parent
HUB = REPO / "docker" / "hub"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, HUB / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


service, client, roster = _load("handin_service"), _load("handin"), _load("roster")
NB = b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'
T0 = datetime(2026, 3, 7, 12, 0, 0, tzinfo=timezone.utc)


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` (relative) -> its bytes, or None for a folder; links as ``b"-> target"``."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        found[rel] = (b"-> " + os.readlink(path).encode() if path.is_symlink()
                      else None if path.is_dir() else path.read_bytes())
    return found


# ---------------------------------------------------------------- what may be stored

@pytest.mark.parametrize("user, lab, files, says", [
    ("../bob", "lab1", {"lab1_a.ipynb": NB}, "cannot name a folder"),
    ("Alice", "lab1", {"lab1_a.ipynb": NB}, "cannot name a folder"),
    (".alice", "lab1", {"lab1_a.ipynb": NB}, "cannot name a folder"),
    ("a/b", "lab1", {"lab1_a.ipynb": NB}, "cannot name a folder"),
    ("a" * 65, "lab1", {"lab1_a.ipynb": NB}, "cannot name a folder"),
    ("alice", "../lab1", {"lab1_a.ipynb": NB}, "is not a lab's name"),
    ("alice", "lab1/x", {"lab1_a.ipynb": NB}, "is not a lab's name"),
    ("alice", "lab1", {}, "nothing to hand in"),
    ("alice", "lab1", {"../bob/lab1_a.ipynb": NB}, "must be a plain name"),
    ("alice", "lab1", {"/etc/lab1_a.ipynb": NB}, "relative to your labs/ folder"),
    ("alice", "lab1", {"lab1_a/../../x": NB}, "must be a plain name"),
    ("alice", "lab1", {"lab1_a/./lab1_a.ipynb": NB}, "must be a plain name"),
    ("alice", "lab1", {"lab1_a//lab1_a.ipynb": NB}, "must be a plain name"),
    ("alice", "lab1", {".lab1_a.ipynb": NB}, "must be a plain name"),
    ("alice", "lab1", {"lab1_a\x1b[2J.ipynb": NB}, "control character"),
    ("alice", "lab1", {"lab1_a\\..\\x.ipynb": NB}, "backslash"),
    ("alice", "lab1", {"lab1_a.ipynb": NB, "lab2_b.ipynb": NB}, "one notebook or one lab folder"),
    ("alice", "lab1", {"lab2_b.ipynb": NB}, "is not lab1's notebook"),
    ("alice", "lab1", {"lab10_b.ipynb": NB}, "is not lab1's notebook"),
    ("alice", "lab1", {"lab1_a.py": NB}, "is not lab1's notebook"),
    ("alice", "lab4", {"lab4_a/cpp/x.cpp": NB}, "holds no lab4_a.ipynb"),
    ("alice", "lab4", {"lab4_a/lab4_a.ipynb": NB, "lab4_a/cpp": b"x", "lab4_a/cpp/x.cpp": b"y"}, "both a file and a folder"),
    ("alice", "lab1", {"lab1_a.ipynb/x": NB}, "holds that one file"),
    ("alice", "lab1", {f"lab1_a/{'d/' * 16}x": NB}, "nested more than 16"),
    ("alice", "lab4", {"lab4_a/lab4_a.ipynb": NB, **{f"lab4_a/cpp/{i}.c": b"" for i in range(2000)}}, "at most 2000"),
    ("alice", "lab1", {"lab1_a.ipynb": b"x" * (64 * 2**20 + 1)}, "at most 64 MiB"),
])
def test_what_cannot_be_stored_is_refused_with_the_reason(user, lab, files, says, tmp_path):
    with pytest.raises(service.HandinError, match=says):
        service.hand_in(tmp_path / "collection", user, lab, files, T0)
    assert not (tmp_path / "collection").exists() or not [
        p for p in _tree(tmp_path / "collection") if not p.startswith(".")]   # nothing stored


@pytest.mark.parametrize("lab, files, entry", [
    ("lab1", {"lab1_pytorch_analysis.ipynb": NB}, "lab1_pytorch_analysis.ipynb"),
    ("lab4", {"lab4_libtorch/lab4_libtorch.ipynb": NB, "lab4_libtorch/cpp/analysis.cpp": b"int x;",
              "lab4_libtorch/cpp/sub/ünïcode name.h": b""}, "lab4_libtorch"),
    ("lab12", {"lab12_x.ipynb": NB}, "lab12_x.ipynb"),
])
def test_a_lab_notebook_or_a_lab_folder_may_be_stored(lab, files, entry):
    assert service.check("alice", lab, files) == entry


# ---------------------------------------------------------------- storing, with its time

def test_a_hand_in_is_stored_in_the_students_entry_with_its_time_on_every_file(tmp_path):
    collection = tmp_path / "collection"
    files = {"lab4_libtorch/lab4_libtorch.ipynb": NB, "lab4_libtorch/cpp/analysis.cpp": b"int x;",
             "lab4_libtorch/cpp/sub/a.h": b"#pragma once\n"}
    receipt = service.hand_in(collection, "alice", "lab4", files, T0)
    entry = collection / "alice" / "lab4_libtorch"
    assert {p: d for p, d in _tree(entry).items() if d is not None} == {
        "lab4_libtorch.ipynb": NB, "cpp/analysis.cpp": b"int x;", "cpp/sub/a.h": b"#pragma once\n"}
    for path in [entry, *entry.rglob("*")]:
        assert path.stat().st_mtime == T0.timestamp(), path
        assert oct(path.stat().st_mode & 0o777) == ("0o755" if path.is_dir() else "0o644")
    assert file_time(entry) == T0   # the time the grader's late days read
    assert receipt == service.Receipt("alice", "lab4", "lab4_libtorch", "2026-03-07T12:00:00+00:00", 3,
                                      len(NB) + 19, __import__("hashlib").sha256(NB).hexdigest(), None)
    assert json.loads((collection / ".receipts" / "alice.json").read_text()) == [receipt.__dict__]
    assert service.handins(collection, "alice") == [receipt.__dict__] and service.handins(collection, "../x") == []
    assert sorted(p.name for p in collection.iterdir()) == [".earlier", ".incoming", ".receipts", "alice"]
    assert [p.name for p in (collection / ".incoming").iterdir()] == [".lock"]   # no staging folder left


def test_a_second_hand_in_replaces_the_first_which_is_kept_with_its_time(tmp_path):
    collection = tmp_path / "collection"
    service.hand_in(collection, "alice", "lab1", {"lab1_pytorch_analysis.ipynb": b"first"}, T0)
    service.hand_in(collection, "alice", "lab4", {"lab4_libtorch/lab4_libtorch.ipynb": b"lab 4"}, T0)
    later = T0 + timedelta(hours=30)
    receipt = service.hand_in(collection, "alice", "lab1", {"lab1_pytorch_analysis.ipynb": b"second"}, later)
    assert receipt.replaced == ".earlier/alice/20260307T120000Z"
    mine = collection / "alice"
    assert (mine / "lab1_pytorch_analysis.ipynb").read_bytes() == b"second"
    assert file_time(mine / "lab1_pytorch_analysis.ipynb") == later
    kept = collection / ".earlier" / "alice" / "20260307T120000Z" / "lab1_pytorch_analysis.ipynb"
    assert kept.read_bytes() == b"first" and file_time(kept) == T0
    assert (mine / "lab4_libtorch" / "lab4_libtorch.ipynb").read_bytes() == b"lab 4"   # another lab: untouched
    third = service.hand_in(collection, "alice", "lab1", {"lab1_pytorch_analysis.ipynb": b"third"}, later)
    assert third.replaced == ".earlier/alice/20260308T180000Z"   # the same second twice: still both kept
    assert [r["time"] for r in service.handins(collection, "alice")] == [
        "2026-03-07T12:00:00+00:00", "2026-03-07T12:00:00+00:00", "2026-03-08T18:00:00+00:00",
        "2026-03-08T18:00:00+00:00"]
    fourth = service.hand_in(collection, "alice", "lab1", {"lab1_pytorch_analysis.ipynb": b"fourth"}, later)
    assert fourth.replaced == ".earlier/alice/20260308T180000Z~2"


def test_only_the_newest_earlier_hand_ins_of_a_lab_are_kept(tmp_path, monkeypatch):
    monkeypatch.setattr(service, "MAX_EARLIER", 2)
    collection = tmp_path / "collection"
    service.hand_in(collection, "alice", "lab4", {"lab4_libtorch/lab4_libtorch.ipynb": b"lab 4"}, T0)
    for hour in range(5):
        service.hand_in(collection, "alice", "lab1", {"lab1_pytorch_analysis.ipynb": b"%d" % hour},
                        T0 + timedelta(hours=hour))
    service.hand_in(collection, "alice", "lab4", {"lab4_libtorch/lab4_libtorch.ipynb": b"lab 4 again"}, T0 + timedelta(hours=9))
    kept = collection / ".earlier" / "alice"
    assert {p.relative_to(kept).as_posix(): p.read_bytes() for p in kept.glob("*/lab1_*")} == {
        "20260307T140000Z/lab1_pytorch_analysis.ipynb": b"2", "20260307T150000Z/lab1_pytorch_analysis.ipynb": b"3"}
    assert sorted(p.name for p in kept.iterdir()) == ["20260307T120000Z", "20260307T140000Z", "20260307T150000Z"]
    assert (kept / "20260307T120000Z" / "lab4_libtorch" / "lab4_libtorch.ipynb").read_bytes() == b"lab 4"  # lab 4's own
    assert (collection / "alice" / "lab1_pytorch_analysis.ipynb").read_bytes() == b"4"


def test_nothing_a_student_sends_reaches_another_students_entry(tmp_path):
    """bob's entry and the rest of the collection are byte for byte the same after every hostile hand-in alice
    tries; her own hand-in of a lab stays in her folder, whatever names its files have."""
    collection = tmp_path / "collection"
    service.hand_in(collection, "bob", "lab1", {"lab1_pytorch_analysis.ipynb": b"bob's"}, T0)
    before = _tree(collection)
    for user, lab, files in [
        ("alice", "lab1", {"../bob/lab1_pytorch_analysis.ipynb": b"x"}),
        ("alice", "lab1", {"lab1_pytorch_analysis.ipynb/../../bob/lab1_pytorch_analysis.ipynb": b"x"}),
        ("../bob", "lab1", {"lab1_pytorch_analysis.ipynb": b"x"}),
        ("alice", "../bob", {"lab1_pytorch_analysis.ipynb": b"x"}),
        ("alice", "lab1", {"lab1_x/..\\..\\bob": b"x"}),
    ]:
        with pytest.raises(service.HandinError):
            service.hand_in(collection, user, lab, files, T0)
    assert _tree(collection) == before
    service.hand_in(collection, "alice", "lab1", {"lab1_pytorch_analysis.ipynb": b"alice's"}, T0)
    after = _tree(collection)
    assert {k: v for k, v in after.items() if not k.startswith(("alice", ".receipts/alice"))} == before
    assert after["alice/lab1_pytorch_analysis.ipynb"] == b"alice's"


def test_links_in_the_collection_are_never_followed(tmp_path):
    """The collection is the receiver's alone, but were a link put there by hand: a student's folder that is a link
    is refused (nothing written through it), and an entry that is a link is moved aside as a link."""
    collection, elsewhere = tmp_path / "collection", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.ipynb").write_bytes(b"precious")
    collection.mkdir()
    (collection / "mallory").symlink_to(elsewhere)
    with pytest.raises(RuntimeError, match="is not a folder"):
        service.hand_in(collection, "mallory", "lab1", {"lab1_pytorch_analysis.ipynb": b"x"}, T0)
    assert _tree(elsewhere) == {"precious.ipynb": b"precious"}
    (collection / "alice").mkdir()
    (collection / "alice" / "lab1_pytorch_analysis.ipynb").symlink_to(elsewhere / "precious.ipynb")
    service.hand_in(collection, "alice", "lab1", {"lab1_pytorch_analysis.ipynb": b"mine"}, T0)
    assert (collection / "alice" / "lab1_pytorch_analysis.ipynb").read_bytes() == b"mine"
    [kept] = (collection / ".earlier" / "alice").glob("*/lab1_pytorch_analysis.ipynb")
    assert kept.is_symlink() and (elsewhere / "precious.ipynb").read_bytes() == b"precious"


# ---------------------------------------------------------------- the student's side: what `handin` sends

def test_handin_sends_the_notebook_and_its_support_files_without_build_products_or_links(tmp_path):
    labs = tmp_path / "labs"
    write_files = {"lab4_libtorch/lab4_libtorch.ipynb": NB, "lab4_libtorch/cpp/CMakeLists.txt": b"cmake",
                   "lab4_libtorch/cpp/analysis.cpp": b"int x;", "lab4_libtorch/cpp/build/a.o": b"\0",
                   "lab4_libtorch/cpp/.hidden": b"h", "lab4_libtorch/cpp/__pycache__/x.pyc": b"c",
                   "lab4_libtorch/outputs/answers.json": b"{}", "lab1_pytorch_analysis.ipynb": NB}
    for name, data in write_files.items():
        (labs / name).parent.mkdir(parents=True, exist_ok=True)
        (labs / name).write_bytes(data)
    (labs / "lab4_libtorch" / "cpp" / "linked.cpp").symlink_to("/etc/passwd")
    files, notes = client.collect(labs, "lab4_libtorch/lab4_libtorch.ipynb", ("cpp",))
    assert files == {"lab4_libtorch/lab4_libtorch.ipynb": NB, "lab4_libtorch/cpp/CMakeLists.txt": b"cmake",
                     "lab4_libtorch/cpp/analysis.cpp": b"int x;"}
    assert notes == ["left out lab4_libtorch/cpp/linked.cpp: a link or not a plain file"]
    assert service.check("alice", "lab4", files) == "lab4_libtorch"   # what it sends, the receiver takes
    assert client.collect(labs, "lab1_pytorch_analysis.ipynb", ()) == ({"lab1_pytorch_analysis.ipynb": NB}, [])
    (labs / "lab1_pytorch_analysis.ipynb").unlink()
    (labs / "lab1_pytorch_analysis.ipynb").symlink_to(labs / "lab4_libtorch" / "lab4_libtorch.ipynb")
    with pytest.raises(client.HandinFailed, match="is a symbolic link"):
        client.collect(labs, "lab1_pytorch_analysis.ipynb", ())
    with pytest.raises(client.HandinFailed, match="is not there: open the lab's link first"):
        client.collect(labs, "lab2_onnx_analysis.ipynb", ())
    assert client.lab_paths("lab4") == ("lab4_libtorch/lab4_libtorch.ipynb", ("cpp",))
    with pytest.raises(client.HandinFailed, match="'lab99' is not a lab of this course"):
        client.lab_paths("lab99")


class _FakeHub(BaseHTTPRequestHandler):
    """The hub's ``GET /hub/api/user``: who owns a token (``alice-token`` a user's, ``culler-token`` a service's)."""

    owners = {"alice-token": {"kind": "user", "name": "alice"}, "bob-token": {"kind": "user", "name": "bob"},
              "culler-token": {"kind": "service", "name": "idle-culler"}}

    def do_GET(self):  # noqa: N802
        model = self.owners.get(self.headers.get("Authorization", "").removeprefix("token "))
        body = json.dumps(model or {"status": 403}).encode()
        self.send_response(200 if model and self.path == "/hub/api/user" else 403)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture()
def receiver(tmp_path, monkeypatch):
    """The receiver on a loopback port, asking a fake hub whose tokens they are; the client pointed at it."""
    servers = []
    hub = ThreadingHTTPServer(("127.0.0.1", 0), _FakeHub)
    servers.append(hub)
    collection = tmp_path / "collection"
    handler = type("H", (service.Handler,), {"collection": collection,
                                             "api_url": f"http://127.0.0.1:{hub.server_port}/hub/api",
                                             "log_message": lambda *a: None})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    servers.append(server)
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    monkeypatch.setenv("COURSE_HANDIN_URL", f"http://127.0.0.1:{server.server_port}/handin")
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "alice-token")
    yield collection
    for s in servers:
        s.shutdown()
        s.server_close()


def test_handin_over_http_stores_the_lab_as_the_tokens_owner(receiver, tmp_path, monkeypatch, capsys):
    labs = tmp_path / "labs"
    labs.mkdir()
    (labs / "lab1_pytorch_analysis.ipynb").write_bytes(NB)
    assert client.main(["lab1", "--labs", str(labs)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("handed in lab1 as alice at ") and f"1 file, {len(NB)} bytes" in out and "replaces" not in out
    assert (receiver / "alice" / "lab1_pytorch_analysis.ipynb").read_bytes() == NB
    assert client.main(["lab1", "--labs", str(labs)]) == 0
    assert "it replaces your earlier hand-in (kept by your instructor)" in capsys.readouterr().out
    assert client.main(["--list"]) == 0
    assert capsys.readouterr().out.count("lab1 ") == 2
    # whatever a request says of its user, the token decides
    answer = client._request("POST", {"lab": "lab1", "user": "bob",
                                      "files": {"lab1_pytorch_analysis.ipynb": "eHl6"}})
    assert answer["user"] == "alice" and not (receiver / "bob").exists()


@pytest.mark.parametrize("token, status, says", [
    ("", None, "is not set"),
    ("nobody-token", 403, "the hub did not accept the token"),
    ("culler-token", 403, "the token is not a user's"),
])
def test_a_request_without_a_students_token_is_refused(receiver, tmp_path, monkeypatch, capsys, token, status, says):
    labs = tmp_path / "labs"
    labs.mkdir()
    (labs / "lab1_pytorch_analysis.ipynb").write_bytes(NB)
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", token)
    assert client.main(["lab1", "--labs", str(labs)]) == 1
    err = capsys.readouterr().err
    assert says in err and (status is None or f"HTTP {status}" in err)
    assert not [p for p in _tree(receiver) if not p.startswith(".")] if receiver.exists() else True


def test_a_malformed_or_oversized_request_is_refused(receiver, monkeypatch):
    with pytest.raises(client.HandinFailed, match=r"HTTP 400\): the request is not"):
        client._request("POST", {"lab": "lab1", "files": {"lab1_a.ipynb": "not base64!"}})
    with pytest.raises(client.HandinFailed, match=r"HTTP 400\): 'lab2_a.ipynb' is not lab1's"):
        client._request("POST", {"lab": "lab1", "files": {"lab2_a.ipynb": ""}})
    monkeypatch.setattr(service, "MAX_BODY", 100)
    with pytest.raises(client.HandinFailed, match=r"HTTP 413\)"):
        client._request("POST", {"lab": "lab1", "files": {"lab1_a.ipynb": "eHl6" * 100}})


# ---------------------------------------------------------------- the collection, graded

def test_the_collection_grades_as_a_class_with_late_days_from_the_hand_in_times(tmp_path, capsys):
    """Two students hand in the tiny lab, one before the deadline and one 30 hours after (twice: the earlier
    one kept, not graded); ``grade COLLECTION --roster --deadline`` gives one row each, named by student, with
    the late days of the hand-in times and the roster's ids."""
    collection = tmp_path / "collection"
    nb = tmp_path / "nb.ipynb"
    write(notebook(("md", "## Task 900.1: First (5 points)"), GOOD_1, ("md", "## Task 900.2: Second (5 points)"),
                   GOOD_2), nb)
    wrong = tmp_path / "wrong.ipynb"
    write(notebook(("md", "## Task 900.1: First (5 points)"), export("900.1", "40"),
                   ("md", "## Task 900.2: Second (5 points)"), GOOD_2), wrong)
    deadline = T0 + timedelta(hours=1)
    service.hand_in(collection, "s0001", "lab900", {"lab900_tiny.ipynb": nb.read_bytes()}, T0)
    service.hand_in(collection, "s0002", "lab900", {"lab900_tiny.ipynb": nb.read_bytes()}, T0)
    service.hand_in(collection, "s0002", "lab900", {"lab900_tiny.ipynb": wrong.read_bytes()}, deadline + timedelta(hours=30))
    (tmp_path / "roster.csv").write_text("student_id,name,email\ns0001,Ann,ann@example.edu\ns0002,Ben,ben@example.edu\n"
                                         "s0003,Cy,cy@example.edu\n")
    assert roster.student_ids(tmp_path / "roster.csv") == ["s0001", "s0002", "s0003"]
    with registered(tmp_path / "references"):
        code = batch.main(paths=[collection], out=tmp_path / "out", progress=False,
                          limits=Limits(cell_timeout=30, notebook_timeout=60),
                          settings={"roster": str(tmp_path / "roster.csv"), "deadlines": [f"lab900={deadline.isoformat()}"],
                                    "late_policy": "10%/day"})
    assert code == 0, capsys.readouterr()
    with (tmp_path / "out" / "gradebook_lab900.csv").open() as handle:
        rows = {r["student_id"]: r for r in csv.DictReader(handle)}
    assert {sid: (r["submission"], r["score"], r["late days"], r["penalty"], r["total"], r["status"])
            for sid, r in rows.items()} == {
        "s0001": ("s0001__lab900_tiny", "10", "0", "0", "10", "full marks"),
        "s0002": ("s0002__lab900_tiny", "5", "2", "2", "3", "partial"),
        "s0003": ("", "0", "", "0", "0", "not submitted")}
    assert rows["s0002"]["submitted"] == (deadline + timedelta(hours=30)).isoformat(timespec="seconds")


# ---------------------------------------------------------------- the roster

@pytest.mark.parametrize("text, says", [
    ("student_id,name\nS1234,Ann\n", "JupyterHub lower-cases names, so write 's1234'"),
    ("student_id,name\n../x,Ann\n", "use lower-case letters, digits"),
    ("student_id,name\nann,Ann\nann,Ann again\n", "line 3: student_id 'ann' appears twice"),
    ("name,email\nAnn,ann@example.edu\n", "no student_id column"),
    ("student_id,name\n", "no students"),
])
def test_a_roster_the_hub_cannot_use_is_refused_with_the_line(tmp_path, text, says):
    (tmp_path / "roster.csv").write_text(text)
    with pytest.raises(roster.RosterError, match=says):
        roster.student_ids(tmp_path / "roster.csv")


def test_the_roster_and_the_receiver_agree_on_names():
    assert roster.STUDENT_ID.pattern == service.USER.pattern
