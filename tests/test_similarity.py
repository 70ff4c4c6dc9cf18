"""The similarity report (``python -m grader similarity``, :mod:`grader.report.similarity`) on a class made from the
course's own notebooks: disguised copies of the solution rank at the top, work written independently from the
handout and handouts left (mostly) blank do not, the handout's code never counts as shared, and the page keeps a
hostile notebook inert.

The class is made of grading records written directly (no notebook is run: the report reads what was submitted,
not how it scored).
"""
from __future__ import annotations

import csv
import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import disguise
import independent_lab13 as independent
import pytest
from hypothesis import given
from hypothesis import strategies as st
from webdriver import browser  # noqa: F401 (the fixture)

from grader import REPO
from grader.core import records
from grader.core.results import SubmissionResult, WrittenAnswer
from grader.report import class_folder, fingerprint, similarity, similarity_page
from util.labs import LABS

LAB13 = LABS["lab13"]
SOLUTION = REPO / "solutions" / LAB13.notebook
HANDOUT = REPO / "labs" / LAB13.notebook
EXAMPLE = REPO / "grader" / "examples" / "lab13" / "zero2_as_zero1.ipynb"
ANSWER = ("The ring sends two chunks fewer than the tree because every rank forwards one chunk per step and the "
          "sizes of uneven chunks differ by one element, so rank zero sends the most bytes of all ranks.")
OWN_ANSWER = "Each bucket waits for the slowest gradient; with a small cap many messages pay the latency alpha."
COPIES = ("copy_renamed", "copy_reordered", "copy_recommented", "copy_all", "copy_inserted")
COPYING = {"solution", "example_zero2", *COPIES}
"""The submissions that share the solution's code (the example is the solution with one mistake made)."""
APART = ("independent_a", "independent_b", "blank", "blank_respaced", "mostly_blank")


def _insert(cells: list[str]) -> list[str]:
    """A line of the copier's own after every third line inside a function."""
    out = []
    for code in cells:
        lines = []
        for n, line in enumerate(code.splitlines()):
            lines.append(line)
            if (n % 3 == 2 and line.startswith("    ") and line.strip() and not line.rstrip().endswith(
                    (":", ",", "(", "[", "{", "\\")) and not line.strip().startswith(('"""', "'''", "#"))):
                lines.append(line[:len(line) - len(line.lstrip())] + "_unused = None")
        out.append("\n".join(lines) + "\n")
    return out


def _respaced(cells: list[str]) -> list[str]:
    """The handout's own cells, spaces added: no longer equal to the handout's cells, their code still its."""
    return [c.replace(" = ", "  =  ").replace("(", "( ") + "\n\n" for c in cells]


def _record(out: Path, name: str, source: Path, lab: str = "lab13", answers: tuple[str, ...] = ()) -> None:
    written = tuple(WrittenAnswer(f"13.Q{i}", text) for i, text in enumerate(answers, 1))
    records.save(out / name, {"notebook": name}, SubmissionResult(str(source), lab, (), 0.0, "completed", (), 2,
                                                                  written), source=source)


def make_class(tmp: Path) -> Path:
    """A class folder of lab 13: the solution, an example submission, disguised copies, independent work, blanks."""
    subs, out = tmp / "submitted", tmp / "class"
    handout_cells = similarity.Handout.of(LAB13, REPO).cells
    made = {"solution": SOLUTION, "example_zero2": EXAMPLE, "blank": HANDOUT}
    steps = {"copy_renamed": ("rename",), "copy_reordered": ("reorder",), "copy_recommented": ("recomment", "respace"),
             "copy_all": ("rename", "reorder", "recomment", "respace")}
    for i, (name, how) in enumerate(steps.items()):
        made[name] = disguise.rewrite(SOLUTION, subs / f"{name}.ipynb",
                                      lambda c, i=i, how=how: disguise.disguise(c, i, how), only=handout_cells)
    made["copy_inserted"] = disguise.rewrite(SOLUTION, subs / "copy_inserted.ipynb",
                                             lambda c: _insert(disguise.disguise(c, 7)), only=handout_cells)
    made["independent_a"] = independent.notebook(HANDOUT, subs / "independent_a.ipynb", "a")
    made["independent_b"] = independent.notebook(HANDOUT, subs / "independent_b.ipynb", "b")
    made["mostly_blank"] = independent.notebook(HANDOUT, subs / "mostly_blank.ipynb", "c")
    made["blank_respaced"] = disguise.rewrite(HANDOUT, subs / "blank_respaced.ipynb", _respaced)
    for name, path in made.items():
        answers = (ANSWER, OWN_ANSWER) if name in ("solution", "copy_all") else (f"{name} wrote this alone.",)
        _record(out, name, path, answers=answers)
    return out


