"""Lab 8's judges against executors and kernels that read how they are measured and step around it, each beside
a control that plays the same wrong answer straight (it must lose its points, so that an attack's gain is real).

Task 8.3 (the grader runs the student's ``execute`` again and measures its memory from outside). The wrong answer
is an executor that computes out of place, in temporaries ``tracemalloc`` does not see (``mmap``), and copies the
results into the pool: its kernel evidence is clean, and the grader's re-run is what catches it. The attacks:

* **a phase outside the measurement**: the temporaries are allocated by the first call and kept, so a
  re-run that measured only a second call saw none;
* **the measurement's effect not judged**: the executor recognises the grader's re-run and does nothing
  there (the re-run's pool was never checked);
* **a process beside the one measured**: the work is done in a forked child, whose memory is its own.

Task 8.4 (the grader times the student's library against its naive kernel). The attacks:

* **a rule enforced by a name**: numpy's OpenBLAS copied under another name and called (the
  judge refused libraries by name); control: the same BLAS loaded where numpy keeps it;
* **a rule in shared state**: rows split over threads that widen their CPU affinity and put it back
  before the call returns (the judge looked at the affinity at the end of each call); control: the same kernel on
  one thread. On a 2-core machine this one can gain at most 2x, and only where the cores are free.

Judged through the grader's own judge process, with an honest executor and kernel, as whoever runs the tests
(root in CI) and as an unprivileged grader.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import cloudpickle
import numpy as np
import pytest
from judged_attacks import job, notebook_namespace, verdicts

from grader.execute import confinement
from util.labs import get_lab
from util.labs.lab8.kernel import build_library

pytestmark = [pytest.mark.notebook,
              pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++"),
              pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")]
LAB = get_lab("lab8")
EXECUTORS = '''
import mmap, os, sys
import numpy as np
from onnx import helper


def attributes(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def view(buffer, shape):
    return buffer[:4 * int(np.prod(shape))].view(np.float32).reshape(shape)


def node_value(op, a, ins, out):
    """One node's result written into ``out`` (in place)."""
    if op == "Gemm":
        x = ins[0].T if a.get("transA", 0) else ins[0]
        w = ins[1].T if a.get("transB", 0) else ins[1]
        np.matmul(x, w, out=out)
        if len(ins) > 2:
            np.add(out, ins[2], out=out)
    elif op == "Add":
        np.add(ins[0], ins[1], out=out)
    elif op == "Relu":
        np.maximum(ins[0], 0, out=out)
    else:
        np.subtract(ins[0], ins[0].max(axis=-1, keepdims=True), out=out)
        np.exp(out, out=out)
        np.divide(out, out.sum(axis=-1, keepdims=True), out=out)


def scratch(shape):
    """A temporary tracemalloc does not see."""
    return np.frombuffer(mmap.mmap(-1, 4 * int(np.prod(shape))), dtype=np.float32).reshape(shape)


def run(model, weights, feeds, shapes, plan, pool, temporary):
    values, env = {**weights, **feeds}, {}
    for node in model.graph.node:
        name = node.output[0]
        out = view(pool[plan["assign"][name]], shapes[name])
        ins = [values[i] for i in node.input]
        if temporary is None:
            node_value(node.op_type, attributes(node), ins, out)
        else:
            held = temporary(name, shapes[name])
            node_value(node.op_type, attributes(node), ins, held)
            np.copyto(out, held)
        env[name] = values[name] = out
    return {value.name: values[value.name] for value in model.graph.output}, env


def honest(model, weights, feeds, shapes, plan, pool, matmul=np.matmul):
    return run(model, weights, feeds, shapes, plan, pool, None)


def out_of_place(model, weights, feeds, shapes, plan, pool, matmul=np.matmul):
    return run(model, weights, feeds, shapes, plan, pool, lambda name, shape: scratch(shape))


KEPT = {}


def kept_from_the_first_call(model, weights, feeds, shapes, plan, pool, matmul=np.matmul):
    return run(model, weights, feeds, shapes, plan, pool,
               lambda name, shape: KEPT.setdefault((name, tuple(shape)), scratch(shape)))


def idle_when_judged(model, weights, feeds, shapes, plan, pool, matmul=np.matmul):
    if "util.labs.lab8.execute_harness" in sys.modules:  # the grader's re-run: the pool's views, nothing computed
        env = {n: view(pool[plan["assign"][n]], shapes[n]) for node in model.graph.node for n in node.output}
        return {value.name: env[value.name] for value in model.graph.output}, env
    return out_of_place(model, weights, feeds, shapes, plan, pool)


