"""Running the hidden cases inside the graded notebook's kernel, after the notebook has run.

The hidden cases are grader-only (a lab's ``cases.py``, :data:`util.labs.GRADER_ONLY`): neither the
students' copy nor a graded kernel can read them. The grader brings them only when it grades: it appends
one cell that calls :func:`run_cases` with the cases' inputs written into the cell itself
(:func:`cell_source`), after the student's cells have run. For every case :func:`run_cases` looks up the
student's function by name in the notebook's namespace, calls it through the task's ``run_case`` (public:
it says how an input is built, not which inputs there are) and writes the JSON-able result (or the error)
to a file after each case, so a case that hangs or kills the kernel does not lose the others. Comparison
with the references happens later, in the grader.

A case's spec is JSON. A file it needs (a recorded trace) is named ``{"$file": "cases_data/NAME"}``, a
path in the lab's folder; the grader puts the file's bytes into the cell (:func:`case_specs`) and the
kernel hands ``run_case`` a ``bytes`` object in its place.

A term secret (:func:`term_spec`) draws the seeds a case declares (``Case.seeds``) anew, so one term's
inputs do not answer the next term's.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import time
import traceback
from pathlib import Path
from typing import Any, Mapping

from util.answers import to_jsonable, write_json

TERM_ENV = "COURSE_TERM_FILE"
"""The grader's variable naming the file that holds this term's secret (``python -m grader grade --term``);
never passed to a kernel (its environment is an allowlist)."""
FILE_KEY = "$file"
"""A spec value ``{"$file": path}`` is replaced by that file's bytes when the case runs."""
_BYTES_KEY = "$bytes"


