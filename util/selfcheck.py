"""The student's self-check: run a task's public checks on the current answer and functions.

In a notebook, after a task's ``submit`` cell::

    check("1.4")        # one task
    check("labN")       # every task of lab N

It reads the answer that ``submit`` exported (``outputs/<lab>/<task>.json``) and looks the task's
function up in the notebook's namespace, then runs the task's public checks (``Task.checks``,
declared in ``util/labs/labN/public_checks.py``). It never reads the grader's reference file and never runs a
hidden case: passing every public check is necessary, not sufficient, for full marks.
``python -m grader check labN`` (from any folder) runs the same checks on a fresh run of a whole notebook.

A task's written questions worth points get a check each: is the answer there (not the placeholder), and
of the length asked? It reads the notebook as last saved (:func:`util.written.saved_notebook`: JupyterLab
and VS Code say where it is; ``python -m grader check`` reads the file it runs); what the answer says is
for the TA who marks it.
"""
from __future__ import annotations

import inspect
import json
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

import util.written as written
from util.answers import AnswerError, output_dir, read_answers, to_jsonable, write_json
from util.contract import Check, Lab, Task

STATUSES = ("passed", "failed", "error", "missing", "unchecked")
"""``passed``; ``failed`` (the property does not hold); ``error`` (your code raised);
``missing`` (no exported answer yet, or the notebook defines no such function); ``unchecked`` (this kernel cannot
see what the check needs, the notebook's saved file: it says where to check instead, and never that something is
missing)."""
UNCHECKED = "not checked here"
"""How an ``unchecked`` outcome reads in a report."""


@dataclass(frozen=True)
class CheckOutcome:
    """What one public check found."""

    name: str
    """The check, in the student's words."""
    status: str
    """One of :data:`STATUSES`."""
    message: str = ""
    """What was found, when it did not pass."""
    hint: str = ""
    """Where to look, when it did not pass."""


@dataclass(frozen=True)
class TaskReport:
    """The public checks of one task."""

    task_id: str
    title: str
    outcomes: tuple[CheckOutcome, ...]
    hidden_points: float = 0.0
    """What the hidden cases the grader also runs are worth (their inputs and answers are not in the students'
    copy: the grader brings them when it grades)."""
    written: int = 0
    """How many of its written questions a TA marks by hand."""

    @property
    def passed(self) -> bool:
        """True when every public check passed."""
        return all(o.status == "passed" for o in self.outcomes)

    def text(self) -> str:
        """The report as the student reads it."""
        good = sum(o.status == "passed" for o in self.outcomes)
        unchecked = sum(o.status == "unchecked" for o in self.outcomes)
        if not self.outcomes:
            return f"Task {self.task_id} ({self.title}): this task declares no public checks"
        lines = [f"Task {self.task_id} ({self.title}): {good}/{len(self.outcomes) - unchecked} public checks passed"
                 + (f", {unchecked} {UNCHECKED}" if unchecked else "")]
        shown: tuple[str, str] = ("", "")
        for o in self.outcomes:
            label = "ok  " if o.status == "passed" else "SKIP" if o.status == "unchecked" else o.status.upper()
            lines.append(f"  {label:7} {o.name}")
            if o.status != "passed" and (o.message, o.hint) != shown:  # "no answer yet" once, not per check
                lines += [f"          {o.message}"] if o.message else []
                lines += [f"          hint: {o.hint}"] if o.hint else []
                shown = (o.message, o.hint)
        more = "the reference answer" + (f" and hidden cases worth {self.hidden_points:g} points, on inputs only the grader holds"
                                         if self.hidden_points else "")
        marked = f"; a TA marks {'its written answer' if self.written == 1 else 'its written answers'}" if self.written else ""
        lines.append(f"  (the grader also compares with {more}{marked}: passing here is not full marks)")
        return "\n".join(lines)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TaskReport":
        return cls(data["task_id"], data["title"], tuple(CheckOutcome(**o) for o in data["outcomes"]),
                   data.get("hidden_points", 0.0), data.get("written", 0))


