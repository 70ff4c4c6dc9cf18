"""What confinement works here, probed once per process: whether bubblewrap can build the sandbox,
which user student code runs as, and which mechanism enforces each limit (for the grader's log).

The probes run Python (importing ``util``) exactly as a kernel will be run
(:func:`grader.execute.launch.command_prefix`); :mod:`grader.execute.sandbox` holds the sandbox's
shape (its bwrap arguments, the unprivileged user) and :mod:`grader.execute.launch` the prefix
that applies it. Every runner asks :func:`available` and :func:`student_ids` here.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

from grader import REPO
from grader.execute import cgroups, disk, launch, sandbox
from grader.execute.sandbox import SANDBOX_ENV, run_as, scratch_base, userns

UNSANDBOXED_WARNING = (
    "bubblewrap (bwrap) is not usable here{reason}: submissions run WITHOUT a sandbox. Time, memory, "
    "process and disk limits still apply{user}, but student code can use the network, read any file "
    "its user can (the references, other submissions) and write outside its scratch folder. "
    "Install it (Debian/Ubuntu: apt-get install bubblewrap) to grade untrusted notebooks.")


def _probe_command(scratch: Path, sandboxed: bool) -> list[str]:
    check = "import util.answers, os; assert os.geteuid() != 0 or os.environ.get('COURSE_PROBE_ROOT')"
    return launch.command_prefix(scratch, sandboxed=sandboxed, ids=run_as()) + [sys.executable, "-c", check]


def _probe(sandboxed: bool) -> str | None:
    """Run Python, importing ``util``, exactly as a kernel will be run; ``None`` if it works."""
    scratch = Path(tempfile.mkdtemp(prefix="grade-probe-", dir=scratch_base()))
    try:
        for name in (".tmp", ".shm", ".home"):
            (scratch / name).mkdir()
        ids = run_as()
        if ids:
            for path in [scratch, *scratch.iterdir()]:
                os.chown(path, *ids)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO)}
        probe = subprocess.run(_probe_command(scratch, sandboxed), capture_output=True, text=True, timeout=60,
                               cwd=scratch, env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return f" ({exc})"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or [f"exit code {probe.returncode}"])[-1]
        return f" ({last[:300]})"
    return None


@functools.lru_cache(maxsize=None)
def unavailable_reason() -> str | None:
    """``None`` when bwrap can build the sandbox here, else why not (probed once per process)."""
    if os.environ.get(SANDBOX_ENV, "").lower() in ("off", "0", "no", "false"):
        return f" ({SANDBOX_ENV}=off)"
    if shutil.which("bwrap") is None:
        return " (not installed)"
    reason = _probe(sandboxed=True)
    if reason is None or userns():
        return reason
    sandbox.use_root_userns(True)  # bwrap as root failed: try it as the unprivileged user, in a user namespace
    second = _probe(sandboxed=True)
    if second is None:
        return None
    sandbox.use_root_userns(False)
    return f"{reason}; as an unprivileged user:{second}"


@functools.lru_cache(maxsize=None)
def unprivileged_without_sandbox() -> str | None:
    """Without the sandbox, a root grader still drops student code to :func:`run_as`'s user when
    that user can run Python here: ``None`` when it can (or the grader is not root), else why not."""
    if run_as() is None:
        return None
    return _probe(sandboxed=False)


def available() -> bool:
    """Whether kernels will run sandboxed (warns once, in words an instructor can act on, if not)."""
    reason = unavailable_reason()
    if reason is not None:
        _warn_once(reason)
    return reason is None


@functools.lru_cache(maxsize=None)
def _warn_once(reason: str) -> None:
    ids, problem = run_as(), unprivileged_without_sandbox()
    user = ("" if ids is None else f" and it runs as uid {ids[0]}" if problem is None
            else f", but it runs AS ROOT: uid {ids[0]} cannot run Python here{problem}")
    text = UNSANDBOXED_WARNING.format(reason=reason, user=user)
    warnings.warn(text, RuntimeWarning, stacklevel=3)
    print("grader: warning: " + text, file=sys.stderr)


def student_ids(sandboxed: bool) -> tuple[int, int] | None:
    """The (uid, gid) student code runs as, seen from outside the sandbox, when that is not the
    grader's own: a root grader's unprivileged user (unless, without the sandbox, that user cannot
    run Python here: then it is root, with a warning, see :mod:`grader.execute.sandbox`)."""
    ids = run_as()
    if ids is None or not (sandboxed or unprivileged_without_sandbox() is None):
        return None
    return ids


JUDGE_OFFSET = 1_000_000_000
"""A root grader's judge processes run as uid = gid = ``UID_BASE + JUDGE_OFFSET + <grader pid>``: not
the user student code runs as, so a student process can neither signal, trace nor read a judge."""


def judge_ids(sandboxed: bool) -> tuple[int, int] | None:
    """The (uid, gid) a judge process runs as, when the grader is root: an unprivileged user of its own,
    distinct from :func:`student_ids`' (``None`` for a non-root grader, whose one user runs judges and
    student processes in namespaces of their own, which keep them apart)."""
    ids = student_ids(sandboxed)
    if ids is None:
        return None
    if os.environ.get(sandbox.UID_ENV):  # an instructor-chosen student user: the judge takes the next one
        return ids[0] + 1, ids[1] + 1
    return ids[0] + JUDGE_OFFSET, ids[1] + JUDGE_OFFSET


def enforcement(sandboxed: bool) -> dict[str, str]:
    """Which mechanism enforces what here, limit by limit, in a few words each (for the grader's log)."""
    ids = student_ids(sandboxed)
    cgroup = cgroups.unavailable_reason() is None
    if ids is not None:
        user = f"uid {ids[0]} (unprivileged, no capabilities)"
    elif sandboxed:
        user = "the grader's user in a user namespace (no capabilities)"
    else:
        user = "ROOT" if os.geteuid() == 0 else "the grader's own user"
    return {
        "isolation": "bubblewrap (no network; read-only system; only the scratch folder writable)" if sandboxed
                     else "NONE",
        "user": user,
        "memory": "cgroup v2 memory.max" if cgroup else "watchdog (resident memory + memfd) and RLIMIT_DATA",
        "processes": "cgroup v2 pids.max and watchdog" if cgroup else
                     "watchdog" + (" and RLIMIT_NPROC" if sandboxed or ids is not None else ""),
        "disk": "a filesystem of --disk per submission" if disk.unavailable_reason() is None
                else "watchdog (walk + deleted files held open)",
        "time": "watchdog (absolute deadline)",
        "output": "relay, kernel-side cap, bounded client",
    }
