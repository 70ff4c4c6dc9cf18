"""The attack kit against every lab's judges, driven by the labs' declarations (``Task.judged``, ``Mistake.variants``).

For every task whose judge declares what it handles, the solution's function and the kit's hostile versions of it
(``tests/attack_kit.py``) are run through a graded case's path (the task's ``run_case``, the grader's judge
process, the references), as whoever runs the tests (root in CI) and as an unprivileged grader: the honest control
must pass, every detector must pass too (it raises when it reaches what it must not), every exploit must fail. A
mistake's variants (the same mistake in float64, another order, another library call) must fail exactly the cases
the mistake names. A lab whose judge fails the kit does not pass CI.

The default run attacks, for every surface, the first task of the course that declares it (one case each, both
users), and makes :data:`VARIANTS_EVERY_RUN`'s mistakes the first of their allowed other ways; ``-m slow`` attacks every
task of every lab and tries every variant (the whole kit took 19 minutes of CI's test time with lab 13 attacked whole
on every run). The declarations themselves are checked on every run: a judge that starts a student process
for a case must declare ``"function"``.
"""
from __future__ import annotations

import contextlib

import attack_kit
import pytest

from grader.author.build import mistakes
from grader.author.solution import solution_namespace
from grader.execute import confinement
from util.contract import SURFACES
from util.judging import secret
from util.labs import LABS, get_lab

VARIANTS_EVERY_RUN = {("lab13", "zero2_as_zero1"), ("lab13", "one_f_one_b_flushed")}
"""Mistakes whose first variant is tried on every run (the rest under ``-m slow``): two of lab 13's, whose judges run
student code on ranks (its three others took 1 to 2 minutes each)."""
pytestmark = pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")
attack_kit.register()


def _judged_tasks():
    for lab in LABS.values():
        for task in lab.tasks:
            if task.judged and task.cases:
                yield lab, task


def _attacks(task) -> list[str]:
    """The kit's attacks on ``task``: its detectors and exploits, by what it declares."""
    found = ["honest"]
    for surface in task.judged:
        found += {"calls": ["calls", "calls_payload"]}.get(surface, [surface])
    return found


def _every_run() -> set[tuple[str, str, str]]:
    """What the default run attacks: for each surface the first task of the course that declares it (with its
    honest control), so every attack runs on every CI run."""
    chosen, covered = set(), set()
    for lab, task in _judged_tasks():
        for attack in _attacks(task):
            if attack != "honest" and attack not in covered:
                chosen |= {(lab.name, task.id, attack), (lab.name, task.id, "honest")}
                covered.add(attack)
    return chosen


def _params():
    every = _every_run()
    for lab, task in _judged_tasks():
        for attack in _attacks(task):
            marks = [] if (lab.name, task.id, attack) in every else [pytest.mark.slow]
            for as_user in (False, True):
                yield pytest.param(lab.name, task.id, attack, as_user, marks=marks,
                                   id=f"{lab.name}-{task.id}-{attack}-{'user' if as_user else 'root'}")


_namespaces: dict = {}


def _namespace(lab_name: str, edit=None, key: object = None) -> dict:
    """The solution's namespace with every task's cells run (a task may use an earlier one's helpers), once
    per lab and edit."""
    if (lab_name, key) not in _namespaces:
        tasks = tuple(task.id for task in get_lab(lab_name).tasks)
        with contextlib.chdir(attack_kit.notebook_folder(lab_name)):
            # a variant's mistake may break one of the notebook's own demonstrations: graded, that cell errs
            # and the notebook goes on, so here too (the honest solution's cells must all run)
            _namespaces[(lab_name, key)] = solution_namespace(lab_name, tasks, edit=edit,
                                                              allow_errors=edit is not None)
    return _namespaces[(lab_name, key)]


def _solution(lab_name: str, task_id: str, kernels_with_lists: bool = False):
    namespace = (_namespace(lab_name, attack_kit.with_lists, "lists") if kernels_with_lists
                 else _namespace(lab_name))
    return namespace[get_lab(lab_name).task(task_id).function]


def _hostile(lab_name: str, task_id: str, attack: str, spec):
    honest = _solution(lab_name, task_id)
    if attack == "honest":
        return honest
    if attack == "function":
        return attack_kit.sniffing(honest, attack_kit.targets(spec, secret.current()))
    if attack == "ranks":
        return attack_kit.peeking(honest)
    if attack == "object":
        return attack_kit.lying(honest)
    if attack == "calls":
        return attack_kit.stateful(honest)
    if attack == "calls_payload":
        return attack_kit.stateful(honest, attack_kit.PAYLOAD_BYTES)
    if attack == "memory":
        return attack_kit.hogging(honest)
    if attack == "kernel":
        return _solution(lab_name, task_id, kernels_with_lists=True)
    raise AssertionError(attack)