def _error(exc: BaseException) -> str:
    """``ExcType: message (line N of fn)``, pointing at the student's code when the traceback shows it."""
    frames = traceback.extract_tb(exc.__traceback__)
    student = [f for f in frames if "<ipython-input" in f.filename or f.filename.startswith("/tmp/ipykernel")]
    where = f" (line {student[-1].lineno} of {student[-1].name})" if student else ""
    return f"{type(exc).__name__}: {exc}{where}"


def run_check(check: Check, task: Task, answer: Any, namespace: Mapping[str, Any], exported: bool) -> CheckOutcome:
    """Run one check; never raises (a check must not stop the notebook)."""
    if check.calls_function:
        function = namespace.get(task.function)
        if not callable(function):
            return CheckOutcome(check.name, "missing", f"the notebook defines no function {task.function}() yet",
                                f"run the cell that defines {task.function} first")

        def value(*args, **kwargs):  # what the function returns, as the grader would store it (JSON),
            result = function(*args, **kwargs)  # or as it is when JSON cannot hold it (an ONNX model)
            try:
                return to_jsonable(result)
            except AnswerError:
                return result

        value.__wrapped__ = function  # a check that needs the object itself (a class, a kernel): inspect.unwrap
    elif not exported:
        return CheckOutcome(check.name, "missing", f"task {task.id} has no exported answer yet",
                            f'run the cell with submit("{task.id}", ...) first')
    else:
        value = answer
    try:
        if check.calls_function:
            from util.seeding import setup
            setup()  # the same seed and thread count as the grader, whatever the notebook did since
        found = check.test(value)
    except Exception as exc:  # the student's code may raise anything
        return CheckOutcome(check.name, "error", _error(exc), check.hint)
    if found is None:
        return CheckOutcome(check.name, "passed")
    return CheckOutcome(check.name, "failed", str(found), check.hint)


NOT_SAVED = object()
"""``nb`` of :func:`task_report` when the notebook's file could not be found."""


def written_outcomes(task: Task, nb: Any) -> tuple[CheckOutcome, ...]:
    """A check per written question of ``task`` worth points: its answer in ``nb`` (the notebook's JSON, or
    :data:`NOT_SAVED`) is there and of the length asked."""
    out = []
    for question in (q for q in task.written if q.points):
        low, high = question.words
        name = f"{question.label} answered in {low}-{high} words (a TA marks it)"
        if nb is NOT_SAVED:
            out.append(CheckOutcome(name, "unchecked", f"{UNCHECKED}: this kernel was not told which file its notebook "
                                    "is (run outside JupyterLab's own server: nbconvert, papermill, another front end), "
                                    "so it cannot read your written answers",
                                    f"save the notebook, then run `python -m grader check "
                                    f"lab{task.id.split('.')[0]} --task {task.id}` in a terminal"))
            continue
        answer = written.find(nb, question)
        problem = written.problem(answer, question)
        status = "passed" if problem is None else "missing" if not answer.answered else "failed"
        out.append(CheckOutcome(name, status, problem or "",
                                "" if problem is None else "written answers are read from the notebook as last saved: "
                                                           "save it first"))
    return tuple(out)


def task_report(lab: Lab, task: Task, namespace: Mapping[str, Any], answers: Mapping[str, Any],
                nb: Any = None) -> TaskReport:
    """Every public check of ``task``, on ``answers[task.id]`` and the functions in ``namespace``; and its
    written answers in ``nb`` (the saved notebook's JSON, :data:`NOT_SAVED`, or ``None``: not checked)."""
    outcomes = tuple(run_check(c, task, answers.get(task.id), namespace, task.id in answers) for c in task.checks)
    outcomes += written_outcomes(task, nb) if nb is not None else ()
    return TaskReport(task.id, task.title, outcomes, task.hidden_points, sum(bool(q.points) for q in task.written))


