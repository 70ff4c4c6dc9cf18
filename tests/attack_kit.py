"""The attack kit: a generic hostile submission for each class of hole the held-out attacks found in judges, built from a lab's own solution by
what its tasks declare (``Task.judged``, :data:`util.contract.SURFACES`), so that a new lab is attacked without
anyone writing its attacks (``tests/test_attack_kit.py`` drives it over every lab).

Each attack is the solution's own function made hostile in one way, beside the solution itself (the honest
control), and run through the path a graded case takes: the task's ``run_case`` as the graded kernel runs it, the
file it saves judged by the grader's real judge process (as whoever runs the tests, and as an unprivileged
grader), what it returned compared with the references. Two kinds:

* **detectors** (the verdict must equal the honest control's: full marks): the hostile code looks for something
  it must never reach and raises :data:`FOUND` when it does, which fails the case, so a leak shows as a lost
  point with the leak named in the feedback:

  - ``function``: at unpickling (an object's ``__reduce__`` among the function's globals) and at every call, it
    walks every frame of every thread, every object the garbage collector tracks, the environment,
    ``/proc/self`` and the files of its working folders for the grading secret (:mod:`util.judging.secret`)
    or the case's spec;
  - ``ranks``: each rank lists ``/proc`` and reads what it can of any other Python process that is not its
    ancestor (a peer rank): ``cmdline``, ``stat``, ``environ``;
  - ``object``: the object the function returns lies about itself (``parameters()``, ``named_parameters()``,
    ``modules()``... list only the first of each), so a judge that counts through those methods counts wrong;
  - ``calls``: a callable that keeps state between calls (a count, every input's digest) and answers honestly.

* **exploits** (the case must fail, where the honest control passes):

  - ``memory``: gives back what it does not need (unmaps the GPU libraries a CPU run never executes), then holds
    as much memory as it can get (up to :data:`HOG_BYTES`) while it answers honestly;
  - ``kernel``: every ``@triton.jit`` kernel of the solution gets a Python list in its body, which Triton's
    interpreter runs and no GPU compiler accepts;
  - ``calls``: the same callable carrying :data:`PAYLOAD_BYTES` of data in its pickle.

The detectors arm themselves only in a student process (the grader sets ``COURSE_STUDENT_CHANNEL_FD`` there):
the graded kernel holds a case's spec by design, and this test process is the grader.

A mistake's :attr:`util.contract.Mistake.variants` (the same mistake made in float64, another order, another
library call) are run the same way: every case the mistake names must fail in every variant.
"""
from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import json
import os
import random
import shutil
import sys
import types
from pathlib import Path
from typing import Any, Callable, Mapping

import cloudpickle

sys.path.insert(0, str(Path(__file__).with_name("labs")))  # judged_files: the judge path the labs' attack tests use

FOUND = "ATTACK KIT FOUND"
"""What a detector's exception starts with: the feedback then names the leak."""
HOG_BYTES = 2 << 30
"""Most memory the memory exploit holds (it holds what it can get below this)."""
PAYLOAD_BYTES = 1 << 20
"""Data the carrying callable holds in its pickle (a data set's worth: no task's code needs it)."""
STUDENT_ENV = "COURSE_STUDENT_CHANNEL_FD"
"""Set by the grader in a student process only (``util.student_process.CHANNEL_FD_ENV``)."""

DETECTORS = ("function", "ranks", "object", "calls")
EXPLOITS = ("memory", "kernel", "calls_payload")


def _armed() -> bool:
    return STUDENT_ENV in os.environ


# ------------------------------------------------------------------ what a detector looks for


def targets(spec: Mapping[str, Any], secret: bytes) -> dict:
    """What the detectors search for, in a form that is not itself a match: the secret's hex reversed (the
    needle is made at search time and skipped by identity), the spec's items as JSON."""
    return {"secret": secret.hex()[::-1], "spec": json.dumps(dict(spec), sort_keys=True)}


