"""What a resume key covers (a C++ lab's resubmission that changed only its cpp/ kept
the old score), and the progress lines of the long steps."""
from __future__ import annotations

import os
import time
from pathlib import Path

from grader import REPO
from grader.author import regen
from grader.core.limits import Limits
from grader.grade import jobs, resume
from util.labs import LABS, get_lab

CPP_LAB = next(lab for lab in LABS.values() if lab.support)
"""The course's lab with support files next to its notebook (a C++ project)."""


def _submission(root: Path) -> Path:
    notebook = root / "student" / "lab.ipynb"
    (notebook.parent / "cpp" / "build").mkdir(parents=True)
    notebook.write_text('{"cells": []}')
    (notebook.parent / "cpp" / "analysis.cpp").write_text("int main() { return 0; }\n")
    (notebook.parent / "cpp" / "build" / "analysis.o").write_bytes(b"\0object")
    return notebook


def test_the_key_covers_the_submissions_support_folder_but_not_its_build(tmp_path):
    notebook = _submission(tmp_path)
    first = resume.key(notebook, CPP_LAB, Limits())
    (notebook.parent / "cpp" / "build" / "analysis.o").write_bytes(b"\0rebuilt")
    assert resume.key(notebook, CPP_LAB, Limits()) == first
    (notebook.parent / "cpp" / "analysis.cpp").write_text("int main() { return 1; }\n")  # only the C++ changed
    second = resume.key(notebook, CPP_LAB, Limits())
    assert resume.changed_parts(first, second) == ["submission"]
    moved = tmp_path / "elsewhere"
    os.rename(notebook.parent, moved)  # the same files in another folder: the same submission
    assert resume.key(moved / "lab.ipynb", CPP_LAB, Limits()) == second


def test_the_key_covers_the_courses_own_support_files(tmp_path):
    files = resume.course_support(CPP_LAB)
    folder = REPO / "labs" / Path(CPP_LAB.notebook).parent
    assert files and all(f.is_file() and f.is_relative_to(folder) for f in files)
    assert {f.name for f in files} >= {"CMakeLists.txt"}
    assert set(files) <= set(resume._code_files(CPP_LAB))


def test_submission_time_is_the_newest_file_of_the_submission(tmp_path):
    notebook = _submission(tmp_path)
    os.utime(notebook, (1_700_000_000, 1_700_000_000))
    os.utime(notebook.parent / "cpp" / "analysis.cpp", (1_700_000_500, 1_700_000_500))
    os.utime(notebook.parent / "cpp" / "build" / "analysis.o", (1_800_000_000, 1_800_000_000))  # not submitted
    assert resume.submitted_at(notebook, CPP_LAB).timestamp() == 1_700_000_500
    plain = next(lab for lab in LABS.values() if not lab.support)
    assert resume.submitted_at(notebook, plain).timestamp() == 1_700_000_000


def test_preparing_a_lab_says_what_it_does_and_how_long_it_took(capsys, monkeypatch):
    from dataclasses import replace
    lab = replace(get_lab(next(iter(LABS))), prepare="time:time")
    monkeypatch.setattr(jobs, "get_lab", lambda name: lab)
    jobs.prepare({lab.name})
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"grader: preparing {lab.name}: exporting the models")
    assert err[1].startswith(f"grader: prepared {lab.name} in ") and err[1].endswith(" s")


def test_regen_check_says_what_it_runs_before_running_it(capsys, monkeypatch):
    lab = next(iter(LABS.values()))
    seen = []

    def check(checked):
        seen.append(capsys.readouterr().err)  # what was printed before the long step started
        time.sleep(0.01)
        return []

    monkeypatch.setattr(regen, "check", check)
    assert regen.main(labs=[lab], check_only=True) == 0
    assert seen == [f"regen --check: {lab.name}: running the solution once (a few seconds to a minute or two "
                    "each)...\n"]
    assert capsys.readouterr().out.startswith(f"regen --check: {lab.name}: fresh (")
