"""Which release of its lab a notebook was built from, and what the student is told about it.

A lab's handout changes during a term (a hidden case added, a convention stated, a helper moved: its
changelog, ``Lab.releases``), and a student half-way through a lab keeps the notebook they started. The
build writes the lab's release into each notebook it makes (``metadata.course.release``); a notebook
built before it did so is told apart by the text it holds (each release's ``marker``). The grader grades
it as its release was graded (:meth:`util.contract.Lab.as_of`: cases added later are not run, and their
points count toward the task's exported answer, where they were before), records the release in its
result and the gradebook, and says in the feedback which release it was and what changed since.

Used by :mod:`grader.grade.submission` (grading) and :mod:`grader.author.regen` (which refuses to change a
released lab's grading silently).
"""
from __future__ import annotations

from dataclasses import dataclass

from grader.core import notebook
from util.contract import Lab


@dataclass(frozen=True)
class Built:
    """The release a notebook is graded under, and how it was told."""

    release: int
    """The lab release the notebook is graded as (never above the lab's current one)."""
    stamped: int | None
    """What its metadata says (``course.release``), or ``None`` when it says nothing (built before the
    build wrote releases, or the student removed it)."""
    shown: int
    """The newest release whose marker text the notebook holds (1 when none)."""


def _text(nb: dict) -> str:
    cells = nb.get("cells", ()) if isinstance(nb, dict) else ()
    sources = (cell.get("source", "") for cell in cells if isinstance(cell, dict))
    return "\n".join("".join(s) if isinstance(s, list) else s for s in sources if isinstance(s, (str, list)))


def built_from(nb: dict, lab: Lab) -> Built:
    """The release ``nb`` was built from: the later of what its metadata says and what its text shows.

    The text wins over an older stamp: a notebook that holds a later release's statement was not built
    from an earlier one (whatever its metadata was edited to say). A stamp newer than the lab's current
    release (a grader older than the handout) is graded as the current release."""
    text = _text(nb)
    shown = max((r.number for r in lab.releases if r.marker and r.marker in text), default=1)
    stamped = notebook.metadata_release(nb)
    return Built(min(max(stamped or 1, shown), lab.release), stamped, shown)


def _list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def note(lab: Lab, built: Built) -> str | None:
    """What the student should know when ``built`` is not the lab's current release (else ``None``), in
    their words: which release they hold, what changed since, and how it was graded."""
    if built.stamped is not None and built.stamped > lab.release:
        return (f"Your notebook says it was built from release {built.stamped} of {lab.name}, but the grader knows "
                f"release {lab.release} at most: it was graded as release {lab.release}. Tell your instructor.")
    if built.release >= lab.release:
        return None
    dates = {r.number: r.date for r in lab.releases}
    later = [r for r in lab.releases if r.number > built.release]
    added = lab.added_since(built.release)
    questions = list(lab.written_since(built.release))
    redeclared = lab.redeclared_since(built.release)
    lines = [f"Your notebook was built from release {built.release} of {lab.name} ({dates[built.release]}); "
             f"the lab is now at release {lab.release} ({dates[lab.release]}). You do not need the new handout."]
    graded = []
    if redeclared:
        graded.append(f"task{'s' if len(redeclared) > 1 else ''} {_list(list(redeclared))} called your functions as "
                      f"release {built.release} asked")
    if added:
        cases = sorted({case for ids in added.values() for case in ids})
        graded.append(f"the hidden checks added since ({_list(cases)}, in tasks {_list(list(added))}) were not run, "
                      "and their points count toward each task's exported answer instead")
    tasks = lab.tasks_since(built.release)
    if tasks:
        graded.append(f"the task{'s' if len(tasks) > 1 else ''} added since ({_list(list(tasks))}) "
                      f"{'were' if len(tasks) > 1 else 'was'} not part of your handout and "
                      f"{'are' if len(tasks) > 1 else 'is'} not graded: every task you had kept the points it had")
    if questions:
        graded.append(f"the written question{'s' if len(questions) > 1 else ''} added since ({_list(questions)}) "
                      f"{'were' if len(questions) > 1 else 'was'} not asked of you, and "
                      f"{'their' if len(questions) > 1 else 'its'} points count toward the task's exported answer "
                      "instead")
    if graded:
        lines.append(f"You were graded as release {built.release} was: {'; '.join(graded)}.")
    else:
        lines.append(f"Nothing graded changed since release {built.release}: you were graded as the current "
                     "release grades.")
    return _with_changes(" ".join(lines), [(f"Release {r.number} ({r.date}): ", r.changes) for r in later])


def _with_changes(verdict: str, changes: list[tuple[str, str]]) -> str:
    """``verdict`` (which release, how it was graded: always whole) followed by what each later release changed,
    each release's text shortened alike when the whole would not fit in one message (:data:`LIMIT_MESSAGE`)."""
    from grader.core.safe_text import LIMIT_MESSAGE

    def joined(texts: list[str]) -> str:
        return " ".join([verdict, "What changed since:", *(head + text for (head, _), text in zip(changes, texts))])

    texts = [text for _, text in changes]
    if not changes or len(joined(texts)) < LIMIT_MESSAGE:
        return joined(texts) if changes else verdict
    room = max(40, (LIMIT_MESSAGE - 1 - len(joined([""] * len(changes)))) // len(changes))
    return joined([text if len(text) <= room else text[:room - 16].rstrip() + " ... (shortened)" for text in texts])
