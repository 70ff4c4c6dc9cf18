"""Which submissions share their code: a class's similarity report, the handout's own code excluded.

``python -m grader similarity CLASS`` compares, lab by lab, what each graded submission of the class folder
wrote itself: its code cells (and, for a lab with support files such as a C++ project, those files), with
the handout's own code taken out, pairwise, with copydetect (a winnowing detector like MOSS, on PyPI;
Schleimer, Wilkerson and Aiken, SIGMOD 2003). Its tokenizer replaces every name with ``V``/``F``/``O`` and
every string with ``S`` and drops comments and whitespace, so renamed variables, reordered functions,
changed comments and spacing still match; what two files share is counted in the k-grams (k =
:data:`NOISE` characters of that filtered code) they both hold.

What counts as the handout's (never shared, whoever wrote it): every code cell of the lab's generated
notebook (``labs/``) and its support files as the course ships them, and the course modules the lab
imports (its helpers). A cell equal to one of the handout's is dropped whole; a handout line left inside
a student's cell is copydetect's boilerplate: its k-grams are removed from every submission, and its
characters are counted and marked on neither side (:class:`Print`). A piece (cell, file, answer) is
fingerprinted on its own: no k-gram spans two, so the order of the cells does not matter.

Written answers are compared as text (lower case, words only: :func:`normal_text`), their own figure.

Files (in the class folder): ``similarity.html`` (the pairs above the threshold, ranked, each side by side
with the shared passages marked: :mod:`grader.report.similarity_page`), ``similarity.csv`` (every pair above
the threshold), ``similarity.json`` (per submission its closest match and score: the per-lab gradebooks'
``similar to`` and ``similarity`` columns, :func:`grader.report.gradebook.lab_table`). Submissions are shown
under pseudonyms unless ``names``. It changes no grade: it points an instructor at what to read.

Scale: each submission is tokenized once (the costly step: in ``jobs`` processes, or on a Dask cluster's
workers through ``mapper``, as ``python -m grader similarity --cluster`` does) and fingerprinted here; every
pair's shared fingerprints are counted (a set intersection, copydetect's own first step), and copydetect's full comparison (the shared fraction and
passages) runs on each submission's :data:`CANDIDATES` closest by that count (as MOSS reports a bounded number
of pairs): every submission's closest matches are listed, though in a group of more than six submissions that all
share their code not every pair of the group is. ``benchmarks/bench_similarity.py`` times a lab of 600.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from grader.core import files, safe_text
from grader.core.namespace import class_file
from grader.core.records import Previous
from grader.report.fingerprint import (  # noqa: F401 (Print, NOISE: this module's vocabulary too)
    NOISE,
    Handout,
    Print,
    code_cells,
    fingerprint,
    normal_text,
    support_code,
    tokens,
)
from util.contract import Lab

THRESHOLD = 0.5
"""A pair is listed when at least this fraction of one side's own code is shared with the other."""
MIN_SHARED = 120
"""...and at least this many characters of filtered code are shared (a few lines): two nearly empty
notebooks that share one idiom are not a pair."""
CANDIDATES = 5
"""Per submission, its closest this many (by shared fingerprints) are compared in full."""
CSV, JSON, HTML = "similarity.csv", "similarity.json", "similarity.html"
SEPARATOR = {"python": "\n\n", "cpp": "\n\n", "text": "\n"}
"""Between the pieces of a part, as shown."""


@dataclass(frozen=True)
class Work:
    """What one submission wrote itself, by part: ``"python"`` (its code cells), ``"cpp"`` (its C++ files),
    ``"text"`` (its written answers)."""

    name: str
    """Its result folder's name."""
    lab: str
    chunks: dict[str, tuple[str, ...]]
    """Part -> its pieces (cells, files, answers), each compared on its own: no k-gram spans two."""

    @property
    def parts(self) -> dict[str, str]:
        """Part -> its pieces joined (:data:`SEPARATOR`): the text compared and shown."""
        return {part: SEPARATOR[part].join(found) for part, found in self.chunks.items()}


