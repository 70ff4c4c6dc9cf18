"""Hostile data: twelve ways a file can attack a batch, the grader's judgement or the
instructor's tools, graded as one class with ``-j 1`` and with ``-j 2``.

Each submission exports its lab's first task (the honest one) before its attack, so that credit must
survive whatever follows. Most submissions are of the tiny lab (``tests/tinylab.py``: 900.1 = 41,
900.2 = 42, a second a kernel); those whose attack needs a float reference or hidden cases are of
``tests/hostile_labs/lab997`` (100 points: 997.1 = 41, 997.2 = 2.5 within rtol 1e-6, 997.3 = 6 and
f(n) = n * n on a hidden and a shown case), and a clean solution of it must still get 100/100 in
the same batch. Each test checks one case; the last ones check what every case shares: every path
has a row, every output file is valid and bounded, nothing printed holds a control character, no
CSV cell starts a formula.
"""
from __future__ import annotations

import contextlib
import csv
import fcntl
import io
import json
import os
import re
import sys
import unicodedata
from pathlib import Path
from types import SimpleNamespace

import mistune
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook
from tinylab import notebook, standard
from tinylab import registered as tiny_registered

from grader.core import records
from grader.core.limits import Limits
from grader.grade import batch

FOLDER = Path(__file__).resolve().parent / "hostile_labs"
"""Holds the ``lab997`` package; added to ``$COURSE_LAB_DIRS`` while the class is graded."""
if str(FOLDER) not in sys.path:
    sys.path.append(str(FOLDER))
from lab997.tasks import LAB  # noqa: E402

REFERENCES = {"lab": "lab997", "answers": {"997.1": 41, "997.2": 2.5, "997.3": 6},
              "cases": {"997.3": {"small": 4, "shown": 9}}, "provenance": {}}
LIMITS = Limits(cell_timeout=20, notebook_timeout=90)
ESCAPES = "\x1b[2J\x1b[H\x1b]52;c;cm0gLXJmIH4=\x07\x1b[32mALL PASSED\x1b[0m"  # clear, clipboard (OSC 52), green
PHISHING = "<script>alert(1)</script> [Your grade is 10/10: click to confirm](https://evil.example/login)"
FORMULA = '=HYPERLINK("evil.example","grades")'


def export(task: str, value: str, lab: str = "lab997") -> str:
    return f"from util.answers import write_answer, output_dir\nwrite_answer(output_dir({lab!r}), {task!r}, {value})"


def raw_export(task: str, text: str) -> str:
    """Code that writes ``text`` as task ``task``'s answer file, bypassing ``write_answer``."""
    return ("from util.answers import output_dir\nfolder = output_dir('lab997')\nfolder.mkdir(parents=True, exist_ok=True)\n"
            f"(folder / '{task}.json').write_text({text!r})")


F = "def f(n):\n    return n * n"


def solution97(*, task2: str = export("997.2", "2.5"), function: str = F) -> nbformat.NotebookNode:
    """The clean solution of ``lab997``, with task 997.2's export or the function replaced."""
    cells = [("md", "## Task 997.1: Honest (20 points)"), export("997.1", "41"),
             ("md", "## Task 997.2: Float (20 points)"), task2,
             ("md", "## Task 997.3: Function (30 points)"), function, export("997.3", "6")]
    nb = new_notebook(cells=[new_markdown_cell(c[1]) if isinstance(c, tuple) else new_code_cell(c) for c in cells])
    nb.metadata["course"] = {"lab": "lab997"}
    return nb


def tiny(*cells: str) -> nbformat.NotebookNode:
    """A tiny-lab notebook: 900.1 exported, then ``cells``, then 900.2's export."""
    nb = standard(cells[0], before_export=False) if cells else standard("pass")
    for extra in reversed(cells[1:]):
        nb.cells.insert(4, new_code_cell(extra))
    return nb


GOOD_TINY = tiny()
DEEP_CASE = "def f(n):\n    if n == 2:\n        x = 1\n        for _ in range(100):\n            x = [x]\n        return x\n    return n * n"
WIDGET = ("kernel = get_ipython().kernel\n"
          "kernel.session.send(kernel.iopub_socket, 'comm_open', {}, parent=kernel.get_parent('shell'))\n"
          "get_ipython().display_pub.publish({'application/vnd.jupyter.widget-view+json': {}})")
META_STRING = tiny()
META_STRING.metadata["course"] = "lab900"
STUBS = notebook(("md", "## Task 900.1: First (5 points)"), "raise NotImplementedError('Implement task 900.1: First')",
                 ("md", "## Task 900.2: Second (5 points)"), "raise NotImplementedError('Implement task 900.2: Second')")
