"""Who may sign up on the class server: the course's roster (the CSV ``python -m grader grade --roster`` reads).

The hub's user name of a student is their ``student_id``: it names their volume, their folder of the
hand-in collection (``COLLECTION/<student_id>/``) and, through the grader's roster, their gradebook row
(a submission belongs to the student whose ``student_id`` names a folder on its path). So an id must
already be what JupyterHub would make of it (lower case) and a plain folder name. Standard library only:
the hub's ``jupyterhub_config.py`` and ``docker/hub/hub.sh`` (to stop early) both read it.

    python3 docker/hub/roster.py roster.csv     # check a roster: prints the ids, or what is wrong
"""
from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

STUDENT_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
"""The same rule as the hand-in receiver's (``handin_service.USER``)."""


class RosterError(ValueError):
    """The roster cannot be used; the message names the line and what to change."""


def student_ids(path: Path) -> list[str]:
    """The roster's ``student_id`` column, in file order; :class:`RosterError` for a missing column, an empty
    roster, a duplicate, or an id that is not a lower-case plain name."""
    try:
        rows = list(csv.DictReader(Path(path).read_text(encoding="utf-8-sig").splitlines()))
    except (OSError, UnicodeDecodeError) as exc:
        raise RosterError(f"cannot read the roster {path}: {exc}") from None
    ids: list[str] = []
    for line, row in enumerate(rows, start=2):
        row = {(key or "").strip().lower(): (value or "").strip() for key, value in row.items()}
        if "student_id" not in row:
            raise RosterError(f"{path}: no student_id column (the header is student_id,name,email,...)")
        sid = row["student_id"]
        if not any(row.values()):
            continue
        if not STUDENT_ID.fullmatch(sid):
            hint = (f"; JupyterHub lower-cases names, so write {sid.lower()!r}" if STUDENT_ID.fullmatch(sid.lower())
                    else ": use lower-case letters, digits and . _ - (at most 64, starting with a letter or digit)")
            raise RosterError(f"{path} line {line}: student_id {sid!r} cannot be a user of the class server{hint}")
        if sid in ids:
            raise RosterError(f"{path} line {line}: student_id {sid!r} appears twice")
        ids.append(sid)
    if not ids:
        raise RosterError(f"{path}: no students (a header student_id,... and one row per student)")
    return ids


if __name__ == "__main__":
    try:
        found = student_ids(Path(sys.argv[1]))
    except (RosterError, IndexError) as exc:
        print(f"roster: {exc or 'usage: roster.py ROSTER.csv'}", file=sys.stderr)
        sys.exit(1)
    print(f"roster: {len(found)} students: {', '.join(found)}")
