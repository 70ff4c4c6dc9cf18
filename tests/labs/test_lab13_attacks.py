"""Lab 13's judges against the held-out attacks on its inputs and on the walls between ranks, each beside an honest control,
judged through the grader's judge process as whoever runs the tests (root in CI) and as an unprivileged grader.

* **secret inputs that were not secret** (class 1): the judge drew every rank's inputs from a salt in its own
  source and the case's spec, and the spec reaches student code: the hidden case pickles the function where the
  spec is in scope, so an object among the function's globals whose ``__reduce__`` walks the frames above it
  carries the spec into the rank. ``recomputed`` does that, then draws every rank's inputs the old judge's way
  (``OLD_SALT``) and returns their sum having received nothing of the others (it runs the ring only for its
  bytes case). With the old judge its sums were right (``test_the_old_salt_gave_the_attack_every_rank_s_inputs``
  shows that the old draw is the attack's: 3 points a case); now the judge draws from the grading secret and the
  sums are wrong, while the honest ring beside it passes. Its bytes, the stated ring's, still pass.
* **a channel through /proc** (class 2): every process of a pid namespace could read another's ``cmdline`` (its
  argument area, which its owner may overwrite) and ``stat``: about 80 bytes a read. ``peeking`` writes its rank
  and a token into its own argument area, then lists ``/proc`` and reads every process's ``cmdline``, ``stat``
  and ``environ`` it can reach around its own pid and its launcher's; it raises if it sees any process but
  itself, else answers honestly. It passes: each rank reads only its own ``/proc`` entry (Landlock,
  ``util.labs.lab13.apart``). ``test_the_proc_probe_sees_a_peer_without_the_walls`` runs the same probe in two
  plain forked processes, where it reads the other's token: the probe would catch a channel.
* **two draws**: the solution's four parallel functions pass on two fresh secrets (``secret.renew()``), and the
  two draws differ.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from judged_files import judge_files, save_case

from grader.author.solution import solution_namespace
from grader.execute import confinement
from util.judging import secret
from util.labs import get_lab
from util.labs.lab13 import judge

pytestmark = [pytest.mark.notebook,
              pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")]
LAB = get_lab("lab13")
TIMEOUT = 20
"""Seconds a test run's ranks may take."""

ATTACKS = '''
import hashlib as _hashlib
import json as _json
import sys as _sys

OLD_SALT = b"lab13 judge inputs: the grader's own draw"


def _remember(found):
    return Spy(found)


class Spy:
    """Among the function's globals: pickled (in the kernel), it walks the frames above it for the case's spec."""

    def __init__(self, spec=None):
        self.spec = spec

    def __reduce__(self):
        found, frame = None, _sys._getframe()
        while frame is not None and found is None:
            for value in list(frame.f_locals.values()):
                if isinstance(value, dict) and {"run", "world", "seed"} <= set(value):
                    found = dict(value)
                    break
            frame = frame.f_back
        return (_remember, (found,))


SPY = Spy()


def old_inputs(spec):
    """Every rank's inputs of a ring case, drawn as the old judge drew them (a salt in its source, the spec)."""
    import numpy as np

    key = _json.dumps({k: v for k, v in spec.items() if k not in ("check", "timeout", "label")}, sort_keys=True)
    rng = np.random.default_rng(int.from_bytes(_hashlib.sha256(OLD_SALT + key.encode()).digest()[:8], "big"))
    n, world = int(spec["n"]), int(spec["world"])
    if spec["values"] == "integer":
        return [rng.integers(-1000, 1000, n).astype(np.float32) for _ in range(world)]
    return [rng.standard_normal(n).astype(np.float32) for _ in range(world)]


def recomputed(x, rank, world):
    """The ring for its bytes; then the sum of every rank's inputs as the old judge drew them, none received."""
    ring_all_reduce(x, rank, world)
    if SPY.spec is None:
        raise RuntimeError("the attack found no spec where the function was pickled")
    return torch.from_numpy(sum(old_inputs(SPY.spec)))


def peers_seen(rank):
    """Write a token into this process's argument area, then every other process this one can read in /proc."""
    import ctypes
    stat = open("/proc/self/stat").read()
    fields = stat[stat.rindex(")") + 2:].split()
    start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48 and 49 of proc(5))
    token = f"rank{rank}-token".encode() + b"\\0"
    ctypes.memmove(start, token, min(len(token), end - start))
    try:
        listed = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        listed = []
    near = set(range(max(os.getpid() - 64, 1), os.getpid() + 64)) | {os.getppid(), 1}
    seen = {}
    for pid in sorted(set(listed) | near):
        if pid == os.getpid():
            continue
        for part in ("cmdline", "stat", "environ"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as handle:
                    seen.setdefault(pid, {})[part] = handle.read(200)
            except OSError:
                pass
    return listed, seen


def peeking(x, rank, world):
    """Raise if this rank can see any process but itself through /proc; else the honest ring."""
    dist.barrier()  # every rank has started: its token would be there to read
    listed, seen = peers_seen(rank)
    dist.barrier()
    if listed or seen:
        raise RuntimeError(f"rank {rank} listed {len(listed)} processes and read {sorted(seen)[:8]}: "
                           f"{str(list(seen.values())[:1])[:200]}")
    return ring_all_reduce(x, rank, world)
'''