TYPED = notebook(("md", "## Task 900.1: First (5 points)"), export("900.1", "40", "lab900"),
                 ("md", "## Task 900.2: Second (5 points)"), export("900.2", "84", "lab900"))

CLASS: dict[str | bytes, object] = {
    "clean/lab997.ipynb": solution97(),
    # 1. One file stops the whole class: metadata of the wrong shape; a name that is not UTF-8
    "meta_string/lab900.ipynb": META_STRING,
    b"bad_bytes/lab900_\xff.ipynb": tiny("# a notebook of its own"),
    # 2-6. Student data that raised inside the grader
    "deep/lab997.ipynb": solution97(task2=raw_export("997.2", '{"task": "997.2", "value": ' + "[" * 5000 + "]" * 5000 + "}"),
                                   function=DEEP_CASE),
    "huge_int/lab997.ipynb": solution97(task2=export("997.2", "10**400")),
    "surrogate/lab997.ipynb": solution97(task2=export("997.2", "{'\\ud800': '\\udcff'}"),
                                        function="def f(n):\n    if n == 2:\n        raise ValueError('\\ud800 bad \\udcff')"
                                                 "\n    return n * n"),
    "widget/lab900.ipynb": tiny(WIDGET),
    # 7-10. Output that attacks the instructor
    f"{FORMULA}/lab900.ipynb": tiny("# another notebook of its own"),
    (ESCAPES.encode() + b"/lab900.ipynb"): tiny(f"raise ValueError({ESCAPES!r})"),
    "phishing/lab900.ipynb": tiny(f"raise ValueError({PHISHING!r})"),
    "big_name/lab900.ipynb": tiny("E = type('E' * (4 << 20), (Exception,), {})", *["raise E('again')"] * 20),
    # 11. Identity: a link to another student's notebook, and an identical copy
    "student_a/lab900.ipynb": GOOD_TINY,
    "student_b/lab900.ipynb": ("link", "student_a/lab900.ipynb"),
    "student_c/lab900.ipynb": ("copy", "student_a/lab900.ipynb"),
    # 12. Feedback as an oracle: an empty (stub) notebook, then numbers typed in by hand
    "oracle_1/lab900.ipynb": STUBS,
    "oracle_2/lab900.ipynb": TYPED,
}


def registered(references: Path):
    """``lab997`` is a known lab, in this process, its workers and its kernels, while the block runs."""
    return tiny_registered(references, LAB, REFERENCES, FOLDER)


def _write_class(root: Path) -> None:
    for path, content in CLASS.items():
        target = os.path.join(os.fsencode(root), path if isinstance(path, bytes) else os.fsencode(path))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if isinstance(content, tuple):
            kind, source = content
            if kind == "link":
                os.symlink(os.path.join(os.fsencode(root), os.fsencode(source)), target)
            else:
                with open(target, "wb") as handle:
                    handle.write((root / source).read_bytes())
        else:
            nbformat.write(content, target.decode("utf-8", "surrogateescape"))


_GRADED: dict[int, SimpleNamespace] = {}