@dataclass(frozen=True)
class Pair:
    """Two submissions of one lab and what copydetect found they share."""

    a: str
    b: str
    lab: str
    score: float
    """The larger of the two shared fractions (the fraction of a side's own code found in the other, the handout's
    characters counted in neither)."""
    fractions: tuple[float, float]
    shared: int
    """Characters of filtered code shared (of ``a``)."""
    text: float = 0.0
    """The larger shared fraction of the written answers (0 when either has none)."""
    slices: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict, compare=False, repr=False)
    """Part -> the shared passages of ``a`` and of ``b``: 2xN arrays of start and end offsets in its text."""


def work_tokens(work: Work) -> dict[str, tuple[str, np.ndarray]]:
    """:func:`tokens` of every part of ``work`` (what ``--jobs`` and ``--cluster`` spread)."""
    return {lang: tokens(work.parts[lang], lang) for lang, found in work.chunks.items() if found}


def submitted_files(out: Path, name: str, record: Previous, lab: Lab) -> tuple[Path | None, Path | None]:
    """The notebook ``name`` submitted and the folder its support files lie in: the original submission
    when it is still where it was graded from, else the copy the grader kept (``executed.ipynb``, no support
    files)."""
    source = Path(record.source) if record.source else None
    if source is not None and source.is_dir():
        found = sorted(source.glob("*.ipynb"))
        source = next((p for p in found if p.name == Path(lab.notebook).name), found[0] if found else None)
    if source is not None and source.is_file() and source.suffix == ".ipynb":
        return source, source.parent
    kept = out / name / "executed.ipynb"
    return (kept if kept.is_file() else None), None


def _appended() -> str:
    """The first line of the cell the grader appends to a notebook to run its hidden cases (:mod:`util.hidden`)."""
    from util.hidden import cell_source

    return cell_source("lab", Path("cases.json"), {}).split("\n", 1)[0]


def read_work(out: Path, name: str, record: Previous, lab: Lab, handout: Handout) -> Work:
    """What ``name`` wrote itself: its code cells that are not the handout's, its support code, its answers."""
    path, folder = submitted_files(out, name, record, lab)
    try:
        cells = code_cells(path) if path is not None else []
    except (OSError, ValueError):
        cells = []
    appended = _appended()  # executed.ipynb ends with the grader's cell of hidden cases: never the student's
    chunks: dict[str, tuple[str, ...]] = {"python": tuple(c for c in cells if c.strip() and c.strip() not in handout.cells
                                                          and not c.startswith(appended))}
    if folder is not None:
        for lang, texts in support_code(folder, lab).items():
            chunks[lang] = chunks.get(lang, ()) + tuple(t for t in texts if t.strip())
    chunks["text"] = tuple(a for a in (normal_text(w.text) for w in record.result.written if w.text) if a)
    return Work(name, lab.name, chunks)


def _prints(work: Work, handout: Handout, tokenized: dict[str, tuple[str, np.ndarray]]) -> dict[str, Print]:
    """Part -> copydetect's fingerprint of what ``work`` wrote in it, the handout's code left out."""
    found = {}
    for lang, chunks in work.chunks.items():
        if chunks:
            starts, at = [], 0
            for chunk in chunks[:-1]:
                at += len(chunk) + len(SEPARATOR[lang])
                starts.append(at)
            found[lang] = fingerprint(work.parts[lang], lang, handout.boilerplate.get(lang), tuple(starts),
                                       handout.lines if lang != "text" else frozenset(), tokenized.get(lang))
    return found


Mapper = Callable[[Callable, list], list]
"""``mapper(function, items)`` -> ``[function(item) for item in items]``, computed anywhere (a Dask cluster's)."""