def in_a_child(model, weights, feeds, shapes, plan, pool, matmul=np.matmul):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child computes out of place and sends the pool's bytes
        os.close(read)
        copies = [np.zeros_like(buffer) for buffer in pool]
        out_of_place(model, weights, feeds, shapes, plan, copies)
        with os.fdopen(write, "wb") as sink:
            for buffer in copies:
                sink.write(buffer.tobytes())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as source:
        for buffer in pool:
            source.readinto(memoryview(buffer))
    os.waitpid(pid, 0)
    env = {n: view(pool[plan["assign"][n]], shapes[n]) for node in model.graph.node for n in node.output}
    return {value.name: env[value.name] for value in model.graph.output}, env
'''
EXECUTE = {  # name: (function, what it must get)
    "honest execute": ("honest", "pass"),
    "temporaries (control)": ("out_of_place", "grown"),
    "temporaries kept from the first call": ("kept_from_the_first_call", "grown"),
    "idle when the grader runs it": ("idle_when_judged", "empty pool"),
    "temporaries in a child process": ("in_a_child", "no child"),
}
SIGNATURE = "void mm_fast(const float* A, const float* B, float* C, int M, int K, int N)"
IKJ = """ {
  for (long i = 0; i < (long)M * N; ++i) C[i] = 0;
  for (int i = 0; i < M; ++i) for (int k = 0; k < K; ++k) {
    const float a = A[(long)i * K + k];
    for (int j = 0; j < N; ++j) C[(long)i * N + j] += a * B[(long)k * N + j]; } }
"""
ROWS = """
static void rows(const float* A, const float* B, float* C, int from, int to, int K, int N) {
  for (int i = from; i < to; ++i) for (int j = 0; j < N; ++j) {
    float s = 0; for (int k = 0; k < K; ++k) s += A[(long)i * K + k] * B[(long)k * N + j]; C[(long)i * N + j] = s; } }
"""
THREADED = """#include <sched.h>
#include <thread>
#include <vector>
""" + ROWS + SIGNATURE + """ {
  cpu_set_t pinned, every; sched_getaffinity(0, sizeof pinned, &pinned);
  CPU_ZERO(&every); for (int c = 0; c < 64; ++c) CPU_SET(c, &every);
  sched_setaffinity(0, sizeof every, &every);
  std::vector<std::thread> helpers;
  for (int t = 1; t < 4; ++t) helpers.emplace_back(rows, A, B, C, M * t / 4, M * (t + 1) / 4, K, N);
  rows(A, B, C, 0, M / 4, K, N);
  for (auto& helper : helpers) helper.join();
  sched_setaffinity(0, sizeof pinned, &pinned); }
"""
ONE_THREAD = ROWS + SIGNATURE + " { rows(A, B, C, 0, M, K, N); }\n"
BLAS = """#include <dlfcn.h>
#include <stdio.h>
#include <stdexcept>
#include <string>
typedef void (*sgemm_t)(int, int, int, long, long, long, float, const float*, long, const float*, long, float,
                        float*, long);
static sgemm_t sgemm = nullptr;
static void copy(const std::string& from, const std::string& to) {
  FILE* in = fopen(from.c_str(), "rb"); FILE* out = fopen(to.c_str(), "wb"); char chunk[1 << 16]; size_t n;
  while (in && out && (n = fread(chunk, 1, sizeof chunk, in)) > 0) fwrite(chunk, 1, n, out);
  if (in) fclose(in); if (out) fclose(out); }
__attribute__((constructor)) static void load() {
  std::string from = NUMPY_LIBS, folder = FOLDER;
  for (const char* name : DEPENDENCIES) copy(from + "/" + name, folder + "/" + name);
  copy(from + "/" + OPENBLAS, folder + "/" + RENAMED);
  void* handle = dlopen((folder + "/" + RENAMED).c_str(), RTLD_NOW);
  if (handle) sgemm = (sgemm_t)dlsym(handle, "scipy_cblas_sgemm64_"); }
""" + SIGNATURE + """ {
  if (!sgemm) throw std::runtime_error("no BLAS here");
  sgemm(101, 111, 111, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N); }
"""


def _numpy_blas() -> tuple[Path, Path] | None:
    import numpy

    libs = Path(numpy.__file__).resolve().parent.parent / "numpy.libs"
    found = sorted(libs.glob("libscipy_openblas*.so"))
    return (libs, found[0]) if found else None


def _kernels(folder: Path) -> dict[str, tuple[str, str]]:
    """name: (C++ source, what it must get)."""
    kernels = {"honest kernel": ("#include <stdexcept>\n" + SIGNATURE + IKJ, "pass"),
               "one thread (control)": (ONE_THREAD, "slow"),
               "threads, affinity put back": (THREADED, "threads")}
    numpy_blas = _numpy_blas()
    if numpy_blas is not None:
        libs, blas = numpy_blas
        others = ", ".join(f'"{p.name}"' for p in sorted(libs.iterdir()) if p != blas)
        kernels["OpenBLAS under another name"] = (
            f'#define NUMPY_LIBS "{libs}"\n#define FOLDER "/tmp"\n#define OPENBLAS "{blas.name}"\n'
            f'#define RENAMED "libkernel_helpers.so"\n#define DEPENDENCIES {{{others}}}\n' + BLAS, "foreign")
        kernels["OpenBLAS where numpy keeps it (control)"] = (
            f'#define NUMPY_LIBS "{libs}"\n#define FOLDER "{libs}"\n#define OPENBLAS "{blas.name}"\n'
            f'#define RENAMED "{blas.name}"\n#define DEPENDENCIES {{}}\n'
            + BLAS.replace("  for (const char* name : DEPENDENCIES) copy(from + \"/\" + name, folder + \"/\" + name);\n"
                           "  copy(from + \"/\" + OPENBLAS, folder + \"/\" + RENAMED);\n", ""), "blas")
    return kernels


def _jobs(folder: Path) -> list[dict]:
    from util.labs.lab8.graphs import graph, random_feeds
    from util.labs.lab8.harness import run_arrays, run_in_plan

    namespace = notebook_namespace(EXECUTORS, "lab8_attacks")
    case = next(c for c in LAB.task("8.3").cases if c.spec["graph"] == "residual_mlp")
    model = graph(case.spec["graph"])
    jobs = []
    for name, (function, _) in EXECUTE.items():
        execute = namespace[function]
        run = run_in_plan(execute, model, random_feeds(model, case.spec["inputs"], case.spec["seed"]))
        jobs.append(job(folder, "lab8", "8.3", f"job{len(jobs)}", {
            **run_arrays(run), "execute": np.frombuffer(cloudpickle.dumps(execute), dtype=np.uint8)}, case.spec))
        jobs[-1]["spec"]["attacker"] = name
    timed = next(c for c in LAB.task("8.4").cases if c.spec["timed"])
    (folder / "cpp").mkdir()
    for name, (source, _) in _kernels(folder).items():
        path = folder / "cpp" / f"kernel{len(jobs)}.cpp"
        path.write_text(source)
        data = np.frombuffer(build_library(path).read_bytes(), dtype=np.uint8)
        jobs.append(job(folder, "lab8", "8.4", f"job{len(jobs)}", {"library": data}, timed.spec))
        jobs[-1]["spec"]["attacker"] = name
    return jobs


def _assert_verdicts(found: dict[str, list[str]], folder: Path) -> None:
    again = "run again by the grader, "
    expected = {**{name: verdict for name, (_, verdict) in EXECUTE.items()},
                **{name: verdict for name, (_, verdict) in _kernels(folder).items()}}
    for name, verdict in expected.items():
        problems = found[name]
        if verdict == "pass":
            assert problems == [], (name, problems)
        elif verdict == "grown":
            assert len(problems) == 1 and problems[0].startswith(again + "execute made the process's memory grow by") \
                and "at most 196,608" in problems[0], (name, problems)
        elif verdict == "empty pool":
            assert problems and all(p.startswith(again) for p in problems) \
                and any("does not hold" in p or "holds NaN" in p for p in problems), (name, problems)
        elif verdict == "no child":
            assert problems == [again + "execute raised PermissionError: [Errno 1] Operation not permitted"], \
                (name, problems)
        elif verdict == "slow":
            assert len(problems) == 1 and "as fast as the naive kernel" in problems[0], (name, problems)
        elif verdict == "threads":
            assert any("of CPU time" in p or "less CPU time than the naive kernel" in p for p in problems) \
                or any("as fast as the naive kernel" in p for p in problems), (name, problems)
            assert not any("affinity" in p for p in problems), (name, problems)  # it put the affinity back
        elif verdict == "foreign":
            assert any(p.startswith("the library loaded /tmp/") and "neither itself nor one of the system's" in p
                       for p in problems), (name, problems)
        elif verdict == "blas":
            assert any(p.startswith("the library loaded libscipy_openblas") for p in problems), (name, problems)


def test_each_attack_on_the_executor_and_kernel_judges_earns_what_its_control_does(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_OUTPUT_DIR", str(tmp_path / "answers"))
    _assert_verdicts(verdicts(_jobs(tmp_path), tmp_path, "lab8", timeout=240), tmp_path)


@pytest.mark.slow  # as an unprivileged grader: the same judge; the sandbox's unprivileged path runs every time in tests/test_walls.py, tests/test_unprivileged.py and labs 7 and 13's attacks
def test_the_same_as_an_unprivileged_grader(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_OUTPUT_DIR", str(tmp_path / "answers"))
    _assert_verdicts(verdicts(_jobs(tmp_path), tmp_path, "lab8", as_user=True, timeout=240), tmp_path)