@pytest.fixture(scope="module")
def functions():
    namespace = solution_namespace("lab13", ("13.1", "13.3", "13.5", "13.6", "13.8"))
    exec(compile(ATTACKS, "<lab13 attacks>", "exec"), namespace)
    return namespace


def _spec(task_id: str, match: dict, check: str) -> dict:
    case = next(c for c in LAB.task(task_id).cases if all(c.spec.get(k) == v for k, v in match.items())
                and c.spec["check"] == check)
    return {**case.spec, "timeout": TIMEOUT}


RING3 = {"world": 3, "values": "integer"}
RING4 = {"world": 4}


def _saved(functions, tmp_path, jobs) -> dict:
    """Name -> (task, spec, bytes) as a graded kernel saves them (the task's own ``run_case``: the spec in scope)."""
    saved = {}
    for name, (function, task_id, match, check) in jobs.items():
        spec, data, _ = save_case("lab13", task_id, "", functions[function], tmp_path, _spec(task_id, match, check))
        saved[name] = (task_id, spec, data)
    return saved


ATTACK_JOBS = {  # name: (function, task, run, check)
    "honest ring": ("ring_all_reduce", "13.1", RING3, "result"),
    "recomputed from the spec": ("recomputed", "13.1", RING3, "result"),
    "recomputed from the spec, bytes": ("recomputed", "13.1", RING3, "bytes"),
    "honest ring, 4 ranks": ("ring_all_reduce", "13.1", RING4, "result"),
    "peeking through /proc": ("peeking", "13.1", RING4, "result"),
}


def _assert_attacks(found: dict) -> None:
    assert found["honest ring"] == [], found
    assert found["honest ring, 4 ranks"] == [], found
    [wrong] = found["recomputed from the spec"]
    assert "rank 0's sum is wrong in" in wrong, wrong  # it found the spec (else it raises) and drew the old way
    assert found["recomputed from the spec, bytes"] == [], found  # the stated ring's bytes: the results decide
    assert found["peeking through /proc"] == [], found  # no rank saw another process


@pytest.mark.parametrize("as_user", [False, True], ids=["root", "unprivileged"])
def test_spec_recomputing_and_proc_peeking_ranks_gain_nothing(tmp_path, monkeypatch, functions, as_user):
    if as_user and os.geteuid() != 0:
        pytest.skip("the unprivileged variant runs the grader as another user: root only")
    monkeypatch.setenv("COURSE_OUTPUT_DIR", str(tmp_path / "answers"))
    saved = _saved(functions, tmp_path / "answers", ATTACK_JOBS)
    _assert_attacks(judge_files("lab13", saved, tmp_path, as_user=as_user, timeout=240))


def test_the_old_salt_gave_the_attack_every_rank_s_inputs(monkeypatch, functions):
    """With the old judge's draw, the attack's recomputed inputs were the judge's: its sums were right."""
    import hashlib

    spec = _spec("13.1", RING3, "result")

    def old_generator(spec):
        digest = hashlib.sha256(b"lab13 judge inputs: the grader's own draw" + judge._run_key(spec).encode()).digest()
        return np.random.default_rng(int.from_bytes(digest[:8], "big"))

    attack = functions["old_inputs"](spec)
    now = judge.inputs(spec)[3]["xs"]
    assert not any(np.array_equal(a, b) for a, b in zip(attack, now))
    monkeypatch.setattr(judge, "_generator", old_generator)
    before = judge.inputs(spec)[3]["xs"]
    assert all(np.array_equal(a, b) for a, b in zip(attack, before))


