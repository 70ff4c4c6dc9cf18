"""The task contract: every lab declares its tasks once, with these dataclasses.

One declaration (``util/labs/labN/tasks.py``) drives three things:

* the notebook: ``util.submit("1.4", value)`` looks the task up here to print a titled block
  and to check the *shape* of the answer (never its correctness);
* the grader: points, tolerance and the hidden cases it calls the student's functions on;
* reference regeneration: the grader runs the solution through the same path and stores what it got;
* written answers (:class:`Written`): the answer cell the build generates, what the self-check and the
  grader read from the notebook, and the points a TA marks by hand (``python -m grader mark``) against
  the lab's grader-only rubrics (``util/labs/labN/rubrics.py``, :mod:`util.rubric`).

The hidden cases themselves are the one part students never hold: a lab declares them in its
grader-only ``cases.py`` (``CASES``: task id -> its :class:`Case` s, matched by
``util.labs.GRADER_ONLY``), and a task states publicly only what they are worth
(:attr:`Task.hidden_points`). The registry attaches them (:meth:`Lab.with_cases`) wherever that file
can be read: in the grader, never in the students' copy or a graded kernel, which receives each case's
input only when the grader runs it (``util.hidden``).

Nobody types an expected value: references are always produced by running the solution.

Its users: every lab folder (``util/labs/labN/``: ``tasks.py`` declares a :class:`Lab`,
``public_checks.py`` its :class:`Check` s, ``mistakes.py`` its :class:`Mistake` s), the registry
(``util/labs/__init__.py``), ``util.submit`` / ``util.selfcheck`` / ``util.hidden`` in the notebook,
and the grader (``grader/judge`` scores against it, ``grader/author`` builds and regenerates from it).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
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
    seeds: tuple[str, ...] = ()
    """Keys of :attr:`spec` holding a seed any value of which makes a valid case (random inputs drawn from it):
    a course that sets a term secret (``python -m grader grade --term FILE``) has them drawn anew from it
    (``util.hidden.term_spec``), so inputs seen in one term's feedback do not answer the next term's. A seed
    chosen at authoring time for a property (clear argmax margins, no rounding ties) is not listed here."""
    since: int = 1
    """The lab release (:class:`Release`) that added this case. A notebook built from an earlier release
    was never told what it tests, so it is graded without it (:meth:`Lab.as_of`). A case added to a
    released lab must name the new release (``python -m grader regen`` refuses otherwise)."""


@dataclass(frozen=True)
class Written:
    """A question a student answers in words, marked by hand against a rubric: part of a task's points.

    The question is stated in the handout (``prompt``, checked there by the build), followed by an
    answer cell the build generates: a Markdown cell headed ``#### Answer to Q6 (2 points, graded by
    hand; 20-120 words)`` whose metadata names the question (:mod:`util.written`). The grader reads the
    answer from the submitted notebook's JSON; a TA marks it with the question's rubric, which is
    grader-only (``util/labs/labN/rubrics.py``: students, kernels and judges never see it)."""

    id: str
    """``"<lab number>.<label>"``, e.g. ``"10.Q6"``; unique across the course. The label (``Q6``) is what
    the notebook calls the question."""
    prompt: str
    """The question as the handout states it (whitespace aside): ``build --check`` fails when the task's
    section does not hold it. The marking page shows it above each answer."""
    points: float
    """Points a TA gives by hand (0 for a question asked for practice, never marked)."""
    words: tuple[int, int] = (10, 300)
    """The length asked, in words: the self-check says when an answer is shorter or longer; the grader
    marks it all the same (an answer is kept up to :data:`util.written.MAX_CHARACTERS` characters)."""
    since: int = 1
    """The lab release that added the question (as :attr:`Case.since`): a notebook built from an earlier
    release has no answer cell for it, so it is graded without it and the points go back to the task's
    exported answer (:meth:`Lab.as_of`)."""

    @property
    def label(self) -> str:
        """What the handout calls the question: ``Q6`` for ``10.Q6``."""
        return self.id.split(".", 1)[1]

    def __post_init__(self) -> None:
        lab, dot, label = self.id.partition(".")
        if not (lab.isdigit() and dot and label and label.replace("_", "").replace("-", "").isalnum()):
            raise ValueError(f"written question {self.id!r}: its id is '<lab number>.<label>' (letters, digits, - "
                             "and _), e.g. '10.Q6'")
        low, high = self.words
        if not 0 <= low <= high or self.points < 0 or not self.prompt.strip():
            raise ValueError(f"written question {self.id}: needs a prompt, points >= 0 and words (low, high) "
                             f"with 0 <= low <= high; found points={self.points}, words={self.words}")


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


SURFACES = {
    "function": "the judge runs the student's pickled function again in a student process (attacked by code that "
                "searches the frames and objects it can reach, when it is unpickled and when it is called, for the "
                "grading secret or the case's spec)",
    "ranks": "the function runs on several ranks the judge keeps apart (attacked by a rank that reads its peers "
             "through /proc)",
    "memory": "the judge bounds the memory the function may use (attacked by code that gives back what it does not "
              "need, then holds more than the bound)",
    "kernel": "the student's Triton kernels are run and counted (attacked by a kernel the interpreter runs and no GPU "
              "compiler accepts)",
    "calls": "the judge calls the function many times (attacked by a callable that keeps state between calls and "
             "carries data in its pickle)",
    "object": "the judge grades counts of an object the student's code built (attacked by an object whose methods "
              "lie about it)",
}
"""What a task's judge may declare it handles (:attr:`Task.judged`), and how the attack kit attacks each."""


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
    hidden_points: float | None = None
    """What the task's hidden cases are worth together: stated here, in what students hold, while the
    cases themselves live in the lab's grader-only ``cases.py`` (:meth:`Lab.with_cases` checks they add up).
    Left out, it is the sum of :attr:`cases` (a test's small lab may declare its cases in place; a course lab
    never does: ``tests/test_hidden_cases.py``)."""
    cases: tuple[Case, ...] = ()
    """Cases the grader runs ``function`` on, after the notebook has run: attached from the lab's grader-only
    ``cases.py`` by the registry (:meth:`Lab.with_cases`); empty wherever that file cannot be read."""
    grader_check: str | None = None
    """``"module:function"`` of a check the *grader* runs on each case's saved file, never the kernel.

    For answers JSON cannot hold (an ONNX model): ``run_case`` saves the file with
    ``util.artifacts.save_model`` and the check, ``check(spec, data, tolerance) -> [problems]``,
    judges its bytes; a case passes only when the list is empty. A check that also takes ``returned``
    (``check(spec, data, tolerance, returned=None)``) receives what ``run_case`` returned in the kernel
    (untrusted JSON, compared with the reference afterwards): where that value is a summary of the saved
    file (counts of a model), the check recomputes it from the file and fails the case when they differ,
    so a summary computed beside the student's code cannot stand for another file than the one judged. It runs in a judge process
    confined like a kernel (sandbox, unprivileged user, the submission's memory and process
    limits, a deadline per case: ``Lab.judge_timeout``; ``grader/judge/isolated.py``), which may start
    processes of its own; a check that raises, crashes or overruns fails only its case."""
    checks: tuple[Check, ...] = ()
    """Public checks students may run themselves (:class:`Check`); never scored by the grader."""
    written: tuple[Written, ...] = ()
    """Questions answered in words and marked by hand (:class:`Written`), in notebook order."""
    judged: tuple[str, ...] = ()
    """What of the student's the grader-side judge (:attr:`grader_check`) handles, each one of :data:`SURFACES`:
    the attack kit (``tests/test_attack_kit.py``) attacks every task by what it declares here, so a new lab is
    attacked without anyone writing its attacks. A judge that runs student code again, serves it inputs or counts
    something of an object it built must say so."""
    since: int = 1
    """The lab release that added this task. A notebook built from an earlier release has no section for it, so it is
    graded without it (:meth:`Lab.as_of`); its points came from the tasks that release redeclared with the points
    they had (:attr:`Release.previous`), so every release totals the same."""

    @property
    def auto_points(self) -> float:
        """What the autograder decides: the public answer plus every hidden case (:attr:`hidden_points`)."""
        return self.answer_points + self.hidden_points

    @property
    def max_points(self) -> float:
        """The task's points (its heading's): the autograder's plus the written questions'."""
        return self.auto_points + sum(question.points for question in self.written)

    def __post_init__(self) -> None:
        if self.hidden_points is None:
            object.__setattr__(self, "hidden_points", float(sum(case.points for case in self.cases)))
        if self.hidden_points and (self.function is None or self.run_case is None):
            raise ValueError(f"task {self.id} has hidden points but no function/run_case to run its cases")
        if self.cases and abs(sum(case.points for case in self.cases) - self.hidden_points) > 1e-9:
            raise ValueError(f"task {self.id}: its hidden cases are worth {sum(c.points for c in self.cases):g} points "
                             f"together, but the task states hidden_points={self.hidden_points:g}")
        if self.cases and (self.function is None or self.run_case is None):
            raise ValueError(f"task {self.id} has cases but no function/run_case to run them")
        unknown = [name for name in self.judged if name not in SURFACES]
        if unknown:
            raise ValueError(f"task {self.id} declares judged={unknown}, not among {sorted(SURFACES)}")
        ids = [case.id for case in self.cases]
        if len(ids) != len(set(ids)):
            raise ValueError(f"task {self.id} has duplicate case ids: {ids}")
        if any(check.calls_function for check in self.checks) and self.function is None:
            raise ValueError(f"task {self.id} has a function check but names no student function")
        lab = self.id.split(".")[0]
        wrong = [q.id for q in self.written if q.id.split(".")[0] != lab]
        if wrong:
            raise ValueError(f"task {self.id}: written questions {', '.join(wrong)} must be numbered in lab {lab} "
                             f"('{lab}.Q1', ...)")