@pytest.fixture(scope="module")
def lab13_class(tmp_path_factory):
    out = make_class(tmp_path_factory.mktemp("similarity"))
    return out, similarity.build(out, names=True)


def test_disguised_copies_rank_at_the_top_and_independent_work_below(lab13_class):
    out, report = lab13_class
    listed = report.pairs["lab13"]
    pairs = {frozenset((p.a, p.b)) for p in listed}
    assert all(pair <= COPYING for pair in pairs)  # no independent or blank notebook in any listed pair
    for name in COPYING:  # each compared in full with its closest (CANDIDATES), all of them copies
        assert sum(name in pair for pair in pairs) >= similarity.CANDIDATES, name
    assert {frozenset(("solution", name)) for name in COPIES} <= pairs
    assert min(p.score for p in listed) >= 0.6, [(p.a, p.b, round(p.score, 2)) for p in listed]
    # every copy's closest match is a copying submission, and each copy of the solution scores > 0.9 with it
    for name in COPYING:
        pair = report.closest["lab13"][name]
        assert {pair.a, pair.b} <= COPYING, (name, pair)
    by_pair = {frozenset((p.a, p.b)): p for p in listed}
    for name in COPIES:
        assert by_pair[frozenset(("solution", name))].score >= (0.65 if name == "copy_inserted" else 0.95), name


def test_independent_solutions_and_blank_handouts_score_below_the_threshold(lab13_class):
    out, report = lab13_class
    works = list(report.works["lab13"].values())
    handout = similarity.Handout.of(LAB13, REPO)
    everything, _ = similarity.compare(works, handout, threshold=0.0, candidates=len(works))
    score = {frozenset((p.a, p.b)): p.score for p in everything}
    measured = {pair: s for pair, s in score.items() if pair & set(APART)}
    assert max(measured.values()) < similarity.THRESHOLD, sorted(measured.items(), key=lambda kv: -kv[1])[:3]
    # the two independent solutions do share some code with the solution (the handout's formulas), measurably
    assert 0.05 < score[frozenset(("solution", "independent_a"))] < 0.45
    assert all(not report.works["lab13"][name].parts["python"] for name in ("blank",))


def test_the_handouts_code_never_counts_as_shared(lab13_class):
    out, report = lab13_class
    handout = similarity.Handout.of(LAB13, REPO)
    respaced = report.works["lab13"]["blank_respaced"]
    assert respaced.parts["python"]  # its cells differ from the handout's, so they are read...
    prints = similarity._prints(respaced, handout, similarity.work_tokens(respaced))["python"]
    assert prints.hashes == set() and prints.coverage == 0  # ...and every k-gram of them is the handout's
    # the solution's own code has fingerprints, and none of them is the handout's
    solution = fingerprint.fingerprint(report.works["lab13"]["solution"].parts["python"], "python")
    kept = fingerprint.fingerprint(report.works["lab13"]["solution"].parts["python"], "python",
                                   handout.boilerplate["python"])
    assert 0 < len(kept.hashes) < len(solution.hashes)
    assert not kept.hashes & set(handout.boilerplate["python"].tolist())


def test_written_answers_are_compared_as_text_on_their_own(lab13_class):
    out, report = lab13_class
    pairs = {frozenset((p.a, p.b)): p for p in report.pairs["lab13"]}
    assert pairs[frozenset(("solution", "copy_all"))].text == pytest.approx(1.0)
    assert pairs[frozenset(("solution", "copy_renamed"))].text == 0.0  # answers written apart


def test_the_command_writes_the_page_the_csv_and_the_gradebook_column(tmp_path, capsys):
    from grader import cli

    out = make_class(tmp_path)
    before = class_folder.main(out=out)
    assert before == 0
    header = (out / "gradebook_lab13.csv").read_text(encoding="utf-8").splitlines()[0]
    assert "similar to" not in header  # no report made yet: the gradebook is as it always was
    assert cli.main(["similarity", str(out), "--lab", "lab13"]) == 0
    printed = capsys.readouterr().out
    rows = list(csv.DictReader((out / "similarity.csv").open(encoding="utf-8")))
    assert f"lab13: 12 submissions, {len(rows)} pairs at or above 50%" in printed
    assert 20 <= len(rows) <= 21 and all(float(r["score"]) >= 0.5 for r in rows)  # of the 21 pairs of 7 copies
    assert [float(r["score"]) for r in rows] == sorted((float(r["score"]) for r in rows), reverse=True)
    aliases = {r["a"] for r in rows} | {r["b"] for r in rows}
    assert len(aliases) == 7 and all(re.fullmatch(r"S[0-9a-f]{8}", a) for a in aliases)  # anonymous by default
    page = (out / "similarity.html").read_text(encoding="utf-8")
    for name in COPYING | set(APART):
        assert name not in page and name not in (out / "similarity.csv").read_text(encoding="utf-8")
    assert class_folder.main(out=out) == 0
    book = list(csv.DictReader((out / "gradebook_lab13.csv").open(encoding="utf-8")))
    by_name = {r["submission"]: r for r in book}
    assert float(by_name["copy_all"]["similarity"]) >= 0.9 and by_name["copy_all"]["similar to"] in aliases
    assert float(by_name["blank"]["similarity"] or 0) < 0.5
    summary = (out / "gradebook.csv").read_text(encoding="utf-8").splitlines()[0]
    assert "similar" not in summary  # the class summary (and every export) unchanged