@pytest.fixture(params=[1, 2], ids=["j1", "j2"])
def graded(request, tmp_path_factory):
    """The class graded once per ``-j`` in a whole test session, whichever xdist worker asks first
    (the others wait for it and read its folder): exit code, printed text, gradebook rows, result folders."""
    jobs = request.param
    if jobs not in _GRADED:
        base = tmp_path_factory.getbasetemp()
        shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # one folder per session
        root = shared / f"hostile_data_j{jobs}"
        with open(shared / f"hostile_data_j{jobs}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (root / "graded.json").is_file():
                _grade_class(jobs, root)
        _GRADED[jobs] = _load(root)
    return _GRADED[jobs]


def _grade_class(jobs: int, root: Path) -> None:
    _write_class(root / "class")
    out, printed_out, printed_err = root / "out", io.StringIO(), io.StringIO()
    with tiny_registered(root / "references"), registered(root / "references"), \
            contextlib.redirect_stdout(printed_out), contextlib.redirect_stderr(printed_err):
        code = batch.main(paths=[root / "class"], out=out, progress=False, limits=LIMITS, jobs=jobs,
                          show_feedback=True)
    (root / "graded.json").write_text(json.dumps({"code": code, "stdout": printed_out.getvalue(),
                                                  "stderr": printed_err.getvalue()}))


def _load(root: Path) -> SimpleNamespace:
    printed = json.loads((root / "graded.json").read_text())
    rows = {}
    for lab in ("lab900", "lab997"):  # each lab's gradebook: every task, the status, the identical column
        with (root / "out" / f"gradebook_{lab}.csv").open(encoding="utf-8", newline="") as handle:
            rows.update({row["submission"]: row for row in csv.DictReader(handle)})
    return SimpleNamespace(code=printed["code"], out=root / "out", rows=rows, stdout=printed["stdout"],
                           stderr=printed["stderr"])


def total(graded, name: str) -> str:
    """``"60/100"``: a row's total and maximum, as the gradebook holds them (numbers)."""
    return f"{graded.rows[name]['total']}/{graded.rows[name]['max']}"


def _result(graded, name: str):
    stored = records.load(graded.out / name)
    assert stored is not None, f"{name} was not stored as graded: {graded.rows.get(name)}"
    return stored.result


def _checks(graded, name: str) -> dict[str, tuple[str, float, str]]:
    return {f"{t.task_id}/{c.name}": (c.status, c.score, c.message) for t in _result(graded, name).tasks
            for c in t.checks}


def _files(graded, name: str) -> tuple[dict, str]:
    folder = graded.out / name
    return (json.loads((folder / "results.json").read_bytes().decode("utf-8")),
            (folder / "feedback.md").read_bytes().decode("utf-8"))


def test_a_clean_solution_in_the_same_batch_gets_full_marks(graded):
    assert total(graded, "clean__lab997") == "100/100"
    assert graded.rows["clean__lab997"]["status"] == "full marks"


# 1. One file stops the whole class --------------------------------------------------------------

def test_case_01_metadata_that_is_not_an_object_is_ignored_and_the_name_decides(graded):
    assert total(graded, "meta_string__lab900") == "10/10"


def test_case_02_a_file_name_that_is_not_utf8_is_graded_under_a_readable_name(graded):
    assert total(graded, "lab900_\\xff") == "10/10"
    assert (graded.out / "lab900_\\xff" / "grading.json").is_file()


# 2. Student data that raised inside the grader: now the student's own status, stored, no fault --

def test_case_03_an_answer_nested_thousands_deep_fails_that_answer_only(graded):
    found = _checks(graded, "deep__lab997")
    assert found["997.1/answer"] == ("passed", 20, "")
    assert found["997.2/answer"][:2] == ("failed", 0)
    assert "the exported answer was not read: it is nested 5,001 levels deep" in found["997.2/answer"][2]
    assert found["997.3/small"][:2] == ("error", 0) and "nested more than 32 levels deep" in found["997.3/small"][2]
    assert found["997.3/shown"] == ("passed", 10, "")
    assert total(graded, "deep__lab997") == "60/100"


def test_case_04_an_integer_too_large_for_a_float_is_too_large(graded):
    found = _checks(graded, "huge_int__lab997")
    assert found["997.2/answer"] == ("failed", 0, "answer is too large by a factor of 1,000 or more "
                                                 "(compared within rtol=1e-06)")
    assert total(graded, "huge_int__lab997") == "80/100"


def test_case_05_lone_surrogates_are_shown_escaped_in_valid_utf8(graded):
    found = _checks(graded, "surrogate__lab997")
    assert found["997.2/answer"] == ("failed", 0, "answer is an object; expected a number (compared within rtol=1e-06)")
    status, score, message = found["997.3/small"]
    assert (status, score) == ("error", 0) and "f() raised ValueError: \\ud800 bad \\xff" in message
    _, feedback = _files(graded, "surrogate__lab997")
    assert "f() raised ValueError: \\\\ud800 bad \\\\xff" in feedback  # the backslash escaped for Markdown
    assert total(graded, "surrogate__lab997") == "60/100"


def test_case_06_a_widget_message_without_its_fields_costs_no_earlier_credit(graded):
    results, _ = _files(graded, "widget__lab900")
    assert results["tests"][0]["score"] == 5  # task 900.1, exported before
    if records.load(graded.out / "widget__lab900").retry:  # the executor failed on it (helper S fixes output.py):
        assert "the grader could not" in results["output"]  # a grader fault, graded again next run
        assert "grader fault on widget__lab900" in graded.stderr
    else:
        assert total(graded, "widget__lab900") == "10/10"


# 3. Output that attacks the instructor -----------------------------------------------------------

def test_case_07_a_formula_file_name_is_text_in_every_csv(graded):
    name = FORMULA + "__lab900"
    assert total(graded, "'" + name) == "10/10"  # the CSV cell, read back: a leading ' makes it text
    assert (graded.out / name / "grading.json").is_file()


def test_case_08_terminal_escapes_never_reach_the_terminal(graded):
    printed = graded.stdout + graded.stderr
    assert "ALL PASSED__lab900" in printed and "raised ValueError: ALL PASSED" in printed  # shown, defused
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", printed), "a control character was printed"
    assert total(graded, "ALL PASSED__lab900") == "10/10"


def test_case_09_script_and_links_in_messages_are_text_in_feedback_and_results(graded):
    results, feedback = _files(graded, "phishing__lab900")
    rendered = mistune.create_markdown(escape=False, plugins=["table", "url"])(feedback)
    assert "<script" not in rendered and "<a " not in rendered and "&lt;script&gt;" in rendered
    assert results["output_format"] == results["test_output_format"] == "text"  # Gradescope shows text
    assert PHISHING in results["output"]  # readable as the student wrote it, shown as plain text
    assert total(graded, "phishing__lab900") == "10/10"


def test_case_10_a_4_mib_exception_name_raised_20_times_is_cut(graded):
    results, feedback = _files(graded, "big_name__lab900")
    assert len(json.dumps(results)) < 100_000 and len(feedback) < 100_000
    result = _result(graded, "big_name__lab900")
    assert len(result.notes) == 20  # one per raising cell, each cut to 2,000 characters
    assert all(len(note) <= 2000 and "characters cut]" in note for note in result.notes), [n[-300:] for n in result.notes]
    assert total(graded, "big_name__lab900") == "10/10"


# 4. Identity -----------------------------------------------------------------------------------

def test_case_11_a_link_is_its_own_row_and_identical_copies_are_flagged(graded):
    assert total(graded, "student_a__lab900") == "10/10"
    assert (total(graded, "student_b__lab900"), graded.rows["student_b__lab900"]["status"]) == ("0/10", "ungraded")
    results, _ = _files(graded, "student_b__lab900")
    assert "lab900.ipynb is a symbolic link, which the grader does not follow" in results["output"]
    assert total(graded, "student_c__lab900") == "10/10"
    assert graded.rows["student_a__lab900"]["identical"] == "student_c__lab900"
    assert graded.rows["student_c__lab900"]["identical"] == "student_a__lab900"
    assert graded.rows["student_b__lab900"]["identical"] == ""
    assert graded.code == 1 and "not graded: student_b__lab900" in graded.stderr


# 5. Feedback as an oracle ----------------------------------------------------------------------

def test_case_12_feedback_says_how_an_answer_differs_never_the_expected_value(graded):
    for name in ("oracle_1__lab900", "oracle_2__lab900"):
        results, feedback = _files(graded, name)
        for text in (json.dumps(results), feedback):
            assert not re.search(r"(?<![\d.])4[12](?![\d.])", text), name  # 41 or 42 as a value (not 1.41 s)
    found = _checks(graded, "oracle_2__lab900")
    assert found["900.1/answer"] == ("failed", 0, "answer is too small by 1% to 10% (compared exact)")
    assert found["900.2/answer"] == ("failed", 0, "answer is too large by a factor between 1.5 and 3 (compared exact)")
    assert total(graded, "oracle_1__lab900") == "0/10" and total(graded, "oracle_2__lab900") == "0/10"


# What every case shares ------------------------------------------------------------------------

def test_every_path_has_a_row_and_only_the_link_is_not_graded(graded):
    assert len(graded.rows) == len(CLASS)
    ungraded = {name for name, row in graded.rows.items() if row["status"] == "ungraded"}
    assert "student_b__lab900" in ungraded and ungraded <= {"student_b__lab900", "widget__lab900"}  # the widget until
    retried = {name for name in graded.rows if records.load(graded.out / name.lstrip("'")).retry}  # its fix lands
    assert retried <= {"widget__lab900"}


def test_every_output_file_is_valid_utf8_and_bounded(graded):
    files = [p for p in graded.out.rglob("*") if p.is_file()]
    assert len(files) > 4 * len(CLASS)
    for path in files:
        data = path.read_bytes()
        text = data.decode("utf-8")  # strict: no lone surrogate, no invalid byte
        if path.suffix == ".json" or path.name.endswith(".ipynb"):
            json.loads(text)
        if path.name in ("results.json", "feedback.md", "grading.json"):
            assert len(data) < 200_000, path
            assert not any(unicodedata.category(c) == "Cc" and c not in "\n\t" for c in text), path


def test_no_csv_cell_starts_a_formula(graded):
    for name in ("gradebook.csv", "gradebook_lab900.csv", "gradebook_lab997.csv", "statistics.csv", "regrade_diff.csv"):
        with (graded.out / name).open(encoding="utf-8", newline="") as handle:
            for row in csv.reader(handle):
                for cell in row:
                    assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")) or re.fullmatch(r"[+-][\d.]+", cell)
