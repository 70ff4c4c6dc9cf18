"""The command prefix that starts student code confined: its cgroup, its user, its rlimits, its sandbox.

A confined command is ``outer launcher + bwrap ... -- + inner launcher + command``. Both launchers
are the same few lines of Python (:data:`LAUNCHER`), run with ``python -c``: they do what their
JSON says, then ``exec`` the rest of the command line, so they cost a Python start and nothing
after.

* The outer launcher runs as the grader: it moves itself into the submission's cgroup (so does
  everything it starts), and, without the sandbox, sets the rlimits and drops to the unprivileged
  user itself (so does a root grader whose sandbox is built in a user namespace,
  :func:`grader.execute.sandbox.userns`).
* The inner launcher runs inside the sandbox: it sets the rlimits and, for a root grader, drops
  the capability bounding set, the groups, then the user and group (``setresuid``/``setresgid``)
  to :func:`grader.execute.sandbox.run_as`'s and sets ``no_new_privs``; last, it installs the
  seccomp filter (:mod:`grader.execute.seccomp`).

The rlimits are set inside the sandbox because Linux counts ``RLIMIT_NPROC`` per user *and user
namespace*: in a non-root grader's sandbox it counts only this submission's tasks, and a root
grader gives each of its processes a user of its own (:data:`grader.execute.sandbox.UID_BASE`). Only when
``$COURSE_SANDBOX_UID`` makes parallel submissions share one user is it left out; the cgroup's
``pids.max`` or the watchdog bounds the processes there.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from grader.core.limits import Limits, rlimits
from grader.execute import sandbox, seccomp

LAUNCHER = """\
import ctypes, json, os, resource, sys
spec = json.loads(sys.argv[1])
if spec.get("cpus"):
    os.sched_setaffinity(0, spec["cpus"])
if spec.get("cgroup"):
    with open(spec["cgroup"], "w") as procs:
        procs.write(str(os.getpid()))
for name, value in spec.get("rlimits", ()):
    kind = getattr(resource, name)
    hard = resource.getrlimit(kind)[1]
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(kind, (value, value))
libc = ctypes.CDLL(None, use_errno=True)
if spec.get("ids"):
    uid, gid = spec["ids"]
    cap = 0
    while hasattr(libc, "prctl") and libc.prctl(24, cap, 0, 0, 0) == 0:  # PR_CAPBSET_DROP, to the last one
        cap += 1
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.geteuid() == 0 or os.getegid() == 0:
        sys.exit("grader launcher: could not drop root")
    if hasattr(libc, "prctl"):
        libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: setuid programs grant nothing
if spec.get("pdeathsig") and hasattr(libc, "prctl"):
    libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG = SIGKILL (after setresuid, which clears it)
if spec.get("seccomp"):
    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    code = bytes.fromhex(spec["seccomp"])
    buffer = ctypes.create_string_buffer(code, len(code))
    libc.prctl(38, 1, 0, 0, 0)  # no_new_privs: a filter needs it (and keeps it)
    if libc.prctl(22, 2, ctypes.byref(Program(len(code) // 8, ctypes.addressof(buffer))), 0, 0) != 0:
        sys.exit("grader launcher: could not install the seccomp filter")
os.execvp(sys.argv[2], sys.argv[2:])
"""


def launcher(spec: dict, python: str = sys.executable) -> list[str]:
    """``python -c LAUNCHER SPEC``: a prefix that does what ``spec`` says, then runs the rest."""
    return [python, "-c", LAUNCHER, json.dumps(spec)]


def command_prefix(scratch: Path, *, sandboxed: bool, ids: tuple[int, int] | None, limits: Limits | None = None,
                   cgroup: Path | None = None, readable: tuple[Path, ...] = (),
                   writable: bool = True, reveal: tuple[Path, ...] = (), cpus: tuple[int, ...] = (),
                   withhold: tuple[Path, ...] = ()) -> list[str]:
    """The prefix that runs a command confined in ``scratch``: in ``cgroup`` (its ``cgroup.procs``),
    under ``limits``' rlimits, as the user ``ids`` (``None``: the grader's own, e.g. a non-root
    grader: :func:`grader.execute.confinement.student_ids` says which), and in the sandbox when ``sandboxed``.

    ``reveal``: the labs' grader-only files this sandbox may read (a judge process: its own lab's
    judges; anything that runs student code: none). ``cpus``: the CPUs it (and everything it starts) may
    run on. ``withhold``: files the sandbox cannot read (data the process is evaluated on).
    """
    limits = limits or Limits()
    outer: dict = {"cgroup": str(cgroup)} if cgroup is not None else {}
    if cpus:
        outer["cpus"] = list(cpus)
    filtered = seccomp.program()
    if not sandboxed:
        outer["rlimits"] = rlimits(limits, per_user=ids is not None and sandbox.UID_ENV not in os.environ)
        if ids is not None:
            outer.update(ids=list(ids), pdeathsig=True)
        if filtered is not None:
            outer["seccomp"] = filtered.hex()
        return launcher(outer)
    inner = {"rlimits": rlimits(limits, per_user=sandbox.userns() or sandbox.UID_ENV not in os.environ)}
    if ids is not None and sandbox.userns():  # a root grader's user-namespace sandbox: drop before bwrap
        outer["ids"] = list(ids)
    elif ids is not None:
        inner["ids"] = list(ids)
    if filtered is not None:
        inner["seccomp"] = filtered.hex()
    return ((launcher(outer) if outer else [])
            + sandbox.bwrap_args(scratch, readable=readable, writable=writable, reveal=reveal, withhold=withhold)
            + launcher(inner))