def _error_text(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    student = [f for f in frames if "<ipython-input" in f.filename or f.filename.startswith("/tmp/ipykernel")]
    where = f" (line {student[-1].lineno} of {student[-1].name})" if student else ""
    return f"{type(exc).__name__}: {exc}{where}"


def _decoded(value: Any) -> Any:
    """``value`` with every ``{"$bytes": base64}`` the grader put in replaced by its bytes."""
    if isinstance(value, dict):
        if set(value) == {_BYTES_KEY}:
            return base64.b64decode(value[_BYTES_KEY])
        return {key: _decoded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_decoded(item) for item in value]
    return value


def run_cases(lab_name: str, namespace: Mapping[str, Any], path: str,
              cases: Mapping[str, list[list[Any]]], release: int | None = None) -> None:
    """Run the hidden cases ``cases`` (task id -> ``[[case id, spec], ...]``, as the grader wrote them into
    the cell) on the functions in ``namespace``; record results in ``path``. ``release``: the lab release
    the notebook is graded as, whose declaration of each task (its function, its ``run_case``) is used
    (``Lab.as_of``: a task a later release redeclared is called as the notebook's release declared it).

    Each record is ``{"status": "ok"|"error"|"missing", "value"?, "message"?, "seconds"}`` keyed by
    task id then case id.
    """
    from util import setup
    from util.labs import get_lab

    lab = get_lab(lab_name)
    lab = lab if release is None else lab.as_of(int(release))
    out_path = Path(path)
    records: dict[str, dict[str, Any]] = {}
    for task in lab.tasks:
        if not cases.get(task.id):
            continue
        records[task.id] = {}
        function = namespace.get(task.function)
        for case_id, spec in cases[task.id]:
            start = time.perf_counter()
            if not callable(function):
                record = {"status": "missing",
                          "message": f"the notebook defines no function {task.function}()"}
            else:
                try:
                    setup()  # the same seed and threads before every case, whatever the notebook did
                    record = {"status": "ok", "value": to_jsonable(task.run_case(function, _decoded(spec)))}
                except Exception as exc:  # the student's code may raise anything
                    record = {"status": "error", "message": _error_text(exc)}
            record["seconds"] = round(time.perf_counter() - start, 3)
            records[task.id][case_id] = record
            write_json(out_path, records)  # after every case: a later hang or crash keeps this one


# ------------------------------------------------------------------ the grader's side


def term_secret() -> bytes | None:
    """This term's secret: the bytes of the file ``$COURSE_TERM_FILE`` names, or ``None`` when none is set.
    An unreadable or empty file is an error (a term graded with the default inputs by mistake is worse)."""
    name = os.environ.get(TERM_ENV)
    if not name:
        return None
    secret = Path(name).read_bytes().strip()
    if not secret:
        raise ValueError(f"the term secret file {name} is empty; write a long random string into it "
                         "(e.g. python -c 'import secrets; print(secrets.token_hex(32))' > FILE)")
    return secret


def use_term(path: str | os.PathLike | None) -> None:
    """Grade (or regenerate references) for the term whose secret the file ``path`` holds, in this process and
    the grader processes it starts (``None``: the course's default inputs). Fails now, with what to do, when
    the file cannot be read or is empty."""
    if path is None:
        os.environ.pop(TERM_ENV, None)
        return
    os.environ[TERM_ENV] = str(Path(path).resolve())
    try:
        term_secret()
    except OSError as exc:
        os.environ.pop(TERM_ENV, None)
        raise ValueError(f"the term secret file {path} cannot be read ({exc.strerror})") from None


def term_fingerprint(secret: bytes) -> str:
    """A short public name for a secret (it names the references made for it; it does not reveal it)."""
    return hashlib.sha256(b"course term\0" + secret).hexdigest()[:12]


def term_spec(lab_name: str, task_id: str, case: Any, secret: bytes | None) -> dict[str, Any]:
    """``case.spec`` as this term grades it: each key ``case.seeds`` lists drawn anew from ``secret``
    (SHA-256 of the secret, the lab, task, case and key: stable, never Python's ``hash``); the spec
    itself when there is no secret."""
    spec = dict(case.spec)
    if secret is None:
        return spec
    for key in case.seeds:
        message = "\0".join((lab_name, task_id, case.id, key, json.dumps(spec[key]))).encode()
        spec[key] = int.from_bytes(hashlib.sha256(secret + b"\0" + message).digest()[:4], "big") % 100_000
    return spec


def graded_spec(lab: Any, task: Any, case: Any) -> dict[str, Any]:
    """``case``'s spec as the grader runs it this term (:func:`term_spec` with :func:`term_secret`): what the
    kernel's ``run_case`` receives (files still named, not inlined) and the judge of its saved file reads."""
    return term_spec(lab.name, task.id, case, term_secret())


def with_files(lab: Any, spec: Any) -> Any:
    """``spec`` as the kernel's ``run_case`` receives it, each ``{"$file": ...}`` replaced by the file's bytes:
    what a saved file's name is derived from (``util.artifacts.case_file``), so the grader finds it."""
    from util.labs import folder

    return _decoded(_inlined(spec, folder(lab)))


def _inlined(value: Any, folder: Path) -> Any:
    if isinstance(value, dict):
        if set(value) == {FILE_KEY}:
            path = (folder / value[FILE_KEY]).resolve()
            if not path.is_relative_to(folder.resolve()):
                raise ValueError(f"a case's file {value[FILE_KEY]!r} lies outside its lab's folder")
            return {_BYTES_KEY: base64.b64encode(path.read_bytes()).decode("ascii")}
        return {key: _inlined(item, folder) for key, item in value.items()}
    if isinstance(value, list):
        return [_inlined(item, folder) for item in value]
    return value


def case_specs(lab: Any) -> dict[str, list[list[Any]]]:
    """What :func:`run_cases` receives for ``lab`` (as its release grades: pass ``lab.as_of(n)``): task id ->
    ``[[case id, spec], ...]``, the specs as this term grades them (:func:`term_spec`) with every
    ``{"$file": ...}`` replaced by the file's bytes. Grader side only: it reads the grader-only cases."""
    from util.labs import folder

    if not lab.has_cases:
        raise RuntimeError(f"the hidden cases of {lab.name} are not here ({lab.name}'s grader-only cases.py cannot "
                           "be read): grade from the course's own repository, not from the students' copy")
    secret, root = term_secret(), folder(lab)
    return {task.id: [[case.id, _inlined(term_spec(lab.name, task.id, case, secret), root)] for case in task.cases]
            for task in lab.tasks if task.cases}


def cell_source(lab_name: str, path: Path, cases: Mapping[str, list[list[Any]]], release: int | None = None) -> str:
    """The code of the cell the grader appends to a notebook: :func:`run_cases` with ``cases`` (and the release the
    notebook is graded as) written in."""
    return ("import json as _course_json, util.hidden as _course_hidden\n"
            f"_course_hidden.run_cases({lab_name!r}, globals(), {str(path)!r}, "
            f"_course_json.loads({json.dumps(cases)!r}), release={release!r})")
