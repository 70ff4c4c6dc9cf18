"""The similarity report of a lab of 600 submissions (``python -m grader similarity``): how long it takes.

Makes N (``-n``) synthetic submissions of lab 13 in a scratch class folder (grading records written directly; nothing
is run): each task's cell taken at random from the course's solution, from one of two students' independent
solutions (``tests/independent_lab13.py``) or left as the handout's stub, then its names renamed, its functions
reordered, its comments and spacing changed at random (``tests/disguise.py``), and a written answer each. Then
times, in one process (copydetect runs in one), the report's parts:

* the comparison: every submission read and fingerprinted (the handout's code removed, in ``--jobs`` processes),
  every pair's shared fingerprints counted, each submission's closest compared in full;
* the files: ``similarity.html``, ``.csv`` and ``.json`` written.

Target: a lab of 600 within 5 minutes on 2 cores. Prints the load average: measure on a quiet machine.

    python benchmarks/bench_similarity.py [-n 600] [--seed 0] [-j 2]
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

import disguise  # noqa: E402
import independent_lab13 as independent  # noqa: E402
import nbformat  # noqa: E402

from grader.core import records  # noqa: E402
from grader.core.results import SubmissionResult, WrittenAnswer  # noqa: E402
from grader.report import similarity  # noqa: E402
from util.labs import LABS  # noqa: E402

TARGET_S = 300.0
WORDS = ("ring tree latency bandwidth chunk rank bucket gradient shard optimizer state memory pipeline bubble "
         "stage microbatch alpha beta bytes message").split()


def make_class(root: Path, n: int, seed: int) -> Path:
    """``n`` submissions of lab 13 under ``root``: the class folder's path."""
    lab = LABS["lab13"]
    handout = nbformat.read(REPO / "labs" / lab.notebook, as_version=4)
    solution = nbformat.read(REPO / "solutions" / lab.notebook, as_version=4)
    given = similarity.Handout.of(lab, REPO).cells
    rng = random.Random(seed)
    out = root / "class"
    for k in range(n):
        nb = nbformat.from_dict(dict(handout))
        nb.cells = [dict(c) for c in handout.cells]
        for i, cell in enumerate(nb.cells):
            text = cell["source"]
            if cell["cell_type"] != "code" or not text.startswith("def "):
                continue
            name = text[4:].split("(")[0]
            source = rng.choice(("solution", "a", "b", "stub"))
            if source == "solution":
                cell["source"] = solution.cells[i]["source"]
            elif source != "stub" and name in independent.CELLS[source]:
                cell["source"] = independent.CELLS[source][name]
        code = [c for c in nb.cells if c["cell_type"] == "code" and c["source"].strip() not in given]
        how = tuple(step for step in ("rename", "reorder", "recomment", "respace") if rng.random() < 0.5)
        for cell, text in zip(code, disguise.disguise([c["source"] for c in code], rng.randrange(1 << 30), how)):
            cell["source"] = text
        path = root / "submitted" / f"student{k:04d}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbformat.from_dict(nb), path)
        answer = " ".join(rng.choice(WORDS) for _ in range(60))
        records.save(out / path.stem, {"notebook": path.stem}, SubmissionResult(
            str(path), "lab13", (), 0.0, "completed", (), 2, (WrittenAnswer("13.Q1", answer),)), source=path)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=600, help="submissions (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", "-j", type=int, default=2, help="processes fingerprinting (default: %(default)s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_similarity_") as tmp:
        start = time.perf_counter()
        out = make_class(Path(tmp), args.n, args.seed)
        made = time.perf_counter() - start
        start = time.perf_counter()
        report = similarity.build(out, jobs=args.jobs)
        whole = time.perf_counter() - start
        start = time.perf_counter()
        similarity.write(report)
        written = time.perf_counter() - start
        page = (out / similarity.HTML).stat().st_size
    total = whole + written
    pairs, closest = report.pairs["lab13"], report.closest["lab13"]
    print(f"lab 13, {args.n} submissions ({args.n * (args.n - 1) // 2:,} pairs), -j {args.jobs}, load average "
          f"{os.getloadavg()[0]:.1f} (made in {made:.1f} s)")
    print(f"  read, fingerprinted and compared in {whole:.1f} s: {len(pairs)} pairs at or above "
          f"{similarity.THRESHOLD:.0%}, {len(closest)} submissions with a closest match")
    print(f"  files written in {written:.1f} s (page {page / 1e6:.1f} MB); in all {total:.1f} s, "
          f"{total / TARGET_S:.2f} of the {TARGET_S:.0f} s target")


if __name__ == "__main__":
    main()
