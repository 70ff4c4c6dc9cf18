"""Lab 13's judges against parallel functions that read the judge and try to get round it, each beside an
honest control.

The functions are judged through the grader's own judge process (``grader.judge.isolated.judge``), as grading
judges them: the judge draws inputs of its own, runs the function on ranks in a student process (one process
for every case, as in grading), and counts the bytes on the wire there. Each attack plays one of the classes of attack that fooled earlier labs' judges:

* **a rule kept in state the student's code shares** (class 1): a ring that sends whole tensors through the
  unwrapped ``isend`` and rewrites the course's log of its calls to the stated ring's; a data-parallel step
  that all-reduces every parameter alone while reporting the stated buckets; a tensor-parallel MLP that
  all-gathers instead of all-reducing: the bytes are counted on the wire, outside the ranks, so each loses its
  bytes case and keeps what its results earn;
* **another way between the ranks** (the walls): a ring that passes chunks through files, a rank that signals the
  process that launched it, a rank that writes forged answers on every descriptor it holds: each is refused or
  fails its own case only, and the control after it still passes (the student process outlived it);
* **data the student's code can read** (class 3): a ring that sends nothing and looks for the other ranks' inputs
  in its own memory (each rank is forked before any input exists and is given only its own), and an Adam step
  that updates every shard from its own shard of the state: both fail their results;
* **a required method that leaves no trace** (class 5): the library's all-reduce in place of the ring: right sums,
  wrong bytes; 13.3's step (all-reduces after the backward pass) as 13.8's overlapped one: right gradients and
  bytes, and the grader's hold on the first layer is never opened; a dummy all-reduce before the backward pass
  opens the hold, and the held run's bytes give it away.

A rank that hangs costs its case, in bounded time. As whoever runs the tests (root in CI) and, for the attacks
where the walls differ, as an unprivileged grader.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from grader import REPO
from grader.author.solution import solution_namespace
from grader.execute import confinement
from grader.judge.isolated import judge
from util import labs
from util.artifacts import files_dir, save_arrays
from util.labs import get_lab

pytestmark = [pytest.mark.notebook,
              pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")]
LAB = get_lab("lab13")
TIMEOUT = 8
"""Seconds a test run's ranks may take (the hanging rank costs this)."""