def _search(found_in: str, wanted: dict) -> None:
    """Raise :data:`FOUND` when the grading secret or the case's spec can be reached from here: the locals of every
    frame of every thread, every str, bytes and dict held by a container the garbage collector tracks (module
    dicts included), the environment, ``/proc/self`` and the small files of the working folders."""
    import gc

    gc.collect()  # what an earlier search left in reference cycles (its frame's locals) is not a find
    needle = wanted["secret"][::-1]
    raw = bytes.fromhex(needle)
    spec = json.loads(wanted["spec"])
    mine = {id(wanted), id(spec), id(needle), id(raw)}
    keys = set(spec)

    def found(value: Any) -> str | None:
        kind = type(value)
        if kind is str:
            return "the grading secret" if len(value) >= 64 and needle in value and value is not needle else None
        if kind is bytes or kind is bytearray:
            return "the grading secret" if value is not raw and (raw in value or needle.encode() in value) else None
        if kind is dict and keys and value is not spec and keys <= value.keys():
            try:
                return "the case's spec" if all(value[key] == spec[key] for key in keys) else None
            except Exception:
                return None
        return None

    def report(what: str, where: str, holder: Any = None) -> None:
        shown = f"; held by a {type(holder).__name__} {_glimpse(holder)}" if holder is not None else ""
        raise RuntimeError(f"{FOUND} {what} ({where}, {found_in}{shown})")

    frames = list(sys._current_frames().values())
    seen: set[int] = set()
    for top in frames:
        frame = top
        while frame is not None and id(frame) not in seen:
            seen.add(id(frame))
            for name, value in list(frame.f_locals.items()):
                what = found(value)
                if what:
                    report(what, f"local {name} of {frame.f_code.co_name}")
            frame = frame.f_back
    frames = top = frame = None  # no cycle through this frame's own locals outlives the search
    for obj in gc.get_objects():
        kind = type(obj)
        if kind is dict:
            if id(obj) in mine:
                continue
            what = found(obj)
            if what:
                report(what, "a dict", obj)
            values = obj.values()
        elif kind is list or kind is tuple:
            values = obj
        else:
            continue
        try:
            for value in values:
                what = found(value)
                if what:
                    report(what, f"inside a {kind.__name__}", obj)
        except RuntimeError as exc:
            if str(exc).startswith(FOUND):
                raise
    for name, value in os.environ.items():
        if needle in value:
            report("the grading secret", f"environment variable {name}")
    for name in ("cmdline", "environ"):
        try:
            if found(Path(f"/proc/self/{name}").read_bytes()):
                report("the grading secret", f"/proc/self/{name}")
        except OSError:
            pass
    for folder in {Path.cwd(), Path(os.environ.get("HOME", "/nonexistent")), Path(os.environ.get("TMPDIR", "/tmp"))}:
        try:
            entries = list(folder.rglob("*"))[:2000]
        except OSError:
            continue
        for path in entries:
            try:
                if path.is_file() and path.stat().st_size < (1 << 20) and found(path.read_bytes()):
                    report("the grading secret", f"file {path}")
            except OSError:
                continue


def _glimpse(value: Any) -> str:
    """A few words on where a find was, for the feedback (at most 160 characters)."""
    if isinstance(value, dict):
        return "with keys " + ", ".join(repr(key)[:30] for key in list(value)[:8])
    return repr(value)[:160]


class _Sniffer:
    """Among a hostile function's globals: unpickling it searches (its ``__reduce__``), and so does each call."""

    def __init__(self, wanted: dict) -> None:
        self.wanted = wanted

    def __reduce__(self):
        return (_sniffer_at_unpickling, (self.wanted,))

    def sniff(self, when: str) -> None:
        if _armed():
            _search(when, self.wanted)


def _sniffer_at_unpickling(wanted: dict) -> _Sniffer:
    sniffer = _Sniffer(wanted)
    sniffer.sniff("when the function was unpickled")
    return sniffer


def _peers() -> None:
    """Raise :data:`FOUND` when this process can read any other Python process that is not its ancestor."""
    ancestors, pid = set(), os.getpid()
    while pid > 1:
        ancestors.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            break
    ancestors.add(pid)
    try:
        pids = [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]
    except OSError:  # /proc cannot be listed: guess, as an attacker would, the pids next to its own
        pids = list(range(max(2, os.getpid() - 64), os.getpid() + 64))
    for number in pids:
        entry = Path(f"/proc/{number}")
        if number in ancestors:
            continue
        for name in ("cmdline", "stat", "environ"):
            try:
                text = (entry / name).read_bytes()
            except OSError:
                continue
            if text and (name != "cmdline" or b"python" in text):
                raise RuntimeError(f"{FOUND} a peer's /proc/{entry.name}/{name} ({len(text)} bytes readable)")


