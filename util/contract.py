"""The task contract: every lab declares its tasks once, with these dataclasses.

One declaration (``util/labs/labN/tasks.py``) drives three things:

* the notebook: ``util.submit("1.4", value)`` looks the task up here to print a titled block
  and to check the *shape* of the answer (never its correctness);
* the grader: points, tolerance and the hidden cases it calls the student's functions on;
* reference regeneration: the grader runs the solution through the same path and stores what it got.

Nobody types an expected value: references are always produced by running the solution.

Its users: every lab folder (``util/labs/labN/``: ``tasks.py`` declares a :class:`Lab`,
``public_checks.py`` its :class:`Check` s, ``mistakes.py`` its :class:`Mistake` s), the registry
(``util/labs/__init__.py``), ``util.submit`` / ``util.selfcheck`` / ``util.hidden`` in the notebook,
and the grader (``grader/judge`` scores against it, ``grader/author`` builds and regenerates from it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping


@dataclass(frozen=True)
class Tolerance:
    """How closely a float must match its reference. Integers, strings and shapes always match exactly."""

    rtol: float = 0.0
    """Relative tolerance: ``|actual - expected| <= atol + rtol * |expected|``."""
    atol: float = 0.0
    """Absolute tolerance, for values that should be near zero."""

    def describe(self) -> str:
        """A short phrase for feedback, e.g. ``exact`` or ``within rtol=1e-04``."""
        if not self.rtol and not self.atol:
            return "exact"
        parts = [f"rtol={self.rtol:g}"] if self.rtol else []
        parts += [f"atol={self.atol:g}"] if self.atol else []
        return "within " + ", ".join(parts)


EXACT = Tolerance()

ANSWER = "answer"
"""Name of the check on the answer a task exports; the other checks of a task are named by case id."""


@dataclass(frozen=True)
class Case:
    """One call the grader makes to a student's function on an input the notebook may never show."""

    id: str
    """Stable, readable name, e.g. ``resnet18@1x3x224x224``; shown in feedback."""
    spec: Mapping[str, Any]
    """JSON-able description of the input, handed to the task's ``run_case``."""
    points: float
    """Points this case is worth."""
    hidden: bool = True
    """Hidden cases never reveal the expected value in feedback."""


@dataclass(frozen=True)
class Check:
    """A public check: a property of a task's answer that a student may test before submitting.

    ``util.check("1.4")`` in the notebook and ``python -m grader check NOTEBOOK`` run them. They
    need no reference file (the students' copy has none): a check tests something the notebook
    already states (a count you can work out by hand, a documented fact, internal consistency such
    as "the per-type MACs add up to the total"), so running it reveals nothing hidden.
    """

    name: str
    """What is checked, in the student's words, e.g. ``total = trainable + non_trainable``."""
    test: Callable[[Any], str | None]
    """``test(value) -> None`` when the property holds, else what was found, in a sentence.

    ``value`` is the exported answer (as the grader reads it back from JSON) or, when
    ``calls_function`` is true, the student's function itself (``Task.function``)."""
    hint: str
    """Where to look when it fails."""
    calls_function: bool = False
    """True: ``test`` receives the student's function (``Task.function``) and calls it on a small
    public input; false: it receives the exported answer."""


@dataclass(frozen=True)
class Task:
    """One graded task of a lab."""

    id: str
    """``"<lab number>.<task number>"``, e.g. ``"1.4"``; unique across the course."""
    title: str
    """Short title, printed above the student's result and in the gradebook."""
    answer_points: float
    """Points for the answer the notebook exports with ``util.submit`` (the public case); the hidden
    cases carry their own (:attr:`max_points` is the task's total)."""
    answer: str
    """What ``util.submit`` expects, in the student's words (shown when the shape is wrong)."""
    keys: tuple[str, ...] = ()
    """For dict answers: the keys the answer must have (checked when it is exported)."""
    tolerance: Tolerance = EXACT
    """How floats inside the answer and the case results are compared."""
    function: str | None = None
    """Name of the student's function that the hidden cases call, e.g. ``"count_macs"``."""
    run_case: Callable[[Callable, Mapping[str, Any]], Any] | None = None
    """``run_case(student_function, case.spec) -> value``; builds the input and calls the function."""
    cases: tuple[Case, ...] = ()
    """Cases the grader runs ``function`` on, after the notebook has run."""
    grader_check: str | None = None
    """``"module:function"`` of a check the *grader* runs on each case's saved file, never the kernel.

    For answers JSON cannot hold (an ONNX model): ``run_case`` saves the file with
    ``util.artifacts.save_model`` and the check, ``check(spec, data, tolerance) -> [problems]``,
    judges its bytes; a case passes only when the list is empty. It runs in a judge process
    confined like a kernel (sandbox, unprivileged user, the submission's memory and process
    limits, a deadline per case: ``Lab.judge_timeout``; ``grader/judge/isolated.py``), which may start
    processes of its own; a check that raises, crashes or overruns fails only its case."""
    checks: tuple[Check, ...] = ()
    """Public checks students may run themselves (:class:`Check`); never scored by the grader."""

    @property
    def max_points(self) -> float:
        """Public answer plus every case."""
        return self.answer_points + sum(case.points for case in self.cases)

    def __post_init__(self) -> None:
        if self.cases and (self.function is None or self.run_case is None):
            raise ValueError(f"task {self.id} has cases but no function/run_case to run them")
        ids = [case.id for case in self.cases]
        if len(ids) != len(set(ids)):
            raise ValueError(f"task {self.id} has duplicate case ids: {ids}")
        if any(check.calls_function for check in self.checks) and self.function is None:
            raise ValueError(f"task {self.id} has a function check but names no student function")


