"""The sandbox student code runs in: Debian's bubblewrap (``bwrap``), as an unprivileged user.

Inside the sandbox the student's code (the kernel and everything it starts, a compiler included):

* runs with no privilege, whoever runs the grader: as an unprivileged user (:func:`run_as`: a uid
  and gid of its own that no account has, when the grader is root; the grader's own user, mapped
  to 65534 in a user namespace of its own, when it is not), with every capability dropped
  (bounding set included) and ``no_new_privs`` set, so setuid programs and file capabilities grant
  nothing.
  Nothing can be remounted: the mounts belong to a namespace the student's user holds no
  capability in. A non-root grader's sandbox also forbids creating further user namespaces;
* sees a read-only system (``/usr``, ``/etc``), the Python installation, and of this repository
  only ``util/`` and any extra lab folders the registry names (``$COURSE_LAB_DIRS``), file by file from
  an allowlist (:func:`util.labs.shown_files`: what students hold; never a lab's grader-only files, its
  hidden cases, judges and mistakes, nor bytecode or a copy of them), and the export caches
  (``build/onnx``, ``build/torchscript``): ``grader/`` with its references, ``solutions/``, the other
  submissions and the gradebook are simply not there;
* can write only in its scratch folder (the notebook's working directory). Its ``/tmp`` and
  ``/dev/shm`` are folders inside the scratch folder, so they count against the disk limit and
  cannot hold memory outside the memory limit; the rest of ``/dev`` is read-only;
* has no network (its own empty network namespace: even the grader's loopback is unreachable), its
  own process and IPC namespaces: when the kernel ends, every process it started ends with it.

The kernel talks to the grader over Unix sockets in the scratch folder (jupyter's ``ipc``
transport), since TCP cannot cross the network namespace.

Without a working ``bwrap`` (not installed, or a container that forbids namespaces) notebooks still
run, with a warning: a root grader still runs them as the unprivileged user (when that user can
run Python) and the time, memory, process and disk limits hold, but the network, the file system
and stray background processes are not contained.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from util import export_cache, labs

SANDBOX_ENV = "COURSE_SANDBOX"
"""Set to ``off`` to run kernels without the sandbox (e.g. on macOS; ``--no-sandbox`` does the same),
or to ``userns`` to build it in a user namespace even for a root grader (see :func:`userns`)."""
_root_userns = False
UID_ENV, GID_ENV = "COURSE_SANDBOX_UID", "COURSE_SANDBOX_GID"
"""Set both to run a root grader's student code as this user and group instead of :func:`run_as`'s."""
NOBODY = 65534
UID_BASE = 2_000_000_000
"""A root grader runs student code as uid = gid = ``UID_BASE + <grader pid>``: a user no account has,
and a different one for each grader process, so that parallel submissions share no per-user count
(``RLIMIT_NPROC``, pipe buffers, keyrings) and, without the sandbox, cannot signal each other."""


def run_as() -> tuple[int, int] | None:
    """(uid, gid) a root grader runs student code as (see :data:`UID_BASE`); ``None`` when the grader
    is not root (student code then runs as the grader's own user, in the sandbox's user namespace)."""
    if os.geteuid() != 0:
        return None
    own = UID_BASE + os.getpid()
    uid, gid = int(os.environ.get(UID_ENV, own)), int(os.environ.get(GID_ENV, own))
    if uid == 0 or gid == 0:
        raise ValueError(f"${UID_ENV} and ${GID_ENV} must name an unprivileged user and group, not root")
    return uid, gid


def _reachable_by_others(path: Path) -> bool:
    """Whether a user other than the owner may pass through ``path`` and each folder above it."""
    try:
        return all(os.stat(folder).st_mode & 0o001 for folder in (path, *path.parents))
    except OSError:
        return False


def scratch_base() -> Path:
    """The folder that scratch folders are made in: the temp folder, unless the sandbox is built by
    bwrap run as student code's user (:func:`userns`, for a root grader) and that user may not pass
    through it (some machines' ``/tmp`` has mode 1700): then ``/var/tmp``, the other folder every
    user may use."""
    base = Path(tempfile.gettempdir())
    if os.geteuid() == 0 and userns() and not _reachable_by_others(base):
        for other in (Path("/var/tmp"),):
            if other.is_dir() and _reachable_by_others(other):
                return other
    return base


def userns() -> bool:
    """Whether the sandbox is built in a user namespace, by bwrap run as the unprivileged user.

    Always for a non-root grader. A root grader runs bwrap as root (no user namespace; the launcher
    inside drops to :func:`run_as`'s user), unless that cannot work here (a container without
    ``CAP_SYS_ADMIN``) or ``$COURSE_SANDBOX=userns``: then it drops first and bwrap builds the
    sandbox in a user namespace, where the student's user holds no capability either.
    """
    return run_as() is None or _root_userns or os.environ.get(SANDBOX_ENV, "").lower() == "userns"


def use_root_userns(on: bool) -> None:
    """Build a root grader's sandbox in a user namespace (:func:`userns`) from now on, or not: set by
    :func:`grader.execute.confinement.unavailable_reason` when bwrap cannot run as root here."""
    global _root_userns
    _root_userns = on


def readable_paths(extra: tuple[Path, ...] = ()) -> list[Path]:
    """What student code may read, whole: the system, the Python installation, the export caches, and ``extra``.
    The course's own folders (``util/`` and any extra lab folder) are shown file by file instead
    (:func:`util.labs.shown_files`, in :func:`bwrap_args`)."""
    paths = [Path(p) for p in ("/usr", "/etc", "/opt", "/sys", "/var/lib")]
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        paths += [Path(prefix), Path(prefix).resolve()]
    paths.append(Path(sys.executable).resolve().parent)
    paths += export_cache.shared_dirs()  # exported models (filled by Lab.prepare), read-only
    paths += [Path(p).resolve() for p in extra]
    return [p for p in dict.fromkeys(paths) if p.exists()]


def _aliases(path: Path, shown: list[Path]) -> list[Path]:
    """``path`` resolved, and the same file under each folder in ``shown`` that is bound where it is named but lies
    elsewhere (a symlink such as a worktree's ``.venv``): a file covered at one mount is still readable through the
    other."""
    real = path.resolve()
    found = [real]
    for folder in shown:
        target = folder.resolve()
        if folder != target and real.is_relative_to(target):
            found.append(folder / real.relative_to(target))
    return list(dict.fromkeys(found))


def _parents(path: Path, made: set[Path]) -> list[str]:
    """``--dir`` arguments for ``path``'s parents, traversable (0755) whatever they are outside."""
    args = []
    for parent in reversed(path.parents):
        if parent != Path("/") and parent not in made:
            made.add(parent)
            args += ["--perms", "0755", "--dir", str(parent)]
    return args


def bwrap_args(scratch: Path, *, readable: tuple[Path, ...] = (), writable: bool = True,
               reveal: tuple[Path, ...] = (), withhold: tuple[Path, ...] = ()) -> list[str]:
    """The ``bwrap`` command prefix (up to ``--``) that runs a command sandboxed in ``scratch``.

    ``scratch`` must hold the folders ``.tmp`` and ``.shm`` (the sandbox's ``/tmp`` and
    ``/dev/shm``). ``readable`` adds folders shown read-only; ``writable=False`` shows ``scratch``
    read-only too (its ``.tmp`` stays writable). The course's folders (``util/``, extra lab folders) are
    shown file by file from an allowlist (:func:`util.labs.shown_files`): sources and data, never a lab's
    grader-only files (hidden cases, judges, mistakes), their bytecode or any other derived file, except
    those in ``reveal`` (a judge process: its own lab's judges and cases). ``withhold``: files that cannot be
    read there (a data set a student process is evaluated on); with any, the export caches are shown as they
    stand when the sandbox is made, so a file exported into them later (a model trained on withheld data) is not
    there either.
    """
    args = ["bwrap", "--die-with-parent", "--new-session", "--unshare-ipc", "--unshare-pid", "--unshare-net",
            "--unshare-uts", "--unshare-cgroup-try",
            # in its own pid namespace the kernel's parent is bwrap's pid 1, which ipykernel would take
            # for "my parent died"; --die-with-parent ends the kernel with the grader instead
            "--setenv", "JPY_PARENT_PID", "1"]
    if userns():  # bwrap runs unprivileged: a user namespace maps its user to an unprivileged one inside
        args += ["--unshare-user", "--disable-userns", "--uid", str(NOBODY), "--gid", str(NOBODY),
                 "--cap-drop", "ALL"]
    # (as root, the launcher inside drops to run_as()'s user, its capabilities and their bounding set)
    args += ["--dev", "/dev", "--proc", "/proc"]
    for name in ("bin", "lib", "lib32", "lib64", "libx32", "sbin"):  # merged-/usr symlinks or real folders
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    scratch = scratch.resolve()
    args += ["--bind", str(scratch / ".tmp"), "/tmp"]  # first: what is shown below may itself lie in /tmp
    made: set[Path] = set()
    # where data is withheld, the export caches are shown as they stand now, file by file: a model the course
    # exports on the digits while the process runs (another grader filling a cold cache) must not appear there
    frozen = [folder.resolve() for folder in export_cache.shared_dirs()] if withhold else []
    for path in readable_paths(readable):
        if path.resolve() not in frozen:
            args += _parents(path, made) + ["--ro-bind", str(path), str(path)]
    for folder in frozen:
        args += _parents(folder, made) + ["--perms", "0755", "--tmpfs", str(folder)]
        for entry in sorted(folder.iterdir()):
            args += ["--ro-bind", str(entry), str(entry)]
        args += ["--remount-ro", str(folder)]
    for root in labs.shown_roots():  # an allowlist: what is not a source students hold is not there at all
        root = root.resolve()
        args += _parents(root, made) + ["--perms", "0755", "--tmpfs", str(root)]
        for path in labs.shown_files(root, reveal):
            for parent in reversed(path.relative_to(root).parents[:-1]):  # traversable, as bwrap would make them 0700
                if root / parent not in made:
                    made.add(root / parent)
                    args += ["--perms", "0755", "--dir", str(root / parent)]
            args += ["--ro-bind", str(path), str(path)]
        args += ["--remount-ro", str(root)]
    for path in withhold:  # at every path the sandbox shows it by, not only its own (a symlinked prefix is bound twice)
        for alias in _aliases(Path(path), readable_paths(readable)):
            args += ["--ro-bind", "/dev/null", str(alias)]
    for path in sorted(Path("/dev").glob("nvidia*")):  # a GPU, where there is one (the labs use it if present)
        args += ["--dev-bind", str(path), str(path)]
    args += _parents(scratch, made) + ["--bind" if writable else "--ro-bind", str(scratch), str(scratch)]
    if not writable:
        args += ["--bind", str(scratch / ".tmp"), str(scratch / ".tmp")]
    args += ["--bind", str(scratch / ".shm"), "/dev/shm", "--remount-ro", "/dev",
             # the sandbox's root is a tmpfs bwrap builds; read-only, so nothing can fill memory through it
             "--remount-ro", "/", "--chdir", str(scratch), "--"]
    return args
