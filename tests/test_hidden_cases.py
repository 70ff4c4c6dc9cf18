"""Hidden cases stay hidden: students never hold them, a graded kernel gets each input only when it runs, and a
term with a secret of its own draws its own seeds.

The cases live in each lab's grader-only ``cases.py`` (and ``cases_data/``); ``tasks.py`` states what they are
worth. These tests build the students' copy and search it for every hidden case of every lab, check the split
by construction (no course lab declares a case where students can read it), and run a small lab end to end
under a term secret.
"""
from __future__ import annotations

import ast
import gzip
import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader import REPO
from grader.author import release
from util import labs
from util.contract import Case, Lab, Task
from util.hidden import FILE_KEY, case_specs, term_fingerprint, term_spec, use_term


def _course_labs() -> list[Lab]:
    return [lab for lab in labs.LABS.values() if labs.folder(lab).is_relative_to(REPO / "util" / "labs")]


def test_every_course_lab_has_its_cases_attached_here_and_states_their_points():
    for lab in _course_labs():
        assert lab.has_cases, lab.name
        for task in lab.tasks:
            assert task.hidden_points == sum(c.points for c in task.cases), task.id
    assert sum(len(t.cases) for lab in _course_labs() for t in lab.tasks) >= 170


def test_no_course_lab_declares_a_case_where_students_can_read_it():
    """Split by construction: ``tasks.py`` (which students hold) declares no case, and no module a student
    holds calls ``Case``: the cases are only in the grader-only ``cases.py``."""
    for lab in _course_labs():
        declared = importlib.import_module(f"{labs.PACKAGES[lab.name]}.tasks").LAB  # as a kernel imports it
        assert not any(t.cases for t in declared.tasks), lab.name
        assert not any(t.cases for r in declared.releases for t in r.previous), lab.name
        for path in labs.folder(lab).rglob("*.py"):
            relative = path.relative_to(labs.folder(lab))
            if labs.grader_only(relative) or "__pycache__" in relative.parts:
                continue
            calls = [node for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                     if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Case"]
            assert calls == [], f"{path.relative_to(REPO)} declares a Case: move it to the lab's cases.py"


PUBLIC_INPUTS = {("lab7", "7.1", "mixer, default lists"): "the notebook's own worked example, run again on the "
                                                          "student's function: its input is public by design",
                 ("lab3", "3.5", "tiny_shape_graph"): "a graph the course's public builder makes "
                                                      "(util.onnx_models.tiny_shape_graph), saved under another name"}
"""Hidden cases whose input the handout shows on purpose (the id may appear there)."""


def _plain(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def _needles(lab: Lab) -> dict[str, tuple[str, str]]:
    """Text that would give a hidden case away -> (task, case): its whole spec in the forms code and JSON write
    it, any long list it holds (a chain's widths), and its id as a string literal, unless the id is just the
    name of the public builder its spec names (``"resnet18"`` for ``{"model": "resnet18", ...}``: the builders
    are in what students hold, since the kernel builds the input)."""
    found: dict[str, tuple[str, str]] = {}
    for task in lab.tasks:
        for case in task.cases:
            where = (task.id, case.id)
            spec = dict(case.spec)
            for text in (json.dumps(spec), json.dumps(spec, separators=(",", ":")), repr(spec)):
                found[text] = where
            for value in spec.values():
                if isinstance(value, list) and len(value) >= 6:
                    found[json.dumps(value)] = found[repr(value)] = where
            builder = {_plain(v) for v in spec.values() if isinstance(v, str)}
            if _plain(case.id) not in builder and (lab.name, task.id, case.id) not in PUBLIC_INPUTS:
                found[f'"{case.id}"'] = found[f"'{case.id}'"] = where
    return found


def _readable(path: Path) -> str:
    """What a student reads in a file of the copy: a notebook's code cells and Markdown, a gzipped file unzipped."""
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    if path.suffix == ".ipynb":
        cells = json.loads(data)["cells"]
        return "\n".join("".join(cell.get("source", "")) for cell in cells)
    return data.decode("utf-8", "replace")


def test_the_students_copy_holds_no_hidden_case_of_any_lab(tmp_path):
    copy = tmp_path / "copy"
    files = release.release(copy)
    assert not [f for f in files if f.name.startswith("cases") or "cases_data" in f.parts]
    texts = {f.relative_to(copy).as_posix(): _readable(f) for f in files}
    blobs = {f.relative_to(copy).as_posix(): f.read_bytes() for f in files}
    leaks = []
    for lab in _course_labs():
        for needle, (task, case) in _needles(lab).items():
            leaks += [f"{lab.name} {task} {case!r}: {needle[:60]} in {name}" for name, text in texts.items()
                      if needle in text]
        for data_file in (labs.folder(lab) / "cases_data").glob("*") if (labs.folder(lab) / "cases_data").is_dir() else []:
            raw = data_file.read_bytes()
            plain = gzip.decompress(raw) if data_file.suffix == ".gz" else raw
            leaks += [f"{lab.name}: the data of {data_file.name} in {name}" for name, blob in blobs.items()
                      if raw in blob or plain[:4096] in blob]
    assert leaks == []
    assert sum(len(_needles(lab)) for lab in _course_labs()) > 500  # the search looked for something


def test_a_graded_kernel_gets_a_cases_input_only_in_the_cell_that_runs_it():
    lab = labs.get_lab("lab11")
    specs = case_specs(lab)
    assert sorted(specs) == [t.id for t in lab.tasks if t.cases]
    trace = next(spec for case_id, spec in specs["11.3"] if case_id == "torch_op_table: MobileNetV2 trace")
    assert set(trace["trace"]) == {"$bytes"}  # the recorded file travels inside the cell, as bytes
    assert FILE_KEY not in json.dumps(specs)
    public = Lab(name=lab.name, title=lab.title, notebook=lab.notebook,
                 tasks=tuple(Task(t.id, t.title, t.answer_points, t.answer, hidden_points=t.hidden_points,
                                  function=t.function, run_case=t.run_case) for t in lab.tasks))
    with pytest.raises(RuntimeError, match="grade from the course's own repository"):
        case_specs(public)  # the students' copy cannot grade: its labs have no cases


def test_a_term_secret_draws_the_declared_seeds_anew_and_nothing_else():
    case = Case("random input", {"seed": 3, "n": 10}, 5, seeds=("seed",))
    plain = term_spec("lab900", "900.1", case, None)
    first = term_spec("lab900", "900.1", case, b"spring term")
    assert plain == {"seed": 3, "n": 10}
    assert first == term_spec("lab900", "900.1", case, b"spring term")  # stable: no Python hash()
    assert first["n"] == 10 and first["seed"] != 3
    others = {term_spec("lab900", "900.1", case, f"term {i}".encode())["seed"] for i in range(50)}
    assert len(others) >= 45  # each term its own seed
    fixed = Case("screened input", {"seed": 3}, 5)  # a seed chosen for a property is never redrawn
    assert term_spec("lab900", "900.1", fixed, b"spring term") == {"seed": 3}
    assert term_fingerprint(b"spring term") != term_fingerprint(b"autumn term")


def test_a_term_secret_file_must_say_something(tmp_path, monkeypatch):
    empty = tmp_path / "secret"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        use_term(empty)
    with pytest.raises(ValueError, match="cannot be read"):
        use_term(tmp_path / "missing")
    assert "COURSE_TERM_FILE" not in os.environ


TERM_TASKS = '''\
"""A lab added by a test, graded under a term secret."""
from util.contract import Lab, Task


def _call(fn, spec):
    return fn(spec["seed"], spec["n"])


LAB = Lab(name="labNN", title="Seeded lab", notebook="labNN_seeded.ipynb", tasks=(
    Task(id="NN.1", title="Draws", answer_points=4, answer="the sum of draws(0, 5)", function="draws",
         run_case=_call, hidden_points=6),
))
'''
TERM_CASES = '''\
"""Its hidden cases: one drawn from a seed any value of which is fine, one screened."""
from util.contract import Case

CASES = {"NN.1": (Case("random", {"seed": 7, "n": 4}, 3, seeds=("seed",)), Case("fixed", {"seed": 1, "n": 3}, 3))}
'''


@pytest.mark.notebook
def test_references_made_for_a_term_grade_that_terms_submissions(tmp_path):
    """``regen --term`` writes the term's references beside its secret (never in the repository) from the seeds
    the secret draws; ``grade --term`` grades against them: the solution gets full marks, and the class folder
    remembers the term."""
    repo, number = tmp_path / "course", 950
    for folder in ("util", "grader"):
        shutil.copytree(REPO / folder, repo / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "examples", "references", "*.onnx", "*.pt"))
    extra = tmp_path / "extra"
    lab = extra / f"lab{number}"
    lab.mkdir(parents=True)
    (lab / "__init__.py").write_text("")
    (lab / "tasks.py").write_text(TERM_TASKS.replace("NN", str(number)))
    (lab / "cases.py").write_text(TERM_CASES.replace("NN", str(number)))
    (repo / "solutions").mkdir()
    solution = new_notebook(cells=[
        new_code_cell("from util import setup, submit\nsetup()"),
        new_markdown_cell(f"## Task {number}.1: Draws (10 points)"),
        new_code_cell("import numpy as np\ndef draws(seed, n):\n    ### BEGIN SOLUTION\n"
                      "    return [int(v) for v in np.random.default_rng(seed).integers(0, 100, n)]\n    ### END SOLUTION"),
        new_code_cell(f'submit("{number}.1", sum(draws(0, 5)))'),
    ], metadata={"course": {"lab": f"lab{number}"}})
    nbformat.write(solution, str(repo / "solutions" / f"lab{number}_seeded.ipynb"))
    secret = tmp_path / "term" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("a secret of this term's\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COURSE_REFERENCE_DIR", "COURSE_TERM_FILE")}
    env[labs.LAB_DIRS_ENV] = str(extra)

    def run(*args: str) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-m", "grader", *args], cwd=repo, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    run("regen", "--lab", f"lab{number}", "--term", str(secret))
    [written] = (secret.parent).glob("references-*/*.json")
    assert written.parent.name == f"references-{term_fingerprint(secret.read_bytes().strip())}"
    assert not (repo / "grader" / "references" / f"lab{number}.json").exists()
    refs = json.loads(written.read_text())
    import numpy as np

    drawn = term_spec(f"lab{number}", f"{number}.1", Case("random", {"seed": 7, "n": 4}, 3, seeds=("seed",)),
                      secret.read_bytes().strip())["seed"]
    assert drawn != 7
    assert refs["cases"][f"{number}.1"] == {
        "random": [int(v) for v in np.random.default_rng(drawn).integers(0, 100, 4)],
        "fixed": [int(v) for v in np.random.default_rng(1).integers(0, 100, 3)]}
    assert refs["provenance"]["term"] == written.parent.name.removeprefix("references-")
    out = tmp_path / "gradebook"
    run("grade", str(repo / "solutions"), "--out", str(out), "--term", str(secret), "--no-progress")
    rows = (out / f"gradebook_lab{number}.csv").read_text()
    assert "10/10" in rows or ",10," in rows or ",10.0," in rows, rows
    assert json.loads((out / "class.json").read_text())["term"] == str(secret.resolve())
