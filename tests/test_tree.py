"""Measuring and deleting a scratch folder by descriptors: what lies past PATH_MAX is counted, a chain
deeper than the walk goes is refused, and any depth or permission is deleted (tests/test_grader_files.py
does it to a graded kernel's folder)."""
from __future__ import annotations

import os

import pytest

from grader.execute import tree


def _chain(top, depth: int, name: str = "d") -> int:
    """Folders ``name/name/...`` ``depth`` deep under ``top``; a descriptor of the deepest."""
    fd = os.open(top, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir(name, dir_fd=fd)
        inner = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    return fd


def _write(fd: int, name: str, size: int) -> None:
    handle = os.open(name, os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)
    os.write(handle, b"x" * size)
    os.close(handle)


def test_files_past_path_max_are_counted(tmp_path):
    fd = _chain(tmp_path, 20, "d" * 250)  # 5,000 bytes of path below tmp_path
    _write(fd, "hidden", 3 << 20)
    os.close(fd)
    found = tree.size(tmp_path, 1 << 40)
    assert 3 << 20 <= found < (3 << 20) + 21 * 8192
    tree.remove(tmp_path / ("d" * 250))  # (pytest's own clean-up walks by path names)
    assert list(tmp_path.iterdir()) == []


def test_counting_stops_past_the_bound_and_links_are_not_followed(tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "big").write_bytes(b"x" * (1 << 20))
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "link").symlink_to(tmp_path / "outside")
    assert tree.size(tmp_path / "in", 1 << 40) == tree.MIN_BLOCK
    for i in range(50):
        (tmp_path / "in" / f"f{i}").write_bytes(b"x")
    assert tree.size(tmp_path / "in", 10 * tree.MIN_BLOCK) == 11 * tree.MIN_BLOCK
    assert tree.size(tmp_path / "absent", 1) == 0


def test_a_chain_deeper_than_the_walk_goes_is_unmeasurable(tmp_path):
    os.close(_chain(tmp_path, tree.MAX_DEPTH))
    assert tree.size(tmp_path, 1 << 40) == tree.MAX_DEPTH * tree.MIN_BLOCK
    os.close(_chain(tmp_path / ("d/" * tree.MAX_DEPTH), 1))
    with pytest.raises(tree.Unmeasurable, match=f"nested folders more than {tree.MAX_DEPTH} levels deep"):
        tree.size(tmp_path, 1 << 40)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any folder (tests/test_grader_files.py grades it as a user)")
def test_a_folder_made_unreadable_is_unmeasurable(tmp_path):
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "big").write_bytes(b"x" * (1 << 20))
    (tmp_path / "locked").chmod(0)
    try:
        with pytest.raises(tree.Unmeasurable, match="made a folder the grader may not read"):
            tree.size(tmp_path, 1 << 40)
    finally:
        tree.remove(tmp_path / "locked")


def test_remove_deletes_any_depth_and_any_permission_and_never_follows_a_link(tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_bytes(b"kept")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    fd = _chain(scratch, 3000)  # deeper than Python's recursion
    _write(fd, "file", 10)
    os.symlink(keep, "link", dir_fd=fd)
    os.mkdir("locked", dir_fd=fd)
    _write(os.open("locked", os.O_RDONLY, dir_fd=fd), "inside", 10)
    os.chmod("locked", 0, dir_fd=fd)
    os.chmod(fd, 0o500)  # its own folder read-only too
    os.close(fd)
    (scratch / ".grader-deep-1").write_bytes(b"a name the submission took")
    tree.remove(scratch)
    assert not scratch.exists() and (keep / "precious").read_bytes() == b"kept"
