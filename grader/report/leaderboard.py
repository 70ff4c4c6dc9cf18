"""``python -m grader leaderboard CLASS_FOLDER``: a class ranked on a figure the grader measured itself.

A lab may declare one figure worth competing on (:class:`util.contract.Leaderboard`: a kernel's speed-up over
the naive one, say). The figure is never what a student's notebook says: it is a fact the lab's judge
measured in the grader's own processes while judging the saved file (``facts.json`` in each submission's
result folder, :mod:`grader.grade.submission`). This module reads those facts for every graded submission of
the class folder, ranks them, and writes ``leaderboard_<lab>.html`` (a static page, every text escaped) and
``leaderboard_<lab>.csv``.

* **Anonymous**: each submission is shown by a nickname drawn from a random secret kept in the class folder
  (``leaderboard.json``): stable from one run to the next, unguessable from a student's name.
* **Noise-controlled**: two figures rank apart only when they differ by more than the measurement's band
  (the declared factor, or each entry's own measured noise): entries within it share a rank, so a rerun
  cannot reorder students on noise alone.
* Only submissions whose case passed are ranked (``only_passed``): a fast kernel with wrong results ranks
  nowhere.
"""
from __future__ import annotations

import csv
import hashlib
import html
import io
import json
import math
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path

from grader.core import files
from grader.core import records as stored_records
from grader.core.namespace import class_file
from util.contract import Lab, Leaderboard
from util.labs import LABS

SECRET = "leaderboard.json"
"""Class file holding the secret the nicknames are drawn from."""
FACTS = "facts.json"
"""A submission's facts (written by :mod:`grader.grade.submission`)."""
ADJECTIVES = ("amber", "bold", "brisk", "calm", "clever", "crisp", "daring", "eager", "fleet", "gentle", "golden",
              "keen", "lively", "lucid", "mellow", "nimble", "quiet", "rapid", "sly", "steady", "swift", "tidy",
              "vivid", "witty")
ANIMALS = ("badger", "bison", "crane", "dingo", "eagle", "ferret", "gecko", "heron", "ibex", "jackal", "koala",
           "lemur", "marten", "newt", "ocelot", "otter", "panda", "quail", "raven", "shrew", "tapir", "viper",
           "walrus", "yak")


@dataclass(frozen=True)
class Entry:
    """One ranked submission."""

    nickname: str
    value: float
    band: float
    """The factor within which this figure ties with another (>= 1)."""
    rank: int
    tied: bool
    """True when it shares its rank with another entry."""


def _secret(out: Path) -> bytes:
    path = class_file(out, SECRET)
    try:
        return bytes.fromhex(json.loads(path.read_text(encoding="utf-8"))["secret"])
    except (OSError, ValueError, KeyError, TypeError):
        secret = secrets.token_bytes(32)
        files.write_text(path, json.dumps({"secret": secret.hex()}) + "\n")
        return secret


def nickname(secret: bytes, name: str, taken: set[str]) -> str:
    """A stable, anonymous name for submission ``name`` (an adjective and an animal, numbered when taken)."""
    digest = hashlib.sha256(secret + b"\0" + name.encode("utf-8", "surrogatepass")).digest()
    base = f"{ADJECTIVES[digest[0] % len(ADJECTIVES)]} {ANIMALS[digest[1] % len(ANIMALS)]}"
    candidate, number = base, 2
    while candidate in taken:
        candidate, number = f"{base} {number}", number + 1
    taken.add(candidate)
    return candidate


def figure(board: Leaderboard, facts: dict, checks: dict[str, str]) -> tuple[float, float] | None:
    """``(value, band)`` of one submission from its facts (task id -> case id -> facts) and its checks' statuses
    (case id -> status): the geometric mean of the figure over the cases whose facts hold it (a speed-up over
    several sizes), and the widest of their bands; ``None`` when no case has it, or when one of them did not
    pass and only passed ones rank, or a figure is not a positive finite number."""
    values, bands = [], [1.0]
    for case_id, found in (facts.get(board.task) or {}).items():
        if not isinstance(found, dict) or board.fact not in found:
            continue
        if board.only_passed and checks.get(case_id) != "passed":
            return None
        value = found[board.fact]
        band = found.get(board.band, 1.0) if isinstance(board.band, str) else board.band
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0
                   for x in (value, band)):
            return None
        values.append(float(value))
        bands.append(float(band))
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values)), max(bands)


