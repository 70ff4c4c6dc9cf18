"""The two timings the benchmarks compare, written once.

* :func:`plain_run`: what a student's "Run all" costs (nbclient executes the notebook, nothing else);
* :func:`graded_run`: ``grader grade`` of a solution (execution, hidden cases, scoring, result
  files); it stops the benchmark if the solution does not get full marks;

and :func:`print_rows`, the table every lab's benchmark prints with its graded time against the target, and
:func:`make_class`, the class of submissions the class and cluster benchmarks grade.
"""
from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import nbformat  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

from grader.execute.scratch import kernel_env  # noqa: E402
from grader.grade.submission import grade_submission  # noqa: E402
from util.labs import get_lab  # noqa: E402


def plain_run(path: Path) -> float:
    """Seconds nbclient takes to execute the notebook at ``path`` in a scratch folder."""
    nb = nbformat.read(str(path), as_version=4)
    with tempfile.TemporaryDirectory() as scratch:
        start = time.perf_counter()
        NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": scratch}}).execute(
            env=kernel_env(Path(scratch) / "answers"))
        return time.perf_counter() - start


def graded_run(path: Path, lab_name: str, sandbox: bool | None = None) -> float:
    """Seconds ``grade_submission`` takes on the solution at ``path``; exits unless it gets full marks."""
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        result = grade_submission(path, get_lab(lab_name), Path(out), sandbox=sandbox)
        seconds = time.perf_counter() - start
    if result.score != result.max_score:
        sys.exit(f"the solution scored {result.score}/{result.max_score}; fix that before benchmarking")
    return seconds


def print_rows(rows: dict[str, float], graded: str, target: float) -> None:
    """Print ``rows`` (label -> seconds) as a table, then ``rows[graded]`` as a fraction of ``target`` seconds."""
    width = max(map(len, rows))
    for label, seconds in rows.items():
        print(f"{label:<{width}}  {seconds:7.2f} s")
    print(f"\ngraded wall time / {target:.0f} s target: {rows[graded] / target:.2f} (<= 1.00 meets the target)")


def make_class(lab_name: str, folder: Path, count: int) -> None:
    """``count`` submissions in ``folder``: the lab's example submissions, topped up with copies of the solution."""
    lab = get_lab(lab_name)
    examples = sorted((REPO / "grader" / "examples" / lab_name).glob("*.ipynb"))[:count]
    sources = examples + [REPO / "solutions" / lab.notebook] * (count - len(examples))
    for i, source in enumerate(sources):
        (folder / f"student{i:02d}").mkdir(parents=True)
        shutil.copy(source, folder / f"student{i:02d}" / Path(lab.notebook).name)
