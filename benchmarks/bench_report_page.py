"""The class report page after one student is regraded: its plots are drawn once per distinct picture.

``report.html`` holds two plots per lab (the score histogram and the tasks' pass rates). Regrading one student
(``python -m grader grade ... --out`` on a class folder, or a dispute) rebuilds the page; the plots whose data
did not change are taken from a cache in the process (``report_page._histogram_png`` and ``_pass_rates_png``)
instead of being drawn again. Measured here, in one run, on a class folder (default: the example class CI's
main job writes, ``build/gradebook``; 63 submissions in 16 labs):

* cold: the page rendered with the cache empty (every lab's plots drawn);
* one regraded: the same class with one submission's score changed (its lab's histogram drawn again);
* unchanged: the page rendered again with nothing changed.

Prints each as the median of ``--repeat`` runs and the ratio cold / one regraded. Target: at least 3x.

    python benchmarks/bench_report_page.py [--out build/gradebook] [--repeat 5]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grader.report import class_folder, report_page  # noqa: E402
from grader.report.settings import Settings  # noqa: E402


def _clear() -> None:
    report_page._histogram_png.cache_clear()
    report_page._pass_rates_png.cache_clear()


def _regraded(book: class_folder.Book) -> class_folder.Book:
    """The book with one graded submission's status changed (as a regrade that fixed or broke it would): its
    lab's histogram differs, every other plot is the same."""
    rows = list(book.rows)
    index = next(i for i, r in enumerate(rows) if r.result is not None and r.status in report_page.COLOURS)
    statuses = list(report_page.COLOURS)
    status = statuses[(statuses.index(rows[index].status) + 1) % len(statuses)]
    rows[index] = dataclasses.replace(rows[index], status=status)
    return dataclasses.replace(book, rows=tuple(rows))


def _timed(book: class_folder.Book) -> float:
    """Seconds ``report_page.render`` takes on ``book``."""
    start = time.perf_counter()
    report_page.render(book)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "build" / "gradebook", help="a graded class folder")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    if not (args.out / "gradebook.csv").is_file():
        sys.exit(f"{args.out} holds no graded class: run `python -m grader grade grader/examples -j 2 --out "
                 f"{args.out}` first (README, 'Grade the example class')")
    book = class_folder.build(args.out, Settings.load(args.out))
    labs = len({r.lab for r in book.rows})
    cold, regraded, unchanged = [], [], []
    for _ in range(args.repeat):
        _clear()
        cold.append(_timed(book))
        other = _regraded(book)  # after the cold render: only that lab's histogram is drawn again
        regraded.append(_timed(other))
        unchanged.append(_timed(other))
    med = statistics.median
    print(f"class: {args.out} ({len(book.rows)} rows, {labs} labs); load average {os.getloadavg()[0]:.1f}; "
          f"median of {args.repeat}")
    print(f"  cold (every plot drawn)      {med(cold):7.3f} s")
    print(f"  one submission regraded      {med(regraded):7.3f} s")
    print(f"  nothing changed              {med(unchanged):7.3f} s")
    print(f"  cold / one regraded: {med(cold) / med(regraded):.1f}x (target: at least 3x)")


if __name__ == "__main__":
    main()
