"""The class report: one self-contained HTML page (``report.html`` in the gradebook folder).

Open it in any browser, from the disk: no server, nothing fetched. Per lab: how the scores are
spread (a histogram), each task's pass rate (a bar chart) and mean, the most common failure of each
task, and every submission with its score, status and a link to the student's feedback
(``<submission>/feedback.html``, next to the page), with a column per written question (its marked
points, or ``to mark``) and, per question, how many answers are marked and how many are still to mark.
The pictures are drawn with matplotlib and embedded in the page as PNG data. Every text that comes from
a submission is HTML-escaped.
"""
from __future__ import annotations

import base64
import io
import statistics
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from urllib.parse import quote

from grader.core import files, safe_text
from grader.mark import state
from grader.report.gradebook import (
    ERRORS,
    FULL,
    NOT_SUBMITTED,
    PARTIAL,
    STATUSES,
    TO_MARK,
    UNGRADED,
    Row,
    written_value,
)

h = safe_text.html

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 72rem; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.plots { display: flex; flex-wrap: wrap; gap: 1rem 2rem; align-items: flex-end; }
figure { flex: 1 1 24rem; max-width: 36rem; margin: 0 0 1rem; } figure img { width: 100%; }
figcaption { color: #555; font-size: 0.9rem; } td.rate { white-space: nowrap; }
.bar { display: inline-block; height: 0.7rem; background: #4c78a8; vertical-align: middle; }
.full-marks { color: #1a7f37; } .partial { color: #9a6700; } .errors, .ungraded { color: #b42318; }
.not-submitted { color: #777; } .to-mark, td.pending { color: #8250df; }
"""

COLOURS = {FULL: "#1a7f37", PARTIAL: "#d4a72c", ERRORS: "#b42318", TO_MARK: "#8250df", UNGRADED: "#6e7781"}


def _png(figure) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def histogram(rows: list[Row], lab: str) -> str:
    """PNG (base64) of the lab's percent scores in 10-point bins, stacked by status."""
    counts = tuple((status, tuple(sum(r.status == status and min(int(r.percent // 10), 9) == b for r in rows)
                                  for b in range(10))) for status in COLOURS)
    return _histogram_png(lab, counts)


@lru_cache(maxsize=256)
def _histogram_png(lab: str, counts: tuple[tuple[str, tuple[int, ...]], ...]) -> str:
    """Drawn once per distinct picture in a process: regrading one student redraws only that lab's plots."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.2, 3.0))
    axes = figure.add_subplot()
    edges = list(range(0, 101, 10))
    bottom = [0] * 10
    for status, bins in counts:
        axes.bar(edges[:-1], bins, width=9.2, align="edge", bottom=bottom, color=COLOURS[status], label=status)
        bottom = [b + c for b, c in zip(bottom, bins)]
    axes.set_xlim(0, 100)
    axes.set_xticks(edges)
    axes.set_xlabel("score (% of the lab's points, after penalties)")
    axes.set_ylabel("submissions")
    axes.yaxis.get_major_locator().set_params(integer=True)
    axes.set_title(f"{lab}: score distribution")
    axes.legend(fontsize=8, loc="upper left")
    figure.tight_layout()
    return _png(figure)


def pass_rates(task_stats: list, lab: str) -> str:
    """PNG (base64) of each task's pass rate, as horizontal bars."""
    labels = tuple(f"{s.task_id} {s.title if len(s.title) <= 24 else s.title[:23] + '…'}" for s in task_stats)[::-1]
    rates = tuple(100 * s.pass_rate for s in task_stats)[::-1]
    return _pass_rates_png(lab, labels, rates)


@lru_cache(maxsize=256)
def _pass_rates_png(lab: str, labels: tuple[str, ...], rates: tuple[float, ...]) -> str:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(5.6, 0.45 * len(labels) + 1.2))
    axes = figure.add_subplot()
    axes.barh(list(labels), list(rates), color="#4c78a8")
    for y, rate in enumerate(rates):
        axes.text(min(rate + 1, 88), y, f"{rate:.0f}%", va="center", fontsize=8)
    axes.set_xlim(0, 100)
    axes.set_xlabel("% of submissions with every point")
    axes.set_title(f"{lab}: pass rate per task")
    figure.tight_layout()
    return _png(figure)


def _cls(status: str) -> str:
    return status.replace(" ", "-")


def _lab_section(lab: str, rows: list[Row], task_stats: list) -> str:
    graded = [r for r in rows if r.status != NOT_SUBMITTED]
    percents = [r.percent for r in graded if r.status != UNGRADED]
    counts = {s: sum(r.status == s for r in rows) for s in STATUSES}
    late = sum(bool(r.late and r.late.days) for r in graded)
    summary = (f"{len(graded)} submissions" + (f", {counts[NOT_SUBMITTED]} students without one" if counts[NOT_SUBMITTED]
                                               else "")
               + (f"; mean {statistics.mean(percents):.1f}%, median {statistics.median(percents):.1f}%" if percents else "")
               + "; " + ", ".join(f"{counts[s]} {s}" for s in (FULL, PARTIAL, ERRORS, TO_MARK, UNGRADED))
               + f"; {late} late")
    parts = [f"<section id=\"{h(lab)}\"><h2>{h(lab)}</h2>", f"<p class=\"summary\">{h(summary)}</p>"]
    plots = []
    if graded:
        plots.append(f"<figure><img class=\"plot\" alt=\"{h(lab)} score distribution\" "
                     f"src=\"data:image/png;base64,{histogram(graded, lab)}\"><figcaption>How the scores spread "
                     "(stacked by status)</figcaption></figure>")
    if task_stats:
        plots.append(f"<figure><img class=\"plot\" alt=\"{h(lab)} pass rate per task\" "
                     f"src=\"data:image/png;base64,{pass_rates(task_stats, lab)}\"><figcaption>Pass rate per task"
                     "</figcaption></figure>")
    if plots:
        parts.append("<div class=\"plots\">" + "".join(plots) + "</div>")
    if task_stats:
        parts.append("<table class=\"tasks\"><tr><th>task</th><th>title</th><th>mean</th><th>max</th>"
                     "<th>pass rate</th><th>most common failure</th><th>count</th></tr>" + "".join(
                         f"<tr><td>{h(s.task_id)}</td><td>{h(s.title)}</td><td class=\"num\">{s.mean:.2f}</td>"
                         f"<td class=\"num\">{s.max_score:g}</td><td class=\"rate\"><span class=\"bar\" style=\"width:"
                         f"{4 * s.pass_rate:.2f}rem\"></span> {100 * s.pass_rate:.0f}%</td>"
                         f"<td>{h(s.common_failure, 400)}</td><td class=\"num\">{s.common_failure_count}</td></tr>"
                         for s in task_stats) + "</table>")
    questions = list(dict.fromkeys(w.question.id for r in graded for w in r.written if w.question.points))
    if questions:
        parts.append("<table class=\"written\"><tr><th>written question</th><th>marked</th><th>to mark</th>"
                     "<th>to re-mark</th><th>no answer</th><th>mean of the marked</th></tr>" + "".join(
                         _question_row(q, [w for r in graded for w in r.written if w.question.id == q])
                         for q in questions) + "</table>")
    with_students = any(r.student for r in rows)
    head = "<tr><th>submission</th>" + ("<th>student</th>" if with_students else "") + "".join(
        f"<th>{h(q)}</th>" for q in questions) + (
        "<th>total</th><th>max</th><th>%</th><th>status</th><th>late</th><th>problems</th></tr>")
    body = []
    for r in rows:
        asked = {w.question.id: w for w in r.written}
        marks = "".join(f"<td class=\"num{' pending' if q in asked and asked[q].pending else ''}\">"
                        f"{h(written_value(asked.get(q)))}</td>" for q in questions)
        name = h(r.submission, safe_text.LIMIT_NAME)
        link = f"<a href=\"{quote(r.submission)}/feedback.html\">{name}</a>" if r.submission else "-"
        student = (f"<td>{h(r.student.name or r.student.student_id) if r.student else ''}</td>"
                   if with_students else "")
        body.append(f"<tr><td>{link}</td>{student}{marks}<td class=\"num\">{r.total:g}</td>"
                    f"<td class=\"num\">{r.max_score:g}</td><td class=\"num\">{r.percent:g}</td>"
                    f"<td class=\"{_cls(r.status)}\">{h(r.status)}</td>"
                    f"<td>{f'{r.late.days} d, -{r.late.penalty:g}' if r.late and r.late.days else ''}</td>"
                    f"<td>{h(r.problems)}</td></tr>")
    parts.append("<table class=\"students\">" + head + "".join(body) + "</table></section>")
    return "\n".join(parts)


def _question_row(question: str, answers: list) -> str:
    counts = {s: sum(w.state == s for w in answers) for s in state.STATES}
    scored = [w.points for w in answers if w.points is not None and w.state in (state.MARKED, state.TO_REMARK)]
    mean = f"{statistics.mean(scored):.2f} of {answers[0].question.points:g}" if scored else "-"
    return (f"<tr><td>{h(question)}</td><td class=\"num\">{counts[state.MARKED]}</td>"
            f"<td class=\"num pending\">{counts[state.TO_MARK]}</td><td class=\"num pending\">{counts[state.TO_REMARK]}</td>"
            f"<td class=\"num\">{counts[state.UNANSWERED]}</td><td class=\"num\">{h(mean)}</td></tr>")


def render(book) -> str:
    """The whole page for a :class:`grader.report.class_folder.Book`."""
    labs = list(dict.fromkeys(r.lab for r in book.rows))
    now = datetime.now(timezone.utc).astimezone().strftime("%Y-%m-%d %H:%M %Z")
    parts = ["<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Class report</title>"
             f"<style>{STYLE}</style></head><body>", "<h1>Class report</h1>",
             f"<p>{h(str(book.out))}: {sum(r.status != NOT_SUBMITTED for r in book.rows)} submissions in "
             f"{len(labs)} lab{'s' if len(labs) != 1 else ''}, made {h(now)}. Settings: {h(book.settings.describe())}."
             " Scores include manual overrides, the marks of written answers and late penalties; task statistics are the "
             "autograder's own.</p>"]
    if book.problems:
        parts.append("<p>Problems with the instructor's files:</p><ul>"
                     + "".join(f"<li>{h(p)}</li>" for p in book.problems) + "</ul>")
    parts.append("<nav>" + " · ".join(f"<a href=\"#{h(lab)}\">{h(lab)}</a>" for lab in labs) + "</nav>")
    for lab in labs:
        parts.append(_lab_section(lab, [r for r in book.rows if r.lab == lab],
                                  [s for s in book.stats if s.lab == lab]))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write(path: Path, book) -> Path:
    """Write the page to ``path``; returns ``path``."""
    return files.write_text(path, render(book))
