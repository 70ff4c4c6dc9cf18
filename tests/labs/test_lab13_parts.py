"""Lab 13's parts, fast: the declaration, the ranks' launcher and walls, the wire counts, results sent back
without pickle, the pipeline replay, and the solution's formulas against independent ones (Hypothesis where
inputs are arbitrary). The judges against hostile functions are in test_lab13_judge_walls.py; the notebooks
are graded by tests/test_labs.py."""
from __future__ import annotations

import io
import json
import math
import os
import struct
import time

import numpy as np
import psutil
import pytest
import torch
import torch.distributed as dist
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.author.solution import solution_namespace
from util.artifacts import case_file
from util.contract import Tolerance
from util.labs import get_lab
from util.labs.lab13 import judge, judge_reference, walls
from util.labs.lab13.pipeline import replay
from util.labs.lab13.public_checks import chunk_sizes, ring_bytes
from util.labs.lab13.ranks import RankError, RankTimeout, pack, run_ranks, unpack

LAB = get_lab("lab13")


@pytest.fixture(scope="module")
def solution():
    return solution_namespace("lab13", ("13.2", "13.3", "13.4", "13.7"))


def test_declaration_adds_up_and_every_run_is_judged_for_what_it_moves():
    assert LAB.max_points == 100
    assert [t.max_points for t in LAB.tasks] == [19, 8, 16, 10, 8, 11, 11, 12, 5]
    files = [case_file(c.spec) for t in LAB.tasks if t.grader_check for c in t.cases]
    assert len(files) == len(set(files))
    runs: dict[str, set[str]] = {}
    for task in LAB.tasks:
        for case in task.cases:
            if "run" in case.spec:
                assert case.seeds == ("seed",)
                runs.setdefault(judge._run_key(case.spec), set()).add(case.spec["check"])
    assert len(runs) == 10 and all({"result", "bytes"} <= checks for checks in runs.values())


# ------------------------------------------------------------------ the walls, as a small BPF interpreter sees them

SECCOMP_DATA = struct.Struct("iIQ6Q")  # nr, arch, instruction pointer, args


def _run_filter(program: bytes, nr: int, arch: int, *args: int) -> int:
    data = SECCOMP_DATA.pack(nr, arch, 0, *[a % (1 << 64) for a in list(args) + [0] * (6 - len(args))])
    code = [struct.unpack_from("HBBI", program, i) for i in range(0, len(program), 8)]
    accumulator, pc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == 0x20:
            accumulator = struct.unpack_from("I", data, k)[0]
        elif op == 0x06:
            return k
        elif op in (0x15, 0x35, 0x45):
            hit = {0x15: accumulator == k, 0x35: accumulator >= k, 0x45: bool(accumulator & k)}[op]
            pc += jt if hit else jf
        else:
            raise AssertionError(f"unknown BPF op {op:#x}")
        pc += 1


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_walls_filter_refuses_exactly_what_it_says(machine):
    arch, numbers = walls.ARCHES[machine]
    program = walls.program(4242, machine)
    assert program and len(program) % 8 == 0
    allow, eperm = walls.ALLOW, walls.EPERM
    verdict = lambda name, *args: _run_filter(program, numbers[name], arch, *args)  # noqa: E731
    assert _run_filter(program, numbers["socket"], 0x40000003) == eperm  # another architecture's numbers
    for name in ("socket", "socketpair", "connect", "pipe2", "memfd_create", "ptrace", "unlinkat", "renameat2",
                 "execve", "pidfd_getfd", "io_uring_setup", "keyctl", "flock", "setxattr", "setpgid", "setsid",
                 "ioprio_set", "sysinfo", "mincore", "preadv2", "fadvise64"):
        assert verdict(name) == eperm, name
    assert verdict("clone3") == walls.ENOSYS
    assert verdict("clone", 0x3D0F00) == eperm and verdict("clone", 0x1200011) == eperm  # a thread, a fork
    assert verdict("openat", -100, 0, os.O_RDONLY | os.O_CLOEXEC) == allow
    for flags in (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC | os.O_RDONLY, os.O_APPEND, 0o20200000):
        assert verdict("openat", -100, 0, flags) == eperm, oct(flags)
    assert verdict("kill", 4242, 9) == allow and verdict("kill", 4243, 9) == eperm and verdict("kill", 0, 9) == eperm
    assert verdict("kill", (1 << 64) - 1, 9) == eperm and verdict("tgkill", 4242, 4250, 6) == allow
    assert verdict("fcntl", 3, 3) == allow and verdict("fcntl", 3, 6) == eperm and verdict("fcntl", 3, 8) == eperm
    assert verdict("prctl", 15) == eperm and verdict("prctl", 16) == allow
    assert verdict("prlimit64", 0, 7, 0, 1234) == allow and verdict("prlimit64", 0, 7, 1234, 0) == eperm
    assert verdict("prlimit64", 77, 7, 0, 1234) == eperm
    refused = set(walls._DENIED) | {"clone3", "clone", "open", "openat", "kill", "tgkill", "rt_sigqueueinfo",
                                    "rt_tgsigqueueinfo", "fcntl", "prctl", "prlimit64"}
    other = [n for n in range(460) if n not in {numbers[name] for name in refused if name in numbers}]
    assert all(_run_filter(program, n, arch, 1, 2, 3) == allow for n in other)
    if machine == "x86_64":
        assert _run_filter(program, 0x40000000 + 41, arch) == eperm  # x32
    assert walls.program(1, "riscv64") is None