def rank(figures: list[tuple[str, float, float]], board: Leaderboard) -> list[Entry]:
    """Entries best first from ``(nickname, value, band)``: an entry starts a new rank only when it is beyond
    the band of the first entry of the rank above (the larger of the two bands), else it shares that rank."""
    ordered = sorted(figures, key=lambda f: (-f[1] if board.higher_is_better else f[1], f[0]))
    entries: list[Entry] = []
    leader: tuple[str, float, float] | None = None
    rank_now = 0
    for position, (name, value, band) in enumerate(ordered, start=1):
        apart = leader is None
        if leader is not None:
            low, high = sorted((abs(leader[1]), abs(value)))
            ratio = math.inf if low == 0 else high / low
            apart = ratio > max(leader[2], band) or (leader[1] >= 0) != (value >= 0)
        if apart:
            leader, rank_now = (name, value, band), position
        entries.append(Entry(name, value, band, rank_now, False))
    counts = {e.rank: sum(x.rank == e.rank for x in entries) for e in entries}
    return [Entry(e.nickname, e.value, e.band, e.rank, counts[e.rank] > 1) for e in entries]


def build(out: Path, lab: Lab) -> list[Entry]:
    """The ranked entries of ``lab`` in the class folder ``out``."""
    board = lab.leaderboard
    if board is None:
        raise ValueError(f"{lab.name} declares no leaderboard")
    secret, taken, figures = _secret(out), set(), []
    for name, record in sorted(stored_records.load_all(out).items()):
        if record.result.lab != lab.name:
            continue
        try:
            facts = json.loads((out / name / FACTS).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        task = next((t for t in record.result.tasks if t.task_id == board.task), None)
        found = figure(board, facts, {c.name: c.status for c in task.checks} if task else {})
        if found is not None:
            figures.append((nickname(secret, name, taken), *found))
    return rank(figures, board)


def page(lab: Lab, entries: list[Entry]) -> str:
    """The static page: every text escaped, no script, nothing fetched."""
    board = lab.leaderboard
    rows = "".join(
        f"<tr><td>{'=' if e.tied else ''}{e.rank}</td><td>{html.escape(e.nickname)}</td>"
        f"<td>{e.value:.4g}{html.escape(board.unit)}</td><td>within {100 * (e.band - 1):.0f} %</td></tr>"
        for e in entries)
    better = "higher" if board.higher_is_better else "lower"
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><meta http-equiv='Content-Security-Policy' "
            "content=\"default-src 'none'; style-src 'unsafe-inline'\"><title>"
            f"{html.escape(lab.name)} leaderboard</title><style>body{{font-family:sans-serif;margin:2em}}"
            "table{border-collapse:collapse}td,th{padding:4px 12px;border-bottom:1px solid #ccc}</style></head><body>"
            f"<h1>{html.escape(lab.title)}: {html.escape(board.title)}</h1>"
            f"<p>Measured by the grader, in its own processes ({better} is better). Figures within a measurement's "
            "band share a rank (=): a difference smaller than the noise is not a difference.</p>"
            f"<table><tr><th>rank</th><th>who</th><th>{html.escape(board.title)}</th><th>band</th></tr>{rows}</table>"
            f"<p>{len(entries)} ranked.</p></body></html>\n")


def write(out: Path, lab: Lab) -> tuple[Path, list[Entry]]:
    """Write ``leaderboard_<lab>.html`` and ``.csv``; return the page's path and the entries."""
    entries = build(out, lab)
    path = class_file(out, f"leaderboard_{lab.name}.html")
    files.write_text(path, page(lab, entries))
    table = io.StringIO()
    writer = csv.writer(table)
    writer.writerow(["rank", "tied", "nickname", "value", "band"])
    writer.writerows([e.rank, e.tied, e.nickname, e.value, e.band] for e in entries)
    files.write_text(class_file(out, f"leaderboard_{lab.name}.csv"), table.getvalue())
    return path, entries


def main(*, out: Path, labs: list[str] | None = None) -> int:
    """``python -m grader leaderboard``: every lab of the class (or those named) that declares one."""
    chosen = [LABS[name] for name in labs] if labs else [lab for lab in LABS.values() if lab.leaderboard]
    if not chosen:
        print("leaderboard: no lab declares a leaderboard", file=sys.stderr)
        return 1
    status = 0
    for lab in chosen:
        if lab.leaderboard is None:
            print(f"leaderboard: {lab.name} declares no leaderboard", file=sys.stderr)
            status = 1
            continue
        path, entries = write(out, lab)
        print(f"leaderboard: {lab.name}: {len(entries)} ranked -> {path}")
    return status
