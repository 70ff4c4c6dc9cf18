"""Lab 8's kernel judge against libraries that are wrong, slow, crash, hang, lie or cheat.

The grader times and checks a student's compiled library in processes of its own
(``util.labs.lab8.judge_timing``): the library in a student process the grader starts (this test
process stands for the judge, ``grader.judge.isolated.serving``), the naive kernel in one of the
judge's. Each library here is a few lines of C++ built with the course's flags (about 0.3 s each), so
the whole file takes about 20 s.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from grader.author.build import SOLUTIONS
from grader.judge.isolated import serving
from util.artifacts import save_arrays
from util.labs import get_lab
from util.labs.lab8 import judge
from util.labs.lab8 import judge_timing as timing
from util.labs.lab8.kernel import NAIVE_SOURCE, KernelBuildError, build_library, load_matmul
from util.labs.lab8.tasks import KERNEL

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


@pytest.fixture(autouse=True, scope="module")
def judge_here():
    """This process is the judge: its calls get student processes from the grader's service."""
    with serving():
        yield
LAB = get_lab("lab8")
SIGNATURE = "void mm_fast(const float* A, const float* B, float* C, int M, int K, int N)"
IKJ = SIGNATURE + """ {
  for (long i = 0; i < (long)M * N; ++i) C[i] = 0;
  for (int i = 0; i < M; ++i) for (int k = 0; k < K; ++k) {
    const float a = A[(long)i * K + k];
    for (int j = 0; j < N; ++j) C[(long)i * N + j] += a * B[(long)k * N + j]; } }
"""
ODD = [[1, 1, 1], [17, 33, 5]]
TIMED = [[384, 512, 640]]  # long enough (naive ~0.3 s) that a loaded machine keeps the 3x


def library(tmp_path: Path, body: str, name: str) -> bytes:
    source = tmp_path / f"{name}.cpp"
    source.write_text("#include <stdexcept>\n#include <sched.h>\n" + body)
    return build_library(source).read_bytes()


def verdict(data: bytes, **kwargs) -> list[str]:
    problems, _ = timing.judge_library(data, **kwargs)
    return problems


def test_a_loop_reordering_passes_and_is_measured(tmp_path):
    problems, measured = timing.judge_library(library(tmp_path, IKJ, "ikj"), check=ODD, timed=TIMED)
    assert problems == [] and measured["speedup"] >= 3 and measured["naive_s"] > measured["fast_s"] > 0


def test_the_solution_kernel_passes_the_judged_cases(tmp_path):
    shutil.copytree(SOLUTIONS / "lab8_graph_executor" / "kernel", tmp_path / "kernel",
                    ignore=shutil.ignore_patterns("build"))
    data = build_library(tmp_path / "kernel" / "mm_fast.cpp").read_bytes()
    task = LAB.task("8.4")
    for case in task.cases:
        if not case.spec["timed"]:
            assert judge.check_kernel(case.spec, _npz(tmp_path, data, case.spec), KERNEL) == ([], {}), case.id


def _npz(tmp_path, data: bytes, spec) -> bytes:
    import os
    os.environ["COURSE_OUTPUT_DIR"] = str(tmp_path / "out")
    try:
        saved = save_arrays({"library": np.frombuffer(data, dtype=np.uint8)}, spec, "lab8")
    finally:
        del os.environ["COURSE_OUTPUT_DIR"]
    return (tmp_path / "out" / "files" / saved["saved"]).read_bytes()


def test_the_naive_kernel_under_another_name_is_too_slow(tmp_path):
    naive = NAIVE_SOURCE.replace("mm_naive", "mm_fast")
    problems = verdict(library(tmp_path, naive, "naive"), timed=TIMED)
    assert len(problems) == 1 and "as fast as the naive kernel" in problems[0] and "at least 3x" in problems[0]


def test_a_kernel_that_writes_zeros_is_wrong(tmp_path):
    zeros = SIGNATURE + " { for (long i = 0; i < (long)M * N; ++i) C[i] = 0; }"
    assert "elements of C are wrong" in verdict(library(tmp_path, zeros, "zeros"), check=ODD)[0]
    assert "(timed)" in verdict(library(tmp_path, zeros, "zeros"), timed=TIMED)[0]