@dataclass(frozen=True)
class Lab:
    """A lab: one solution notebook, its generated student copy, and its tasks."""

    name: str
    """Short name used on the command line and in file names: ``"labN"``, the name of its folder in ``util/labs/``."""
    title: str
    """Human title, e.g. ``"ONNX model analysis"``."""
    notebook: str
    """File name shared by ``solutions/`` and ``labs/``, e.g. ``"labN_topic.ipynb"``."""
    tasks: tuple[Task, ...]
    """Tasks in notebook order."""
    cell_timeout: int = 300
    """Seconds one cell may run when graded."""
    notebook_timeout: int = 900
    """Seconds the notebook's own cells may run when graded, counted from the kernel's start: an
    absolute deadline (the kernel is killed at it)."""
    hidden_timeout: int = 300
    """Seconds the hidden cases together may run after the notebook (a deadline of their own)."""
    judge_timeout: int = 120
    """Seconds the grader's check of one saved file may take (``Task.grader_check``, in its judge process).

    These four are the lab's defaults; the grader's command line may override them, and every runner
    asks the one policy resolved from both (``grader.core.limits.Deadlines``)."""
    shared_sources: tuple[str, ...] = field(default=())
    """Paths (relative to the repo root) of shared source files or folders whose change makes the
    references stale, besides the lab's own folder (``util/labs/<name>/``, always included)."""
    packages: tuple[str, ...] = field(default=())
    """Python packages (as ``requirements.txt`` pins them) whose version can change the lab's
    reference values, e.g. ``("torch", "onnxruntime")``: their versions are the references'
    provenance, and ``python -m grader regen --check`` says the references are stale when one differs."""
    requires: tuple[str, ...] = field(default=())
    """Programs the lab needs besides Python, e.g. ``("g++", "cmake", "make")`` for a C++ lab: the
    students' README lists them and ``python -m grader check`` says which are missing."""
    support: tuple[str, ...] = field(default=())
    """Files or folders next to the notebook that belong to it, e.g. ``("cpp",)`` for a C++ project.

    A lab with support files lives in a folder (``notebook="labN_topic/labN_topic.ipynb"``):
    the build generates them with the notebook, a submission is that folder, and the grader copies
    them from the notebook's folder into the scratch folder before running the notebook."""
    prepare: str | None = None
    """``"module:function"`` the grader calls once, outside the sandbox, before grading the lab (usually
    ``"util.labs.labN.tasks:prepare"``): it
    fills the shared export caches (``build/onnx``, ``build/torchscript``) with the models the notebook
    and its hidden cases load. The sandbox sees those caches read-only, so no graded kernel spends
    seconds re-exporting a model. Purely a speed-up: without it every kernel exports for itself."""

    @property
    def max_points(self) -> float:
        return sum(task.max_points for task in self.tasks)

    def task(self, task_id: str) -> Task:
        """The task with this id, or a ``KeyError`` that lists the lab's task ids."""
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise KeyError(f"{self.name} has no task {task_id!r}; its tasks are "
                       + ", ".join(t.id for t in self.tasks))


@dataclass(frozen=True)
class Mistake:
    """One example submission: the solution notebook with one realistic student mistake.

    Example submissions are *generated* from ``solutions/`` by ``python -m grader build`` (never
    edited by hand), so they cannot drift from the solution: a replacement that no longer matches
    exactly once fails the build. The expected score is derived from the declared points, and the
    tests assert the grader gives exactly that. A lab lists its mistakes as ``MISTAKES`` in
    ``util/labs/labN/mistakes.py`` (a file the graded kernel never sees: it quotes the solution).
    """

    name: str
    """File stem of the generated notebook, e.g. ``flops_as_macs``."""
    description: str
    """The mistake in a student's words, shown in the README and the tests."""
    replacements: tuple[tuple[str, str], ...]
    """``(old, new)`` pairs applied to code cells (and support files); each ``old`` must occur exactly once."""
    expected_failures: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Task id -> the checks that must fail (:data:`ANSWER` and/or case ids); every other check passes."""