def reports(target: str, namespace: Mapping[str, Any], *, with_written: bool = True) -> list[TaskReport]:
    """Reports for a task id (``"1.4"``) or a whole lab (``"labN"``), answers read from this notebook's exports
    and, ``with_written``, its written answers from its saved file."""
    from util.labs import LABS, find_task

    if target in LABS:
        lab, tasks = LABS[target], LABS[target].tasks
    else:
        lab, task = find_task(target)
        tasks = (task,)
    answers = read_answers(output_dir(lab.name))
    nb = None
    if with_written and any(q.points for task in tasks for q in task.written):
        nb = written.saved_notebook(dict(namespace)) or NOT_SAVED
    return [task_report(lab, task, namespace, answers, nb) for task in tasks]


def check(target: str, namespace: Mapping[str, Any] | None = None) -> None:
    """Run the public checks of a task (``check("1.4")``) or of a lab (``check("labN")``) and print them.

    Uses the answer your ``submit`` cell exported and the functions defined in your notebook
    (``namespace``: the caller's globals unless given). A check that fails says what it found and
    where to look. The grader's reference answers and hidden cases are not used: passing every
    check here is necessary for full marks, not sufficient.
    """
    if namespace is None:
        caller = inspect.currentframe().f_back
        namespace = caller.f_globals if caller is not None else {}
    found = reports(target, namespace)
    print("\n\n".join(report.text() for report in found))
    record_checks(target, found)


CHECKS_FOLDER = "checks"
"""The folder of ``output_dir(lab)`` where :func:`check` records each task's last result (the course panel shows it)."""


def record_checks(target: str, found: list[TaskReport]) -> None:
    """Record each report's result as ``outputs/<lab>/checks/<task>.json`` (status, public checks passed and run,
    the report, when), the kernel's last check of each task, which the course panel shows beside its own
    (``grader.panel.state``). Never graded; a folder that cannot be written only goes unrecorded. Only a student's
    own kernel records (answers beside the notebook): under the grader (``$COURSE_OUTPUT_DIR`` set) nothing is."""
    import os
    import time

    from util.answers import OUTPUT_DIR_ENV
    from util.labs import LABS, find_task

    if os.environ.get(OUTPUT_DIR_ENV):
        return

    lab = LABS[target] if target in LABS else find_task(target)[0]
    folder = output_dir(lab.name) / CHECKS_FOLDER
    for report in found:
        seen = [o for o in report.outcomes if o.status != "unchecked"]
        passed = sum(o.status == "passed" for o in seen)
        try:
            write_json(folder / f"{report.task_id}.json", {
                "task": report.task_id, "status": "passed" if passed == len(seen) else "failed", "passed": passed,
                "checks": len(seen), "report": report.text(), "checked_at": time.time()})
        except OSError:
            return


def write_reports(lab_name: str, namespace: Mapping[str, Any], path: str, tasks: tuple[str, ...] = ()) -> None:
    """Run every public check of ``lab_name`` (only those of ``tasks`` if given) and write the
    reports as JSON to ``path``.

    Used by ``python -m grader check``, which appends a call to a fresh run of the notebook, and adds the
    written answers' checks itself, from the file (:func:`written_outcomes`).
    """
    found = [report for target in (tasks or (lab_name,)) for report in reports(target, namespace, with_written=False)]
    write_json(Path(path), [asdict(report) for report in found])


def read_reports(path: Path) -> list[TaskReport]:
    """The reports :func:`write_reports` wrote."""
    return [TaskReport.from_dict(item) for item in json.loads(path.read_text(encoding="utf-8"))]


def cell_source(lab_name: str, path: Path, tasks: tuple[str, ...] = ()) -> str:
    """The code of the cell ``python -m grader check`` appends to a notebook."""
    return ("import util.selfcheck as _course_selfcheck\n"
            f"_course_selfcheck.write_reports({lab_name!r}, globals(), {str(path)!r}, {tuple(tasks)!r})")
