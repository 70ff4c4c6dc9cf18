"""A submission's scratch folder, the only place its code may write, and how its size is bounded.

Where the grader runs as root and Linux can mount a loop device (``mkfs.ext4`` and ``mount``
installed, ``/dev/loop-control`` present), the folder is a filesystem of its own: an ext4 image of
``--disk`` bytes (plus its metadata) mounted ``nosuid,nodev``. Every byte the submission keeps
counts, in files it deleted but holds open too, and a write past the end fails with "No space
left on device"; the watchdog reads the filesystem's usage (``statvfs``, a cheap call) and stops
the submission once it is over the limit.

Elsewhere the folder is a plain folder: the watchdog measures it every 2 s by walking it (by
descriptors, at any depth: :mod:`grader.execute.tree`; a folder nested deeper than the walk goes
or made unreadable stops the submission, as over the limit), and adds the files the submission's
processes hold open after deleting them (``/proc/<pid>/fd``). A file created and filled between two
measurements can overshoot the limit until the next one.

In the sandbox the kernel's ``/tmp`` and ``/dev/shm`` are folders inside the scratch folder
(:data:`TMP`, :data:`SHM`), so they count against the same limit.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from grader.execute import tree
from grader.execute.sandbox import scratch_base  # where student code's user can reach it

ENV = "COURSE_SCRATCH_FS"
"""``off``: never mount a filesystem per submission (plain folders and the watchdog's walk)."""
TMP, SHM, HOME, KERNEL = ".tmp", ".shm", ".home", ".kernel"
"""Folders inside the scratch folder: the sandbox's ``/tmp`` and ``/dev/shm``, ``$HOME``, the kernel's sockets."""


def _run(*cmd: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if done.returncode:
        raise OSError(f"{' '.join(cmd[:2])}: {(done.stderr or done.stdout).strip()[:300]}")


def _mkfs() -> str | None:
    for name in ("mkfs.ext4", "mke2fs"):
        found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
        if found:
            return found
    return None


@functools.lru_cache(maxsize=None)
def unavailable_reason() -> str | None:
    """``None`` when scratch folders can be size-limited filesystems here, else why not (probed once)."""
    if os.environ.get(ENV, "").lower() in ("off", "0", "no", "false"):
        return f"{ENV}=off"
    if os.geteuid() != 0:
        return "mounting a filesystem needs root"
    if _mkfs() is None or shutil.which("mount") is None:
        return "mkfs.ext4 or mount is not installed"
    if not Path("/dev/loop-control").exists():
        return "no loop devices (/dev/loop-control)"
    _sweep()
    try:
        Scratch.create("probe", disk=16 << 20, owner=None, filesystem=True).remove()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"a loop mount failed ({exc})"
    return None


def _sweep() -> None:
    """Unmount and delete the scratch filesystems of graders that died without doing it themselves."""
    base = os.path.realpath(tempfile.gettempdir())
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return
    for line in lines:
        point = line.split()[4]
        name = os.path.basename(point)
        if os.path.dirname(point) != base or not name.startswith("grade-"):
            continue
        try:
            os.kill(int(name.rsplit("-", 2)[1]), 0)
            continue  # its grader still runs
        except ProcessLookupError:
            pass
        except (ValueError, IndexError, PermissionError):
            continue
        Scratch(Path(point), Path(point + ".img"), None).remove()


def limited() -> bool:
    return unavailable_reason() is None


def folder_size(folder: Path, stop_above: int) -> int:
    """Bytes under ``folder`` (links not followed; each entry at least :data:`grader.execute.tree.MIN_BLOCK`),
    counting stops past ``stop_above``; :class:`grader.execute.tree.Unmeasurable` for a folder nested too
    deep or made unreadable (:func:`grader.execute.tree.size`)."""
    return tree.size(folder, stop_above)


class Scratch:
    """A scratch folder (``path``), on a size-limited filesystem of its own when :func:`limited`.

    ``owner`` (uid, gid): who the submission runs as, when that is not the grader (a root grader
    drops the kernel to an unprivileged user): the folder and what the grader puts in it are
    given to that user. :meth:`remove` unmounts and deletes everything, whatever the submission
    did to its permissions.
    """

    def __init__(self, path: Path, image: Path | None, owner: tuple[int, int] | None) -> None:
        self.path, self.image, self.owner = path, image, owner

    @classmethod
    def create(cls, label: str, *, disk: int, owner: tuple[int, int] | None,
               filesystem: bool | None = None) -> "Scratch":
        """A new scratch folder for ``label`` (e.g. a lab name) allowing ``disk`` bytes.

        ``filesystem`` forces a mounted filesystem on or off (default: on when :func:`limited`).
        """
        use_fs = limited() if filesystem is None else filesystem
        path = Path(tempfile.mkdtemp(prefix=f"grade-{label}-{os.getpid()}-", dir=scratch_base()))
        scratch = cls(path, None, owner)
        try:
            if use_fs:
                scratch._mount(disk)
            scratch.give(path)
        except BaseException:
            scratch.remove()
            raise
        return scratch

    def _mount(self, disk: int) -> None:
        self.image = self.path.with_name(self.path.name + ".img")
        fd = os.open(self.image, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        os.close(fd)
        os.truncate(self.image, disk + disk // 16 + (8 << 20))  # sparse; ext4's metadata on top of ``disk``
        uid, gid = self.owner or (os.getuid(), os.getgid())
        _run(_mkfs(), "-q", "-F", "-t", "ext4", "-m", "0", "-O", "^has_journal",
             "-N", str(max(2048, disk // (64 << 10))),
             "-E", f"root_owner={uid}:{gid},lazy_itable_init=1,nodiscard", str(self.image))
        _run("mount", "-t", "ext4", "-o", "loop,nosuid,nodev,noinit_itable", str(self.image), str(self.path))
        try:
            (self.path / "lost+found").rmdir()
        except OSError:
            pass

    @property
    def mounted(self) -> bool:
        return self.image is not None

    def give(self, path: Path) -> None:
        """Make ``path`` (a file or a folder, recursively) the submission's, when it runs as another user."""
        if self.owner is None:
            return
        uid, gid = self.owner
        os.chown(path, uid, gid, follow_symlinks=False)
        if path.is_dir() and not path.is_symlink():
            for root, dirs, files in os.walk(path):
                for name in dirs + files:
                    os.chown(os.path.join(root, name), uid, gid, follow_symlinks=False)

    def folder(self, name: str) -> Path:
        """A sub-folder of the scratch folder, made and given to the submission."""
        path = self.path / name
        path.mkdir(exist_ok=True)
        self.give(path)
        return path

    def usage(self, stop_above: int) -> int:
        """Bytes the scratch folder holds: the filesystem's own count, or a walk of the folder."""
        if self.mounted:
            try:
                info = os.statvfs(self.path)
                return (info.f_blocks - info.f_bfree) * info.f_frsize
            except OSError:
                return 0
        return folder_size(self.path, stop_above)

    def full(self) -> bool:
        """Whether its own filesystem has (almost) no room left: a write has failed or is about to.
        (Right after "no space left", the blocks just refused may not show in the usage yet.)"""
        if not self.mounted:
            return False
        try:
            info = os.statvfs(self.path)
        except OSError:
            return False
        return info.f_bavail * info.f_frsize < (1 << 20)

    def remove(self) -> None:
        """Unmount (if mounted) and delete the folder, even one the submission made unreadable."""
        if self.image is not None:
            subprocess.run(["umount", str(self.path)], capture_output=True, timeout=60)
            if os.path.ismount(self.path):
                subprocess.run(["umount", "-l", str(self.path)], capture_output=True, timeout=60)
            self.image.unlink(missing_ok=True)
            self.image = None
        tree.remove(self.path)  # at any depth, whatever the submission did to its permissions