def test_a_rank_behind_the_walls_reaches_the_others_only_through_the_group(tmp_path):
    target = str(tmp_path / "left-by-a-rank")
    readable = tmp_path / "readable.txt"
    readable.write_text("course data")

    def attempt(rank, world):
        import signal
        import socket
        import threading

        def fork():
            if os.fork() == 0:
                os._exit(0)

        def rename():
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(15, b"renamed", 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl")

        tried = {}
        for name, action in {
            "write a file": lambda: open(target, "w"),
            "append to a file": lambda: open(str(readable), "a"),
            "make a folder": lambda: os.mkdir(target),
            "remove a file": lambda: os.unlink(str(readable)),
            "a socket": lambda: socket.socket(),
            "a pipe": lambda: os.pipe(),
            "fork": fork,
            "signal the launcher": lambda: os.kill(os.getppid(), signal.SIGCONT),
            "signal another process": lambda: os.kill(1, 0),
            "rename itself": rename,
        }.items():
            try:
                action()
                tried[name] = "done"
            except OSError as exc:
                tried[name] = exc.errno
        def ioprio():
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            if libc.syscall(251 if os.uname().machine == "x86_64" else 30, 1, 0, (2 << 13) | 7) != 0:
                raise OSError(ctypes.get_errno(), "ioprio_set")

        for name, action in {"a thread": lambda: threading.Thread(target=print).start(),
                             "its own process group": lambda: os.setpgid(0, 0), "a session": os.setsid,
                             "its I/O priority": ioprio}.items():
            try:
                action()
                tried[name] = "done"
            except OSError as exc:
                tried[name] = exc.errno
            except RuntimeError as exc:  # threading's "can't start new thread"
                tried[name] = 1 if "new thread" in str(exc) else str(exc)
        done = [open(str(readable)).read()]
        os.kill(os.getpid(), 0)  # itself: allowed
        total = torch.tensor([float(rank + 1)])
        dist.all_reduce(total)
        filtered = [("Seccomp:\t2" in open(f"/proc/self/task/{tid}/status").read())
                    for tid in os.listdir("/proc/self/task")]
        return {"tried": tried, "read": done, "total": total, "filtered": filtered}

    run = run_ranks(attempt, 2)
    assert run.walls
    for result in run.results:
        assert result["read"] == ["course data"] and result["total"].tolist() == [3.0]
        assert set(result["tried"].values()) == {1}, result["tried"]  # EPERM, every one
        assert len(result["filtered"]) > 1 and all(result["filtered"])  # gloo's threads are behind the filter too
    assert not os.path.exists(target) and readable.read_text() == "course data"


def test_the_wire_counts_tensors_and_glooss_framing_the_same_every_time():
    """A send of b bytes from i to j puts b + 96 bytes on the wire from i to j and 48 back (gloo's framing, with
    torch 2.14.1's gloo): the count the judge compares against its own run, never a constant it assumes."""
    def pattern(rank, world):
        if rank == 0:
            dist.send(torch.zeros(250), 1)
            dist.send(torch.zeros(0), 2)
        elif rank == 1:
            dist.recv(torch.empty(250), 0)
            request = dist.isend(torch.zeros(7), 2)
            request.wait()
        else:
            dist.recv(torch.empty(0), 0)
            dist.recv(torch.empty(7), 1)
        return rank

    first, second = run_ranks(pattern, 3), run_ranks(pattern, 3)
    assert first.wire == second.wire == [[0, 1000 + 96, 0 + 96], [48, 0, 28 + 96], [48, 48, 0]]
    assert [first.sent_bytes(r) for r in range(3)] == [1000, 28, 0] and first.results == [0, 1, 2]
    assert first.messages[1] == [{"op": "recv", "peer": 0, "bytes": 1000}, {"op": "isend", "peer": 2, "bytes": 28}]


def test_pairing_leaves_out_a_stray_connection_and_refuses_a_group_with_a_pair_missing():
    from util.labs.lab13.wire import pair_ranks

    ends = {0: [("a:1", "b:1"), ("a:2", "c:1")], 1: [("b:1", "a:1"), ("b:2", "c:2"), ("b:3", "x:9")],
            2: [("c:1", "a:2"), ("c:2", "b:2")]}
    assert pair_ranks(ends) == {(0, 0): 1, (0, 1): 2, (1, 0): 0, (1, 1): 2, (2, 0): 0, (2, 1): 1}  # b:3 left out
    with pytest.raises(ValueError, match="rank 0 holds no connection to rank 2"):
        pair_ranks({0: [("a:1", "b:1")], 1: [("b:1", "a:1"), ("b:2", "c:2")], 2: [("c:2", "b:2")]})
    with pytest.raises(ValueError, match="to itself"):
        pair_ranks({0: [("a:1", "a:2"), ("a:2", "a:1")], 1: []})
    assert pair_ranks({0: [], 1: []}) == {}


def test_where_the_kernel_cannot_count_a_run_says_so(monkeypatch):
    """macOS has neither ``/proc/self/fd`` nor ``TCP_INFO``: a student's run there reports no wire counts (the
    grader, on Linux, always counts them)."""
    from util.labs.lab13 import wire

    monkeypatch.setattr(wire, "available", lambda: False)
    run = run_ranks(lambda rank, world: torch.ones(1) * rank, 2)
    assert run.wire == [] and run.wire_sent(0) is None and "not counted" in run.summary()
    assert [r.tolist() for r in run.results] == [[0.0], [1.0]]


def test_the_stated_ring_sends_what_the_notebook_says():
    """The reference ring on 3 ranks of 1,000 floats (chunks 334, 333, 333): the bytes of public_checks.ring_bytes,
    2 (p - 1) sends each, and exact sums of integers."""
    xs = [torch.arange(1000, dtype=torch.float32) * (r + 1) for r in range(3)]
    run = run_ranks(lambda rank, world: judge_reference.ring_all_reduce(xs[rank], rank, world), 3)
    assert [run.sent_bytes(r) for r in range(3)] == ring_bytes(1000, 3) == [5332, 5336, 5332]
    assert [run.sends(r) for r in range(3)] == [4, 4, 4]
    assert all(np.array_equal(r, np.arange(1000, dtype=np.float32) * 6) for r in run.results)
    assert chunk_sizes(10, 3) == [len(c) for c in torch.tensor_split(torch.zeros(10), 3)] == [4, 3, 3]


def test_a_rank_that_raises_or_hangs_costs_its_run_and_leaves_nothing_behind():
    def raises(rank, world):
        if rank == 1:
            raise ValueError("rank 1 gave up")
        return rank

    with pytest.raises(RankError, match=r"rank 1 raised ValueError: rank 1 gave up"):
        run_ranks(raises, 2)

    def hangs(rank, world):
        if rank == 0:
            dist.recv(torch.empty(1), 1)  # nobody sends
        return rank

    start = time.monotonic()
    with pytest.raises(RankTimeout, match="rank 0 did not finish in time"):
        run_ranks(hangs, 2, timeout=3)
    assert time.monotonic() - start < 20
    assert [p for p in psutil.Process().children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE] == []


# ------------------------------------------------------------------ results come back as arrays, never pickled

_leaf = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False), st.text(max_size=5),
                  st.lists(st.floats(-1e6, 1e6, width=32), max_size=6).map(lambda v: np.array(v, dtype=np.float32)))
