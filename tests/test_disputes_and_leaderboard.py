"""Disputes that re-run a task and record it; a leaderboard on figures the grader measured itself.

The test lab ``lab902`` (``tests/boardlab_labs/``) saves bytes per hidden case; its judge passes a file of at
least ``n`` bytes and reports, as facts, the file's "speed" (bytes per byte asked) and a noise band (1.1). It
declares a leaderboard on "speed". A class of three is graded through the real command line; then one task is
disputed (run twice more) and the leaderboard written.
"""
from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import folder_from_gradebook
from hypothesis import given
from hypothesis import strategies as st
from tinylab import notebook, write
from webdriver import browser  # noqa: F401 (the fixture)

from grader import REPO
from grader.report import leaderboard
from util.artifacts import case_file
from util.contract import Leaderboard

LABS = Path(__file__).resolve().parent / "boardlab_labs"
EXPORT = "from util.answers import write_answer, output_dir\nwrite_answer(output_dir('lab902'), '902.1', 902)"


def _submission(factor: int) -> object:
    code = f"def make_bytes(n):\n    return b'x' * ({factor} * n)\n"
    return notebook(("md", "## Task 902.1: Fast bytes (10 points)"), code + EXPORT, lab="lab902")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A class of four graded through the command line: ``slow`` (2 bytes per byte asked), ``quick`` (6),
    ``nearly`` (about 6.3: within ``quick``'s band) and ``short`` (half the bytes: its cases fail)."""
    root = tmp_path_factory.mktemp("board")
    for name, factor in (("slow", 2), ("quick", 6)):
        write(_submission(factor), root / "class" / f"{name}.ipynb")
    write(notebook(("md", "## Task 902.1: Fast bytes (10 points)"),
                   "def make_bytes(n):\n    return b'x' * int(6.4 * n)\n" + EXPORT, lab="lab902"),
          root / "class" / "nearly.ipynb")
    write(notebook(("md", "## Task 902.1: Fast bytes (10 points)"),
                   "def make_bytes(n):\n    return b'x' * (n // 2)\n" + EXPORT, lab="lab902"), root / "class" / "short.ipynb")
    refs = root / "references"
    refs.mkdir()
    (refs / "lab902.json").write_text(json.dumps(
        {"lab": "lab902", "answers": {"902.1": 902}, "provenance": {}, "cases": {"902.1": {
            "small": {"saved": case_file({"n": 4}, ".bin")}, "large": {"saved": case_file({"n": 64}, ".bin")}}}}))
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "COURSE_LAB_DIRS": str(LABS),
           "COURSE_REFERENCE_DIR": str(refs)}
    run = lambda *args: subprocess.run([sys.executable, "-m", "grader", *args], env=env, cwd=REPO,  # noqa: E731
                                       capture_output=True, text=True, timeout=900)
    done = run("grade", str(root / "class"), "--out", str(root / "out"), "--no-progress")
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return root, env, run


def test_the_judges_facts_are_kept_beside_the_result_and_given_to_gradescope(graded):
    root, _, _ = graded
    facts = json.loads((root / "out" / "quick" / "facts.json").read_text())
    assert facts == {"902.1": {"small": {"speed": 6.0, "noise": 1.1, "ignored": "object"},
                               "large": {"speed": 6.0, "noise": 1.1, "ignored": "object"}}}
    results = json.loads((root / "out" / "quick" / "results.json").read_text())
    assert results["leaderboard"] == [{"name": "Bytes per byte asked", "value": 6.0, "order": "desc"}]
    assert results["score"] == 10
    short = json.loads((root / "out" / "short" / "results.json").read_text())
    assert "leaderboard" not in short and short["score"] == 2  # its cases failed: it ranks nowhere


def test_the_leaderboard_ranks_by_the_graders_figure_anonymously_with_ties_in_the_band(graded):
    root, _, run = graded
    done = run("leaderboard", str(root / "out"), "--lab", "lab902")
    assert done.returncode == 0, done.stderr
    rows = (root / "out" / "leaderboard_lab902.csv").read_text().splitlines()[1:]
    ranked = [row.split(",") for row in rows]
    nearly = (25 / 4 * 409 / 64) ** 0.5  # the geometric mean over the two sizes: 6.32, within 1.1 of quick's 6
    assert [(r[0], r[1], round(float(r[3]), 6)) for r in ranked] == [("1", "True", round(nearly, 6)),
                                                                    ("1", "True", 6.0), ("3", "False", 2.0)]
    page = (root / "out" / "leaderboard_lab902.html").read_text()
    for name in ("slow", "quick", "nearly", "short"):
        assert f">{name}<" not in page  # anonymous
    again = run("leaderboard", str(root / "out"), "--lab", "lab902")
    assert again.returncode == 0 and (root / "out" / "leaderboard_lab902.csv").read_text().splitlines()[1:] == rows