def _all_prints(works: list[Work], handout: Handout, jobs: int, mapper: Mapper | None = None) -> list[dict]:
    """Every work's fingerprints. Their tokens are made by ``mapper``, else in ``jobs`` processes; the hashes
    here, in this process: copydetect hashes with Python's ``hash(str)``, whose key differs from one process to
    the next (``PYTHONHASHSEED``), so fingerprints made in two processes would never match."""
    from concurrent.futures import ProcessPoolExecutor

    if mapper is not None:
        made = mapper(work_tokens, works)
    elif jobs <= 1 or len(works) < 2 * jobs:
        made = [work_tokens(w) for w in works]
    else:
        with ProcessPoolExecutor(jobs) as pool:
            made = list(pool.map(work_tokens, works, chunksize=max(len(works) // (4 * jobs), 1)))
    return [_prints(w, handout, t) for w, t in zip(works, made)]


def compare(works: list[Work], handout: Handout, *, threshold: float = THRESHOLD, candidates: int = CANDIDATES,
            jobs: int = 1, mapper: Mapper | None = None) -> tuple[list[Pair], dict[str, Pair]]:
    """The pairs of ``works`` (one lab's) above ``threshold``, best first, and each submission's closest pair
    (any score) among those compared in full; tokenized in ``jobs`` processes or by ``mapper``."""
    from copydetect import compare_files

    prints = _all_prints(works, handout, jobs, mapper)
    code_langs = sorted({lang for p in prints for lang in p if lang != "text"})
    chosen: set[tuple[int, int]] = set()
    counts: list[list[tuple[int, int]]] = [[] for _ in works]
    for i in range(len(works)):
        for j in range(i + 1, len(works)):
            common = sum(len(prints[i][lang].hashes & prints[j][lang].hashes) for lang in code_langs
                         if lang in prints[i] and lang in prints[j])
            if not common:
                continue
            counts[i].append((common, j))
            counts[j].append((common, i))
    for i, found in enumerate(counts):
        for _, j in sorted(found, reverse=True)[:candidates]:
            chosen.add((min(i, j), max(i, j)))
    pairs = []
    for i, j in sorted(chosen):
        shared, covered, slices = [0, 0], [0, 0], {}
        for lang in code_langs:
            left, right = prints[i].get(lang), prints[j].get(lang)
            covered[0] += left.coverage if left else 0
            covered[1] += right.coverage if right else 0
            if left is None or right is None:
                continue
            overlap, _, (s1, s2) = compare_files(left.fp, right.fp)
            if overlap:
                (n1, p1), (n2, p2) = left.own_passages(s1), right.own_passages(s2)
                shared[0], shared[1] = shared[0] + n1, shared[1] + n2
                slices[lang] = (p1, p2)
        fractions = tuple(min(s / c, 1.0) if c else 0.0 for s, c in zip(shared, covered))
        text = 0.0
        if "text" in prints[i] and "text" in prints[j]:
            left, right = prints[i]["text"], prints[j]["text"]
            overlap, _, (s1, s2) = compare_files(left.fp, right.fp)
            if overlap:
                (n1, p1), (n2, p2) = left.own_passages(s1), right.own_passages(s2)
                text = max(min(n1 / left.coverage, 1.0) if left.coverage else 0.0,
                           min(n2 / right.coverage, 1.0) if right.coverage else 0.0)
                slices["text"] = (p1, p2)
        pairs.append(Pair(works[i].name, works[j].name, works[i].lab, max(fractions), fractions, shared[0], text,
                          slices))
    closest: dict[str, Pair] = {}
    for pair in sorted(pairs, key=lambda p: (-p.score, p.a, p.b)):
        for name in (pair.a, pair.b):
            closest.setdefault(name, pair)
    listed = sorted((p for p in pairs if p.score >= threshold and p.shared >= MIN_SHARED),
                    key=lambda p: (-p.score, -p.shared, p.a, p.b))
    return listed, closest


@dataclass(frozen=True)
class Report:
    """A class's similarity report: per lab its listed pairs, each submission's closest, and the texts shown."""

    out: Path
    threshold: float
    names: bool
    pairs: dict[str, list[Pair]]
    closest: dict[str, dict[str, Pair]]
    works: dict[str, dict[str, Work]]
    aliases: dict[str, str]
    """Submission name -> what the report calls it (its name with ``names``, else a pseudonym)."""

    def shown(self, name: str) -> str:
        return self.aliases.get(name, name)


def alias(secret: bytes, lab: str, name: str) -> str:
    """A submission's pseudonym in ``lab``'s report: ``S`` and 8 hex digits of an HMAC keyed by the class's
    secret (the marking page's, :func:`grader.mark.state.pseudonym`), unrelated to the name."""
    from grader.mark import state

    return "S" + state.pseudonym(secret, f"similarity:{lab}", name)[:8]


def build(out: Path, *, labs: list[str] | None = None, names: bool = False,
          threshold: float = THRESHOLD, repo: Path | None = None, jobs: int = 1,
          mapper: Mapper | None = None) -> Report:
    """Compare the graded submissions of ``out`` (of ``labs``, default every lab it holds)."""
    from grader import REPO
    from grader.core import records as stored
    from grader.mark import store
    from util.labs import LABS

    records = stored.load_all(out)
    by_lab: dict[str, dict[str, Previous]] = {}
    for name, record in records.items():
        if record.result.lab in LABS and (not labs or record.result.lab in labs) and not record.retry:
            by_lab.setdefault(record.result.lab, {})[name] = record
    secret = b""
    if not names:
        with store.Store(out) as marks:  # the class's key, kept in marks.sqlite (made when absent)
            secret = marks.secret()
    pairs, closest, works, aliases = {}, {}, {}, {}
    for lab_name, group in by_lab.items():
        lab = LABS[lab_name]
        handout = Handout.of(lab, repo or REPO)
        lab_works = [read_work(out, name, record, lab, handout) for name, record in group.items()]
        pairs[lab_name], closest[lab_name] = compare(lab_works, handout, threshold=threshold, jobs=jobs, mapper=mapper)
        works[lab_name] = {w.name: w for w in lab_works}
        aliases.update({name: name if names else alias(secret, lab_name, name) for name in group})
    return Report(out, threshold, names, pairs, closest, works, aliases)


def closest_of(out: Path, lab: str) -> dict[str, tuple[str, float]] | None:
    """Submission -> (its closest match as the report names it, score), from ``similarity.json``; ``None``
    when no similarity report was made for ``lab`` in ``out`` (the gradebook then has no such columns)."""
    try:
        data = json.loads(class_file(out, JSON).read_text(encoding="utf-8"))
        found = data["labs"][lab]
        return {str(k): (str(v["match"]), float(v["score"])) for k, v in found.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write(report: Report) -> list[Path]:
    """Write ``similarity.csv``, ``similarity.json`` and ``similarity.html`` into the class folder."""
    from grader.report import similarity_page

    headers = ["lab", "a", "b", "score", "a shared", "b shared", "shared characters", "written answers"]
    rows = [[p.lab, report.shown(p.a), report.shown(p.b), round(p.score, 3), round(p.fractions[0], 3),
             round(p.fractions[1], 3), p.shared, round(p.text, 3)] for lab in report.pairs for p in report.pairs[lab]]
    labs = {lab: {name: {"match": report.shown(p.b if p.a == name else p.a), "score": round(p.score, 3)}
                  for name, p in sorted(found.items())} for lab, found in report.closest.items()}
    return [files.write_csv(class_file(report.out, CSV), headers, rows),
            files.write_text(class_file(report.out, JSON), json.dumps(
                {"threshold": report.threshold, "names": report.names, "labs": labs}, indent=1) + "\n"),
            similarity_page.write(class_file(report.out, HTML), report)]


def main(*, out: Path, labs: list[str] | None = None, names: bool = False, threshold: float = THRESHOLD,
         jobs: int = 1, mapper: Mapper | None = None) -> int:
    """``python -m grader similarity``: write the class's similarity report; 0 when written, 2 when there is
    nothing to compare. Rebuild the gradebooks (``python -m grader report``) to add its columns."""
    import sys

    report = build(out, labs=labs, names=names, threshold=threshold, jobs=jobs, mapper=mapper)
    if not report.works:
        print(f"grader: {out} holds no graded submission{' of ' + ', '.join(labs) if labs else ''}: run "
              f"`python -m grader grade ... --out {out}` first", file=sys.stderr)
        return 2
    write(report)
    for lab, found in report.pairs.items():
        print(f"{lab}: {len(report.works[lab])} submissions, {len(found)} pairs at or above {threshold:.0%}")
        for p in found[:10]:
            print(f"  {safe_text.terminal(report.shown(p.a), 80)} ~ {safe_text.terminal(report.shown(p.b), 80)}: "
                  f"{p.score:.0%} ({p.shared} characters of code shared)")
    print(f"\n{out}: {HTML}, {CSV} and {JSON} written; `python -m grader report --out {out}` adds each "
          "submission's closest match to its lab's gradebook. No grade changed.")
    return 0
