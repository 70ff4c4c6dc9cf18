"""cgroup v2 per submission: found only where the grader may use it, configured, read and ended right.

Most machines running these tests either have no usable cgroup v2 (cgroup v1 holds the memory
controller, as on the development machines) or have one (a fresh Debian 12 CI machine as root):
the logic is tested on a fake hierarchy everywhere, and the real thing where it exists.
"""
from __future__ import annotations

import os
import subprocess
import time

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader.core.limits import Deadlines, Limits
from grader.execute import cgroups


def test_the_cgroup2_mount_is_read_from_mountinfo(tmp_path):
    (tmp_path / "mountinfo").write_text(
        "30 23 0:26 / /sys/fs/cgroup/memory rw,relatime shared:11 - cgroup cgroup rw,memory\n"
        "35 23 0:31 / /sys/fs/cgroup/unified rw,nosuid shared:16 - cgroup2 cgroup2 rw\n")
    assert cgroups.mount_point(str(tmp_path / "mountinfo")) == cgroups.Path("/sys/fs/cgroup/unified")
    (tmp_path / "mountinfo").write_text("30 23 0:26 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n")
    assert cgroups.mount_point(str(tmp_path / "mountinfo")) is None


def test_a_hierarchy_without_delegated_controllers_is_refused_and_left_alone(tmp_path, monkeypatch):
    (tmp_path / "cgroup.subtree_control").write_text("hugetlb\n")  # v1 holds memory and pids (as here)
    monkeypatch.delenv(cgroups.ENV, raising=False)
    monkeypatch.setattr(cgroups.os, "geteuid", lambda: 0)
    with pytest.raises(OSError, match="does not delegate memory, pids"):
        cgroups._prepare_parent(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cgroup.subtree_control"]  # nothing created
    monkeypatch.setattr(cgroups.os, "geteuid", lambda: 1000)
    with pytest.raises(OSError, match="not root and \\$COURSE_CGROUP names no cgroup"):
        cgroups._prepare_parent(tmp_path)
    monkeypatch.setenv(cgroups.ENV, str(tmp_path / "absent"))
    with pytest.raises(OSError, match="is not a cgroup v2 folder"):
        cgroups._prepare_parent(tmp_path)


def test_a_group_gets_its_limits_and_reports_kills_and_refused_forks(tmp_path):
    group = cgroups.Group.create(tmp_path, memory=768 << 20, tasks=256)
    assert group.path.parent == tmp_path and group.path.name.startswith(f"sub-{os.getpid()}-")
    assert (group.path / "memory.max").read_text() == str(768 << 20)
    assert (group.path / "pids.max").read_text() == "256"
    (group.path / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 1\n")
    (group.path / "pids.events").write_text("max 3\n")
    (group.path / "memory.peak").write_text("805306368\n")
    assert (group.oom_kills(), group.tasks_refused(), group.memory_peak()) == (2, 3, 768 << 20)


def test_without_cgroup_kill_every_process_in_the_group_is_killed(tmp_path):
    group = cgroups.Group.create(tmp_path, memory=1 << 30, tasks=64)
    sleepers = [subprocess.Popen(["sleep", "4646"]) for _ in range(3)]
    (group.path / "cgroup.procs").write_text("".join(f"{p.pid}\n" for p in sleepers))
    group.kill()
    time.sleep(0.2)
    assert [p.poll() for p in sleepers] == [-9, -9, -9]


@pytest.mark.skipif(cgroups.unavailable_reason() is not None, reason=f"no usable cgroup v2 here: "
                                                                         f"{cgroups.unavailable_reason()}")
def test_the_kernel_enforces_memory_and_tasks_for_the_whole_submission(tmp_path):
    """Where cgroup v2 is usable: a tmpfs-free hoard (memfd) is an out-of-memory kill of the whole
    submission, a fork bomb is refused forks, and each is reported with the right status."""
    from grader.execute.kernel import execute
    from grader.execute.scratch import kernel_env

    def run(code: str, folder):
        nb = new_notebook(cells=[new_markdown_cell("## Task 900.1: Thing (1 points)"), new_code_cell(code)])
        return execute(nb, folder, kernel_env(folder / "answers"), deadlines=Deadlines(cell=60, notebook=120, hidden=300, judge=120),
                       limits=Limits(memory=512 << 20, procs=16, fsize=1 << 30))

    (tmp_path / "a").mkdir()
    hoard = run("import os, time\nfd = os.memfd_create('x')\nfor _ in range(48):\n    os.write(fd, b'x' * (16 << 20))\n"
                "time.sleep(30)", tmp_path / "a")
    assert hoard.status == "memory" and "used more than 512 MiB of memory" in hoard.message, hoard.message
    assert 400 << 20 < hoard.peak_memory <= 520 << 20
    (tmp_path / "b").mkdir()
    bomb = run("import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
               "    time.sleep(0.05)", tmp_path / "b")
    assert bomb.status == "crash" and "more than 16 processes" in bomb.message, bomb.message
    assert not [p for p in cgroups.parent().glob(f"sub-{os.getpid()}-*")]  # every group removed