def test_the_leaderboard_page_shows_the_ranks_in_headless_chromium(graded, browser):
    """The page as a student opens it: two entries tied at rank 1 (shown =1), the one outside the band third,
    nicknames only, the figure with its band, and no script (the page's CSP allows none; none is in it)."""
    root, _, run = graded
    assert run("leaderboard", str(root / "out"), "--lab", "lab902").returncode == 0
    page = root / "out" / "leaderboard_lab902.html"
    browser.open(page.resolve().as_uri())
    rows = browser.script("return [...document.querySelectorAll('tr')].map(r => [...r.cells].map(c => c.textContent))")
    assert rows[0] == ["rank", "who", "Bytes per byte asked", "band"]
    assert [row[0] for row in rows[1:]] == ["=1", "=1", "3"]
    assert [row[2] for row in rows[1:]] == ["6.32x", "6x", "2x"] and all(row[3].startswith("within ") for row in rows[1:])
    names = [row[1] for row in rows[1:]]
    assert len(set(names)) == 3 and not {"slow", "quick", "nearly", "short"} & set(names)
    assert browser.script("return document.scripts.length") == 0


def test_a_dispute_reruns_the_task_twice_and_records_everything(graded):
    root, _, run = graded
    done = run("dispute", str(root / "out"), "quick", "902.1")
    assert done.returncode == 0, done.stderr
    [record] = (root / "out" / "quick" / "disputes").glob("902.1-*.json")
    found = json.loads(record.read_text())
    assert found["verdict"] == "stands" and found["grader_version"] and found["lab"] == "lab902"
    assert [r["points"] for r in found["runs"]] == [10.0, 10.0] and found["original"]["points"] == 10.0
    for run_record in [found["original"], *found["runs"]]:
        by_case = {c["case"]: c for c in run_record["cases"]}
        assert by_case["large"]["input"] == {"n": 64}
        assert by_case["large"]["verdict"] == "passed" and by_case["large"]["measured"]["speed"] == 6.0
        assert by_case["small"]["value"] == {"saved": case_file({"n": 4}, ".bin")}
        assert isinstance(by_case["small"]["seconds"], float)
    assert "The mark stands" in record.with_suffix(".md").read_text()


def test_a_mark_that_would_change_says_so_and_the_decision_reaches_the_overrides(graded):
    root, env, run = graded
    refs = Path(env["COURSE_REFERENCE_DIR"]) / "lab902.json"
    original = refs.read_text()
    try:
        changed = json.loads(original)
        changed["answers"]["902.1"] = 903  # the reference was wrong when the class was graded
        refs.write_text(json.dumps(changed))
        done = run("dispute", str(root / "out"), "slow", "902.1", "--decide", "10", "--reason", "regraded")
    finally:
        refs.write_text(original)
    assert done.returncode == 0, done.stderr
    [record] = (root / "out" / "slow" / "disputes").glob("902.1-*.json")
    found = json.loads(record.read_text())
    assert found["verdict"] == "differs" and [r["points"] for r in found["runs"]] == [8.0, 8.0]
    overrides = (root / "out" / "overrides.csv").read_text()
    assert f"slow,902.1,10,regraded (dispute record: slow/disputes/{record.name})" in overrides
    assert json.loads((root / "out" / "class.json").read_text())["overrides"].endswith("overrides.csv")


def test_a_dispute_of_nobody_says_who_there_is(graded):
    root, _, run = graded
    done = run("dispute", str(root / "out"), "mallory", "902.1")
    assert done.returncode == 1 and "no graded submission 'mallory' of lab902" in done.stderr
    assert "nearly" in done.stderr


BOARD = Leaderboard("t", task="1", fact="v", band=1.1)


