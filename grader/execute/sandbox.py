"""The sandbox a graded kernel runs in: Debian's bubblewrap (``bwrap``), when it works here.

Inside the sandbox the student's code (the kernel and everything it starts, a compiler included):

* sees a read-only system (``/usr``, ``/etc``), the Python installation, and of this repository
  only ``util/`` (what notebooks import; each lab's grader-only files, its judges and mistakes,
  read as empty) and the export caches ``build/onnx``, ``build/torchscript``: ``grader/`` with its
  references, ``solutions/``, the other submissions and the gradebook are simply not there;
* can write only in its scratch folder (the notebook's working directory) and a private ``/tmp``
  of bounded size that is thrown away;
* has no network (its own empty network namespace: even the grader's loopback is unreachable) and
  its own process namespace: when the kernel ends, every process it started ends with it.

The kernel talks to the grader over Unix sockets in the scratch folder (jupyter's ``ipc``
transport), since TCP cannot cross the network namespace.

Without a working ``bwrap`` (not installed, or a container that forbids namespaces) notebooks still
run, with a warning: the time, memory, process and file-size limits hold, but the network, the file
system and stray background processes are not contained.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

from grader import REPO
from util import export_cache, labs

SANDBOX_ENV = "COURSE_SANDBOX"
"""Set to ``off`` to run kernels without the sandbox (e.g. on macOS); ``--no-sandbox`` does the same."""
UNSANDBOXED_WARNING = (
    "bubblewrap (bwrap) is not usable here{reason}: submissions run WITHOUT a sandbox. Time, memory, "
    "process and file-size limits still apply, but student code can use the network, read any file "
    "the grader can (the references, other submissions) and write outside its scratch folder. "
    "Install it (Debian/Ubuntu: apt-get install bubblewrap) to grade untrusted notebooks.")


@functools.lru_cache(maxsize=None)
def unavailable_reason() -> str | None:
    """``None`` when bwrap can build the sandbox here, else why not (probed once per process)."""
    if os.environ.get(SANDBOX_ENV, "").lower() in ("off", "0", "no", "false"):
        return f" ({SANDBOX_ENV}=off)"
    exe = shutil.which("bwrap")
    if exe is None:
        return " (not installed)"
    try:
        probe = subprocess.run([exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                                "--unshare-all", "--die-with-parent", "true"],
                               capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f" ({exc})"
    if probe.returncode != 0:
        return f" ({probe.stderr.strip() or f'exit code {probe.returncode}'})"
    return None


def available() -> bool:
    """Whether kernels will run sandboxed (warns once, in words an instructor can act on, if not)."""
    reason = unavailable_reason()
    if reason is not None:
        _warn_once(reason)
    return reason is None


@functools.lru_cache(maxsize=None)
def _warn_once(reason: str) -> None:
    warnings.warn(UNSANDBOXED_WARNING.format(reason=reason), RuntimeWarning, stacklevel=3)
    print("grader: warning: " + UNSANDBOXED_WARNING.format(reason=reason), file=sys.stderr)


def _readable() -> list[Path]:
    """What the kernel may read: the system, the Python installation, the course's ``util``."""
    paths = [Path(p) for p in ("/usr", "/etc", "/opt", "/sys", "/var/lib")]
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        paths += [Path(prefix), Path(prefix).resolve()]
    paths.append(Path(sys.executable).resolve().parent)
    paths.append(REPO / "util")
    paths += labs.extra_dirs()  # lab folders added for tests ($COURSE_LAB_DIRS)
    paths += export_cache.shared_dirs()  # exported models (filled by Lab.prepare), read-only
    return [p for p in dict.fromkeys(paths) if p.exists()]


def bwrap_prefix(scratch: Path, *, tmp_size: int) -> list[str]:
    """The ``bwrap`` command prefix that runs a command sandboxed with ``scratch`` writable."""
    # JPY_PARENT_PID=1: in its own pid namespace the kernel's parent is bwrap's pid 1, which ipykernel
    # would take for "my parent died"; --die-with-parent ends the kernel with the grader instead.
    args = ["bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--setenv", "JPY_PARENT_PID", "1",
            "--dev", "/dev", "--proc", "/proc", "--size", str(tmp_size), "--tmpfs", "/tmp"]
    for name in ("bin", "lib", "lib32", "lib64", "libx32", "sbin"):  # merged-/usr symlinks or real folders
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for path in _readable():
        args += ["--ro-bind", str(path), str(path)]
    for path in labs.grader_only_paths():  # judges and mistakes: they hold or quote solutions
        args += ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
    scratch = scratch.resolve()
    # the sandbox's root is a tmpfs that bwrap builds; read-only, so nothing can fill memory through it
    args += ["--bind", str(scratch), str(scratch), "--remount-ro", "/", "--chdir", str(scratch), "--"]
    return args