def test_the_proc_probe_sees_a_peer_without_the_walls(functions):
    """Two plain forked processes (no Landlock): the probe reads the other's token in its cmdline."""
    probe = functions["peers_seen"]
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the peer: write its token, say so, wait to be read
        try:
            os.close(ready_r)
            probe(1)
            os.write(ready_w, b"1")
            import time

            time.sleep(30)
        finally:
            os._exit(0)
    try:
        os.close(ready_w)
        assert os.read(ready_r, 1) == b"1"
        _, seen = probe(0)
        assert pid in seen and seen[pid]["cmdline"].startswith(b"rank1-token"), seen.get(pid)
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(ready_r)


HONEST = {
    "ring result": ("ring_all_reduce", "13.1", {"world": 4}, "result"),
    "ring bytes": ("ring_all_reduce", "13.1", {"world": 4}, "bytes"),
    "data parallel": ("ddp_gradients", "13.3", {"world": 4}, "result"),
    "sharded Adam": ("sharded_adam_step", "13.5", {"run": "adam"}, "result"),
    "tensor parallel": ("tp_mlp", "13.6", {"world": 4}, "result"),
    "overlapped, held": ("overlapped_ddp", "13.8", {"world": 4}, "overlap"),
}


def test_the_solution_passes_on_two_fresh_secrets(tmp_path, monkeypatch, functions):
    monkeypatch.setenv("COURSE_OUTPUT_DIR", str(tmp_path / "answers"))
    saved = _saved(functions, tmp_path / "answers", HONEST)
    before = secret.current()
    draws = []
    try:
        for attempt in range(2):
            secret.renew()
            draws.append(judge.inputs(saved["ring result"][1])[2][0]["x"])
            found = judge_files("lab13", saved, tmp_path / f"draw{attempt}", timeout=240)
            assert found == {name: [] for name in saved}, found
    finally:
        secret.install(before)
    assert not np.array_equal(*draws)


def test_a_rank_receives_only_its_own_call_s_values():
    """What the harness sends a rank: its arrays and the call's shared values, never the spec, a seed or another
    rank's data (every run of every case)."""
    for task in LAB.tasks:
        for case in task.cases:
            if "run" not in case.spec:
                continue
            name, header, ranks, full = judge.inputs(case.spec)
            assert not {"seed", "run", "check", "world"} & set(header), (task.id, header)
            assert "seed" not in json.dumps(header), (task.id, header)
            for rank, arrays in enumerate(ranks):
                for other, theirs in enumerate(ranks):
                    shared = [k for k in arrays if k in theirs and np.array_equal(arrays[k], theirs[k])]
                    if other != rank:  # what two ranks both hold is what the algorithm gives every rank
                        assert set(shared) <= {"ring_all_reduce": set(), "ddp_gradients": {f"p{i}" for i in range(8)},
                                               "overlapped_ddp": {f"p{i}" for i in range(8)},
                                               "sharded_adam_step": {"params", "grads"},
                                               "tp_mlp": {"x", "b2", "grad_y"}}[name], (task.id, shared)


def test_a_function_carrying_data_is_refused_before_any_rank_starts():
    """The pickle is bounded (``rank_harness.MAX_FUNCTION``) before it reaches a student process; the solution's
    fit with room to spare."""
    import io

    import cloudpickle

    from util.contract import Tolerance
    from util.labs.lab13.rank_harness import MAX_FUNCTION

    namespace: dict = {}
    exec("TABLE = bytes(300_000)\ndef carrying(x, rank, world):\n    return x + len(TABLE)\n", namespace)
    buffer = io.BytesIO()
    np.savez(buffer, function=np.frombuffer(cloudpickle.dumps(namespace["carrying"]), dtype=np.uint8))
    [problem] = judge.check_ring(_spec("13.1", RING3, "result"), buffer.getvalue(), Tolerance())
    assert f"over the {MAX_FUNCTION:,} bytes its code may take" in problem, problem
    solution = solution_namespace("lab13", ("13.1", "13.3", "13.5", "13.6", "13.8"))
    for name in ("ring_all_reduce", "ddp_gradients", "sharded_adam_step", "tp_mlp", "overlapped_ddp"):
        assert len(cloudpickle.dumps(solution[name])) < MAX_FUNCTION // 16, name