_judged_case: dict = {}
"""(lab, task) -> the first case whose honest run makes the judge start a student process (else the first case):
the case the attacks run on, where the judge handles student code, not a value the kernel computed."""


def _case(lab_name: str, task_id: str, folder, started: list) -> object:
    task = get_lab(lab_name).task(task_id)
    if (lab_name, task_id) not in _judged_case:
        _judged_case[(lab_name, task_id)] = task.cases[0]
        for index, case in enumerate(task.cases):
            started.clear()
            attack_kit.verdict(lab_name, task_id, case.id, _solution(lab_name, task_id), folder / f"probe{index}")
            if started:
                _judged_case[(lab_name, task_id)] = case
                break
    return _judged_case[(lab_name, task_id)]


@pytest.mark.parametrize(("lab_name", "task_id", "attack", "as_user"), list(_params()))
def test_the_kit_against_a_judge(lab_name, task_id, attack, as_user, tmp_path, monkeypatch):
    """The honest control and every detector keep the case; every exploit loses it."""
    from grader.execute import student_process

    task = get_lab(lab_name).task(task_id)
    started: list[str] = []
    real = student_process.start

    def counting(*args, **kwargs):
        started.append(args[1] if len(args) > 1 else kwargs.get("harness", "?"))
        return real(*args, **kwargs)

    monkeypatch.setattr(student_process, "start", counting)
    case = _case(lab_name, task_id, tmp_path, started)
    started.clear()
    function = _hostile(lab_name, task_id, attack, case.spec)
    problems = attack_kit.verdict(lab_name, task_id, case.id, function, tmp_path, as_user=as_user)
    if attack in attack_kit.EXPLOITS:
        assert problems, f"{task_id}'s case {case.id} passed the kit's {attack} exploit: its judge can be beaten"
    elif attack != "honest" and "memory" in task.judged:  # a detector's own search counts against a memory bound
        assert not [p for p in problems if attack_kit.FOUND in p], f"{task_id}'s case {case.id}: {problems}"
    else:
        assert problems == [], f"{task_id}'s case {case.id} under the kit's {attack} attack: {problems}"
    if attack == "honest" and not as_user and started:
        assert "function" in task.judged, (f"{task_id}'s judge started a student process ({started[0]}) but the task "
                                           "does not declare judged=('function', ...): the kit cannot attack it")


def _variants():
    for lab in LABS.values():
        for mistake in mistakes(lab):
            for index in range(len(mistake.variants)):
                marks = [] if (lab.name, mistake.name) in VARIANTS_EVERY_RUN and index == 0 else [pytest.mark.slow]
                yield pytest.param(lab.name, mistake.name, index, marks=marks, id=f"{lab.name}-{mistake.name}-{index}")


@pytest.mark.parametrize(("lab_name", "mistake_name", "index"), list(_variants()))
def test_every_variant_of_a_mistake_is_caught(lab_name, mistake_name, index, tmp_path):
    """A mistake made another allowed way fails exactly the cases the mistake names (and passes the others).
    A lab with support files (lab 4's and lab 8's C++) is graded whole, as its examples are: the variant is applied
    to a copy of the solution's folder, whose C++ the grader builds."""
    lab = get_lab(lab_name)
    mistake = next(m for m in mistakes(lab) if m.name == mistake_name)
    if lab.support:
        from util.contract import ANSWER

        # the hidden cases, as for every lab (the notebook's own answer is its demonstration's: lab 8's variant
        # zeroes enough of C for 8.5's, which the mistake does not)
        result = _graded_variant(lab, mistake, index, tmp_path)
        failed = {(t.task_id, c.name) for t in result.tasks for c in t.checks if c.status != "passed" and c.hidden}
        expected = {(task_id, check) for task_id, checks in mistake.expected_failures.items() for check in checks
                    if check != ANSWER}
        assert failed == expected, f"{mistake_name} variant {index}"
        return
    namespace = _namespace(lab_name, attack_kit.applying(mistake.variants[index]), (mistake_name, index))
    for task_id, expected in mistake.expected_failures.items():
        task = lab.task(task_id)
        for case in task.cases:
            problems = attack_kit.verdict(lab_name, task_id, case.id, namespace[task.function], tmp_path / case.id)
            if case.id in expected:
                assert problems, f"{mistake_name} variant {index} passed {task_id}'s case {case.id}, which names it"
            else:
                assert problems == [], f"{mistake_name} variant {index} failed {task_id}'s case {case.id}: {problems}"


