"""Marking written answers, measured: the page by keyboard in Chromium, and a class's files rebuilt with marks.

1. Page latency: a class of 50 lab 10 submissions, each with an answer to 10.Q4 (about 60 words); the
   marking page served by ``python -m grader mark``'s server, opened in headless Chromium (the course's
   webdriver), and every answer marked by keyboard: ``1``, ``2``, ``Enter``. Per answer, the time from the
   ``Enter`` key to the next answer on screen, measured in the page (a key listener and a mutation
   observer added by this script, nothing in the page itself), and the wall time per answer as the
   WebDriver client sees it (a TA's round trip, key events included). Target: under 100 ms per answer.
2. Gradebook rebuild: a class of 600 lab 10 submissions, every written answer marked (600 x 7 marks),
   rebuilt as ``python -m grader report`` does it: the records and marks read and scored
   (``class_folder.build``) and every file written (``class_folder.write``: gradebooks, statistics, 600
   feedback pages in two formats, report.html). Target: the build under 5 s on 2 cores.

    python benchmarks/bench_marking.py [--answers 50] [--class-size 600]

Needs Chromium and chromedriver for part 1 (``.ci/run`` installs them); prints the load average: measure on
a quiet machine.
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from grader.core import records  # noqa: E402
from grader.core.results import CheckResult, SubmissionResult, TaskResult, WrittenAnswer  # noqa: E402
from grader.mark.api import Desk  # noqa: E402
from grader.mark.server import MarkingServer  # noqa: E402
from grader.mark.store import Mark, Store  # noqa: E402
from grader.report import class_folder  # noqa: E402
from grader.report.settings import Settings  # noqa: E402
from util.labs import get_lab, rubrics  # noqa: E402

LAB = get_lab("lab10")
QUESTION = "10.Q4"
WORDS = ("the linears and the head cost the same per token because every token goes through every weight matrix "
         "once while attention grows with the position since the query meets every cached key and value").split()


def _answer(rng: random.Random, words: int = 60) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def _result(rng: random.Random) -> SubmissionResult:
    tasks = tuple(TaskResult(t.id, t.title, (CheckResult("answer", "passed", t.answer_points, t.answer_points, ""),)
                             + tuple(CheckResult(c.id, "passed", c.points, c.points, "", c.hidden) for c in t.cases))
                  for t in LAB.tasks)
    written = tuple(WrittenAnswer(q.id, _answer(rng) if q.points else "") for q in LAB.written)
    return SubmissionResult("lab10_transformer_costs.ipynb", LAB.name, tasks, 11.0, "completed", (), LAB.release,
                            written)


def make_class(out: Path, size: int, seed: int = 0) -> None:
    """``size`` graded lab 10 records in ``out``, as ``grade`` stores them."""
    rng = random.Random(seed)
    for k in range(size):
        name = f"student{k:04d}"
        (out / name).mkdir(parents=True)
        key = {"lab": LAB.name, "submission": f"s{k}", "references": "r", "grader": "g", "limits": "l"}
        records.save(out / name, key, _result(rng), source=out.parent / "class" / name / "lab10.ipynb")


def _browser(profile: Path):
    import webdriver

    port = webdriver._free_port()
    driver = subprocess.Popen([str(webdriver.CHROMEDRIVER), f"--port={port}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    web = webdriver.WebDriver(f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + 30
    while True:
        try:
            if web.call("GET", "/status")["ready"]:
                break
        except OSError:
            pass
        if time.monotonic() > deadline:
            sys.exit("chromedriver did not start")
        time.sleep(0.1)
    options = {"binary": str(webdriver.CHROMIUM), "args": [*webdriver.CHROMIUM_FLAGS, f"--user-data-dir={profile}"]}
    web.session = web.call("POST", "/session", {"capabilities": {"alwaysMatch": {
        "browserName": "chrome", "goog:chromeOptions": options}}})["sessionId"]
    return web, driver


PROBE = """
window.benchLatencies = []; let pressed = null;
document.addEventListener('keydown', (e) => { if (e.key === 'Enter') pressed = performance.now(); }, true);
new MutationObserver(() => { if (pressed !== null) { window.benchLatencies.push(performance.now() - pressed);
                                                     pressed = null; } })
  .observe(document.body, {attributes: true, attributeFilter: ['data-answer']});