def test_scores_are_the_same_whatever_pythons_string_hash_seed(tmp_path):
    out = make_class(tmp_path)
    found = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        subprocess.run([sys.executable, "-m", "grader", "similarity", str(out), "--names"], check=True, env=env,
                       cwd=REPO, capture_output=True)
        found.append((out / "similarity.csv").read_text(encoding="utf-8"))
    assert found[0] == found[1] and found[0].count("\n") >= 21


def test_a_lab_with_cpp_files_compares_them_too(tmp_path):
    lab4 = LABS["lab4"]
    solution, handout = REPO / "solutions" / lab4.notebook, REPO / "labs" / lab4.notebook
    out, subs = tmp_path / "class", tmp_path / "submitted"
    copy = subs / "copier" / solution.parent.name
    shutil.copytree(solution.parent, copy)
    for path in copy.rglob("*.cpp"):  # comments dropped, blank lines added: the same C++
        text = re.sub(r"//[^\n]*", "", path.read_text(encoding="utf-8"))
        path.write_text(text.replace(";\n", ";\n\n"), encoding="utf-8")
    shutil.copytree(handout.parent, subs / "blank" / handout.parent.name)
    for name, path in {"solution": solution, "copier": copy / solution.name,
                       "blank": subs / "blank" / handout.parent.name / handout.name}.items():
        _record(out, name, path, lab="lab4")
    report = similarity.build(out, names=True)
    [pair] = report.pairs["lab4"]
    assert {pair.a, pair.b} == {"solution", "copier"} and pair.score > 0.9
    assert "cpp" in pair.slices and report.works["lab4"]["copier"].parts["cpp"]
    assert "blank" not in report.closest["lab4"]  # it shares nothing with anyone: the handout is all it holds


HOSTILE = '<script>document.title="PWNED"</script><img src=x onerror="document.title=\'PWNED\'">'


def _hostile_class(tmp: Path) -> Path:
    out = tmp / "class"
    nb = json.loads(SOLUTION.read_text(encoding="utf-8"))
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                        "source": f"# {HOSTILE}\nbanner = '{HOSTILE}'\n"})
    for name in ("a", f"b{HOSTILE}"[:60].replace("/", "_")):
        path = tmp / "submitted" / f"{len(name)}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(nb), encoding="utf-8")
        _record(out, name, path, answers=(HOSTILE + " " + ANSWER,))
    return out


def test_the_page_escapes_every_student_text(tmp_path):
    out = _hostile_class(tmp_path)
    similarity.write(similarity.build(out, names=True))
    page = (out / "similarity.html").read_text(encoding="utf-8")
    assert "<script" not in page and "<img" not in page
    assert "&lt;script&gt;document.title=&quot;PWNED&quot;&lt;/script&gt;" in page
    assert f'content="{similarity_page.POLICY}"' in page and "default-src 'none'" in similarity_page.POLICY


def test_no_script_of_a_notebook_runs_in_the_browser(tmp_path, browser):
    out = _hostile_class(tmp_path)
    similarity.write(similarity.build(out, names=True))
    browser.open((out / "similarity.html").as_uri())
    browser.wait("return document.readyState === 'complete'", "the similarity report did not load")
    seen = browser.script("document.querySelectorAll('details').forEach(d => d.open = true);"
                          "return [document.title, document.querySelectorAll('script, img').length,"
                          " document.body.innerText.includes('<script>document.title=\"PWNED\"</script>'),"
                          " document.querySelectorAll('mark').length]")
    assert seen[0] == "Similarity report" and seen[1] == 0 and seen[2] is True and seen[3] > 0