# ------------------------------------------------------------------ hostile versions of a solution's function


def _first(before: Callable[[], None], function: Callable, after: Callable[[Any], Any] = lambda value: value):
    """``function`` with ``before()`` first, in ``function``'s own globals (the notebook's, as a student's hostile
    function would be: a judge that finds a task's other functions beside it, 11.6's, finds them)."""
    def hostile(*args, **kwargs):
        before()
        return after(function(*args, **kwargs))

    home = getattr(function, "__globals__", None)
    if home is not None:
        hostile = types.FunctionType(hostile.__code__, home, hostile.__name__, hostile.__defaults__,
                                     hostile.__closure__)
    return functools.wraps(function)(hostile)


def _wrap(honest: Any, before: Callable[[], None], after: Callable[[Any], Any] = lambda value: value) -> Any:
    """``honest`` with ``before()`` run first at each call (and ``after`` applied to what it returns). A class is
    wrapped as a subclass whose every method it defines (static and class methods too: an autograd ``Function``'s
    ``forward`` is one) and whose making runs ``before`` first."""
    if not isinstance(honest, type):
        return _first(before, honest, after)
    members: dict[str, Any] = {"__module__": honest.__module__, "__qualname__": honest.__qualname__}
    for name, member in vars(honest).items():
        if name.startswith("__") and name != "__init__":
            continue
        if isinstance(member, staticmethod):
            members[name] = staticmethod(_first(before, member.__func__))
        elif isinstance(member, classmethod):
            members[name] = classmethod(_first(before, member.__func__))
        elif callable(member):
            members[name] = _first(before, member)
    return type(honest.__name__, (honest,), members)


SNIFFED_CALLS = 2
"""Calls the ``function`` detector searches at (a search takes a few seconds; a loss is called hundreds of times)."""


def sniffing(honest: Any, wanted: dict) -> Any:
    """The ``function`` detector: ``honest`` searching for the secret and the spec when unpickled and at its first
    :data:`SNIFFED_CALLS` calls."""
    sniffer, calls = _Sniffer(wanted), [0]

    def before():
        calls[0] += 1
        if calls[0] <= SNIFFED_CALLS:
            sniffer.sniff(f"at call {calls[0]} of the function")

    return _wrap(honest, before)


def peeking(honest: Any) -> Any:
    """The ``ranks`` detector: ``honest``, each call (in each rank) looking for its peers in ``/proc``."""
    return _wrap(honest, lambda: _peers() if _armed() else None)


def _liar(value: Any) -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return value
    if isinstance(value, torch.nn.Module):
        def first(method):
            def lying(*args, **kwargs):
                for item in method(*args, **kwargs):
                    yield item
                    return
            return lying
        for module in list(torch.nn.Module.modules(value)):
            for name in ("parameters", "named_parameters", "buffers", "named_buffers", "modules", "named_modules",
                         "children", "named_children"):
                object.__setattr__(module, name, first(getattr(type(module), name).__get__(module)))
        return value
    if isinstance(value, (tuple, list)):
        return type(value)(_liar(item) for item in value)
    if isinstance(value, dict):
        return {key: _liar(item) for key, item in value.items()}
    return value


def lying(honest: Any) -> Any:
    """The ``object`` detector: what ``honest`` returns, with every module's listing methods listing one item."""
    return _wrap(honest, lambda: None, _liar)


def stateful(honest: Any, payload: int = 0) -> Any:
    """The ``calls`` attacks: ``honest`` keeping a count and every input's digest between calls, carrying
    ``payload`` bytes of data in its pickle (0: the detector; :data:`PAYLOAD_BYTES`: the exploit)."""
    state = {"calls": 0, "seen": [], "carried": random.Random(0).randbytes(payload)}

    def remember():
        state["calls"] += 1
        state["seen"].append(hashlib.sha256(str(state["calls"]).encode()).hexdigest()[:8])

    return _wrap(honest, remember)


