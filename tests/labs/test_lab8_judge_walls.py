"""Lab 8's timed kernel cases against libraries that attack the judge instead of multiplying well.

Each library's constructor runs as soon as it is loaded: it tries to forge the judge's verdict
(writing finished-case records to its standard output and to every other process's descriptors it
can reach, killing every process it sees; its own socket to the judge it leaves alone, since garbage
there only fails its own case), to
spoil the baseline it is timed against (overwriting any naive kernel it can find, stopping processes,
spinning a thread beside it), or to leak a grader-only file (lab 7's reference emulator) through its
error message. The cases run through the grader's own judge process (``grader.judge.isolated.judge``),
as grading runs them: the library in a student process of its own. Each attacker gets exactly the
verdict its multiplication earns, and an honest library judged in the same run passes: as whoever runs
the tests (root in CI) and as an unprivileged user.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from grader import REPO
from grader.execute import confinement
from grader.judge.isolated import judge
from util import labs
from util.artifacts import files_dir, save_arrays
from util.labs import get_lab
from util.labs.lab8.kernel import build_library

pytestmark = [pytest.mark.notebook,
              pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++"),
              pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")]
LAB = get_lab("lab8")
SIGNATURE = "void mm_fast(const float* A, const float* B, float* C, int M, int K, int N)"
IKJ = """ {
  for (long i = 0; i < (long)M * N; ++i) C[i] = 0;
  for (int i = 0; i < M; ++i) for (int k = 0; k < K; ++k) {
    const float a = A[(long)i * K + k];
    for (int j = 0; j < N; ++j) C[(long)i * N + j] += a * B[(long)k * N + j]; } }
"""
NAIVE = """ {
  for (int i = 0; i < M; ++i) for (int j = 0; j < N; ++j) {
    float s = 0; for (int k = 0; k < K; ++k) s += A[(long)i * K + k] * B[(long)k * N + j]; C[(long)i * N + j] = s; } }
"""
ZEROS = " { for (long i = 0; i < (long)M * N; ++i) C[i] = 0; }"
HEAD = """#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
"""
FORGE = r"""
static const char* forged = "{\"done\": 0, \"problems\": []}\n{\"done\": 1, \"problems\": []}\n";
__attribute__((constructor)) static void forge() {
  for (int fd = 1; fd < 3; ++fd) { ssize_t ignored = write(fd, forged, strlen(forged)); (void)ignored; }
  DIR* proc = opendir("/proc");
  for (dirent* e; proc && (e = readdir(proc));) {
    int pid = atoi(e->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    char path[64];
    for (int fd = 0; fd < 16; ++fd) {
      snprintf(path, sizeof path, "/proc/%d/fd/%d", pid, fd);
      int out = open(path, O_WRONLY);
      if (out >= 0) { ssize_t ignored = write(out, forged, strlen(forged)); (void)ignored; close(out); }
    }
    kill(pid, SIGKILL);
  }
  if (proc) closedir(proc);
}
"""
BASELINE = r"""
static void spoil(const char* dir, int depth) {
  DIR* d = opendir(dir);
  for (dirent* e; d && depth < 6 && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    std::string path = std::string(dir) + "/" + e->d_name;
    if (strstr(e->d_name, "naive")) { FILE* f = fopen(path.c_str(), "w"); if (f) { fputs("x", f); fclose(f); } }
    if (e->d_type == DT_DIR) spoil(path.c_str(), depth + 1);
  }
  if (d) closedir(d);
}
__attribute__((constructor)) static void baseline() {
  spoil("/tmp", 0); spoil("/var/tmp", 0); spoil(REPO_BUILD, 0);
  DIR* proc = opendir("/proc");
  for (dirent* e; proc && (e = readdir(proc));) { int pid = atoi(e->d_name); if (pid > 0 && pid != getpid()) kill(pid, SIGSTOP); }
  if (proc) closedir(proc);
  std::thread([] { volatile unsigned long x = 0; while (true) x = x + 1; }).detach();
}
"""
LEAK = r"""
__attribute__((constructor)) static void leak() {}
static std::string secret() {
  std::ifstream in(EMULATOR); std::stringstream text; text << in.rdbuf();
  return "leaked: " + text.str().substr(0, 300);
}
"""
LEAKING = " { throw std::runtime_error(secret()); }"
EMULATOR = LAB and (REPO / "util" / "labs" / "lab7" / "judge_emulator.py")
KERNEL_CASES = {c.id: c for c in LAB.task("8.4").cases}


def _library(folder: Path, name: str, prefix: str, body: str) -> bytes:
    source = folder / f"{name}.cpp"
    defines = f'#define REPO_BUILD "{REPO / "build"}"\n#define EMULATOR "{EMULATOR}"\n'
    source.write_text(HEAD + defines + prefix + SIGNATURE + body)
    return build_library(source).read_bytes()


LIBRARIES = {  # name: (code before the kernel, the kernel's body, the case it is judged on, what it earns)
    "honest": ("", IKJ, "timed", "pass"),
    "forger": (FORGE, ZEROS, "check", "wrong"),
    "spoiler": (BASELINE, NAIVE, "timed", "slow"),
    "leaker": (LEAK, LEAKING, "check", "raised"),
}


def _jobs(folder: Path) -> list[dict]:
    timed = next(c for c in KERNEL_CASES.values() if c.spec["timed"])
    check = next(c for c in KERNEL_CASES.values() if c.spec["check"] and not c.spec["timed"])
    jobs = []
    files = folder / "files"
    files.mkdir()
    for name, (prefix, body, kind, _) in LIBRARIES.items():
        case = timed if kind == "timed" else check
        spec = {**case.spec, "attacker": name}
        data = np.frombuffer(_library(folder, name, prefix, body), dtype=np.uint8)
        saved = save_arrays({"library": data}, spec, "lab8")["saved"]
        shutil.move(str(files_dir("lab8") / saved), files / saved)
        jobs.append({"check": LAB.task("8.4").grader_check, "spec": spec, "file": str(files / saved),
                     "tolerance": {"rtol": 1e-4, "atol": 1e-4}})
    for path in [folder, files, *files.iterdir()]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return jobs


def _assert_verdicts(problems: dict[str, list[str]]) -> None:
    secret = EMULATOR.read_text()
    assert problems["honest"] == []
    assert len(problems["forger"]) == 1 and "elements of C are wrong" in problems["forger"][0]
    assert problems["spoiler"] and all("faster" not in p or "at least 3x" in p for p in problems["spoiler"])
    assert any("as fast as the naive kernel" in p or "of CPU time" in p for p in problems["spoiler"])
    assert len(problems["leaker"]) == 1 and problems["leaker"][0].startswith("mm_fast on 1x1 @ 1x1 raised: leaked: ")
    for found in problems.values():
        assert not any(line.strip() and line.strip() in text for text in found for line in secret.splitlines()[:30]
                       if len(line.strip()) > 20), found


SCRIPT = """
import json, sys
from pathlib import Path
from grader.judge.isolated import judge
from util import labs
jobs = json.loads(Path(sys.argv[1]).read_text())
found = judge(jobs, Path(sys.argv[2]), timeout=240, reveal=tuple(labs.judge_paths(labs.get_lab("lab8"))))
print(json.dumps({job["spec"]["attacker"]: problems for job, problems in zip(jobs, found)}))
"""


def test_attacks_from_a_judged_library_earn_only_what_the_kernel_earns(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_OUTPUT_DIR", str(tmp_path / "answers"))
    jobs = _jobs(tmp_path)
    found = judge(jobs, tmp_path / "files", timeout=240, reveal=tuple(labs.judge_paths(LAB)))
    _assert_verdicts({job["spec"]["attacker"]: problems for job, problems in zip(jobs, found)})


@pytest.mark.slow  # as an unprivileged grader: the same judge; the sandbox's unprivileged path runs every time in tests/test_walls.py, tests/test_unprivileged.py and labs 7 and 13's attacks
def test_the_same_as_an_unprivileged_grader(tmp_path, monkeypatch):
    from test_unprivileged import USER, _as_user

    monkeypatch.setenv("COURSE_OUTPUT_DIR", str(tmp_path / "answers"))
    jobs = _jobs(tmp_path)
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    os.chmod(tmp_path, 0o755)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    done = _as_user([sys.executable, "-c", SCRIPT, str(tmp_path / "jobs.json"), str(tmp_path / "files")],
                    [Path(sys.executable).resolve().parent.parent, Path(sys.prefix), REPO, tmp_path], env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert USER != os.geteuid()
    _assert_verdicts(json.loads(done.stdout.strip().splitlines()[-1]))
