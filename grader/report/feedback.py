"""Per-student feedback, as Markdown (``feedback.md``) and as a web page (``feedback.html``).

Each task, its points, its status, what happened, what to try; the instructor's changes (manual
overrides, a late penalty) when there are any; each written answer, with the rubric items its marker
applied (their texts), the adjustment and the marker's comment, never the markers' notes or names
(:mod:`grader.mark.state`; before marking, whether each answer was received). Hidden checks never reveal the expected value (their
messages are written that way by :mod:`grader.judge.score`); this module only lays the results out. The one
exception is the class's choice: under ``feedback: diagnosed``, from its date and after the lab's deadline
(:meth:`grader.report.settings.Settings.diagnosed`), the caller passes the submission's ``diagnosis.json`` and
each task's failed hidden checks are explained (:func:`explained`: the case's input, the student's value, the
expected value or the failed property, the likely declared mistake), from that task's entry only.

Everything that comes from a submission (messages, notes, names) is escaped for where it goes
(:mod:`grader.core.safe_text`): a message cannot add a link, a heading or a script to the page. Paths of
the grader's own machine (the repository, its scratch folders, the Gradescope layout) are removed
from what students read: :func:`public`.
"""
from __future__ import annotations

import json
import re
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from grader.core import safe_text
from grader.core.results import GRADER_FAULT, CheckResult, SubmissionResult, TaskResult
from grader.mark import state
from grader.mark.state import Marked

HINTS = {
    "failed": "Your code ran but gave a different result. Reread the task's convention and try your "
              "function on the small example in the notebook, where you can work the answer out by hand.",
    "error": "The cell or function raised an exception. Restart the kernel and run all cells from the "
             "top: the traceback in your notebook shows the line.",
    "timeout": "The notebook ran past its time limit. Restart and run all: any cell that takes minutes "
               "(a loop over every input, a model built inside a loop) needs a cheaper approach.",
    "memory": "The notebook ran out of its memory allowance. Look for copies of large tensors kept in "
              "lists, models built over and over, or outputs stored for every layer at once.",
    "crash": "The Python kernel itself died (a crash in compiled code, os._exit, or too many processes). "
             "Nothing after that point ran.",
    "missing": "Nothing was graded for this: the answer was never exported, or the function is not "
               "defined under the name the task gives. Run the cell that calls submit(...).",
}
"""What to try next, per status (never shown for ``passed``)."""

DIAGNOSIS = "diagnosis.json"
"""Beside each result: what went wrong on its failed hidden cases (:mod:`grader.grade.diagnosis`), read for
diagnosed feedback only."""
DIAGNOSED_NOTE = ("Your course now shows, for each hidden check you did not pass, the input it used, the value "
                  "your function gave, what was expected (or which property failed) and, where your results "
                  "look like a common mistake, its name and a hint.")
"""Said once, in place of :data:`HIDDEN_NOTE`, when the feedback is diagnosed."""
MAX_DIAGNOSED_CASES = 12
"""At most this many hidden cases explained per task (the rest are counted)."""
MAX_MISTAKES = 3
"""At most this many likely mistakes named per task."""
LIMIT_SHOWN = 700
"""Longest input, value or expected value shown (``diagnosis.json`` cuts at 600 and says so)."""

HIDDEN_NOTE = ("Checks marked *hidden input* call your functions on inputs the notebook never shows; "
               "their feedback says where your result differs, not what the expected value is.")

_SCRATCH = re.compile(r"(?:/[^\s/:'\"()]+)*/grade-[\w]+-[\w]+/")
"""A grader scratch folder (``/tmp/grade-labN-k2j3/``), wherever the temporary folder is."""


def _grader_roots() -> list[str]:
    from grader import REPO
    return [str(REPO), tempfile.gettempdir(), str(Path.home())]


def strip_paths(text: str, roots: Iterable[Path | str] = ()) -> str:
    """``text`` without the grader's absolute paths: a scratch folder, the repository, the temporary
    folder, the home folder and ``roots`` are cut from every path they start, so
    ``/tmp/grade-labN-x1/cpp/analysis.cpp:12`` reads ``cpp/analysis.cpp:12``."""
    text = _SCRATCH.sub("", text)
    for root in sorted({str(r).rstrip("/") for r in (*roots, *_grader_roots()) if str(r).strip("/")},
                       key=len, reverse=True):
        text = re.sub(re.escape(root) + r"(?:/|(?=[\s:'\")]|$))", "", text)
    return text