@dataclass(frozen=True)
class Release:
    """One release of a lab's handout: what students may be holding, and what changed, in their words.

    A lab's releases are its changelog (``Lab.releases``). The build writes the current one into each
    notebook it makes (``metadata.course.release``); the grader reads it back, grades the notebook as
    its release was graded (:meth:`Lab.as_of`) and tells the student what changed since."""

    number: int
    """1, 2, ...: the lab's releases are numbered from 1, in order."""
    date: str
    """When it was published, ``YYYY-MM-DD``."""
    changes: str
    """What changed since the release before (for the first: what it is), in the students' words: shown
    in the feedback of a notebook built from an earlier release."""
    marker: str = ""
    """Text every handout of this release and later holds and earlier ones do not (a sentence of a task's
    statement): how the grader tells the release of a notebook built before the build wrote releases
    into notebooks. ``python -m grader build --check`` fails when the solution lacks it."""
    previous: tuple["Task", ...] = ()
    """Tasks as the release before declared them, for those this release changed in a way a case's
    ``since`` cannot say (the student's function renamed, called differently): a notebook built before
    this release is graded by these (:meth:`Lab.as_of`). Each keeps its task's id, points and case ids
    (the references are the current solution's)."""


@dataclass(frozen=True)
class Leaderboard:
    """A figure of a lab worth competing on, which the grader measures itself (never one the student reports).

    The figure is a fact the task's judge reports beside its verdict (``check`` returns ``(problems, facts)``,
    :mod:`grader.judge.worker`): the first case of :attr:`task` (in declaration order) whose facts hold
    :attr:`fact`. ``python -m grader leaderboard`` ranks a class by it (anonymous nicknames, ties within the
    measurement's band) and Gradescope gets it in ``results.json``'s ``leaderboard``."""

    title: str
    """What is ranked, in the students' words, e.g. ``"Speed-up over the naive kernel"``."""
    task: str
    """The task whose judge measures it."""
    fact: str
    """The name of the fact that holds the figure."""
    higher_is_better: bool = True
    unit: str = ""
    """Printed after the figure, e.g. ``"x"``."""
    band: float | str = 1.0
    """How far apart two figures must be before their ranks differ: a factor >= 1 (1.1: within 10 % is a tie),
    or the name of a fact giving each entry's own factor (the noise its judge measured)."""
    only_passed: bool = True
    """Rank only submissions whose case passed (a fast kernel with wrong products ranks nowhere)."""


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
    """Paths (relative to the repo root) of other files or folders whose change makes the references
    stale (a C++ source the solution compiles). The lab's own folder (``util/labs/<name>/``) and the
    course modules it and its solution import are always included without being named here
    (:func:`util.labs.source_files`)."""
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
    releases: tuple[Release, ...] = field(default=())
    """The lab's changelog, oldest first (:class:`Release`); none declared means one release, the first.
    Add one whenever a change reaches what students hold: a new hidden case (``Case.since``), a convention
    stated, a helper moved (``surface.py``)."""
    leaderboard: Leaderboard | None = None
    """A figure worth competing on (:class:`Leaderboard`), if the lab has one."""
    prepare: str | None = None
    """``"module:function"`` the grader calls once, outside the sandbox, before grading the lab (usually
    ``"util.labs.labN.tasks:prepare"``): it
    fills the shared export caches (``build/onnx``, ``build/torchscript``) with the models the notebook
    and its hidden cases load. The sandbox sees those caches read-only, so no graded kernel spends
    seconds re-exporting a model. Purely a speed-up: without it every kernel exports for itself."""

    def __post_init__(self) -> None:
        numbers = [r.number for r in self.releases]
        if numbers != list(range(1, len(numbers) + 1)):
            raise ValueError(f"{self.name}: releases must be numbered 1, 2, ... in order; found {numbers}")
        late = [f"{t.id} {c.id} (since {c.since})" for t in self.tasks for c in t.cases
                if not 1 <= c.since <= self.release]
        late += [f"{t.id} {q.id} (since {q.since})" for t in self.tasks for q in t.written
                 if not 1 <= q.since <= self.release]
        if late:
            raise ValueError(f"{self.name}: cases or written questions name a release the lab does not declare: "
                             f"{', '.join(late)}")
        questions = [q.id for t in self.tasks for q in t.written]
        if len(questions) != len(set(questions)):
            raise ValueError(f"{self.name}: two written questions share an id: {questions}")
        late = [f"{t.id} (since {t.since})" for t in self.tasks if not 1 <= t.since <= self.release]
        if late:
            raise ValueError(f"{self.name}: tasks name a release the lab does not declare: {', '.join(late)}")
        tasks = {t.id: t for t in self.tasks}
        for release in self.releases:
            adds = any(t.since == release.number for t in self.tasks)
            for old in release.previous:
                now = tasks.get(old.id)
                if now is None or (old.max_points != now.max_points and not adds) \
                        or {c.id for c in old.cases} - {c.id for c in now.cases}:
                    raise ValueError(f"{self.name}: release {release.number}'s previous task {old.id} must be a task of "
                                     "the lab, worth the same points (other points only in a release that adds "
                                     "tasks), with case ids the lab still has")
        for number in range(1, self.release):
            then = sum(task.max_points for task in self._declared(number))
            if abs(then - self.max_points) > 1e-9:
                raise ValueError(f"{self.name}: as of release {number} its tasks are worth {then:g} points, now "
                                 f"{self.max_points:g}: a release that adds tasks redeclares the tasks it took their "
                                 "points from in its previous, with the points they had")

    @property
    def max_points(self) -> float:
        """Every point of the lab: the autograder's and the written questions'."""
        return sum(task.max_points for task in self.tasks)

    @property
    def auto_points(self) -> float:
        """The points the autograder decides (:attr:`max_points` less the written questions')."""
        return sum(task.auto_points for task in self.tasks)

    @property
    def written(self) -> tuple[Written, ...]:
        """Every written question of the lab, in notebook order."""
        return tuple(q for task in self.tasks for q in task.written)

    @property
    def release(self) -> int:
        """The current release: the newest of :attr:`releases` (1 when none is declared)."""
        return self.releases[-1].number if self.releases else 1

    def as_of(self, release: int) -> "Lab":
        """The lab as release ``release`` graded it: a task a later release changed is declared as it was
        (``Release.previous``), the cases and written questions added later (``Case.since``,
        ``Written.since``) are left out and their points go back to their task's exported answer, where
        they were before; every task keeps its points. Its :attr:`release` is ``release``; the current
        release (or a later one) is the lab itself."""
        if release >= self.release:
            return self
        tasks = []
        for task in self._declared(release):
            later_cases = sum(case.points for case in task.cases if case.since > release)
            later = later_cases + sum(q.points for q in task.written if q.since > release)
            newer = any(c.since > release for c in task.cases) or any(q.since > release for q in task.written)
            tasks.append(replace(task, cases=tuple(c for c in task.cases if c.since <= release),
                                 written=tuple(q for q in task.written if q.since <= release),
                                 answer_points=task.answer_points + later,
                                 hidden_points=task.hidden_points - later_cases) if newer else task)
        return replace(self, tasks=tuple(tasks), releases=self.releases[:max(release, 1)])

    def _declared(self, release: int) -> list[Task]:
        """The tasks release ``release`` had, each as it declared them (:meth:`as_of`, before its cases are
        filtered)."""
        declared = {t.id: t for t in self.tasks}
        for later in reversed(self.releases[release:]):  # newest first: the oldest declaration wins
            declared.update({old.id: old for old in later.previous})
        return [declared[t.id] for t in self.tasks if t.since <= release]

    @property
    def has_cases(self) -> bool:
        """Whether the hidden cases are attached (the grader), as opposed to only their points (students)."""
        return all(task.cases or not task.hidden_points for task in self.tasks)

    def with_cases(self, cases: Mapping[str, tuple[Case, ...]]) -> "Lab":
        """This lab with its hidden cases attached: ``cases`` maps a task id to its :class:`Case` s (the lab's
        grader-only ``CASES``). Every task stating :attr:`Task.hidden_points` must get cases worth exactly that,
        and every id must be a task's; a release's ``previous`` task gets its task's cases too."""
        known = {t.id for t in self.tasks}
        unknown = sorted(set(cases) - known)
        if unknown:
            raise ValueError(f"{self.name}: CASES names tasks the lab does not have: {', '.join(unknown)}")
        missing = [t.id for t in self.tasks if t.hidden_points and not cases.get(t.id)]
        if missing:
            raise ValueError(f"{self.name}: tasks {', '.join(missing)} state hidden points but CASES gives them none")

        def attach(task: Task) -> Task:
            return replace(task, cases=tuple(cases.get(task.id, ())))

        def attach_previous(task: Task) -> Task:
            """A task as an earlier release declared it, with other hidden points than its cases are worth now (a
            release that added tasks took points from it): each case worth its share of what it was then."""
            found = tuple(cases.get(task.id, ()))
            total = sum(case.points for case in found)
            if found and total and abs(total - task.hidden_points) > 1e-9:
                found = tuple(replace(case, points=case.points * task.hidden_points / total) for case in found)
            return replace(task, cases=found)

        releases = tuple(replace(r, previous=tuple(attach_previous(t) for t in r.previous)) for r in self.releases)
        return replace(self, tasks=tuple(attach(t) for t in self.tasks), releases=releases)

    def added_since(self, release: int) -> dict[str, tuple[str, ...]]:
        """Task id -> the ids of its cases that ``release`` did not have (:meth:`as_of`)."""
        then = {t.id: {c.id for c in t.cases} for t in self.as_of(release).tasks}
        found = {t.id: tuple(c.id for c in t.cases if c.id not in then[t.id]) for t in self.tasks if t.id in then}
        return {task_id: cases for task_id, cases in found.items() if cases}

    def tasks_since(self, release: int) -> tuple[str, ...]:
        """Ids of the tasks that ``release`` did not have (:attr:`Task.since`)."""
        return tuple(t.id for t in self.tasks if t.since > release)

    def written_since(self, release: int) -> tuple[str, ...]:
        """Ids of the written questions that ``release`` did not ask (:meth:`as_of`)."""
        then = {q.id for q in self.as_of(release).written}
        return tuple(q.id for q in self.written if q.id not in then)

    def redeclared_since(self, release: int) -> tuple[str, ...]:
        """Ids of the tasks a later release changed, which :meth:`as_of` declares as ``release`` had them."""
        return tuple(dict.fromkeys(t.id for later in self.releases[release:] for t in later.previous))

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
    variants: tuple[tuple[tuple[str, str], ...], ...] = ()
    """The same mistake made in other ways the task allows (computed in float64, with another library call, in
    another order), each a set of ``(old, new)`` replacements applied to the solution instead of
    :attr:`replacements`: every case that names this mistake must catch it in each way, so the attack kit grades
    every variant and expects exactly :attr:`expected_failures` (not generated as example submissions)."""
