"""Judging saved files through the grader's real judge path, as whoever runs the tests and as an unprivileged grader.

The attack tests of labs 5, 6, 7, 9 and 10 (``tests/labs/test_labN_attacks.py``) make the file a hidden case
saves the way a graded kernel makes it (the task's own ``run_case``, on a hostile function or beside an honest
one), then have it judged by :func:`grader.judge.isolated.judge`: a confined judge process, the student
processes it asks the grader for, the lab's judges shown to it and nothing else of the grader-only files. The
same jobs are judged again by ``python`` run as the unprivileged user of ``tests/test_unprivileged.py``.

    saved = save_case("lab9", "9.3", case_id, function, tmp_path)          # (spec, bytes) as the kernel saves them
    verdicts = judge_files("lab9", {"attack": ("9.3", spec, data)}, tmp_path)               # as root in CI
    verdicts = judge_files("lab9", {"attack": ("9.3", spec, data)}, tmp_path, as_user=True)  # as uid 4242
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from grader import REPO
from util import labs
from util.answers import OUTPUT_DIR_ENV
from util.artifacts import case_stem, files_dir
from util.hidden import with_files
from util.judging import secret

SCRIPT = """
import json, sys
from pathlib import Path
from grader.judge.isolated import judge
from util import labs
from util.judging import secret
secret.install(bytes.fromhex(sys.stdin.readline().strip()))  # the test's grading secret, as the grader's own
jobs = json.loads(Path(sys.argv[1]).read_text())
found = judge(jobs, Path(sys.argv[2]), timeout=int(sys.argv[4]), reveal=tuple(labs.judge_paths(labs.get_lab(sys.argv[3]))))
print(json.dumps([problems for problems in found]))
"""


def save_case(lab_name: str, task_id: str, case_id: str, function: Callable, folder: Path,
              spec: Mapping[str, Any] | None = None) -> tuple[dict, bytes, Any]:
    """Run ``task_id``'s case ``case_id`` (or ``spec``) on ``function`` as a graded kernel does (the task's
    ``run_case``, answers in ``folder``): ``(spec, the bytes it saved, what run_case returned, as JSON holds it)``."""
    from util.answers import to_jsonable

    lab = labs.get_lab(lab_name)
    task = lab.task(task_id)
    if spec is None:
        spec = dict(next(c for c in task.cases if c.id == case_id).spec)
    previous = os.environ.get(OUTPUT_DIR_ENV)
    os.environ[OUTPUT_DIR_ENV] = str(folder)
    try:
        value = to_jsonable(task.run_case(function, with_files(lab, spec)))
        [path] = list(files_dir(lab_name).glob(case_stem(with_files(lab, spec)) + "*"))
        data = path.read_bytes()
        path.unlink()
    finally:
        if previous is None:
            os.environ.pop(OUTPUT_DIR_ENV, None)
        else:
            os.environ[OUTPUT_DIR_ENV] = previous
    return dict(spec), data, value


def judge_files(lab_name: str, saved: Mapping[str, tuple], folder: Path, *,
                as_user: bool = False, timeout: int = 300) -> dict[str, list[str]]:
    """Name -> the problems the grader's judge process finds in each ``(task id, spec, bytes)`` of ``saved`` (or
    ``(task id, spec, bytes, returned)``: what the case returned in the kernel, passed on as the grader does),
    judged in one run of :func:`grader.judge.isolated.judge` (``as_user``: by a grader run as the unprivileged
    user of ``tests/test_unprivileged.py``)."""
    from grader.judge.isolated import judge

    lab = labs.get_lab(lab_name)
    files = folder / "judged"
    shutil.rmtree(files, ignore_errors=True)
    files.mkdir(parents=True)
    jobs = []
    for index, (task_id, spec, data, *returned) in enumerate(saved.values()):
        task = lab.task(task_id)
        path = files / f"case{index}.bin"
        path.write_bytes(data)
        jobs.append({"check": task.grader_check, "spec": dict(spec), "file": str(path),
                     "tolerance": {"rtol": task.tolerance.rtol, "atol": task.tolerance.atol},
                     **({"returned": json.loads(json.dumps(returned[0]))} if returned else {})})
    for path in [folder, files, *files.iterdir()]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    if not as_user:
        found = judge(jobs, files, timeout=timeout, reveal=tuple(labs.judge_paths(lab)))
    else:
        from test_unprivileged import USER, _as_user

        (folder / "jobs.json").write_text(json.dumps(jobs))
        os.chmod(folder / "jobs.json", 0o644)
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "HOME": str(folder), "LANG": "C.UTF-8"}
        done = _as_user([sys.executable, "-c", SCRIPT, str(folder / "jobs.json"), str(files), lab_name, str(timeout)],
                        [Path(sys.executable).resolve().parent.parent, Path(sys.prefix), REPO, folder], env,
                        input=secret.current().hex() + "\n")
        assert done.returncode == 0, done.stderr[-3000:]
        assert USER != os.geteuid()
        found = json.loads(done.stdout.strip().splitlines()[-1])
    return dict(zip(saved, found))
