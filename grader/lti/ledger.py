"""Every post to the LMS and its answer, and what the LMS has accepted, kept in the class folder.

``OUT/lti_posts.log`` has one JSON line per request the tool made to the LMS (its time, method, URL, what was
sent, the HTTP status and the answer's body, cut at 4,000 characters), appended and flushed as each answer
arrives, so an interrupted run leaves every post it made on record. ``OUT/lti_sent.json`` holds, per lab and
student, the last score the LMS accepted, and per lab the line item it goes in: a run sends only the scores that
differ from it (posting twice changes nothing; a run stopped half-way goes on where it stopped), and a refused
post is not in it, so the next run sends it again.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from grader.core.namespace import class_file

POSTS = "lti_posts.log"
SENT = "lti_sent.json"
ANSWER_CHARS = 4000
"""An answer's body is recorded up to this many characters."""


def now() -> str:
    """The time, as AGS's timestamps are written (ISO 8601 with a zone, to the millisecond)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


@dataclass
class Ledger:
    """The class folder's record of the LMS: what was sent and accepted (:data:`SENT`), every request (:data:`POSTS`)."""

    out: Path
    line_items: dict[str, str] = field(default_factory=dict)
    """Lab -> its line item's URL at the LMS."""
    accepted: dict[str, dict] = field(default_factory=dict)
    """``lab/student_id`` -> the content of the last score the LMS accepted (:meth:`Score.content`)."""

    @classmethod
    def open(cls, out: Path) -> Ledger:
        path = class_file(out, SENT)
        if not path.is_file():
            return cls(Path(out))
        data = json.loads(path.read_text())
        return cls(Path(out), dict(data.get("line_items", {})), dict(data.get("accepted", {})))

    def record(self, method: str, url: str, sent, status: int | None, answer: str, **extra) -> None:
        """Append one request and its answer to :data:`POSTS` (``status`` ``None``: no answer came)."""
        line = {"time": now(), "method": method, "url": url, "sent": sent, "status": status,
                "answer": answer[:ANSWER_CHARS], **extra}
        with class_file(self.out, POSTS).open("a") as handle:
            handle.write(json.dumps(line, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def accept(self, key: str, content: dict) -> None:
        """The LMS accepted this score: remember it (written at once, so a stopped run resumes after it)."""
        self.accepted[key] = content
        self.save()

    def line_item(self, lab: str, url: str) -> None:
        self.line_items[lab] = url
        self.save()

    def save(self) -> None:
        path = class_file(self.out, SENT)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"line_items": self.line_items, "accepted": self.accepted}, indent=1,
                                  sort_keys=True))
        os.replace(tmp, path)

    def posts(self) -> list[dict]:
        """Every request recorded, oldest first."""
        path = class_file(self.out, POSTS)
        return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []
