"""What one student costs a class server, lab by lab: each lab's solution run whole, as a student's kernel runs it,
in the class server's student image under its per-student limits (docs/hub.md, "Sizing").

For each lab, one container of the single-user image (``docker/hub/hub.sh build``), with the hub's limits
(``--memory 4g --cpus 1``), runs ``python -m grader check labN`` on the lab's solution: a fresh kernel executes the
whole notebook, then its public checks. Printed per lab: the wall time, the largest process's peak resident memory
(``ru_maxrss`` of the processes it waited for: the kernel, or a C++ build's compiler), and the container's peak as
its memory cgroup counts it (page cache included: an upper bound; the limit reclaims cache before it kills).
Then the sizing: the JupyterLab server's own memory (``IDLE_MIB``, measured by tests/test_hub.py) plus the largest
peak, and how many students at their peak and idle fit in a machine's memory.

    python benchmarks/bench_hub_memory.py [--lab lab1 --lab lab4] [--image ml-cost-course:hub-student]

Needs a Docker engine and the image; takes about a minute per lab on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from util.labs import LABS  # noqa: E402

DOCKER = os.environ.get("COURSE_DOCKER", "/usr/bin/docker")
IDLE_MIB = 120
"""A student's container with JupyterLab and no kernel (tests/test_hub.py measured 111-118 MiB)."""
PROBE = r"""
import json, resource, subprocess, sys, time
started = time.monotonic()
done = subprocess.run([sys.executable, "-m", "grader", "check", sys.argv[1]], capture_output=True, text=True)
peak = None
for path in ("/sys/fs/cgroup/memory/memory.max_usage_in_bytes", "/sys/fs/cgroup/memory.peak"):
    try:
        peak = int(open(path).read())
        break
    except OSError:
        pass
print(json.dumps({"seconds": time.monotonic() - started, "rc": done.returncode,
                  "maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "cgroup_bytes": peak,
                  "summary": (done.stdout.strip().splitlines() or [""])[-1]}))
"""


def _labs_folder(dest: Path, lab) -> Path:
    """The handouts' labs/ with ``lab``'s solution (notebook and support folders) in place of its handout."""
    labs = Path(shutil.copytree(REPO / "labs", dest / "labs", ignore=shutil.ignore_patterns("outputs", "build")))
    notebook = Path(lab.notebook)
    if len(notebook.parts) > 1:
        shutil.rmtree(labs / notebook.parts[0])
        shutil.copytree(REPO / "solutions" / notebook.parts[0], labs / notebook.parts[0],
                        ignore=shutil.ignore_patterns("outputs", "build"))
    else:
        shutil.copy(REPO / "solutions" / notebook, labs / notebook)
    for path in [labs, *labs.rglob("*")]:
        os.chown(path, 1000, 1000)
    return labs


def measure(lab, image: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="course-hub-memory-") as scratch:
        labs = _labs_folder(Path(scratch), lab)
        done = subprocess.run([DOCKER, "run", "--rm", "--memory", "4g", "--memory-swap", "4g", "--cpus", "1",
                               "--network", "none", "-v", f"{labs}:/home/student/handouts/labs",
                               "-w", "/home/student/handouts/labs", "--entrypoint", "python", image, "-c", PROBE,
                               lab.name], capture_output=True, text=True, timeout=1800)
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"{lab.name}: the container failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lab", action="append", choices=list(LABS), help="only this lab (repeat for several)")
    p.add_argument("--image", default=os.environ.get("COURSE_HUB_IMAGE", "ml-cost-course:hub-student"))
    args = p.parse_args()
    rows = []
    print(f"{'lab':<6} {'wall':>7} {'largest process':>16} {'container (cgroup)':>19}  check")
    for name in args.lab or list(LABS):
        found = measure(LABS[name], args.image)
        rows.append((name, found))
        cgroup = f"{found['cgroup_bytes'] / 2**20:,.0f} MiB" if found["cgroup_bytes"] else "n/a"
        print(f"{name:<6} {found['seconds']:>6.1f}s {found['maxrss_kib'] / 1024:>12,.0f} MiB {cgroup:>19}  "
              f"{found['summary']}", flush=True)
    worst = max(rows, key=lambda r: r[1]["maxrss_kib"])
    busy = IDLE_MIB + worst[1]["maxrss_kib"] / 1024
    print(f"\nload average {os.getloadavg()[0]:.2f}; a student at the largest peak ({worst[0]}): about {busy:,.0f} MiB "
          f"(JupyterLab {IDLE_MIB} MiB + the kernel)")
    for gib in (16, 64, 256):
        print(f"  {gib:>3} GiB of memory: {gib * 1024 // busy:,.0f} students at that peak at once, "
              f"{gib * 1024 // IDLE_MIB:,.0f} idle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
