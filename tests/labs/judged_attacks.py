"""Judging hostile saved files through the grader's own judge process, as root and as an unprivileged grader.

A hidden case's verdict on what it saved is decided by ``grader.judge.isolated.judge``: a confined judge
process that asks the grader for student processes. The attack tests of labs 8, 11 and 12 build saved files
(pickled functions written as a notebook would write them, libraries, arrays), judge them all in one call
beside an honest file and a control that plays the same wrong answer straight, and compare the verdicts.

* :func:`notebook_namespace`: run source text as a notebook cell would be run, in a module nobody can import,
  so that cloudpickle pickles its functions by value (with what they read), exactly as a hidden case does in
  the student's kernel;
* :func:`job`: a saved file for one attacker and the judge's job for it;
* :func:`verdicts`: judge the jobs as whoever runs the tests (root in CI), or as an unprivileged user
  (``tests/test_unprivileged.py``).
"""
from __future__ import annotations

import io
import json
import os
import sys
import types
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from grader import REPO

SCRIPT = """
import json, sys
from pathlib import Path
from grader.judge.isolated import judge
from util import labs
jobs = json.loads(Path(sys.argv[1]).read_text())
found = judge(jobs, Path(sys.argv[2]), timeout=int(sys.argv[4]), reveal=tuple(labs.judge_paths(labs.get_lab(sys.argv[3]))))
print(json.dumps({job["spec"]["attacker"]: problems for job, problems in zip(jobs, found)}))
"""


def notebook_namespace(source: str, name: str = "judged_notebook", **given: Any) -> dict[str, Any]:
    """The globals of ``source`` run as a notebook cell (in a module that cannot be imported: its functions
    pickle by value), with ``given`` defined first."""
    module = types.ModuleType(name)
    module.__dict__.update(given)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module.__dict__


def job(folder: Path, lab_name: str, task_id: str, name: str, arrays: Mapping[str, np.ndarray],
        spec: Mapping[str, Any], tolerance: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Write ``arrays`` as the file a case of ``task_id`` saves (``folder/files/<name>.npz``) and return the judge's
    job for it (its spec marked with the attacker's ``name``)."""
    from util.labs import get_lab

    files = folder / "files"
    files.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    path = files / f"{name}.npz"
    path.write_bytes(buffer.getvalue())
    task = get_lab(lab_name).task(task_id)
    return {"check": task.grader_check, "spec": {**spec, "attacker": name}, "file": str(path),
            "tolerance": dict(tolerance or {"rtol": task.tolerance.rtol, "atol": task.tolerance.atol})}


def verdicts(jobs: list[dict], folder: Path, lab_name: str, *, as_user: bool = False, timeout: int = 300,
             env: Mapping[str, str] | None = None, needed: tuple[Path, ...] = ()) -> dict[str, list[str]]:
    """``{attacker: problems}`` for ``jobs`` (files under ``folder/files``), judged by the grader's judge process
    with ``lab_name``'s judges: in this process (as whoever runs the tests), or, ``as_user``, by a grader running
    as the unprivileged user of ``tests/test_unprivileged.py`` (``env`` added to its environment, ``needed``
    folders shown to it)."""
    from util import labs

    for path in [folder, *folder.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    if not as_user:
        from grader.judge.isolated import judge

        found = judge(jobs, folder / "files", timeout=timeout, reveal=tuple(labs.judge_paths(labs.get_lab(lab_name))))
        return {job["spec"]["attacker"]: problems for job, problems in zip(jobs, found)}
    from test_unprivileged import USER, _as_user

    (folder / "jobs.json").write_text(json.dumps(jobs))
    os.chmod(folder / "jobs.json", 0o644)
    base = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "HOME": str(folder), "LANG": "C.UTF-8"}
    done = _as_user([sys.executable, "-c", SCRIPT, str(folder / "jobs.json"), str(folder / "files"), lab_name,
                     str(timeout)],
                    [Path(sys.executable).resolve().parent.parent, Path(sys.prefix), REPO, folder, *needed],
                    {**base, **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    assert USER != os.geteuid()
    return json.loads(done.stdout.strip().splitlines()[-1])