"""


def page_latency(answers: int) -> None:
    import webdriver

    if not (webdriver.CHROMIUM.exists() and webdriver.CHROMEDRIVER.exists()):
        print("page latency: skipped (needs chromium and chromedriver)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        make_class(out, answers)
        with Store(out) as store:
            server = MarkingServer(Desk(out, store, "bench"))
            threading.Thread(target=server.serve_forever, daemon=True).start()
            web, driver = _browser(Path(tmp) / "profile")
            try:
                web.open(server.url + f"#question={QUESTION}")
                while not web.script("return document.body.dataset.ready === '1'"):
                    time.sleep(0.05)
                web.script(PROBE)
                walls = []
                for _ in range(answers):
                    before = web.script("return document.body.dataset.answer")
                    start = time.perf_counter()
                    keys = [step for key in ("1", "2", "\ue007") for step in ({"type": "keyDown", "value": key},
                                                                            {"type": "keyUp", "value": key})]
                    web.call("POST", f"/session/{web.session}/actions",
                             {"actions": [{"type": "key", "id": "kb", "actions": keys}]})
                    while web.script("return document.body.dataset.answer") == before and len(walls) < answers - 1:
                        time.sleep(0.002)
                    walls.append(time.perf_counter() - start)
                while len(store.marks(QUESTION)) < answers:  # the last save, still on its way
                    time.sleep(0.01)
                latencies = web.script("return window.benchLatencies")
            finally:
                web.call("DELETE", f"/session/{web.session}")
                os.killpg(driver.pid, signal.SIGTERM)
                driver.wait(timeout=30)
                server.shutdown()
                server.server_close()
            marked = len(store.marks(QUESTION))
    print(f"page: {answers} answers of {QUESTION} marked by keyboard (1, 2, Enter); {marked} marks stored")
    print(f"  Enter -> next answer on screen (in the page): median {statistics.median(latencies):.1f} ms, "
          f"90th percentile {sorted(latencies)[int(0.9 * (len(latencies) - 1))]:.1f} ms, max {max(latencies):.1f} ms "
          f"over {len(latencies)} moves")
    print(f"  per answer, keys sent to next answer seen by the WebDriver client: median "
          f"{1000 * statistics.median(walls):.1f} ms, total {sum(walls):.2f} s")


def rebuild(size: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        start = time.perf_counter()
        make_class(out, size)
        made = time.perf_counter() - start
        lab_rubrics = rubrics(LAB)
        rng = random.Random(1)
        with Store(out) as store:
            start = time.perf_counter()  # the answers' hashes from the records, then one transaction
            marks = []
            for name, record in records.load_all(out).items():
                for answer in record.result.written:
                    rubric = lab_rubrics.get(answer.question)
                    if rubric is not None:
                        items = tuple(i.id for i in rubric.items if rng.random() < 0.6)
                        marks.append((Mark(name, answer.question, answer.sha256, items, 0, "", "bench"), 0))
            store.save_all(marks)
            stored = time.perf_counter() - start
        timings = []
        for _ in range(2):
            start = time.perf_counter()
            book = class_folder.build(out, Settings())
            built = time.perf_counter() - start
            start = time.perf_counter()
            class_folder.write(book)
            timings.append((built, time.perf_counter() - start))
        to_mark = sum(len(r.to_mark) for r in book.rows)
    built, written = min(timings)
    print(f"rebuild: a class of {size} lab 10 submissions, {len(marks)} marks ({to_mark} answers left to mark); "
          f"made in {made:.1f} s, marks stored in one transaction in {stored:.2f} s")
    print(f"  class_folder.build (records and marks read, scored): {built:.2f} s (target 5 s: {built / 5:.2f})")
    print(f"  class_folder.write (gradebooks, statistics, {2 * size} feedback files, report.html): {written:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--answers", type=int, default=50)
    parser.add_argument("--class-size", type=int, default=600)
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    page_latency(args.answers)
    rebuild(args.class_size)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