@given(st.text(max_size=200))
def test_a_marked_passage_shows_the_text_itself_and_no_markup_of_its_own(text):
    import numpy as np

    from grader.core import safe_text

    text = safe_text.plain(text, 400)  # as every part is, once read
    slices = np.array([[0, len(text) // 2], [len(text) // 3, len(text)]]) if text else None
    shown = similarity_page.marked(text, slices)
    assert "<" not in shown.replace("<mark>", "").replace("</mark>", "")
    assert html.unescape(shown.replace("<mark>", "").replace("</mark>", "")) == text


@given(st.text(max_size=200))
def test_normal_text_ignores_case_spacing_and_punctuation(text):
    normal = similarity.normal_text(text)
    assert similarity.normal_text(normal) == normal
    assert similarity.normal_text(text.upper().replace(" ", "  \n")) == similarity.normal_text(text.upper())
    assert not re.search(r"[^\w ]|  |_", normal)


def test_the_command_line_default_threshold_is_the_modules():
    from grader import cli

    [sub] = [a for a in cli.parser()._actions if getattr(a, "choices", None) and "similarity" in a.choices]
    assert f"default: {similarity.THRESHOLD}" in sub.choices["similarity"].format_help()


def test_a_submission_moved_away_is_read_from_the_copy_the_grader_kept(tmp_path):
    out = tmp_path / "class"
    for name in ("kept", "other"):
        path = tmp_path / "submitted" / f"{name}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(SOLUTION, path)
        _record(out, name, path)
    kept = json.loads((tmp_path / "submitted" / "kept.ipynb").read_text(encoding="utf-8"))
    from util.hidden import cell_source

    kept["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                          "source": cell_source("lab13", Path("/tmp/cases.json"), {"13.1": [["a case", {"n": 8}]]})})
    (out / "kept" / "executed.ipynb").write_text(json.dumps(kept), encoding="utf-8")  # as the grader keeps it
    (tmp_path / "submitted" / "kept.ipynb").unlink()  # the original is gone
    report = similarity.build(out, names=True)
    [pair] = report.pairs["lab13"]
    assert {pair.a, pair.b} == {"kept", "other"} and pair.score == pytest.approx(1.0)
    assert pair.fractions == (pytest.approx(1.0), pytest.approx(1.0))  # the grader's appended cell is not the student's
    assert "run_cases" not in report.works["lab13"]["kept"].parts["python"]
    assert similarity.submitted_files(out, "kept", records.load(out / "kept"), LAB13) == (
        out / "kept" / "executed.ipynb", None)


def test_no_line_of_the_handouts_is_marked_as_shared(lab13_class):
    """A handout line shorter than copydetect's k-grams (a signature, a docstring) is in none of the handout's
    k-grams; it is still never marked: each character marked lies on a line of the submission's own."""
    out, report = lab13_class
    handout = similarity.Handout.of(LAB13, REPO)
    checked = 0
    for pair in report.pairs["lab13"]:
        for name, passages in zip((pair.a, pair.b), pair.slices["python"]):
            text = report.works["lab13"][name].parts["python"]
            marked = [False] * len(text)
            for start, end in zip(*passages.tolist()):
                marked[start:end] = [True] * (end - start)
            at = 0
            for line in text.splitlines(keepends=True):
                if any(m and not c.isspace() for m, c in zip(marked[at:at + len(line)], line)):
                    assert "".join(line.split()) not in handout.lines, (name, line)
                    checked += 1
                at += len(line)
    assert checked > 1000


def test_tokens_made_in_other_processes_give_the_same_scores(lab13_class):
    """What ``--jobs`` and ``--cluster`` spread is copydetect's tokenizing, which any interpreter does alike (a
    spawned one has another ``hash(str)`` key): the scores are those of one process."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    out, report = lab13_class

    def spawned(function, items):
        with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
            return list(pool.map(function, items))

    again = similarity.build(out, names=True, mapper=spawned)
    assert [(p.a, p.b, p.score, p.shared) for p in again.pairs["lab13"]] == [
        (p.a, p.b, p.score, p.shared) for p in report.pairs["lab13"]]


def test_the_command_tokenizes_on_a_dask_cluster_as_it_does_here(tmp_path, capsys):
    from grader import cli

    out = tmp_path / "class"
    for name, source in (("solution", SOLUTION), ("example", EXAMPLE), ("independent", HANDOUT)):
        path = tmp_path / "submitted" / f"{name}.ipynb"
        if name == "independent":
            independent.notebook(HANDOUT, path, "a")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, path)
        _record(out, name, path)
    assert cli.main(["similarity", str(out), "--names"]) == 0
    here = (out / "similarity.csv").read_text(encoding="utf-8")
    assert cli.main(["similarity", str(out), "--names", "--cluster", "local:1"]) == 0
    assert (out / "similarity.csv").read_text(encoding="utf-8") == here
    assert here.count("\n") == 2 and "example,solution" in here
