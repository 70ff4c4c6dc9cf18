"""The export caches: every file is recorded (size, SHA-256) when written and verified before each
submission; a file that does not match is deleted and rebuilt, so no one is graded against it.

A kernel that could write the cache could replace a model, and the next student's
notebook read the replacement. The sandbox shows the caches read-only (tests/test_walls.py); here
the cache is made writable to everyone and graded without the sandbox, the way the tampering
happened, and the student graded next must still read the real file.
"""
from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from tinylab import write

from grader.core.limits import Limits
from grader.execute import caches
from grader.grade import batch
from grader.judge.references import REFERENCE_ENV
from util import export_cache, labs

FOLDER = Path(__file__).resolve().parent / "cachelab_labs"
READ = ("from util import export_cache\nfrom util.answers import write_answer, output_dir\n"
        "write_answer(output_dir('lab998'), '998.1', int(export_cache.find('onnx', 'answer.bin').read_bytes()))")
TAMPER = "open(export_cache.find('onnx', 'answer.bin'), 'wb').write(b'13')"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(export_cache.KINDS["onnx"], str(tmp_path / "cache"))
    return tmp_path / "cache"


def _store(name: str, data: bytes) -> Path:
    return caches.store("onnx", name, lambda path: path.write_bytes(data))


def test_a_stored_file_verifies_and_is_not_hashed_again_until_it_changes(cache, monkeypatch):
    path = _store("a.onnx", b"model")
    manifest = json.loads((cache / caches.MANIFEST).read_text())
    assert manifest == {"a.onnx": {"bytes": 5, "sha256": hashlib.sha256(b"model").hexdigest()}}
    hashed = []
    monkeypatch.setattr(caches, "_digest", lambda p: hashed.append(p.name) or "x")
    assert caches.verify_kind("onnx") == [] and hashed == []  # unchanged since it was stored: not hashed
    path.write_bytes(b"MODEL")  # same size, other bytes
    monkeypatch.undo()
    monkeypatch.setenv(export_cache.KINDS["onnx"], str(cache))
    assert caches.verify_kind("onnx") == ["a.onnx"] and not path.exists()


def test_planted_files_links_and_folders_are_deleted(cache):
    _store("a.onnx", b"model")
    (cache / "planted.onnx").write_bytes(b"no export wrote me")
    (cache / "link.onnx").symlink_to(cache / "a.onnx")
    (cache / "folder.onnx").mkdir()
    assert sorted(caches.verify_kind("onnx")) == ["folder.onnx", "link.onnx", "planted.onnx"]
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == ["a.onnx", caches.MANIFEST]
    assert export_cache.find("onnx", "a.onnx").read_bytes() == b"model"


def test_ensure_rebuilds_what_it_deleted_with_the_labs_hook(cache, monkeypatch):
    _store("a.onnx", b"model")
    (cache / "a.onnx").write_bytes(b"tampered")
    called = []
    monkeypatch.setattr(caches, "prepare", lambda lab, **kw: called.append(lab.name))
    lab = labs.LABS[next(iter(labs.LABS))]
    assert caches.ensure(lab) == ["onnx/a.onnx"] and called == [lab.name]
    assert caches.ensure(lab) == [] and called == [lab.name]  # nothing left to rebuild


def test_the_student_after_a_cache_tamperer_reads_the_real_file(tmp_path, cache, monkeypatch, capsys):
    (tmp_path / "references").mkdir()
    (tmp_path / "references" / "lab998.json").write_text(json.dumps(
        {"lab": "lab998", "answers": {"998.1": 42}, "cases": {}, "provenance": {}}))
    monkeypatch.setenv(labs.LAB_DIRS_ENV, str(FOLDER))
    monkeypatch.setenv(REFERENCE_ENV, str(tmp_path / "references"))
    monkeypatch.syspath_prepend(str(FOLDER))
    from lab998.tasks import LAB
    monkeypatch.setitem(labs.LABS, "lab998", LAB)
    monkeypatch.setitem(labs.PACKAGES, "lab998", "lab998")
    cache.mkdir()
    (cache / "answer.bin").write_bytes(b"13")  # there before the grader: never recorded, so never trusted
    heading = new_markdown_cell("## Task 998.1: From the cache (1 points)")
    for name, cells in {"a_tamperer": [READ, TAMPER], "b_next": [READ]}.items():
        nb = new_notebook(cells=[heading] + [new_code_cell(c) for c in cells])
        nb.metadata["course"] = {"lab": "lab998"}
        write(nb, tmp_path / "class" / name / "lab998.ipynb")
    code = batch.main(paths=[tmp_path / "class"], out=tmp_path / "out", lab="lab998", progress=False, sandbox=False,
                      limits=Limits(cell_timeout=60, notebook_timeout=120))
    with (tmp_path / "out" / "gradebook.csv").open() as handle:
        rows = {row["submission"]: (row["total"], row["max"]) for row in csv.DictReader(handle)}
    assert code == 0 and rows == {"a_tamperer__lab998": ("1", "1"), "b_next__lab998": ("1", "1")}
    assert "no longer match the size and hash it recorded" in capsys.readouterr().err
    assert export_cache.find("onnx", "answer.bin").read_bytes() == b"42"
    assert caches.verify_kind("onnx") == []  # what the hook rebuilt is recorded


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=4096), name=st.from_regex(r"[a-z][a-z0-9]{0,12}_[0-9a-f]{6}\.onnx", fullmatch=True))
def test_an_export_is_stored_whole_readable_by_everyone_and_replaces_older_versions(cache, data, name):
    """The kernels that read a cache run as another user than the one that exported it: an export
    written 0600 (as mkstemp makes it) failed lab 4 for every student graded by an unprivileged grader."""
    older = cache / (name.rsplit("_", 1)[0] + "_000000.onnx")
    cache.mkdir(parents=True, exist_ok=True)
    older.write_bytes(b"from older code")
    path = export_cache.store("onnx", name, data, stale=name.rsplit("_", 1)[0] + "_*.onnx")
    assert path == cache / name and path.read_bytes() == data
    assert path.stat().st_mode & 0o777 == 0o644
    assert not older.exists() or older == path
    assert not list(cache.glob("*.tmp"))
    path.unlink()


def test_an_export_written_by_a_function_is_stored_the_same_way(cache):
    path = export_cache.store("onnx", "model_abc123.pt", lambda tmp: tmp.write_bytes(b"pt"))
    assert path.read_bytes() == b"pt" and path.stat().st_mode & 0o777 == 0o644
    with pytest.raises(RuntimeError):  # a failed export leaves nothing behind, not even its temp file
        export_cache.store("onnx", "broken_abc123.pt", lambda tmp: (_ for _ in ()).throw(RuntimeError("no")))
    assert sorted(p.name for p in cache.iterdir()) == ["model_abc123.pt"]


@pytest.mark.parametrize("lab_name", sorted((name for name, lab in labs.LABS.items() if lab.prepare),
                                            key=lambda name: int(name[3:])))
def test_each_labs_prepare_hook_runs_as_the_grader_runs_it(lab_name):
    """A hook that raises costs nothing visible but time (each kernel exports for itself, and the class run only
    warns), so it is run here the way ``grade`` runs it, in a subprocess that reads the grader-only cases: it must
    finish. With the caches filled (after ``grade``) this takes seconds; cold, the exports it makes are the ones
    the lab's gradings would make anyway."""
    assert caches.prepare(labs.get_lab(lab_name)) is None