def test_a_kernel_that_skips_setting_c_meets_nan(tmp_path):
    adds = IKJ.replace("for (long i = 0; i < (long)M * N; ++i) C[i] = 0;", "")
    assert "= nan instead of" in verdict(library(tmp_path, adds, "adds"), check=ODD)[0]


def test_crash_exception_and_garbage_are_reported(tmp_path):
    crash = SIGNATURE + " { volatile float* p = nullptr; *p = 1; }"
    assert "crashed (SIGSEGV)" in verdict(library(tmp_path, crash, "crash"), check=ODD)[0]
    throws = SIGNATURE + ' { throw std::logic_error("Implement task 8.4: Fast matmul kernel"); }'
    assert verdict(library(tmp_path, throws, "throws"), check=ODD) == [
        "mm_fast on 1x1 @ 1x1 raised: Implement task 8.4: Fast matmul kernel"]
    assert verdict(b"not a shared library", check=ODD)[0].startswith(
        "loading the library raised: the library could not be loaded:")


def test_a_hang_is_stopped_at_the_deadline(tmp_path, monkeypatch):
    monkeypatch.setattr(timing, "CALL_SECONDS", 1.0)
    hang = SIGNATURE + " { volatile int x = 0; while (true) x = x + 1; }"
    assert verdict(library(tmp_path, hang, "hang"), check=ODD) == [
        "mm_fast did not finish mm_fast on 1x1 @ 1x1 within 1 s"]


def test_leaving_the_cpu_is_refused(tmp_path):
    unpin = IKJ.replace("{\n  for (long i", "{\n  cpu_set_t s; CPU_ZERO(&s); for (int c = 0; c < 64; ++c) CPU_SET(c, &s);"
                                             " sched_setaffinity(0, sizeof(s), &s);\n  for (long i", 1)
    problems = verdict(library(tmp_path, unpin, "unpin"), timed=TIMED)
    assert problems == ["mm_fast changed its CPU affinity: it is timed on one core, with one thread"]


def test_a_blas_is_refused(tmp_path):
    import numpy
    found = sorted(Path(numpy.__file__).parent.parent.glob("numpy.libs/libscipy_openblas*.so"))
    if not found:
        pytest.skip("numpy's bundled OpenBLAS is not where this test looks")
    blas = f"""#include <dlfcn.h>
{SIGNATURE} {{
  void* handle = dlopen("{found[0]}", RTLD_NOW);
  if (!handle) throw std::runtime_error("no blas");
  for (long i = 0; i < (long)M * N; ++i) C[i] = 0;
  for (int i = 0; i < M; ++i) for (int k = 0; k < K; ++k) for (int j = 0; j < N; ++j)
    C[(long)i * N + j] += A[(long)i * K + k] * B[(long)k * N + j]; }}
"""
    problems = verdict(library(tmp_path, blas, "blas"), timed=TIMED)
    assert any(p.startswith("the library loaded libscipy_openblas") for p in problems)


def test_the_notebook_loader_checks_layout_and_reports_exceptions(tmp_path):
    throws = SIGNATURE + ' { throw std::logic_error("nope"); }'
    source = tmp_path / "t.cpp"
    source.write_text("#include <stdexcept>\n" + throws)
    matmul = load_matmul(build_library(source))
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    with pytest.raises(RuntimeError, match="mm_fast raised: nope"):
        matmul(a, b, np.empty((2, 4), np.float32))
    with pytest.raises(ValueError, match="not C-contiguous"):
        matmul(a, np.ones((4, 3), np.float32).T, np.empty((2, 4), np.float32))
    with pytest.raises(ValueError, match="cannot multiply"):
        matmul(a, b, np.empty((2, 5), np.float32))
    broken = tmp_path / "broken.cpp"
    broken.write_text(SIGNATURE + " { return 1 }")
    with pytest.raises(KernelBuildError, match="broken.cpp does not compile"):
        build_library(broken)
