"""Parcels: a submission packed for a cluster worker, unpacked there at the instructor's path under
a private root, and its result folder sent back byte for byte (no cluster needed)."""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
from tinylab import LAB

from grader.core import records
from grader.grade import parcel

CPP_LAB = replace(LAB, support=("cpp",))


def _submission(folder: Path) -> Path:
    (folder / "cpp" / "build").mkdir(parents=True)
    (folder / "cpp" / "analysis.cpp").write_text("int main() {}\n")
    (folder / "cpp" / "build" / "analysis.o").write_bytes(b"\x7fELF")
    os.symlink("/etc/hostname", folder / "cpp" / "host")
    (folder / "notes.txt").write_text("not part of the submission\n")
    notebook = folder / "lab900.ipynb"
    notebook.write_text('{"cells": []}')
    return notebook


def test_a_parcel_unpacks_at_the_instructors_path_with_its_support_files(tmp_path):
    notebook = _submission(tmp_path / "class" / "amy")
    packed = parcel.pack(notebook, CPP_LAB)
    root = parcel.Root.make(notebook, temp=tmp_path / "worker")
    try:
        assert str(root.path) == str(root.base) + str(notebook)  # ROOT + the instructor's absolute path
        assert root.unpack(packed) == root.path
        here = root.path.parent
        assert root.path.read_text() == '{"cells": []}'
        assert (here / "cpp" / "analysis.cpp").read_text() == "int main() {}\n"
        assert os.readlink(here / "cpp" / "host") == "/etc/hostname"  # a link stays a link, never followed
        assert sorted(p.name for p in here.rglob("*")) == ["analysis.cpp", "cpp", "host", "lab900.ipynb"]  # no build/
        assert root.unroot(f"cannot read {root.path}".encode()) == f"cannot read {notebook}".encode()
    finally:
        root.remove()
    assert not root.base.exists()


def test_a_relative_path_with_dot_dot_stays_inside_the_root(tmp_path):
    root = parcel.Root.make(Path("../class/amy/lab900.ipynb"), temp=tmp_path)
    assert str(root.path).endswith("/../class/amy/lab900.ipynb")
    assert Path(os.path.normpath(root.path)).is_relative_to(root.base)
    assert root.unroot(str(root.path).encode()) == b"../class/amy/lab900.ipynb"
    notebook = _submission(tmp_path / "elsewhere")
    root.unpack(parcel.pack(notebook, LAB))
    assert root.path.read_text() == '{"cells": []}'  # the path works as written, .. and all


def test_result_files_come_back_byte_for_byte_and_the_record_is_written_last(tmp_path, monkeypatch):
    root = parcel.Root.make(Path("class/amy/lab900.ipynb"), temp=tmp_path / "worker")
    folder = root.base / "results" / "amy"
    (folder / "files").mkdir(parents=True)
    where = str(root.path).encode()
    (folder / "results.json").write_bytes(b'{"output": "' + where + b' is not a notebook"}')
    (folder / "files" / "model.onnx").write_bytes(b"\x00" + where)  # a judged model: never rewritten
    (folder / records.RECORD).write_bytes(b'{"submission": "' + where + b'"}')
    os.chmod(folder / "results.json", 0o600)
    files = root.collect(folder)
    assert files == {"files/model.onnx": (0o644, b"\x00" + where),
                     "grading.json": (0o644, b'{"submission": "class/amy/lab900.ipynb"}'),
                     "results.json": (0o600, b'{"output": "class/amy/lab900.ipynb is not a notebook"}')}

    written = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (written.append(Path(b).name), real_replace(a, b)))
    parcel.write(tmp_path / "out" / "amy", files)
    assert written == ["model.onnx", "results.json", "grading.json"]
    for name, (mode, data) in files.items():
        assert (tmp_path / "out" / "amy" / name).read_bytes() == data
        assert (tmp_path / "out" / "amy" / name).stat().st_mode & 0o777 == mode


def test_sizes_are_bounded_both_ways(tmp_path):
    notebook = _submission(tmp_path / "amy")
    with pytest.raises(parcel.TooLarge, match=r"lab900.ipynb and its support files are \d+ bytes compressed; "
                                              r"a cluster worker is sent at most 100 bytes"):
        parcel.pack(notebook, CPP_LAB, limit=100)
    root = parcel.Root.make(notebook, temp=tmp_path / "worker")
    with pytest.raises(parcel.TooLarge, match="the result folder holds more than 10 bytes"):
        root.collect(notebook.parent, limit=10)