def _graded_variant(lab, mistake, index: int, folder):
    """The grader's result for the solution with ``mistake``'s variant ``index`` applied to its code cells and
    support files (written as an example submission is: :func:`grader.author.build.example_copy`)."""
    import dataclasses

    from grader.author.build import SOLUTIONS, example_copy, support_files
    from grader.core import notebook
    from grader.grade.submission import grade_submission

    files = support_files(lab)
    variant = dataclasses.replace(mistake, replacements=mistake.variants[index])
    nb = example_copy(lab, notebook.read(SOLUTIONS / lab.notebook), variant, files)
    submission = folder / "submission"
    for name, text in files.items():
        (submission / name).parent.mkdir(parents=True, exist_ok=True)
        (submission / name).write_text(text, encoding="utf-8")
    path = submission / f"{mistake.name}.ipynb"
    path.write_text(notebook.dumps(nb), encoding="utf-8")
    return grade_submission(path, lab, folder / "graded")


WITHOUT_VARIANTS: dict[tuple[str, str], str] = {}
"""(lab, mistake) -> why a mistake that names hidden cases has no variants (a C++ mistake's variants are graded
whole: :func:`_graded_variant`)."""


def _names_hidden_cases(mistake) -> bool:
    from util.contract import ANSWER
    return any(check != ANSWER for checks in mistake.expected_failures.values() for check in checks)


def test_every_mistake_that_names_a_hidden_case_has_variants():
    """A case named for a mistake must catch it however the task allows it to be made, so each such mistake
    declares its variants, or is listed in :data:`WITHOUT_VARIANTS` with the reason (and only while it has none)."""
    missing = {(lab.name, m.name) for lab in LABS.values() for m in mistakes(lab)
               if _names_hidden_cases(m) and not m.variants}
    assert missing - set(WITHOUT_VARIANTS) == set(), "mistakes naming hidden cases without variants"
    assert set(WITHOUT_VARIANTS) - missing == set(), "WITHOUT_VARIANTS lists mistakes that have variants now"


def test_every_variant_edits_the_solution():
    """Each ``old`` of every variant occurs in the solution's code cells, so no variant is silently the solution
    itself (the slow run grades each variant; this catches an edit that no longer applies on every run)."""
    from grader import REPO
    from grader.author.build import support_files
    from grader.core.notebook import read

    for lab in LABS.values():
        found = [m for m in mistakes(lab) if m.variants]
        if not found:
            continue
        code = "\n".join([cell.source for cell in read(REPO / "solutions" / lab.notebook).cells
                          if cell.cell_type == "code"] + list(support_files(lab).values()))
        for mistake in found:
            for index, variant in enumerate(mistake.variants):
                for old, _ in variant:
                    assert old in code, f"{lab.name} {mistake.name} variant {index}: {old!r} is not in the solution"


def test_the_declarations_name_known_surfaces():
    """Every surface a task declares is one the kit attacks, and the kit attacks every surface it knows."""
    declared = {surface for _, task in _judged_tasks() for surface in task.judged}
    assert declared <= set(SURFACES)
    handled = {"function", "ranks", "object", "calls", "memory", "kernel"}
    assert handled == set(SURFACES), "a surface the contract names has no attack in the kit"


def test_the_detectors_detect(tmp_path, monkeypatch):
    """The detectors are not blind: armed in this process (which holds the secret and a spec), they raise."""
    monkeypatch.setenv(attack_kit.STUDENT_ENV, "0")
    spec = {"seed": 12345, "n": 77, "label": "kit"}
    held = {"spec": dict(spec), "secret": secret.current()}
    sniffer = attack_kit.sniffing(lambda: 1, attack_kit.targets(spec, secret.current()))
    with pytest.raises(RuntimeError, match=attack_kit.FOUND):
        sniffer()
    del held
    import cloudpickle

    with pytest.raises(RuntimeError, match=attack_kit.FOUND):
        cloudpickle.loads(cloudpickle.dumps(attack_kit.sniffing(lambda: 1, attack_kit.targets({}, secret.current()))))
    import torch

    lied = attack_kit.lying(lambda: torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 2)))()
    assert len(list(lied.parameters())) < 4                     # the instance's own listing lies (4 tensors)
    assert len(list(torch.nn.Module.parameters(lied))) < 4      # and so does the class's, which calls it
    assert sum(t.numel() for m in lied._modules.values() for t in m._parameters.values()) == 6 + 3 + 6 + 2
    edited = attack_kit.with_lists("@triton.jit\ndef k(x):\n    y = x\n    return y\n")
    assert "kit_held = [0]" in edited and edited.index("kit_held") > edited.index("def k")
