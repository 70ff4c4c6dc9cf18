"""The marks of written answers: one SQLite file in the class folder, written in transactions.

``<class folder>/marks.sqlite`` holds one row per mark, keyed by the submission (its folder's name in the
class folder), the question (``10.Q6``) and the SHA-256 of the answer's text as the grader received it.
A row keeps the ids of the rubric items applied, a free adjustment, a comment, who marked it (never shown
to students) and when, and a version that grows with each change.

Several markers at once (pages of one server, or several ``grader mark`` processes on one folder) lose
nothing: every write is one ``BEGIN IMMEDIATE`` transaction that checks the version the marker saw
(:meth:`Store.save`); a mark changed meanwhile is refused with :class:`Conflict`, which carries the mark
as it is now, never overwritten silently. A regrade rewrites the class's records and never this file;
an answer whose text changed keeps its old mark, under the old text's SHA-256 (:mod:`grader.mark.state`
calls it "to re-mark").
"""
from __future__ import annotations

import json
import math
import secrets
import sqlite3
import threading
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from grader.core.namespace import class_file
from grader.core.safe_text import LIMIT_MESSAGE, plain

FILE = "marks.sqlite"
"""The store's name in the class folder."""
FORMAT = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS marks (
    submission TEXT NOT NULL, question TEXT NOT NULL, sha256 TEXT NOT NULL,
    items TEXT NOT NULL, adjust REAL NOT NULL, comment TEXT NOT NULL, marker TEXT NOT NULL,
    marked TEXT NOT NULL, version INTEGER NOT NULL,
    PRIMARY KEY (submission, question, sha256));
"""
MAX_ITEMS = 64
"""Rubric items one mark may apply."""
MAX_ADJUST = 1000.0
"""Largest free adjustment, either way (a question is worth far fewer points)."""


class Conflict(RuntimeError):
    """The mark was changed by another marker since this one read it; ``current`` is what it is now."""

    def __init__(self, current: "Mark | None") -> None:
        super().__init__("another marker changed this mark since you opened it; it was reloaded: check it and "
                         "save again")
        self.current = current


@dataclass(frozen=True)
class Mark:
    """One marker's verdict on one answer."""

    submission: str
    """The submission's folder name in the class folder."""
    question: str
    """The written question's id, e.g. ``10.Q6``."""
    sha256: str
    """SHA-256 of the answer's text that was marked."""
    items: tuple[str, ...] = ()
    """Ids of the rubric items applied (their points come from the rubric as it is now)."""
    adjust: float = 0.0
    """A free adjustment, in points, added after the items."""
    comment: str = ""
    """What the marker tells the student (shown in the feedback, escaped)."""
    marker: str = ""
    """Who marked it (for the instructor; never shown to students)."""
    marked: str = ""
    """When (ISO 8601, UTC)."""
    version: int = 0
    """1 for a new mark, one more at each change; 0 for a mark not stored yet."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "items", tuple(dict.fromkeys(plain(i, 64) for i in self.items))[:MAX_ITEMS])
        object.__setattr__(self, "comment", plain(self.comment, LIMIT_MESSAGE).strip())
        object.__setattr__(self, "marker", plain(self.marker, 100).strip())
        adjust = float(self.adjust)
        if not math.isfinite(adjust) or abs(adjust) > MAX_ADJUST:
            raise ValueError(f"adjustment {self.adjust!r}: expected a number of points between -{MAX_ADJUST:g} "
                             f"and {MAX_ADJUST:g}")
        object.__setattr__(self, "adjust", adjust)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _mark(row: sqlite3.Row) -> Mark:
    items = json.loads(row["items"])
    return Mark(row["submission"], row["question"], row["sha256"], tuple(items) if isinstance(items, list) else (),
                row["adjust"], row["comment"], row["marker"], row["marked"], row["version"])


class Store:
    """The marks of one class folder (use as a context manager, or call :meth:`close`)."""

    def __init__(self, out: Path, *, create: bool = True) -> None:
        path = class_file(out, FILE)
        if not create and not path.is_file():
            raise FileNotFoundError(path)
        self.path = path
        self.lock = threading.RLock()  # one connection, shared by a server's threads: one use at a time
        self.db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        with self.transaction():
            for statement in filter(str.strip, _SCHEMA.split(";")):
                self.db.execute(statement)
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (str(FORMAT),))
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('secret', ?)", (secrets.token_hex(16),))

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken at once (``BEGIN IMMEDIATE``): committed when the block ends,
        rolled back (nothing half-written) when it raises."""
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    def secret(self) -> bytes:
        """The class's key for pseudonyms (:func:`grader.mark.state.pseudonym`): made once, kept here."""
        with self.lock:
            return bytes.fromhex(self.db.execute("SELECT value FROM meta WHERE key = 'secret'").fetchone()[0])

    def marks(self, question: str | None = None) -> list[Mark]:
        """Every stored mark (of ``question`` only, if given), newest first."""
        where, args = ("WHERE question = ?", (question,)) if question else ("", ())
        with self.lock:
            rows = self.db.execute(f"SELECT * FROM marks {where} ORDER BY marked DESC, version DESC", args).fetchall()
        return [_mark(row) for row in rows]

    def get(self, submission: str, question: str, sha256: str) -> Mark | None:
        with self.lock:
            row = self.db.execute("SELECT * FROM marks WHERE submission = ? AND question = ? AND sha256 = ?",
                                  (submission, question, sha256)).fetchone()
        return _mark(row) if row else None

    def _write(self, mark: Mark, expected: int) -> Mark:
        current = self.get(mark.submission, mark.question, mark.sha256)
        if (current.version if current else 0) != expected:
            raise Conflict(current)
        saved = replace(mark, marked=now(), version=expected + 1)
        self.db.execute("INSERT OR REPLACE INTO marks VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (saved.submission, saved.question, saved.sha256, json.dumps(list(saved.items)), saved.adjust,
                         saved.comment, saved.marker, saved.marked, saved.version))
        return saved

    def save(self, mark: Mark, expected: int) -> Mark:
        """Store ``mark`` if its stored version is still ``expected`` (0: none stored yet), in one
        transaction; returns it as stored. :class:`Conflict` (nothing written) otherwise."""
        with self.transaction():
            return self._write(mark, expected)

    def save_all(self, marks: list[tuple[Mark, int]]) -> list[Mark]:
        """Store every ``(mark, expected version)`` in one transaction: all of them, or none when one
        conflicts (:class:`Conflict`)."""
        with self.transaction():
            return [self._write(mark, expected) for mark, expected in marks]


def load(out: Path) -> list[Mark]:
    """Every mark stored in the class folder ``out`` (none when it has no store), newest first; read only."""
    path = class_file(out, FILE)
    if not path.is_file():
        return []
    with closing(sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=30)) as db:
        db.row_factory = sqlite3.Row
        try:
            return [_mark(row) for row in db.execute("SELECT * FROM marks ORDER BY marked DESC, version DESC")]
        except sqlite3.OperationalError:  # no table yet
            return []