ATTACKS = '''
def unlogged(x, rank, world):
    """Whole tensors through the unwrapped primitives; the course's log rewritten to the stated ring's."""
    import gc
    isend, recv = dist.isend.__wrapped__, dist.recv.__wrapped__
    acc = [c.clone() for c in torch.tensor_split(x, world)]
    for step in range(world - 1):
        buffer = torch.empty_like(x)
        request = isend(torch.cat(acc), (rank + 1) % world)
        recv(buffer, (rank - 1) % world)
        request.wait()
        into = (rank - step - 2) % world
        acc[into] = acc[into] + torch.tensor_split(buffer, world)[into]
    total = ring_all_gather(acc[rank], rank, world, x.numel())
    sizes = [len(c) for c in torch.tensor_split(x, world)]
    stated = [sizes[(rank - s - 1) % world] for s in range(world - 1)] + [sizes[(rank - s) % world] for s in range(world - 1)]
    for log in (o for o in gc.get_objects() if type(o).__name__ == "_Log"):
        log.calls[:] = [{"op": "isend", "peer": (rank + 1) % world, "bytes": 4 * n} for n in stated]
    return total


def library(x, rank, world):
    total = x.clone()
    dist.all_reduce(total)
    return total


def files(x, rank, world):
    import numpy as np
    np.save(f"/tmp/rank{rank}.npy", x.numpy())
    dist.barrier()
    return sum(torch.from_numpy(np.load(f"/tmp/rank{r}.npy")) for r in range(world))


def memory(x, rank, world):
    """No communication: sum every other float32 array of its size found in this process's memory."""
    import gc
    import numpy as np
    found = [o for o in gc.get_objects() if isinstance(o, np.ndarray) and o.dtype == np.float32
             and o.shape == tuple(x.shape) and not np.array_equal(o, x.numpy())]
    return x + sum(torch.from_numpy(o) for o in found[:world - 1]) if found else x * world


def kill_launcher(x, rank, world):
    import signal
    os.kill(os.getppid(), signal.SIGKILL)
    return ring_all_reduce(x, rank, world)


def forge(x, rank, world):
    """Forged answers on every descriptor it holds (its line to the launcher among them)."""
    import json
    forged = json.dumps({"done": [], "wire": [[0] * world] * world, "passed": True}).encode()
    for fd in range(3, 256):
        try:
            os.write(fd, forged)
        except OSError:
            pass
    return ring_all_reduce(x, rank, world)


def hang(x, rank, world):
    if rank == 0:
        dist.recv(torch.empty(1), 1)
    return x


def per_parameter(model, x, y, rank, world, cap_bytes):
    """Every gradient all-reduced alone, the stated buckets reported."""
    params = list(model.parameters())
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()
    for p in params:
        dist.all_reduce(p.grad)
        p.grad /= world
    buckets = make_buckets([p.numel() * p.element_size() for p in params[::-1]], cap_bytes)
    return {"grads": [p.grad for p in params], "buckets": buckets}


def gathered(x, w1, b1, w2, b2, grad_y, rank, world):
    """All-gathers the ranks' shares and sums them (world times the bytes of an all-reduce)."""
    x, w1, b1, w2 = (t.detach().clone().requires_grad_(True) for t in (x, w1, b1, w2))
    partial = F.relu(x @ w1.T + b1) @ w2.T
    shares = [torch.empty_like(partial) for _ in range(world)]
    dist.all_gather(shares, partial.detach().contiguous())
    partial.backward(grad_y)
    grads = [torch.empty_like(x.grad) for _ in range(world)]
    dist.all_gather(grads, x.grad.contiguous())
    return {"y": sum(shares) + b2, "grad_x": sum(grads), "grad_w1": w1.grad, "grad_b1": b1.grad, "grad_w2": w2.grad,
            "grad_b2": grad_y.sum(0)}


def dummy_first(model, x, y, rank, world, cap_bytes):
    """A dummy all-reduce before the backward pass, to open the grader's hold; then 13.3's step, after it."""
    dist.all_reduce(torch.zeros(4096))
    return ddp_gradients(model, x, y, rank, world, cap_bytes)


def own_state_only(params, grads, exp_avg, exp_avg_sq, step, rank, world, lr):
    """Updates every parameter locally from its own shard of the state, zeros for the rest."""
    sizes = [len(c) for c in torch.tensor_split(params, world)]
    full = [torch.zeros(s) for s in sizes]
    full_sq = [torch.zeros(s) for s in sizes]
    full[rank], full_sq[rank] = exp_avg, exp_avg_sq
    m = 0.9 * torch.cat(full) + 0.1 * grads
    v = 0.999 * torch.cat(full_sq) + 0.001 * grads * grads
    new = params - lr * (m / (1 - 0.9 ** step)) / ((v / (1 - 0.999 ** step)).sqrt() + 1e-8)
    return {"params": new, "exp_avg": torch.tensor_split(m, world)[rank], "exp_avg_sq": torch.tensor_split(v, world)[rank]}
'''


def _spec(task_id: str, match: dict, check: str, label: str) -> dict:
    case = next(c for c in LAB.task(task_id).cases if all(c.spec.get(k) == v for k, v in match.items())
                and c.spec["check"] == check)
    return {**case.spec, "label": label, "timeout": TIMEOUT}


RING3 = {"world": 3, "values": "integer"}
DDP2, TP2, ADAM = {"world": 2}, {"world": 2}, {"run": "adam"}
OVERLAP2 = {"world": 2, "run": "overlap"}
JOBS = [  # (label, function, task, which run, check, what it earns)
    ("honest ring", "ring_all_reduce", "13.1", RING3, "result", "pass"),
    ("honest ring", "ring_all_reduce", "13.1", RING3, "bytes", "pass"),
    ("unlogged whole tensors", "unlogged", "13.1", RING3, "result", "pass"),
    ("unlogged whole tensors", "unlogged", "13.1", RING3, "bytes", "bytes"),
    ("the library's all-reduce", "library", "13.1", RING3, "result", "pass"),
    ("the library's all-reduce", "library", "13.1", RING3, "bytes", "bytes"),
    ("chunks through files", "files", "13.1", RING3, "result", "refused"),
    ("other ranks' inputs from memory", "memory", "13.1", RING3, "result", "wrong sum"),
    ("kill the launcher", "kill_launcher", "13.1", RING3, "result", "refused"),
    ("honest after the kill", "ring_all_reduce", "13.1", RING3, "bytes", "pass"),
    ("forged answers on every descriptor", "forge", "13.1", RING3, "result", "no answer"),
    ("a rank that hangs", "hang", "13.1", RING3, "result", "timeout"),
    ("honest data parallel", "ddp_gradients", "13.3", DDP2, "result", "pass"),
    ("honest data parallel", "ddp_gradients", "13.3", DDP2, "bytes", "pass"),
    ("one all-reduce per parameter", "per_parameter", "13.3", DDP2, "buckets", "pass"),
    ("one all-reduce per parameter", "per_parameter", "13.3", DDP2, "bytes", "bytes"),
    ("honest tensor parallel", "tp_mlp", "13.6", TP2, "bytes", "pass"),
    ("all-gathered shares", "gathered", "13.6", TP2, "result", "pass"),
    ("all-gathered shares", "gathered", "13.6", TP2, "bytes", "bytes"),
    ("honest overlapped", "overlapped_ddp", "13.8", OVERLAP2, "result", "pass"),
    ("honest overlapped", "overlapped_ddp", "13.8", OVERLAP2, "overlap", "pass"),
    ("13.3's step, after the backward", "ddp_gradients", "13.8", OVERLAP2, "bytes", "pass"),
    ("13.3's step, after the backward", "ddp_gradients", "13.8", OVERLAP2, "overlap", "held"),
    ("a dummy all-reduce opens the hold", "dummy_first", "13.8", OVERLAP2, "overlap", "bytes"),
    ("honest sharded Adam", "sharded_adam_step", "13.5", ADAM, "result", "pass"),
    ("only its own shard of the state", "own_state_only", "13.5", ADAM, "result", "wrong step"),
]
UNPRIVILEGED = {"honest ring", "chunks through files", "kill the launcher", "honest after the kill", "honest overlapped",
                "forged answers on every descriptor", "honest data parallel", "one all-reduce per parameter"}
