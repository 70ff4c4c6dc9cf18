"""Every case of lab 14 that names a mistake catches it in every way the task allows (``Mistake.variants``).

Each mistake of ``util/labs/lab14/mistakes.py`` is made in its own way and in each of its variants (float64 instead
of float32, another call, another order), applied to the solution's cells as ``grader build`` applies a mistake;
each is run through its task's ``run_case`` (as the student's kernel runs a hidden case) and judged by the task's
judge (14.7, decided in the kernel: against the solution's value), in student processes started from this process (``grader.judge.isolated.serving``). The hidden cases that
fail must be exactly the mistake's ``expected_failures`` (the public answer, ``ANSWER``, is the notebook's and is
graded with the examples). The full notebooks of the variants are graded only under ``-m slow``.
"""
from __future__ import annotations

import os

import pytest
from judged_files import save_case
from lab14_solution import namespace

from grader.judge.compare import compare
from grader.judge.isolated import serving
from util.contract import ANSWER
from util.labs import get_lab
from util.labs.lab14 import judge
from util.labs.lab14.mistakes import MISTAKES, OVERFLOW

LAB = get_lab("lab14")
WAYS = [(mistake.name, index, replacements) for mistake in MISTAKES
        for index, replacements in enumerate((mistake.replacements, *mistake.variants))]


@pytest.fixture(autouse=True, scope="module")
def judge_here():
    with serving():
        yield
    for state in (judge._students, judge._answered, judge._owing, judge._compiled, judge._baseline):
        state.clear()


def failing_cases(task_id: str, replacements: tuple, folder) -> list[str]:
    """The hidden cases of ``task_id`` the judge fails for the solution with ``replacements`` applied."""
    task = LAB.task(task_id)
    function = namespace(tuple(replacements))[task.function]
    if task.grader_check is None:  # decided in the kernel (14.7): run_case's value against the solution's
        honest = namespace()[task.function]
        return [case.id for case in task.cases
                if compare(task.run_case(honest, case.spec), task.run_case(function, case.spec), task.tolerance)]
    module = judge.__dict__[task.grader_check.split(":")[1]]
    failing = []
    for case in task.cases:
        spec, data, _ = save_case("lab14", task_id, case.id, function, folder)
        problems = module(spec, data, task.tolerance)
        if problems:
            failing.append(case.id)
    return failing


def test_every_variant_is_declared_once_and_the_overflow_case_names_its_mistake():
    assert {name for name, index, _ in WAYS if index} == {m.name for m in MISTAKES}  # each has variants
    assert [m.name for m in MISTAKES if OVERFLOW in m.expected_failures.get("14.4", ())] == [
        "softmax_reads_the_row_twice", "softmax_without_the_maximum"]
    assert OVERFLOW in [c.id for c in LAB.task("14.4").cases]


@pytest.mark.parametrize("name,index,replacements", WAYS, ids=[f"{name}-{index}" for name, index, _ in WAYS])
def test_each_way_of_making_a_mistake_fails_exactly_its_cases(name, index, replacements, tmp_path):
    os.environ.setdefault("TRITON_INTERPRET", "1")
    mistake = next(m for m in MISTAKES if m.name == name)
    for task_id, expected in mistake.expected_failures.items():
        assert failing_cases(task_id, replacements, tmp_path) == [c for c in expected if c != ANSWER], (name, index)


def test_the_solution_fails_no_case_on_two_fresh_secrets(tmp_path):
    from util.judging import secret

    kept, drawn = secret.current(), []
    try:
        for _ in range(2):
            secret.renew()
            drawn.append(judge.inputs(LAB.task("14.4").cases[0].spec, [[2, 3]])[0])
            for task_id in ("14.2", "14.3", "14.4", "14.5"):
                assert failing_cases(task_id, (), tmp_path) == [], task_id
    finally:
        secret.install(kept)
    assert not bool((drawn[0] == drawn[1]).all())  # two draws indeed
