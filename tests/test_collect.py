"""Collecting a class: every submitted path gets its own row and folder, named after itself, and
nothing a file is called or holds (links, FIFOs, bytes that are not UTF-8) stops the collection."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_notebook

from grader import REPO
from grader.core.notebook import read
from grader.grade.collect import find_submissions, output_names, refusal, resolve_lab
from util.labs import LABS


def _notebook(path: Path, metadata: object = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nb = new_notebook()
    if metadata is not None:
        nb.metadata["course"] = metadata
    nbformat.write(nb, str(path))
    return path


def test_a_link_is_its_own_row_named_after_itself_and_never_followed(tmp_path):
    a = _notebook(tmp_path / "class" / "student_a" / "lab1.ipynb")
    (tmp_path / "class" / "student_b").mkdir()
    os.symlink(a, tmp_path / "class" / "student_b" / "lab1.ipynb")
    os.symlink(tmp_path / "class" / "student_a", tmp_path / "class" / "student_c")  # a linked folder
    found = find_submissions([tmp_path / "class"])
    assert [p.relative_to(tmp_path / "class").as_posix() for p in found] == [
        "student_a/lab1.ipynb", "student_b/lab1.ipynb", "student_c"]
    assert output_names(found) == ["student_a__lab1", "student_b__lab1", "student_c"]
    assert refusal(found[0]) is None
    assert "lab1.ipynb is a symbolic link, which the grader does not follow" in refusal(found[1])
    assert "student_c is a symbolic link" in refusal(found[2])


def test_fifos_and_devices_are_refused_without_being_opened(tmp_path):
    os.mkfifo(tmp_path / "lab1.ipynb")  # opening it for reading would block the grader for ever
    assert "lab1.ipynb is not a regular file (a FIFO, device or socket)" in refusal(tmp_path / "lab1.ipynb")
    assert "is not a regular file" in refusal(Path("/dev/zero"))
    with pytest.raises(ValueError, match="not a plain file"):
        read(tmp_path / "lab1.ipynb")
    assert resolve_lab(tmp_path / "lab1.ipynb", None).name == "lab1"  # by its name, without reading it


def test_a_missing_path_says_no_such_file(tmp_path):
    assert refusal(tmp_path / "nothing.ipynb").endswith("nothing.ipynb: no such file or folder")
    with pytest.raises(FileNotFoundError, match="nothing.ipynb: no such file or folder"):
        resolve_lab(tmp_path / "nothing.ipynb", None)


def test_a_file_that_is_not_json_says_where(tmp_path):
    (tmp_path / "homework.ipynb").write_text('{"cells": [\n  {"cell_type": "code",\n  oops')
    with pytest.raises(ValueError, match=r"homework.ipynb: homework.ipynb is not a valid Jupyter notebook: it is not "
                                         r"valid JSON \(Expecting property name enclosed in double quotes at line 3, "
                                         r"column 3\); and cannot tell which lab this is"):
        resolve_lab(tmp_path / "homework.ipynb", None)


@pytest.mark.parametrize("course", ["lab1", ["lab1"], {"lab": 5}, {"lab": ["lab1"]}, {"lab": "x" * 10_000}, None])
def test_metadata_of_the_wrong_shape_is_ignored_and_the_name_decides(tmp_path, course):
    path = _notebook(tmp_path / "lab2_mine.ipynb", course)
    assert resolve_lab(path, None).name == "lab2"


def test_metadata_naming_an_unknown_lab_falls_back_to_the_name_or_says_so(tmp_path):
    assert resolve_lab(_notebook(tmp_path / "lab2.ipynb", {"lab": "lab77"}), None).name == "lab2"
    with pytest.raises(ValueError, match="it names lab77, which is not a lab of this course"):
        resolve_lab(_notebook(tmp_path / "mine.ipynb", {"lab": "lab77"}), None)


def test_names_that_are_not_utf8_or_hold_control_characters_are_safe_and_distinct(tmp_path):
    root = os.fsencode(tmp_path)
    for raw in (b"lab1_\xff.ipynb", b"lab1_\\xff.ipynb", b"lab1_\x1b[2Jx\x07.ipynb", b"...ipynb", b".ipynb.ipynb"):
        with open(os.path.join(root, raw), "wb") as handle:
            handle.write(b"{}")
    found = find_submissions([tmp_path])  # hidden files (a leading dot) are not looked for in a folder
    found += find_submissions([tmp_path / "...ipynb", tmp_path / ".ipynb.ipynb"])  # but named, they are graded
    names = output_names(found)
    assert names == ["lab1_x", "lab1_\\xff", "lab1_\\xff~2", "_..", "_.ipynb"]
    assert len(set(names)) == len(names)
    for name in names:
        (tmp_path / "out" / name).mkdir(parents=True)  # each is a folder name the file system takes
        name.encode("utf-8")


def test_long_names_are_cut_and_stay_distinct(tmp_path):
    paths = [tmp_path / f"{'é' * 200}{i}.ipynb" for i in range(2)]
    names = output_names(paths)
    assert len(set(names)) == 2 and all(len(n.encode()) <= 120 for n in names)
    assert output_names([tmp_path / 'a' / paths[0].name, tmp_path / 'b' / paths[0].name])[0].startswith('a__é')


def test_naming_a_lab4_folder_itself_is_one_submission(tmp_path):
    folder = tmp_path / "lab4_submission"
    _notebook(folder / "lab4_libtorch.ipynb")
    (folder / "cpp").mkdir()
    (folder / "cpp" / "main.cpp").write_text("int main() {}")
    assert find_submissions([folder]) == [folder / "lab4_libtorch.ipynb"]
    (tmp_path / "class" / "alice").mkdir(parents=True)  # a class folder: a student without a notebook
    _notebook(tmp_path / "class" / "bob" / "lab4_libtorch.ipynb")
    (tmp_path / "class" / "bob" / "cpp").mkdir()
    assert [p.name for p in find_submissions([tmp_path / "class"])] == ["lab4_libtorch.ipynb", "alice"]


def test_a_link_to_the_solution_is_refused_under_the_students_name(tmp_path):
    solution = REPO / "solutions" / next(iter(LABS.values())).notebook
    os.symlink(solution, tmp_path / "lab1.ipynb")
    assert output_names(find_submissions([tmp_path])) == ["lab1"]
    assert "lab1.ipynb is a symbolic link" in refusal(tmp_path / "lab1.ipynb")
    with pytest.raises(ValueError, match="it is a link, which the grader does not follow"):
        read(tmp_path / "lab1.ipynb")  # even asked directly, the grader does not read through it


def test_the_command_line_says_no_such_file_and_where_json_breaks(tmp_path, capsys):
    from grader import cli

    assert cli.main(["check", str(tmp_path / "missing.ipynb")]) == 1
    assert "missing.ipynb: no such notebook" in capsys.readouterr().out
    (tmp_path / "homework.ipynb").write_text('{"cells": [}')
    code = cli.main(["grade", str(tmp_path / "homework.ipynb"), str(tmp_path / "gone.ipynb"),
                     "--out", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1
    assert "homework.ipynb is not a valid Jupyter notebook: it is not valid JSON (Expecting value at line 1, " \
           "column 12); and cannot tell which lab this is" in err
    assert "not graded: gone: " in err and "gone.ipynb: no such file or folder" in err


def test_grader_processes_validate_notebooks_without_compiling_the_iri_grammars(tmp_path):
    """A grader process reads and validates notebooks as before, but never imports ``rfc3987_syntax`` (its 39
    grammars cost 1.3 s of every grader command; no notebook schema uses the ``iri`` formats it checks)."""
    bad = tmp_path / "bad.ipynb"
    nb = new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("x = 1"))
    nb.cells[0]["execution_count"] = "one"
    bad.write_text(json.dumps(nb), encoding="utf-8")
    code = ("from grader.core.notebook import read; import sys, nbformat; from pathlib import Path\n"
            "nbformat.validate(read(Path(sys.argv[2])))\n"
            "try:\n    nbformat.validate(read(Path(sys.argv[1])))\nexcept nbformat.ValidationError as exc:\n"
            "    print('refused:', str(exc).splitlines()[0])\n"
            "print('rfc3987_syntax:', sys.modules.get('rfc3987_syntax', 'never imported'))")
    handout = REPO / "labs" / LABS["lab1"].notebook
    done = subprocess.run([sys.executable, "-c", code, str(bad), str(handout)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["refused: 'one' is not of type 'integer', 'null'", "rfc3987_syntax: None"]
