"""Measuring and deleting a folder a submission wrote, whatever it did to it.

A submission controls the shape of its scratch folder. A walk by path names (``os.walk``,
``shutil.rmtree``) trips on what it can make there: folders nested past ``PATH_MAX`` (4,096 bytes;
20 folders of 250 characters) make every path below them unusable, so a walk skips what they hold
and the disk limit never sees it; a few thousand nested folders exhaust Python's recursion, so the
grader could not delete the folder at all (its grading then failed, each retry leaving another
folder behind); and a folder whose permissions it removed is unreadable to a grader that is not
root (the sandbox maps the submission to the grader's own user).

So both work by file descriptors (``openat``, no path grows with the depth), iteratively (no
recursion), never through a link, and:

* :func:`size` refuses to guess: a folder nested deeper than :data:`MAX_DEPTH` levels, or one it
  may not read, raises :class:`Unmeasurable` (the watchdog stops the submission, as over the limit);
* :func:`remove` deletes at any depth, holding at most :data:`OPEN_FOLDERS` descriptors (a deeper
  chain is moved up to the top folder first), giving each folder back to the grader as it goes.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

MIN_BLOCK = 4096
"""Every file or folder counts at least this much (an empty file still costs an inode)."""
MAX_DEPTH = 128
"""Deepest folder :func:`size` measures below the top (a C++ build nests about 8 levels)."""
OPEN_FOLDERS = 64
"""Most folder descriptors :func:`remove` holds at once."""
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class Unmeasurable(Exception):
    """The folder holds something the grader cannot measure; the message says what, in a student's words."""


def _scan(fd: int, total: int, stop_above: int) -> tuple[int, list[str]]:
    """``total`` plus what the entries of the folder ``fd`` cost, and its sub-folders' names (the
    scan stops once ``total`` is past ``stop_above``)."""
    folders = []
    with os.scandir(fd) as entries:
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:  # deleted since it was listed
                continue
            total += max(info.st_blocks * 512, MIN_BLOCK)
            if stat.S_ISDIR(info.st_mode):
                folders.append(entry.name)
            if total > stop_above:
                break
    return total, folders


def size(folder: Path, stop_above: int) -> int:
    """Bytes under ``folder`` (each entry at least :data:`MIN_BLOCK`, links not followed); counting
    stops past ``stop_above``. Raises :class:`Unmeasurable` for a folder deeper than :data:`MAX_DEPTH`
    or one the grader may not read."""
    try:
        top = os.open(folder, _FOLDER)
    except OSError:
        return 0
    stack: list[tuple[int, list[str]]] = []
    try:
        total, names = _scan(top, 0, stop_above)
        stack.append((top, names))
        while stack and total <= stop_above:
            fd, names = stack[-1]
            if not names:
                os.close(stack.pop()[0])
                continue
            name = names.pop()
            try:
                child = os.open(name, _FOLDER, dir_fd=fd)
            except (FileNotFoundError, NotADirectoryError):  # removed or replaced since it was listed
                continue
            except OSError as exc:
                if exc.errno == errno.ELOOP:  # replaced by a link since: not followed, already counted
                    continue
                raise Unmeasurable("made a folder the grader may not read (its permissions removed)") from None
            if len(stack) > MAX_DEPTH:
                os.close(child)
                raise Unmeasurable(f"nested folders more than {MAX_DEPTH} levels deep")
            try:
                total, names = _scan(child, total, stop_above)
            except PermissionError:
                os.close(child)
                raise Unmeasurable("made a folder the grader may not read (its permissions removed)") from None
            stack.append((child, names))
    finally:
        for fd, _ in stack:
            os.close(fd)
    return total


def _open_own(name: str, parent: int) -> int:
    """Open the folder ``name`` in ``parent`` after giving it back to the grader (``u+rwx``)."""
    try:
        os.chmod(name, stat.S_IRWXU, dir_fd=parent, follow_symlinks=False)
    except (NotImplementedError, OSError):
        pass
    return os.open(name, _FOLDER, dir_fd=parent)


def remove(path: Path) -> None:
    """Delete the folder ``path`` and everything in it, at any depth, whatever its permissions (as far
    as the grader's user may change them); what cannot be deleted is left, never raised."""
    try:
        os.chmod(path, stat.S_IRWXU, follow_symlinks=False)
    except OSError:
        pass
    try:
        top = os.open(path, _FOLDER)
    except OSError:
        return
    stack: list[tuple[int, str]] = [(top, "")]  # (folder, its name in the folder above)
    moved = 0
    try:
        while stack:
            fd, _ = stack[-1]
            inner = None
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        if entry.is_dir(follow_symlinks=False):
                            inner = entry.name
                            break
                        try:
                            os.unlink(entry.name, dir_fd=fd)
                        except FileNotFoundError:
                            pass
            except OSError:
                inner = None
            if inner is None:  # emptied: delete it from the folder above
                _, name = stack.pop()
                os.close(fd)
                if stack:
                    try:
                        os.rmdir(name, dir_fd=stack[-1][0])
                    except OSError:
                        pass
                continue
            if len(stack) >= OPEN_FOLDERS:  # too deep to hold open: move the rest of the chain up
                moved += 1
                target = f".grader-deep-{moved}-{os.urandom(8).hex()}"  # a name the submission cannot have taken
                try:
                    os.rename(inner, target, src_dir_fd=fd, dst_dir_fd=top)
                except OSError:
                    return
                continue
            try:
                stack.append((_open_own(inner, fd), inner))
            except OSError:  # neither opened nor deletable: leave it
                try:
                    os.rmdir(inner, dir_fd=fd)
                except OSError:
                    return
    finally:
        for fd, _ in stack:
            os.close(fd)
    try:
        os.rmdir(path)
    except OSError:
        pass