def _give_back_and_hold() -> list:
    """Unmap the GPU libraries' segments a CPU run never executes, then hold as much memory as can be had."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split()
        if len(fields) >= 6 and any(key in fields[5] for key in ("libcudnn", "libcublas", "libnccl", "libcusparse",
                                                                   "libcufft", "libcurand", "libcusolver", "libnvrtc",
                                                                   "libtorch_cuda", "libcupti", "libnvJitLink")):
            low, high = (int(part, 16) for part in fields[0].split("-"))
            libc.munmap(low, high - low)
    import numpy as np

    held, chunk = [], 64 << 20
    while len(held) * chunk < HOG_BYTES:
        try:
            block = np.ones(chunk // 8)
        except MemoryError:
            if chunk <= 1 << 20:
                break
            chunk //= 4
            continue
        held.append(block)
    return held


def hogging(honest: Any) -> Any:
    """The ``memory`` exploit: ``honest`` answering while holding as much memory as it could get."""
    holder: list = []

    def hog():
        if _armed() and not holder:
            holder.append(_give_back_and_hold())

    return _wrap(honest, hog)


def with_lists(source: str) -> str:
    """``source`` (a notebook cell) with a Python list built and indexed at the top of every ``@triton.jit``
    function's body: Triton's interpreter runs it; its compiler refuses it."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    lines = source.splitlines(True)
    inserts = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant) \
                    and len(node.body) > 1:
                first = node.body[1]
            indent = " " * first.col_offset
            inserts.append((first.lineno - 1, f"{indent}kit_held = [0]\n{indent}kit_held = kit_held + [kit_held[0]]\n"))
    for index, text in sorted(inserts, reverse=True):
        lines.insert(index, text)
    return "".join(lines)


def applying(replacements: tuple[tuple[str, str], ...]) -> Callable[[str], str]:
    """A cell edit applying ``replacements`` wherever their ``old`` text occurs (a mistake's variant)."""
    def edit(source: str) -> str:
        for old, new in replacements:
            source = source.replace(old, new)
        return source
    return edit


# ------------------------------------------------------------------ a case's verdict, as grading gives it


def verdict(lab_name: str, task_id: str, case_id: str, function: Any, folder: Path, *,
            as_user: bool = False, timeout: int = 300) -> list[str]:
    """The problems a graded case finds with ``function`` (``[]``: it passes): the task's ``run_case`` as the
    graded kernel runs it, the file it saved judged by the grader's judge process (``as_user``: by an
    unprivileged grader), what it returned compared with the lab's references."""
    from judged_files import judge_files

    from grader.judge import references
    from grader.judge.compare import compare, describe
    from util import labs, setup
    from util.answers import OUTPUT_DIR_ENV, to_jsonable
    from util.artifacts import case_stem, files_dir
    from util.hidden import with_files

    lab = labs.get_lab(lab_name)
    task = lab.task(task_id)
    case = next(c for c in task.cases if c.id == case_id)
    spec = dict(case.spec)
    answers = folder / "answers"
    shutil.rmtree(answers, ignore_errors=True)
    answers.mkdir(parents=True)
    previous = os.environ.get(OUTPUT_DIR_ENV)
    os.environ[OUTPUT_DIR_ENV] = str(answers)
    try:
        setup()
        with contextlib.chdir(notebook_folder(lab_name)):  # where a kernel runs: support files beside it
            value = to_jsonable(task.run_case(function, with_files(lab, spec)))
        saved = list(files_dir(lab_name).glob(case_stem(with_files(lab, spec)) + "*"))
        data = saved[0].read_bytes() if saved else None
    except Exception as exc:  # the kernel's record would be an error
        return [f"{task.function}() raised {type(exc).__name__}: {exc}"[:400]]
    finally:
        if previous is None:
            os.environ.pop(OUTPUT_DIR_ENV, None)
        else:
            os.environ[OUTPUT_DIR_ENV] = previous
    problems: list[str] = []
    if task.grader_check:
        if data is None:
            return ["the case saved no file for the grader to judge"]
        problems += judge_files(lab_name, {"case": (task_id, spec, data, value)}, folder, as_user=as_user,
                                timeout=timeout)["case"]
    if not problems:
        expected = references.load(lab)["cases"][task_id][case_id]
        mismatches = compare(expected, json.loads(json.dumps(value)), task.tolerance, path="result")
        if mismatches:
            problems.append(describe(mismatches, task.tolerance))
    return problems


def notebook_folder(lab_name: str) -> Path:
    """The folder a lab's solution notebook lies in (its support files, lab 8's ``kernel/``, lie beside it)."""
    from grader import REPO
    from util import labs

    return (REPO / "solutions" / labs.get_lab(lab_name).notebook).parent


def register() -> None:
    """Pickle this module's functions by value, as a notebook's are (the student process cannot import tests/)."""
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
