"""Per-student feedback as Markdown: each task, its points, its status, what happened, what to try.

Hidden checks never reveal the expected value (their messages are written that way by
:mod:`grader.judge.score`); this module only lays the results out and adds a hint per status.
"""
from __future__ import annotations

from grader.report.results import SubmissionResult, TaskResult

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


def _task_section(task: TaskResult) -> list[str]:
    lines = [f"## Task {task.task_id}: {task.title} - {task.score:g}/{task.max_score:g} ({task.status})", "",
             "| check | points | status | what happened |", "|---|---|---|---|"]
    for check in task.checks:
        label = f"{check.name} (hidden input)" if check.hidden else check.name
        message = (check.message or ("correct" if check.status == "passed" else "")).replace("|", "\\|")
        message = " ".join(message.split())  # one table row: newlines would break it
        lines.append(f"| {label} | {check.score:g}/{check.max_score:g} | {check.status} | {message} |")
    statuses = list(dict.fromkeys(c.status for c in task.checks if c.status != "passed"))
    if statuses:
        lines.append("")
        lines += [f"*Hint ({status}):* {HINTS[status]}" for status in statuses]
    lines.append("")
    return lines


def render(name: str, result: SubmissionResult) -> str:
    """The Markdown feedback for one submission."""
    lines = [f"# {result.lab} feedback: {name}", "",
             f"**Score: {result.score:g} / {result.max_score:g}**", ""]
    if result.execution_status != "completed":
        lines += [f"Your notebook did not run to the end ({result.execution_status}). Answers it exported "
                  "before it stopped were graded; the rest could not be.", ""]
    if result.notes:
        lines += ["Notes:", ""] + [f"- {' '.join(note.split())}" for note in result.notes] + [""]
    lines += ["| task | points | status |", "|---|---|---|"]
    lines += [f"| {t.task_id} {t.title} | {t.score:g}/{t.max_score:g} | {t.status} |" for t in result.tasks]
    lines.append("")
    for task in result.tasks:
        lines += _task_section(task)
    lines.append("Checks marked *hidden input* call your functions on inputs the notebook never shows; "
                 "their feedback says where your result differs, not what the expected value is.")
    return "\n".join(lines) + "\n"
