"""``python -m grader lti post``: each roster student's lab scores sent to the LMS's gradebook (LTI 1.3 AGS).

``python -m grader lti post --out build/gradebook [--lab labN] [--unmarked pending|skip] [--missing zero|skip]``
reads the class folder's registration (``OUT/lti.json``, :mod:`grader.lti.registration`) and gradebook, and for
every roster student and lab posts the score :mod:`grader.lti.scores` gives to the lab's line item (created where
missing). It is idempotent and resumable: a score the LMS already accepted with the same content is not sent
again (``--again`` sends every one), and each accepted score is written down as its answer arrives
(:mod:`grader.lti.ledger`). A refused score is said on the terminal with the LMS's answer, recorded, left out of
what was accepted (the next run sends it again), and the run goes on with the others; a refused access token (a
key the LMS does not know) stops the run at once, since every other request would be refused the same way.

Exit status: 0 every score sent or unchanged; 1 some refused or not sendable (said why); 2 nothing could be sent.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from grader.core import safe_text
from grader.lti.ags import Gradebook, Refused
from grader.lti.ledger import Ledger
from grader.lti.registration import Registration, RegistrationError, tool_key
from grader.lti.scores import Score, Skipped, plan
from grader.report import class_folder
from grader.report.export import column_names
from grader.report.lms.table import gather
from grader.report.settings import Settings


@dataclass
class Outcome:
    """What one run did."""

    sent: list[Score] = field(default_factory=list)
    """Accepted by the LMS in this run."""
    unchanged: list[Score] = field(default_factory=list)
    """Already accepted with the same content: not sent."""
    refused: list[tuple[Score, str]] = field(default_factory=list)
    """Refused, or not answered, with what the LMS said."""
    skipped: list[Skipped] = field(default_factory=list)
    """Not sent, and why."""
    stopped: str = ""
    """Why the run stopped before the end (the access token was refused), or empty."""


def send(scores: list[Score], gradebook: Gradebook, ledger: Ledger, labels: dict[str, str], *,
         again: bool = False) -> Outcome:
    """Post ``scores`` through ``gradebook``, skipping those ``ledger`` holds as accepted (unless ``again``)."""
    done = Outcome()
    broken: dict[str, str] = {}
    for score in scores:
        if not again and ledger.accepted.get(score.key()) == score.content():
            done.unchanged.append(score)
            continue
        if score.lab in broken:
            done.refused.append((score, broken[score.lab]))
            continue
        try:
            item = gradebook.line_item(score.lab, labels[score.lab], score.maximum)
        except Refused as exc:
            if gradebook.token_refused:
                done.stopped = str(exc)
                break
            broken[score.lab] = str(exc)
            done.refused.append((score, str(exc)))
            continue
        try:
            gradebook.post(score, item)
        except Refused as exc:
            if gradebook.token_refused:
                done.stopped = str(exc)
                break
            why = str(exc)
            if exc.status == 404 and ledger.line_items.pop(score.lab, None):  # the line item was deleted at the LMS
                for key in [k for k in ledger.accepted if k.startswith(score.lab + "/")]:
                    del ledger.accepted[key]  # its scores went with it
                ledger.save()
                why += (" (the lab's line item is gone from the LMS: the next run finds or creates it again and "
                        "sends the lab's every score)")
            done.refused.append((score, why))
            continue
        ledger.accept(score.key(), score.content())
        done.sent.append(score)
    return done


def main(*, out: Path, labs: list[str] | None = None, unmarked: str = "pending", missing: str = "zero",
         again: bool = False, settings: dict | None = None) -> int:
    try:
        registration = Registration.load(out)
        key = tool_key(out, registration.key)
        class_settings = Settings.load(out).updated(**(settings or {}))
    except (RegistrationError, ValueError) as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    class_folder.free_class_names(out)
    book = class_folder.build(out, class_settings)
    if book.roster is None:
        print(f"grader: posting grades needs the roster (--roster FILE), with each student's LMS user id in its "
              f"{registration.user_id_column} column", file=sys.stderr)
        return 2
    labs = labs or list(dict.fromkeys(r.lab for r in book.rows if r.cells))
    if not labs:
        print(f"grader: nothing to post: {out} holds no graded submission", file=sys.stderr)
        return 2
    class_settings.save(out)
    table = gather(book, labs, column_names(labs, {}), "zero")
    scores, skipped = plan(table, registration.user_id_column, unmarked=unmarked, missing=missing)
    ledger = Ledger.open(out)
    done = send(scores, Gradebook(registration, key, ledger), ledger, table.columns, again=again)
    done.skipped = skipped
    pending = sum(s.progress != "FullyGraded" for s in done.sent)
    print(f"{out}: LTI scores to {registration.lineitems_url}: {len(done.sent)} sent ({pending} pending marking), "
          f"{len(done.unchanged)} unchanged, {len(done.refused)} refused, {len(skipped)} not sent; every request "
          f"and answer in {out}/lti_posts.log")
    for _, why in done.refused:
        print(f"grader: refused, kept to send again: {safe_text.terminal(why)}", file=sys.stderr)
    for skip in skipped:
        print(f"grader: not sent: {skip.student_id} {skip.lab}: {skip.reason}", file=sys.stderr)
    if done.stopped:
        print(f"grader: stopped, nothing more sent: {safe_text.terminal(done.stopped)}. The LMS refused the tool's "
              "access token: check client_id and token_url in lti.json, and that the LMS holds the public key "
              "`python -m grader lti config` prints", file=sys.stderr)
        return 2 if not done.sent else 1
    problems = done.refused or any("could not be graded" in s.reason or "no LMS user id" in s.reason for s in skipped)
    return 1 if problems else 0
