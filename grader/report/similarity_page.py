"""The similarity report's page: ``similarity.html`` in the class folder (:mod:`grader.report.similarity`).

Per lab, the pairs whose shared fraction reaches the threshold, ranked; each pair side by side, its shared
passages marked. Every text from a submission (code, answers, names) is escaped (:func:`grader.core.safe_text.html`)
and the page forbids every script and every fetch (its Content-Security-Policy): a notebook holding
``<script>`` shows it as text.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from grader.core import files, safe_text

SHOWN = 100
"""Pairs shown side by side per lab (the CSV lists all of them)."""
POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
PARTS = {"python": "code cells", "cpp": "C++ files", "text": "written answers (as compared: lower case, words only)"}

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 90rem; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.side { display: grid; grid-template-columns: 1fr 1fr; gap: 0.5rem; }
pre { background: #fafafa; border: 1px solid #ddd; padding: 0.5rem; overflow: auto; max-height: 40rem;
      font-size: 0.8rem; white-space: pre-wrap; word-break: break-word; }
mark { background: #ffd84d; } details { margin: 0.3rem 0 1rem; } .note { color: #555; }
"""


def marked(text: str, slices: np.ndarray | None) -> str:
    """``text`` HTML-escaped, the passages ``slices`` (a 2xN array of start and end offsets) in ``<mark>``."""
    h = safe_text.html
    if slices is None or len(slices) == 0 or np.size(slices) == 0:
        return h(text, len(text) + 64)
    out, at = [], 0
    for start, end in sorted(zip(np.asarray(slices[0]).tolist(), np.asarray(slices[1]).tolist())):
        start, end = max(int(start), at), min(int(end), len(text))
        if end <= start:
            continue
        out += [h(text[at:start], len(text) + 64), "<mark>", h(text[start:end], len(text) + 64), "</mark>"]
        at = end
    out.append(h(text[at:], len(text) + 64))
    return "".join(out)


def _pair(report, pair, rank: int) -> str:
    h = safe_text.html
    a, b = report.works[pair.lab][pair.a], report.works[pair.lab][pair.b]
    parts = [f"<details id=\"{h(pair.lab)}-{rank}\"><summary>{rank}. {h(report.shown(pair.a))} ~ "
             f"{h(report.shown(pair.b))}: {pair.score:.0%} of the code</summary>"]
    for part, title in PARTS.items():
        left, right = a.parts.get(part, ""), b.parts.get(part, "")
        if not left and not right:
            continue
        s1, s2 = pair.slices.get(part, (None, None))
        parts.append(f"<h4>{h(title)}</h4><div class=\"side\"><pre>{marked(left, s1)}</pre>"
                     f"<pre>{marked(right, s2)}</pre></div>")
    return "".join(parts) + "</details>"


def _lab(report, lab: str) -> str:
    h = safe_text.html
    pairs = report.pairs[lab]
    head = (f"<section id=\"{h(lab)}\"><h2>{h(lab)}</h2><p>{len(report.works[lab])} submissions compared; "
            f"{len(pairs)} pair{'s' if len(pairs) != 1 else ''} share at least {report.threshold:.0%} of one side's "
            "own code.</p>")
    if not pairs:
        return head + "</section>"
    rows = "".join(
        f"<tr><td class=\"num\">{i}</td><td><a href=\"#{h(lab)}-{i}\">{h(report.shown(p.a))}</a></td>"
        f"<td>{h(report.shown(p.b))}</td><td class=\"num\">{p.score:.0%}</td>"
        f"<td class=\"num\">{p.fractions[0]:.0%} / {p.fractions[1]:.0%}</td><td class=\"num\">{p.shared}</td>"
        f"<td class=\"num\">{p.text:.0%}</td></tr>" for i, p in enumerate(pairs, 1))
    table = ("<table><tr><th>#</th><th>submission</th><th>submission</th><th>score</th><th>shared of each</th>"
             "<th>characters shared</th><th>written answers</th></tr>" + rows + "</table>")
    shown = "".join(_pair(report, p, i) for i, p in enumerate(pairs[:SHOWN], 1))
    more = (f"<p class=\"note\">{len(pairs) - SHOWN} more pairs are in similarity.csv.</p>"
            if len(pairs) > SHOWN else "")
    return head + table + shown + more + "</section>"


def render(report) -> str:
    """The whole page for a :class:`grader.report.similarity.Report`."""
    h = safe_text.html
    now = datetime.now(timezone.utc).astimezone().strftime("%Y-%m-%d %H:%M %Z")
    labs = list(report.works)
    return "\n".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{POLICY}\">"
        f"<title>Similarity report</title><style>{STYLE}</style></head><body>",
        "<h1>Which submissions share their code</h1>",
        f"<p>{h(str(report.out))}, made {h(now)}. Each submission's own code (its code cells and support files, the "
        "handout's code removed) compared pairwise by copydetect (winnowing, as MOSS): names, comments and spacing "
        "do not count, so renamed variables and reordered functions still match. A score is the larger of the two "
        "fractions of a side's own code found in the other. Written answers are compared as text, their own figure. "
        + ("Submissions are named." if report.names else "Submissions are shown under pseudonyms "
           "(<code>--names</code> names them).")
        + " <strong>It changes no grade</strong>: it points at what to read; a high score is a reason to look, "
        "never proof.</p>",
        "<nav>" + " · ".join(f"<a href=\"#{h(lab)}\">{h(lab)}</a>" for lab in labs) + "</nav>",
        *[_lab(report, lab) for lab in labs],
        "</body></html>\n"])


def write(path: Path, report) -> Path:
    """Write the page to ``path``; returns ``path``."""
    return files.write_text(path, render(report))