@given(st.lists(st.floats(min_value=0.01, max_value=1e6), min_size=1, max_size=30))
def test_ranks_only_split_beyond_the_band(values):
    entries = leaderboard.rank([(f"n{i}", v, 1.1) for i, v in enumerate(values)], BOARD)
    assert [e.value for e in entries] == sorted(values, reverse=True)
    assert entries[0].rank == 1
    for a, b in zip(entries, entries[1:]):
        assert b.rank >= a.rank
        if b.rank == a.rank:  # a tie: within the band of its rank's first entry
            first = next(e for e in entries if e.rank == b.rank)
            assert first.value / b.value <= 1.1 + 1e-12
        else:  # apart: beyond the band of the rank above's first entry
            first = next(e for e in entries if e.rank == a.rank)
            assert first.value / b.value > 1.1


@given(st.text(min_size=1, max_size=40))
def test_nicknames_are_stable_escaped_and_distinct(name):
    taken: set[str] = set()
    first = leaderboard.nickname(b"secret", name, taken)
    assert first == leaderboard.nickname(b"secret", name, set())
    second = leaderboard.nickname(b"secret", name, taken)
    assert second != first
    assert html.escape(first) == first


@pytest.mark.notebook
def test_a_dispute_records_every_kind_of_case_in_the_course(tmp_path):
    """Disputes of real submissions cover each kind of case: exact (12.3: a value compared with the reference), a
    saved file the judge decides (12.4: a plan run in the course's executor), a student process the judge starts
    (12.1: grad run again where autograd cannot run; 12.5: train run again), and a measured case (8.4: the
    kernel timed by the grader, its speed-up in the record). Lab 12's four tasks are run again together."""
    examples = REPO / "grader" / "examples"
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_REFERENCE_DIR", "COURSE_TERM_FILE")}
    run = lambda *args: subprocess.run([sys.executable, "-m", "grader", *args], env=env, cwd=REPO,  # noqa: E731
                                       capture_output=True, text=True, timeout=1800)
    submissions = {"lab12": examples / "lab12" / "fan_out_overwritten.ipynb",
                   "lab8": examples / "lab8" / "in_place_reuse" / "in_place_reuse.ipynb"}  # (its folder is graded)
    reused = {lab: folder_from_gradebook(path, lab) for lab, path in submissions.items()}
    if all(reused.values()):  # the main job graded both under this run's key: its result folders, not a grading again
        for folder in reused.values():
            shutil.copytree(folder, out / folder.name)
    else:
        done = run("grade", str(submissions["lab12"]), str(submissions["lab8"].parent), "--out", str(out), "--no-progress")
        assert done.returncode in (0, 1), done.stderr[-3000:]
    names = {json.loads((f / "grading.json").read_text())["result"]["lab"]: f.name for f in out.iterdir()
             if (f / "grading.json").is_file()}
    done = run("dispute", str(out), names["lab12"], "12.1", "12.3", "12.4", "12.5")
    assert done.returncode == 0, done.stderr[-3000:]
    records = {json.loads(p.read_text())["task"]: json.loads(p.read_text())
               for p in (out / names["lab12"] / "disputes").glob("*.json")}
    assert sorted(records) == ["12.1", "12.3", "12.4", "12.5"]
    for task, found in records.items():
        assert found["verdict"] == "stands", (task, found["original"]["points"], [r["points"] for r in found["runs"]])
        assert found["grader_version"] and len(found["runs"]) == 2
        for row in [*found["original"]["cases"], *(c for r in found["runs"] for c in r["cases"])]:
            assert row["input"] and row["verdict"] in ("passed", "failed"), (task, row)
            assert row["points"] is not None and row["max_points"] > 0
    # 12.1: the two cases the mistake fails (a value read twice) fail in every run, the others pass
    failing = {row["case"] for row in records["12.1"]["runs"][0]["cases"] if row["verdict"] == "failed"}
    assert failing == {"residual MLP (a tensor read twice)", "one weight used by two layers"}
    assert all(row["value"] is not None for row in records["12.3"]["runs"][1]["cases"])  # exact: what it returned
    done = run("dispute", str(out), names["lab8"], "8.4")
    assert done.returncode == 0, done.stderr[-3000:]
    [measured] = [json.loads(p.read_text()) for p in (out / names["lab8"] / "disputes").glob("8.4-*.json")]
    timed = [row for run_record in [measured["original"], *measured["runs"]] for row in run_record["cases"]
             if row["measured"]]
    assert len(timed) == 3 and all(row["measured"]["speedup"] > 3 and row["measured"]["naive_s"] > 0 for row in timed)