_tree = st.recursive(_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                    st.dictionaries(st.text(max_size=4), inner, max_size=4)),
                     max_leaves=12)


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, (list, tuple)):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b and type(a) is type(b)


@settings(max_examples=60, deadline=None)
@given(_tree)
def test_results_travel_as_json_and_arrays(value):
    tree, data = pack(value)
    json.dumps(tree)
    assert _same(value, unpack(tree, data))


def test_what_a_rank_sends_back_is_never_unpickled():
    buffer = io.BytesIO()
    np.save(buffer, np.array([object()], dtype=object), allow_pickle=True)
    with pytest.raises(TypeError):
        pack({"x": np.array([object()], dtype=object)})
    tree, data = pack({"x": torch.ones(2)})
    with pytest.raises(ValueError, match="names an array it did not send"):
        unpack({"$array": 7}, data)
    with pytest.raises(ValueError):
        unpack(tree, b"\x80\x04pickled")
    deep: object = {"$array": 0}
    for _ in range(60):
        deep = [deep]
    with pytest.raises(ValueError, match="nested more than 50"):
        unpack(deep, data)


# ------------------------------------------------------------------ the solution's formulas, against independent ones


def _gpipe_makespan(p: int, m: int, limit: int) -> int:
    return sum(3 * (min(limit, m - start) + p - 1) for start in range(0, m, limit))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 12), st.integers(0, 4))