"""The attacks where the walls (not the counting) decide, and their controls: again as an unprivileged grader."""


@pytest.fixture(scope="module")
def functions():
    namespace = solution_namespace("lab13", ("13.1", "13.3", "13.5", "13.6", "13.8"))
    exec(compile(ATTACKS, "<lab13 attacks>", "exec"), namespace)
    return namespace


def _jobs(folder: Path, functions: dict, labels: set[str] | None = None) -> list[dict]:
    import cloudpickle
    import numpy as np

    files = folder / "files"
    files.mkdir()
    jobs = []
    for label, name, task_id, match, check, _ in JOBS:
        if labels is not None and label not in labels:
            continue
        spec = _spec(task_id, match, check, label)
        data = np.frombuffer(cloudpickle.dumps(functions[name]), dtype=np.uint8)
        saved = save_arrays({"function": data}, spec, "lab13")["saved"]
        shutil.move(str(files_dir("lab13") / saved), files / saved)
        jobs.append({"check": LAB.task(task_id).grader_check, "spec": spec, "file": str(files / saved),
                     "tolerance": {"rtol": 0.0, "atol": 0.0}})
    for path in [folder, files, *files.iterdir()]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return jobs


def _assert_verdicts(jobs: list[dict], found: list[list[str]]) -> None:
    earned = {(label, check): what for label, _, _, _, check, what in JOBS}
    for job, problems in zip(jobs, found):
        what = earned[(job["spec"]["label"], job["spec"]["check"])]
        where = f"{job['spec']['label']} ({job['spec']['check']}): {problems}"
        if what == "pass":
            assert problems == [], where
            continue
        assert len(problems) == 1, where
        expected = {"bytes": "counted on the wire, your ranks sent", "refused": "raised PermissionError",
                    "wrong sum": "sum is wrong in", "no answer": "ended without an answer",
                    "timeout": "did not finish in time", "wrong step": "moved differently",
                    "held": "the grader held the backward pass of the first layer"}[what]
        assert expected in problems[0], where


def test_attacks_earn_only_what_their_results_and_bytes_earn(tmp_path, monkeypatch, functions):
    monkeypatch.setenv("COURSE_OUTPUT_DIR", str(tmp_path / "answers"))
    jobs = _jobs(tmp_path, functions)
    found = judge(jobs, tmp_path / "files", timeout=240, reveal=tuple(labs.judge_paths(LAB)))
    _assert_verdicts(jobs, found)


SCRIPT = """
import json, sys
from pathlib import Path
from grader.judge.isolated import judge
from util import labs
jobs = json.loads(Path(sys.argv[1]).read_text())
print(json.dumps(judge(jobs, Path(sys.argv[2]), timeout=240, reveal=tuple(labs.judge_paths(labs.get_lab("lab13"))))))
"""


def test_the_walls_hold_as_an_unprivileged_grader(tmp_path, monkeypatch, functions):
    from test_unprivileged import USER, _as_user

    monkeypatch.setenv("COURSE_OUTPUT_DIR", str(tmp_path / "answers"))
    jobs = _jobs(tmp_path, functions, UNPRIVILEGED)
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    os.chmod(tmp_path, 0o755)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    done = _as_user([sys.executable, "-c", SCRIPT, str(tmp_path / "jobs.json"), str(tmp_path / "files")],
                    [Path(sys.executable).resolve().parent.parent, Path(sys.prefix), REPO, tmp_path], env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert USER != os.geteuid()
    _assert_verdicts(jobs, json.loads(done.stdout.strip().splitlines()[-1]))
