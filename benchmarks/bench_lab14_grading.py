"""Lab 14, measured in one run: the graded solution against the 30 s target, the grader's judge work on its own,
and the solution's kernels: counted in Triton's interpreter (any machine) and, where there is a GPU, compiled and
timed beside the time the lab's H100-like machine model predicts from their bytes and FLOPs.

    python benchmarks/bench_lab14_grading.py                 # everything this machine can run
    python benchmarks/bench_lab14_grading.py --kernels-only  # the kernels alone (on a GPU machine: no grader needed)

Without a GPU the kernels run in the interpreter at small sizes (their traffic counted and checked against the
closed forms, their interpreter seconds shown); with one they also run compiled at sizes that keep it busy
(``triton.testing.do_bench``, the mean after warm-up), each beside its predicted time. Timings depend on what else
runs: the load average is printed first. Target (the course's): the graded solution <= 30 s on 2 cores.
"""
from __future__ import annotations

import argparse
import ast
import json
import linecache
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
WALL_TARGET = 30.0
SOLUTION = REPO / "solutions" / "lab14_attention_kernels.ipynb"


def solution_definitions() -> dict:
    """The functions and kernels the solution notebook defines (its cells' definitions only, markers dropped),
    with their sources registered so that Triton can read them."""
    import torch
    import triton
    import triton.language as tl

    found: dict = {"__name__": "__lab14_bench__", "math": __import__("math"), "torch": torch, "triton": triton,
                   "tl": tl}
    cells = json.loads(SOLUTION.read_text(encoding="utf-8"))["cells"]
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        source = "".join(line for line in "".join(cell["source"]).splitlines(True)
                         if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
        tree = ast.parse(source)
        tree.body = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
        if tree.body:
            filename = f"<lab14 solution cell {index}>"
            linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
            exec(compile(tree, filename, "exec"), found)
    return found


def interpreted_kernels(defs: dict) -> None:
    """The kernels in the interpreter at small sizes: counted bytes against the closed forms, interpreter time."""
    import torch

    from util.labs.lab14 import judge, launch
    from util.labs.lab14.machines import H100

    print("\nIn Triton's interpreter (the grader's way): bytes counted vs the closed form, the time predicted on "
          f"{H100['name']} from them, the interpreter's seconds")
    g = torch.Generator().manual_seed(0)
    flops = [2 * 128 ** 3, 2 * 256 ** 3, 0, defs["attention_costs"](256, 32, 2, 64, False)["flash_flops"],
             defs["attention_costs"](256, 32, 2, 32, False)["flash_flops"],
             0, 0]  # the backward's: its FLOPs not counted here (the bytes' time alone)
    runs = [("matmul 128^3, tiles 32", lambda: launch.run_matmul(defs["matmul_kernel"], torch.randn(128, 128, generator=g),
                                                               torch.randn(128, 128, generator=g), (32, 32, 32))[-1],
             judge.matmul_traffic(128, 128, 128, (32, 32, 32))),
            ("matmul 256^3, tiles 64", lambda: launch.run_matmul(defs["matmul_kernel"], torch.randn(256, 256, generator=g),
                                                               torch.randn(256, 256, generator=g), (64, 64, 32))[-1],
             judge.matmul_traffic(256, 256, 256, (64, 64, 32))),
            ("softmax 64 x 1000", lambda: launch.run_softmax(defs["softmax_kernel"],
                                                             torch.randn(64, 1000, generator=g))[-1],
             judge.softmax_traffic(64, 1000)),
            ("FlashAttention 2 x 256 x 32, blocks 64", lambda: launch.run_flash(
                defs["flash_kernel"], *(torch.randn(2, 256, 32, generator=g) for _ in range(3)), False, (64, 64))[-1],
             judge.flash_traffic(2, 256, 32, (64, 64), False)),
            ("FlashAttention 2 x 256 x 32, blocks 32", lambda: launch.run_flash(
                defs["flash_kernel"], *(torch.randn(2, 256, 32, generator=g) for _ in range(3)), False, (32, 32))[-1],
             judge.flash_traffic(2, 256, 32, (32, 32), False)),
            ("FlashAttention backward 2 x 256 x 32, 64 x 32", lambda: _backward(defs, g, False)[-1],
             judge.backward_traffic(2, 256, 32, (64, 32), False)),
            ("FlashAttention backward, causal, the same", lambda: _backward(defs, g, True)[-1],
             judge.backward_traffic(2, 256, 32, (64, 32), True))]
    for (label, run, (loaded, stored)), work in zip(runs, flops):
        start = time.perf_counter()
        traffic = run()
        seconds = time.perf_counter() - start
        same = traffic.loaded == loaded and traffic.stored == stored
        predicted = max(work / H100["flops"], traffic.total_bytes / H100["bandwidth"])
        print(f"  {label:40s} {traffic.total_bytes:>12,} B  closed form {'equal' if same else 'DIFFERENT'}  "
              f"predicted {predicted * 1e6:6.2f} us  interpreter {seconds:6.2f} s")


def _backward(defs: dict, generator, causal: bool):
    """The solution's backward on 2 heads of 256 x 32 in query blocks of 64 and key blocks of 32, O and L float64's."""
    import torch

    from util.labs.lab14 import judge, launch

    q, k, v, do = (torch.randn(2, 256, 32, generator=generator) for _ in range(4))
    scores = q.double() @ k.double().transpose(-1, -2) / 32 ** 0.5
    if causal:
        scores = scores.masked_fill(torch.ones(256, 256, dtype=torch.bool).triu(1), float("-inf"))
    o = judge.attention64(q, k, v, do, causal)[0].float()
    return launch.run_flash_backward(defs["flash_backward_kernel"], q, k, v, o, torch.logsumexp(scores, -1).float(), do,
                                     causal, (64, 32))


def gpu_kernels(defs: dict) -> None:
    """The kernels compiled on the GPU at sizes that keep it busy, measured beside the H100-like prediction."""
    import torch
    import triton

    from util.labs.lab14 import judge
    from util.labs.lab14.launch import gpu_seconds
    from util.labs.lab14.machines import H100

    def predicted(flops: int, nbytes: int) -> float:
        return max(flops / H100["flops"], nbytes / H100["bandwidth"])

    def total(traffic) -> int:
        return sum(traffic[0].values()) + sum(traffic[1].values())

    print(f"\nCompiled on {torch.cuda.get_device_name()} (Triton {triton.__version__}), measured vs predicted on "
          f"{H100['name']} ({H100['bandwidth'] / 1e12:.2f} TB/s, {H100['flops'] / 1e12:.0f} TFLOP/s, no cache)")
    n, heads, d = 4096, 16, 64
    a, b = torch.randn(n, n), torch.randn(n, n)
    q, k, v = (torch.randn(heads, n, d) for _ in range(3))
    costs = defs["attention_costs"]
    rows = []
    for tile in ((128, 128, 32), (64, 64, 32), tuple(defs["plan_matmul"](n, n, n, H100)["block"])):
        rows.append((f"matmul {n}^3, tile {tile[0]} x {tile[1]} x {tile[2]}",
                     lambda tile=tile: gpu_seconds("matmul", defs["matmul_kernel"], a, b, block=tile),
                     2 * n ** 3, total(judge.matmul_traffic(n, n, n, tile))))
    rows.append((f"softmax {n} x {n}", lambda: gpu_seconds("softmax", defs["softmax_kernel"], a), 0,
                 total(judge.softmax_traffic(n, n))))
    for causal in (False, True):
        c = costs(n, d, heads, 64, causal)
        rows.append((f"FlashAttention {heads} x {n} x {d}{', causal' if causal else ''}, blocks 64",
                     lambda causal=causal: gpu_seconds("flash", defs["flash_kernel"], q, k, v, block=(64, 64),
                                                       causal=causal), c["flash_flops"], c["flash_bytes"]))
    qc, kc, vc = (t.cuda() for t in (q, k, v))
    c = costs(n, d, heads, 64, False)
    rows.append((f"naive attention in PyTorch {heads} x {n} x {d} (3 kernels)",
                 lambda: triton.testing.do_bench(lambda: torch.softmax(qc @ kc.transpose(-1, -2) / 8, -1) @ vc) / 1e3,
                 c["naive_flops"], c["naive_bytes"]))
    for causal in (False, True):  # 14.8: the backward compiled, O and L from PyTorch on the GPU
        c = costs(n, d, heads, 64, causal)
        rows.append((f"FlashAttention backward {heads} x {n} x {d}{', causal' if causal else ''}, blocks 64",
                     lambda causal=causal: _gpu_backward(defs["flash_backward_kernel"], qc, kc, vc, causal, (64, 64)),
                     5 * c["flash_flops"] // 2, total(judge.backward_traffic(heads, n, d, (64, 64), causal))))
    for label, measure, flops, nbytes in rows:
        try:
            measured = f"{measure() * 1e6:10.1f} us"
        except Exception as exc:  # a tile the compiler cannot fit: say so, keep measuring the others
            measured = f"failed ({type(exc).__name__}: {str(exc)[:60]})"
        print(f"  {label:56s} predicted {predicted(flops, nbytes) * 1e6:10.1f} us   measured {measured}")


def _gpu_backward(kernel, q, k, v, causal: bool, block: tuple[int, int]) -> float:
    """Seconds one compiled launch of the solution's ``flash_backward_kernel`` takes on ``q, k, v`` (on the GPU),
    its O and L computed by PyTorch there. Predicted beside it: five matrix products of the forward's size (2.5 times
    its FLOPs: S again, dV, dP, dQ, dK) and the bytes of :func:`util.labs.lab14.judge.backward_traffic`."""
    import torch
    import triton

    from util.labs.lab14.launch import flash_backward_args

    heads, n, d = q.shape
    scores = q @ k.transpose(-1, -2) / d ** 0.5
    if causal:
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    lse = torch.logsumexp(scores, -1).contiguous()
    o = (torch.softmax(scores, -1) @ v).contiguous()
    del scores
    do = torch.randn_like(q)
    dq, dk, dv = (torch.empty_like(q) for _ in range(3))
    grid, args = flash_backward_args(q, k, v, o, lse, do, dq, dk, dv, causal, block)
    return float(triton.testing.do_bench(lambda: kernel[grid](*args))) / 1e3


def grading_rows() -> dict[str, float]:
    """Plain and graded runs of the solution, and the judge's work alone (its student processes included)."""
    from timing import graded_run, plain_run

    from grader.judge.isolated import serving
    from util.labs import get_lab
    from util.labs.lab14 import judge, rules

    lab = get_lab("lab14")
    rows = {"plain run of the solution (nbclient)": plain_run(SOLUTION)}
    rows["grader grade of the solution"] = graded_run(SOLUTION, "lab14")
    defs = solution_definitions()
    import io

    import cloudpickle
    import numpy as np

    buffer = io.BytesIO()
    np.savez(buffer, function=np.frombuffer(cloudpickle.dumps(defs["FlashAttention"]), dtype=np.uint8))
    saved = {"14.2": buffer.getvalue()} | {task: rules.kernel_source(defs[name]).encode()
                                           for task, name in (("14.3", "matmul_kernel"), ("14.4", "softmax_kernel"),
                                                              ("14.5", "flash_kernel"),
                                                              ("14.8", "flash_backward_kernel"))}
    checks = {"14.2": judge.check_attention, "14.3": judge.check_matmul, "14.4": judge.check_softmax,
              "14.5": judge.check_flash, "14.8": judge.check_backward}
    with serving():
        start = time.perf_counter()
        for task_id, check in checks.items():
            task = lab.task(task_id)
            for case in task.cases:
                before = time.perf_counter()
                problems = check(dict(case.spec), saved[task_id], task.tolerance)
                if problems:
                    sys.exit(f"the judge failed the solution on {task_id} {case.id}: {problems}")
                rows[f"  judge {task_id}: {case.id[:60]}"] = time.perf_counter() - before
        rows["the judges' work alone (student processes started at the first case)"] = time.perf_counter() - start
        before = time.perf_counter()  # a compile alone, at constexprs no case uses (nothing cached)
        reply, _, problem = judge._ask("compiler", {"kernel": "backward", "source": saved["14.8"].decode(),
                                                    "constexprs": {"D": 64, "BLOCK_M": 64, "BLOCK_N": 64,
                                                                   "CAUSAL": True}})
        if problem or "compiled" not in reply:
            sys.exit(f"the compiler refused the solution's backward: {problem or reply}")
        rows["  compile of the backward for an H100 alone (D = 64, blocks of 64, causal)"] = \
            time.perf_counter() - before
    for state in (judge._students, judge._answered, judge._owing, judge._compiled, judge._baseline):
        state.clear()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels-only", action="store_true", help="time the kernels only (no grading)")
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    import torch

    gpu = torch.cuda.is_available()
    if not gpu:
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel is decorated
    if not args.kernels_only:
        from timing import print_rows

        rows = grading_rows()
        print_rows(rows, "grader grade of the solution", WALL_TARGET)
    defs = solution_definitions()
    if gpu:  # the kernels are compiled here; the grader's count runs in the interpreter (a CPU machine)
        print("\nA GPU is here: the kernels run compiled (the grader counts their traffic in Triton's interpreter on "
              "a CPU, where this script prints the counts)")
        gpu_kernels(defs)
        return
    interpreted_kernels(defs)
    print("\nNo GPU here: nothing was compiled or measured on one (predicted times: the notebook's task 14.6).")


if __name__ == "__main__":
    main()
