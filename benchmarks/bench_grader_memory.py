"""The grader's own peak memory while grading one submission: a normal notebook and a hostile one.

Each submission is graded in a fresh process (``grade_submission``, sandbox and limits as
``python -m grader grade`` uses them); the number printed is that process's peak resident memory
(``ru_maxrss``): the grader alone, not the kernel, the message relay or the judge, which are
processes of their own, each under its own limit. Target: under 512 MiB whatever the submission does.

* normal: the first lab's solution notebook (``solutions/``), or with ``--tiny`` the test lab's
  two-line notebook;
* hostile: one notebook (the test lab's) that does everything at once: a 30 MiB source cell (just
  under the 32 MiB notebook limit), 200 MiB of prints, 50 MiB display messages, 200 displays and a
  900 KiB update of them all, 120 widget messages of 900 KiB, messages of 300 parts that point at
  one 1 MiB buffer (300 MiB each for the receiver), malformed messages, and 500 errors of 4 MiB.

    python benchmarks/bench_grader_memory.py [--tiny]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "tests" / "tinylab_labs"
TARGET = 512 << 20

HOSTILE = [
    "x = 1  # " + "y" * (30 << 20),
    "for _ in range(200):\n    print('x' * 2**20)",
    "for _ in range(4):\n    get_ipython().display_pub.publish({'text/plain': 'y' * (50 << 20)})",
    "from IPython.display import display, update_display\nfor _ in range(200):\n"
    "    display({'text/plain': 'small'}, raw=True, display_id='same')\n"
    "update_display({'text/plain': 'y' * (900 << 10)}, raw=True, display_id='same')",
    "k = get_ipython().kernel\nparent = k.get_parent()\nfor i in range(120):\n"
    "    k.session.send(k.iopub_socket, 'comm_open', {'comm_id': f'c{i}', 'target_name': 'jupyter.widget',\n"
    "                   'data': {'state': {'_model_name': 'x' * (900 << 10)}}}, parent=parent)\n"
    "buffer = b'x' * (1 << 20)\nfor _ in range(20):\n"
    "    k.session.send(k.iopub_socket, 'display_data', {'data': {}, 'metadata': {}}, parent=parent,\n"
    "                   buffers=[buffer] * 300)\n"
    "for _ in range(50):\n    k.session.send(k.iopub_socket, 'comm_msg', {'comm_id': 'c0'}, parent=parent)",
    "class E(Exception):\n    pass\nfor _ in range(500):\n"
    "    get_ipython().showtraceback((E, E('z' * (4 << 20)), None))",
    "from util.answers import write_answer, output_dir\nwrite_answer(output_dir('lab900'), '900.1', 41)\n"
    "write_answer(output_dir('lab900'), '900.2', 42)",
]


def _notebook(cells: list[str], path: Path) -> Path:
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    nb = new_notebook(cells=[new_markdown_cell("## Task 900.1: First (5 points)")] + [new_code_cell(c) for c in cells])
    nb.metadata["course"] = {"lab": "lab900"}
    nbformat.write(nb, str(path))
    return path


def measure(scenario: str) -> dict:
    """Grade one submission in this process; its peak RSS and how grading went."""
    import resource

    sys.path.insert(0, str(REPO))
    from grader.grade.submission import grade_submission
    from util.labs import get_lab

    with tempfile.TemporaryDirectory() as folder:
        if scenario == "normal":
            lab = get_lab(next(iter(__import__("util.labs", fromlist=["LABS"]).LABS)))
            path = REPO / "solutions" / lab.notebook
        else:
            lab = get_lab("lab900")
            path = _notebook(HOSTILE if scenario == "hostile" else HOSTILE[-1:], Path(folder) / "lab900.ipynb")
        size = path.stat().st_size
        start = time.monotonic()
        result = grade_submission(path, lab, Path(folder) / "out")
        return {"scenario": scenario, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss << 10,
                "seconds": time.monotonic() - start, "score": f"{result.score:g}/{result.max_score:g}",
                "status": result.execution_status, "notebook": size,
                "executed": (Path(folder) / "out" / "executed.ipynb").stat().st_size}


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--one":
        print(json.dumps(measure(sys.argv[2])))
        return
    with tempfile.TemporaryDirectory() as references:
        Path(references, "lab900.json").write_text(json.dumps(
            {"lab": "lab900", "answers": {"900.1": 41, "900.2": 42}, "cases": {}, "provenance": {}}))
        env = {**os.environ, "COURSE_LAB_DIRS": str(TINY), "COURSE_REFERENCE_DIR": references}
        rows = []
        for scenario in ("tiny" if "--tiny" in sys.argv else "normal", "hostile"):
            if scenario == "normal":  # the course's own references for the real lab
                one_env = {k: v for k, v in env.items() if k != "COURSE_REFERENCE_DIR"}
            else:
                one_env = env
            done = subprocess.run([sys.executable, __file__, "--one", scenario], capture_output=True, text=True,
                                  env=one_env, cwd=REPO)
            if done.returncode:
                sys.exit(f"{scenario}: the grading process failed:\n{done.stderr[-3000:]}")
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    mib = 1 << 20
    print(f"{'submission':<10} {'notebook':>10} {'executed':>10} {'score':>7} {'status':>10} {'seconds':>8} "
          f"{'grader peak RSS':>16}")
    for row in rows:
        print(f"{row['scenario']:<10} {row['notebook'] / mib:>8.1f} M {row['executed'] / mib:>8.1f} M "
              f"{row['score']:>7} {row['status']:>10} {row['seconds']:>8.1f} {row['peak'] / mib:>12.0f} MiB")
    worst = max(row["peak"] for row in rows)
    print(f"\nhighest grader peak: {worst / mib:.0f} MiB (target: under {TARGET / mib:.0f} MiB) -> "
          f"{'OK' if worst < TARGET else 'OVER'}; hostile/normal: {rows[1]['peak'] / rows[0]['peak']:.2f}")


if __name__ == "__main__":
    main()
