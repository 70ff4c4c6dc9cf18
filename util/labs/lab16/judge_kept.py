"""Lab 16's one student process, kept by the judge across cases and tasks (16.7 and, since release 5, 16.9).

Starting a student process imports PyTorch again (about a second and a half on a quiet machine, several under
load): a graded run that started one per case of 16.7 and per case of 16.9 paid it five times. So the judge keeps
one. A case asks :func:`student` for a process with its function loaded; a case that passed hands it back with
:func:`keep`, one that failed (or whose process answered out of turn) closes it with :func:`drop`, and the next case
starts a fresh one.

**Started early** (:func:`prestart`): 16.5's re-run, the case before 16.7's, trains for seconds in the judge while its
own student process answers; the lab's process is started then, so that its start and PyTorch's import (course code,
before any function is loaded: ``residual_harness.serve`` warms up first) run beside that training instead of before
16.7's first call. A process started early is this grading's and holds no function until a case loads one.

A kept process serves a later case only if it is **the grader's that started it**: the same harness
(:data:`HARNESS`), the same grading (a digest of the grading secret, :func:`util.judging.secret.current`: a judge
process serves one grading, and this makes it explicit), and younger than :data:`REUSE_SECONDS` (it still has most
of its lifetime before it). A function is loaded at most once in it, under its task's name, before any of that
task's inputs reach it; a second task's function is loaded into the same process when its first case comes (the same
student's code, which has seen only what earlier calls sent it: no case's spec, seed or the secret).
"""
from __future__ import annotations

import hashlib
import time
from typing import Any

HARNESS = "util.labs.lab16.residual_harness:serve"
"""The harness every kept process runs (it serves 16.7's and 16.9's calls)."""
LIFETIME_SECONDS = 600.0
"""How long a process started early (:func:`prestart`) may run; a case reuses it only while it is younger than
:data:`REUSE_SECONDS`."""
REUSE_SECONDS = 90.0
"""A kept process serves another case only while it is younger than this: the judge's timeout per case is 180 s, and
an honest case takes a few seconds."""
MAX_REPLY = 8 << 20
"""The largest answer the judge takes back from the student process."""
_KEPT: dict[str, Any] = {}
"""``student`` (the process), ``grading`` (a digest of the secret it was started under), ``started`` (by
``time.monotonic``), ``loaded`` (task name -> the sha256 of the function loaded under it)."""


def _grading() -> str:
    from util.judging import secret

    return hashlib.sha256(secret.current()).hexdigest()


def student(name: str, function: bytes, seconds: float, cpu: int):
    """A student process of :data:`HARNESS` with ``function`` (pickled bytes) loaded as ``name``: the kept one when it
    is this grading's, young enough, and has no other function loaded under ``name``; else a fresh one. The first
    reply to a load comes with the next call's (the harness answers a load only when it fails)."""
    from util.student_process import StudentProcess

    digest = hashlib.sha256(function).hexdigest()
    kept = _KEPT.pop("student", None)
    loaded = _KEPT.get("loaded", {})
    fresh = kept is None or _KEPT.get("grading") != _grading() or \
        time.monotonic() - _KEPT.get("started", 0.0) >= REUSE_SECONDS or loaded.get(name, digest) != digest \
        or not _alive(kept)
    if fresh:
        if kept is not None:
            kept.close()
        kept = StudentProcess.start(HARNESS, max_data=MAX_REPLY, seconds=seconds, cpu=cpu)
        _KEPT.update(grading=_grading(), started=time.monotonic(), loaded={})
        loaded = _KEPT["loaded"]
    if name not in loaded:
        kept.send({"function": name}, data=function)
        loaded[name] = digest
    return kept


def _alive(process) -> bool:
    """Whether the grader says ``process`` still runs (a kept process can end between cases: its lifetime, or the
    grader's service it was started under closed, as in a benchmark that calls the judges one after another)."""
    from util.student_process import ChannelError

    try:
        return process.stats().get("exit") is None
    except ChannelError:
        return False


def prestart(cpu: int) -> None:
    """Start this grading's process now, pinned to ``cpu``, with no function loaded, unless one is kept already: the
    next case that asks :func:`student` for one finds it warm. Nothing is raised: a process that cannot be started
    now is started by that case."""
    from util.student_process import ChannelError, StudentProcess

    if "student" in _KEPT:
        return
    try:
        process = StudentProcess.start(HARNESS, max_data=MAX_REPLY, seconds=LIFETIME_SECONDS, cpu=cpu)
    except ChannelError:
        return
    _KEPT.update(student=process, grading=_grading(), started=time.monotonic(), loaded={})


def keep(process) -> None:
    """Hand ``process`` back after a case that passed: the next case of this grading may use it."""
    _KEPT["student"] = process


def drop(process) -> None:
    """Close ``process`` after a case that failed: the next case starts a fresh one."""
    _KEPT.pop("student", None)
    _KEPT["loaded"] = {}
    if process is not None:
        process.close()