def test_the_stated_schedules_replay_to_their_closed_forms(p, m, extra):
    limit = min(p, m) + extra
    gpipe = replay(judge_reference.schedule("gpipe", p, m, limit), m)
    one = replay(judge_reference.schedule("1f1b", p, m, limit), m)
    assert gpipe.makespan == _gpipe_makespan(p, m, limit) and gpipe.peak == [min(limit, m)] * p
    assert one.makespan == 3 * (m + p - 1) and one.peak == [min(p - s, m) for s in range(p)]
    assert math.isclose(one.bubble, (p - 1) / (m + p - 1))
    assert one.makespan <= gpipe.makespan


def test_the_solution_schedules_and_replays_refusals(solution):
    schedule = solution["pipeline_schedule"]
    for kind in ("gpipe", "1f1b"):
        for p, m, limit in ((4, 8, 4), (3, 7, 3), (5, 3, 5), (1, 4, 2), (3, 10, 3)):
            ours = replay(schedule(kind, p, m, limit), m).summary()
            assert ours == replay(judge_reference.schedule(kind, p, m, limit), m).summary()
    with pytest.raises(ValueError, match="stage 1 must run F and B"):
        replay([["F0", "B0"], ["F0", "B0", "B0"]])
    with pytest.raises(ValueError, match="never finishes"):
        replay([["F0", "B0"], ["B0", "F0"]])
    with pytest.raises(ValueError, match="each operation is 'F<i>' or 'B<i>'"):
        replay([["F0", "X0"]])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 5000), min_size=1, max_size=12), st.integers(1, 20000))