def public(result: SubmissionResult, roots: Iterable[Path | str] = ()) -> SubmissionResult:
    """``result`` with :func:`strip_paths` applied to every message and note (what students read)."""
    roots = tuple(roots)

    def check(c: CheckResult) -> CheckResult:
        return replace(c, message=strip_paths(c.message, roots))

    tasks = tuple(replace(t, checks=tuple(check(c) for c in t.checks)) for t in result.tasks)
    return replace(result, tasks=tasks, notes=tuple(strip_paths(n, roots) for n in result.notes),
                   submission=Path(result.submission).name)


def read_diagnosis(folder: Path) -> dict:
    """A result folder's ``diagnosis.json``; empty when it has none or it cannot be read (then the
    feedback explains nothing)."""
    try:
        found = json.loads((Path(folder) / DIAGNOSIS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def explained(task: TaskResult, diagnosis: Mapping[str, Any] | None,
              roots: Iterable[Path | str] = ()) -> tuple[list[list[tuple[str, str]]], list[tuple[str, str]], int]:
    """What diagnosed feedback says about ``task``, from ``diagnosis`` (``diagnosis.json``'s content):
    per failed hidden check of ``task`` that the diagnosis covers, (label, text) pairs (the case, its input,
    the student's value or what it raised, the expected value or the property that failed); the likely
    mistakes as (name, hint); and how many cases were left out. Plain text, bounded, without the grader's
    paths; the caller escapes it. Only ``task``'s own entry is read, and only for checks that failed now (a
    diagnosis left from an earlier grading says nothing about a check that passes)."""
    entry = (diagnosis or {}).get(task.task_id) if isinstance(diagnosis, Mapping) else None
    if not isinstance(entry, Mapping):
        return [], [], 0
    failed = {c.name: c for c in task.checks if c.hidden and c.status != "passed"}
    roots = tuple(roots)

    def text(value: Any) -> str:
        return strip_paths(safe_text.plain(value, LIMIT_SHOWN), roots)

    cases = []
    for row in entry.get("cases") or ():
        check = failed.get(row.get("case")) if isinstance(row, Mapping) else None
        if check is None:
            continue
        lines = [("Case", text(check.name)), ("Input", text(row.get("input") or "(not recorded)"))]
        if row.get("value") is not None:
            lines.append(("Your value", text(row["value"])))
        elif row.get("raised"):
            lines.append(("Your function raised", text(row["raised"])))
        else:
            lines.append(("Your value", "(none was recorded)"))
        if row.get("expected") is not None:
            lines.append(("Expected", text(row["expected"])))
        else:
            lines.append(("Property that failed", text(row.get("found") or check.message)))
        cases.append(lines)
    mistakes = [(text(m.get("name")), text(m.get("hint"))) for m in entry.get("mistakes") or ()
                if isinstance(m, Mapping) and m.get("name")] if failed else []
    return cases[:MAX_DIAGNOSED_CASES], mistakes[:MAX_MISTAKES], max(len(cases) - MAX_DIAGNOSED_CASES, 0)


def explained_text(task: TaskResult, diagnosis: Mapping[str, Any] | None, roots: Iterable[Path | str] = ()) -> str:
    """:func:`explained` as plain text (Gradescope's outputs are shown as text), empty when there is nothing."""
    cases, mistakes, more = explained(task, diagnosis, roots)
    lines = []
    for case in cases:
        lines += [f"{label}: {value}" for label, value in case] + [""]
    if more:
        lines += [f"({more} more hidden case{'s' if more > 1 else ''} not shown)", ""]
    lines += [f"Likely mistake: {name}: {hint}" for name, hint in mistakes]
    return "\n".join(lines).strip()


def _points(value: float) -> str:
    return f"{value:g}"


def _changes(overrides: Iterable, late) -> list[tuple[str, str]]:
    """(kind, sentence) for each change the instructor made to the autograder's score."""
    out = [("override", f"Task {o.task}: {_points(o.new)} points instead of the autograder's {_points(o.old)}, "
                        f"set by your instructor. Reason: {o.reason or 'none given'}") for o in overrides]
    if late is not None and late.days:
        out.append(("late", late.sentence()))
    return out


def _written(name: str, result: SubmissionResult, written: tuple[Marked, ...] | None) -> tuple[Marked, ...]:
    """The written answers to show: as given, or (before any marking) as received, all still to mark."""
    if written is not None:
        return written
    from util.labs import LABS

    return state.assess(name, state.questions(LABS.get(result.lab), result.release), result.written, {}, {})


def _score(result: SubmissionResult, overrides, late, written: tuple[Marked, ...]) -> tuple[str, str]:
    """(the score line's text, a note when it is not final)."""
    total = (result.score + sum(o.new - o.old for o in overrides) + sum(w.counted for w in written)
             - (late.penalty if late else 0))
    best = result.max_score + sum(w.question.points for w in written)
    pending = [w for w in written if w.pending]
    note = (f" (not final: {len(pending)} written answer{'s' if len(pending) > 1 else ''} still to be marked)"
            if pending else "")
    return f"Score: {_points(max(total, 0))} / {_points(best)}", note


def _written_lines(marked: Marked) -> list[str]:
    """What the student reads about one written answer (plain sentences; the caller escapes them)."""
    question = marked.question
    if marked.state == state.PRACTICE:
        return ["For practice: not marked."]
    if marked.state == state.TO_MARK:
        words = marked.answer.words
        return [f"Your answer was received ({words} word{'s' if words != 1 else ''}); it has not been marked yet."]
    if marked.state == state.UNANSWERED:
        return ["No answer was found in the answer cell: 0 points. (If you answered elsewhere, tell your "
                "instructor.)"]
    lines = ["Your answer changed after it was marked: the earlier mark counts until it is marked again."
             ] if marked.state == state.TO_REMARK else []
    lines += [f"{_signed(item.points)}: {item.text}" for item in marked.applied]
    if marked.mark is not None and marked.mark.adjust:
        lines.append(f"{_signed(marked.mark.adjust)}: adjusted by your marker")
    if not marked.applied and not (marked.mark and marked.mark.adjust):
        lines.append(f"No rubric item applied: {_points(marked.counted)} of {_points(question.points)}.")
    if marked.mark is not None and marked.mark.comment:
        lines.append(f"Comment: {marked.mark.comment}")
    return lines


def _signed(value: float) -> str:
    return f"{'+' if value >= 0 else '-'}{_points(abs(value))}"


def _written_title(marked: Marked) -> str:
    shown = "-" if marked.points is None else _points(marked.points)
    return f"{marked.question.label} (task {marked.task_id}): {shown}/{_points(marked.question.points)} ({marked.state})"


def render(name: str, result: SubmissionResult, *, overrides: Iterable = (), late=None,
           roots: Iterable[Path | str] = (), written: tuple[Marked, ...] | None = None,
           diagnosis: Mapping[str, Any] | None = None) -> str:
    """The Markdown feedback for one submission (``overrides``: :class:`grader.report.overrides.Applied`;
    ``late``: :class:`grader.report.late.Late`; ``written``: its written answers, marked or not,
    :class:`grader.mark.state.Marked`; ``None``: as received, before any marking; ``diagnosis``: its
    ``diagnosis.json``, given only when the class shows diagnosed feedback, :func:`explained`)."""
    written = _written(name, result, written)
    roots = tuple(roots)
    result = public(result, roots)
    md = safe_text.markdown
    changes = _changes(overrides, late)
    score, pending = _score(result, overrides, late, written)
    lines = [f"# {result.lab} feedback: {md(name, safe_text.LIMIT_NAME)}", "",
             f"**{score}**{pending}", ""]
    if changes:
        lines += ["Changed by your instructor:", ""] + [f"- {md(text)}" for _, text in changes] + [""]
    if result.execution_status != "completed":
        lines += [f"Your notebook did not run to the end ({result.execution_status}). Answers it exported "
                  "before it stopped were graded; the rest could not be.", ""]
    if result.notes:
        lines += ["Notes:", ""] + [f"- {md(note)}" for note in result.notes] + [""]
    lines += ["| task | points | status |", "|---|---|---|"]
    lines += [f"| {t.task_id} {md(t.title)} | {_points(t.score)}/{_points(t.max_score)} | {t.status} |"
              for t in result.tasks]
    lines.append("")
    for task in result.tasks:
        lines += [f"## Task {task.task_id}: {md(task.title)} - {_points(task.score)}/"
                  f"{_points(task.max_score)} ({task.status})", "",
                  "| check | points | status | what happened |", "|---|---|---|---|"]
        for check in task.checks:
            label = f"{check.name} (hidden input)" if check.hidden else check.name
            message = md(check.message or ("correct" if check.status == "passed" else ""))
            lines.append(f"| {md(label)} | {_points(check.score)}/{_points(check.max_score)} | {check.status} | "
                         f"{message} |")
        hints = [f"*Hint ({status}):* {_hint(task, status)}" for status in _statuses(task)]
        lines += [""] + hints + ([""] if hints else [])
        if diagnosis is not None:
            lines += _explained_md(task, diagnosis, roots)
    if written:
        lines += ["## Written answers (marked by hand)", ""]
        for marked in written:
            lines += [f"### {md(_written_title(marked))}", ""] + [f"- {md(text)}" for text in _written_lines(marked)]
            lines.append("")
    lines.append(DIAGNOSED_NOTE if diagnosis is not None else HIDDEN_NOTE)
    return "\n".join(lines) + "\n"


def _explained_md(task: TaskResult, diagnosis: Mapping[str, Any], roots: tuple) -> list[str]:
    cases, mistakes, more = explained(task, diagnosis, roots)
    if not cases and not mistakes:
        return []
    md = safe_text.markdown
    lines = ["### What went wrong on the hidden inputs", ""]
    for case in cases:
        (_, first), rest = case[0], case[1:]
        lines += [f"- **{md(first, LIMIT_SHOWN)}**"] + [f"  - {label}: {md(value, LIMIT_SHOWN)}" for label, value in rest]
    if more:
        lines.append(f"- ({more} more hidden case{'s' if more > 1 else ''} not shown)")
    lines += [""] + [f"*Likely mistake:* **{md(n, safe_text.LIMIT_NAME)}**: {md(h, LIMIT_SHOWN)}" for n, h in mistakes]
    return lines + [""]


def _statuses(task: TaskResult) -> list[str]:
    return list(dict.fromkeys(c.status for c in task.checks if c.status != "passed"))


FAULT_HINT = ("The grader itself failed on this task, not your code: it is graded again on the next run, "
              "and the instructors can see it.")


def _hint(task: TaskResult, status: str) -> str:
    """What to try next for ``status``; when the grader failed (its message says so), that it was the grader."""
    fault = any(c.status == status and c.message.startswith(GRADER_FAULT) for c in task.checks)
    return FAULT_HINT if fault else HINTS[status]


STYLE = """
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.6rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
.passed { color: #1a7f37; } .failed, .error, .timeout, .memory, .crash, .missing { color: #b42318; }
.changes { background: #fff8e1; border: 1px solid #f0d58c; padding: 0.5rem 1rem; }
.hint { color: #555; }
dl.diagnosed { border-left: 3px solid #ccc; margin: 0.5rem 0; padding-left: 0.8rem; }
dl.diagnosed dt { font-weight: bold; } dl.diagnosed dd { margin: 0 0 0.3rem 1rem; overflow-wrap: anywhere; }
.mistake { background: #eef4ff; padding: 0.3rem 0.6rem; }
"""


def render_html(name: str, result: SubmissionResult, *, overrides: Iterable = (), late=None,
                roots: Iterable[Path | str] = (), written: tuple[Marked, ...] | None = None,
                diagnosis: Mapping[str, Any] | None = None) -> str:
    """The same feedback as :func:`render`, as one self-contained, escaped HTML page."""
    written = _written(name, result, written)
    roots = tuple(roots)
    result = public(result, roots)
    h = safe_text.html
    changes = _changes(overrides, late)
    score, pending = _score(result, overrides, late, written)
    title = f"{h(result.lab)} feedback: {h(name, safe_text.LIMIT_NAME)}"
    parts = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>"
             f"<style>{STYLE}</style></head><body>", f"<h1>{title}</h1>",
             f"<p class=\"score\"><strong>{score}</strong>{h(pending)}</p>"]
    if changes:
        parts.append("<div class=\"changes\"><p>Changed by your instructor:</p><ul>"
                     + "".join(f"<li class=\"{kind}\">{h(text)}</li>" for kind, text in changes) + "</ul></div>")
    if result.execution_status != "completed":
        parts.append(f"<p>Your notebook did not run to the end ({h(result.execution_status)}). Answers it "
                     "exported before it stopped were graded; the rest could not be.</p>")
    if result.notes:
        parts.append("<p>Notes:</p><ul>" + "".join(f"<li>{h(n)}</li>" for n in result.notes) + "</ul>")
    parts.append("<table class=\"tasks\"><tr><th>task</th><th>points</th><th>status</th></tr>" + "".join(
        f"<tr><td><a href=\"#task-{h(t.task_id)}\">{h(t.task_id)} {h(t.title)}</a></td>"
        f"<td>{_points(t.score)}/{_points(t.max_score)}</td><td class=\"{t.status}\">{t.status}</td></tr>"
        for t in result.tasks) + "</table>")
    for task in result.tasks:
        parts.append(f"<h2 id=\"task-{h(task.task_id)}\">Task {h(task.task_id)}: {h(task.title)} - "
                     f"{_points(task.score)}/{_points(task.max_score)} (<span class=\"{task.status}\">"
                     f"{task.status}</span>)</h2>")
        rows = "".join(
            f"<tr><td>{h(c.name)}{' (hidden input)' if c.hidden else ''}</td>"
            f"<td>{_points(c.score)}/{_points(c.max_score)}</td><td class=\"{c.status}\">{c.status}</td>"
            f"<td>{h(c.message or ('correct' if c.status == 'passed' else ''))}</td></tr>" for c in task.checks)
        parts.append("<table><tr><th>check</th><th>points</th><th>status</th><th>what happened</th></tr>"
                     + rows + "</table>")
        parts += [f"<p class=\"hint\"><em>Hint ({status}):</em> {h(_hint(task, status))}</p>" for status in _statuses(task)]
        if diagnosis is not None:
            parts += _explained_html(task, diagnosis, roots)
    if written:
        parts.append("<h2 id=\"written\">Written answers (marked by hand)</h2>")
        for marked in written:
            parts.append(f"<h3 class=\"written\" id=\"written-{h(marked.question.id)}\">{h(_written_title(marked))}</h3>"
                         "<ul>" + "".join(f"<li>{h(text)}</li>" for text in _written_lines(marked)) + "</ul>")
    note = DIAGNOSED_NOTE if diagnosis is not None else HIDDEN_NOTE.replace('*', '')
    parts.append(f"<p class=\"hint\">{h(note)}</p></body></html>")
    return "\n".join(parts) + "\n"


def _explained_html(task: TaskResult, diagnosis: Mapping[str, Any], roots: tuple) -> list[str]:
    cases, mistakes, more = explained(task, diagnosis, roots)
    if not cases and not mistakes:
        return []
    h = safe_text.html
    parts = [f"<h3 class=\"diagnosed\" id=\"diagnosed-{h(task.task_id)}\">What went wrong on the hidden inputs</h3>"]
    for case in cases:
        parts.append("<dl class=\"diagnosed\">" + "".join(f"<dt>{h(label)}</dt><dd><code>{h(value, LIMIT_SHOWN)}</code></dd>"
                                                           for label, value in case) + "</dl>")
    if more:
        parts.append(f"<p>({more} more hidden case{'s' if more > 1 else ''} not shown)</p>")
    parts += [f"<p class=\"mistake\"><em>Likely mistake:</em> <strong>{h(n, safe_text.LIMIT_NAME)}</strong>: "
              f"{h(hint, LIMIT_SHOWN)}</p>" for n, hint in mistakes]
    return parts