def test_buckets_partition_in_order_and_close_at_the_cap(solution, sizes, cap):
    buckets = solution["make_buckets"](sizes, cap)
    assert buckets == judge_reference.make_buckets(sizes, cap)
    assert [i for b in buckets for i in b] == list(range(len(sizes)))
    for bucket in buckets[:-1]:
        held = [sizes[i] for i in bucket]
        assert sum(held) >= cap > sum(held[:-1])
    assert sum(sizes[i] for i in buckets[-1][:-1]) < cap


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 64), st.floats(1e-7, 1e-4), st.floats(1e-12, 1e-8), st.integers(1, 1 << 30))
def test_the_alpha_beta_costs_and_their_crossover(solution, p, alpha, beta, nbytes):
    found = solution["allreduce_costs"](nbytes, p, alpha, beta)
    levels = math.ceil(math.log2(p))
    assert math.isclose(found["ring"], 2 * (p - 1) * (alpha + nbytes / p * beta), rel_tol=1e-12)
    assert math.isclose(found["tree"], 2 * levels * (alpha + nbytes * beta), rel_tol=1e-12)
    assert math.isclose(found["naive"], 2 * (p - 1) * (alpha + nbytes * beta), rel_tol=1e-12)
    cross = found["crossover_bytes"]
    if cross > 0:
        at = solution["allreduce_costs"](cross, p, alpha, beta)
        assert math.isclose(at["ring"], at["tree"], rel_tol=1e-9)
        assert (found["ring"] < found["tree"]) == (nbytes > cross) or math.isclose(nbytes, cross, rel_tol=1e-9)
    else:
        assert p - 1 <= levels and found["fastest"] == "ring"


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 10**10), st.integers(1, 16), st.integers(0, 3))
def test_zero_memory_shards_as_tensor_split_does(solution, numel, world, stage):
    rows = solution["zero_memory"](numel, world, stage)
    shards = [numel // world + (r < numel % world) for r in range(world)]
    assert len(rows) == world and sum(shards) == numel
    for row, shard in zip(rows, shards):
        assert row == {"weights": 4 * (shard if stage >= 3 else numel), "grads": 4 * (shard if stage >= 2 else numel),
                       "optimizer_state": 8 * (shard if stage >= 1 else numel),
                       "total": row["weights"] + row["grads"] + row["optimizer_state"]}
    if stage == 3:
        assert sum(row["total"] for row in rows) == 16 * numel


def test_the_judges_adam_is_torch_adam():
    rng = np.random.default_rng(0)
    full = {"params": rng.standard_normal(50), "grads": rng.standard_normal(50), "exp_avg": rng.standard_normal(50),
            "exp_avg_sq": rng.random(50)}
    param = torch.nn.Parameter(torch.from_numpy(full["params"].copy()))
    optimizer = torch.optim.Adam([param], lr=0.03)
    param.grad = torch.from_numpy(full["grads"].copy())
    optimizer.state[param] = {"step": torch.tensor(3.0, dtype=torch.float64),
                              "exp_avg": torch.from_numpy(full["exp_avg"].copy()),
                              "exp_avg_sq": torch.from_numpy(full["exp_avg_sq"].copy())}
    optimizer.step()
    params, m, v = judge.adam64(full, 4, 0.03)
    assert np.allclose(params, param.detach().numpy(), rtol=1e-13, atol=0)
    assert np.allclose(m, optimizer.state[param]["exp_avg"].numpy()) and np.allclose(v, optimizer.state[param]["exp_avg_sq"].numpy())


def test_the_judge_draws_inputs_of_its_own_and_gives_each_rank_only_its_part(monkeypatch):
    cases = {c.spec["run"]: dict(c.spec) for t in LAB.tasks for c in t.cases if "run" in c.spec}
    first = judge.inputs(cases["ring"])
    assert all(np.array_equal(a["x"], b["x"]) for a, b in zip(first[2], judge.inputs(cases["ring"])[2]))
    from util.judging import secret

    before = secret.current()
    try:
        secret.renew()  # another grading: other inputs, from the same spec and the same code
        assert not np.array_equal(first[2][0]["x"], judge.inputs(cases["ring"])[2][0]["x"])
    finally:
        secret.install(before)
    assert np.array_equal(first[2][0]["x"], judge.inputs(cases["ring"])[2][0]["x"])
    header = judge.inputs(cases["ddp"])[1]
    assert set(header) == {"widths", "cap_bytes"}  # no seed: the MLP's parameters travel as arrays
    _, _, ranks, full = judge.inputs(cases["ddp"])
    assert sum(len(r["y"]) for r in ranks) == len(full["y"]) and all(len(r["y"]) < len(full["y"]) for r in ranks)
    _, _, ranks, full = judge.inputs(cases["adam"])
    assert sum(r["exp_avg"].size for r in ranks) == full["exp_avg"].size
    _, _, ranks, full = judge.inputs(cases["tp"])
    assert sum(r["w1"].shape[0] for r in ranks) == full["w1"].shape[0] and all("w1" in r and r["w1"].shape[0] < 64
                                                                             for r in ranks)


def test_the_schedule_judge_on_good_wrong_and_hostile_files():
    spec = dict(next(c.spec for c in LAB.task("13.7").cases if c.spec["kind"] == "1f1b" and c.spec["stages"] == 4))
    tolerance = Tolerance()

    def verdict(orders) -> list[str]:
        return judge.check_schedule(spec, json.dumps({"orders": orders}).encode(), tolerance)

    assert verdict(judge_reference.schedule("1f1b", 4, 8, 4)) == []
    [flushed] = verdict(judge_reference.schedule("gpipe", 4, 8, 4))
    assert "ends at time 42; the stated 1f1b schedule ends at 33" in flushed
    [over] = verdict(judge_reference.schedule("gpipe", 4, 8, 8))
    assert "holds 8 micro-batches' activations at once, over the limit of 4" in over
    stuck = judge_reference.schedule("1f1b", 4, 8, 4)
    stuck[0] = ["B0"] + [op for op in stuck[0] if op != "B0"]
    assert "never finishes" in verdict(stuck)[0]
    assert "stages' orders" in verdict([["F0"]])[0]
    for hostile in (b"", b"\xff\xfe", b"[]", json.dumps({"orders": "F0", "extra": 1}).encode(), b"{" * 10**6):
        [problem] = judge.check_schedule(spec, hostile, tolerance)
        assert "not the schedule the course saves" in problem or "a list of stages" in problem


def test_a_saved_function_that_is_not_the_courses_file_is_refused_before_anything_runs():
    spec = dict(LAB.task("13.1").cases[0].spec)
    [problem] = judge.check_ring(spec, b"not an npz", Tolerance())
    assert "the grader reads numeric arrays only and never unpickles anything" in problem
