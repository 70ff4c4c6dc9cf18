"""Lab 13's grader-side checks (``Task.grader_check``): every parallel function run again on the grader's ranks.

Nothing a notebook's kernel computed decides a case. The hidden cases of 13.1, 13.3, 13.5, 13.6 and 13.8 save
the student's function (pickled by value); here, in the grader's judge process, each is run again:

* **on the student's side**, in a student process the grader starts (:mod:`util.labs.lab13.rank_harness`):
  its ranks are forked before any input exists; each reads of ``/proc`` only its own entry
  (:mod:`util.labs.lab13.apart`: no rank reads another's ``cmdline``, ``stat`` or anything else), runs behind
  the walls (:mod:`util.labs.lab13.walls`: no files written, no sockets, pipes, signals or new processes: the
  process group is the only way between ranks), loads the student's function there, bounded, and only then
  receives its own inputs (its part of the data, its shard of the weights or of the optimizer state: values,
  never the spec or a seed); the process that forked them, which runs no student code, counts the bytes that
  arrive on every connection with the kernel's own counters (:mod:`util.labs.lab13.wire`);
* **on the grader's side**, here: the stated algorithm (:mod:`util.labs.lab13.judge_reference`) on the same
  inputs on ranks of the judge's own, counted the same way.

Every input is drawn here from the grading secret (:mod:`util.judging.secret`, which no student process ever
receives) and the run: a notebook or a rank that knows the case's spec and this file still cannot compute
them, so a rank's result can depend on another rank's inputs only through what crossed the wire between them.
A case's ``check`` says what it decides: ``result`` (every rank's output against the grader's own one-process
computation, in float64 where it matters, integers exactly), ``buckets`` (the bucket layout against the
stated rule) or ``bytes`` (the bytes between every pair of ranks, counted on the wire, equal to the stated
algorithm's: so a rank that sends a whole tensor where a chunk is due, makes an extra call, or all-reduces per
parameter instead of per bucket is caught whatever its own log says). The result and bytes cases of one input
share one run; 13.8's ``overlap`` case is a run of its own on the same inputs, whose model carries the grader's hold
after the first layer (:mod:`util.labs.lab13.hold`: its backward waits until the bytes of the buckets that closed
before it have arrived on the rank's connections, by the kernel's counts), judged on its bytes and gradients once it
finishes. 13.7's saved schedule is replayed here by the course's replay and compared with the stated
schedule's makespan and activations. A run whose ranks were not kept apart or not walled (a machine without
Landlock or seccomp) is not judged: its cases fail with a message for the instructor.

What stays the student's: what crossed the wire is counted, not read (gloo connects the ranks directly; reading
the payload would need the launcher to relay every connection, a few milliseconds a run at these sizes), so an
algorithm that moves exactly the stated bytes between the same ranks with other tensors would pass the bytes
case (it would have to be as good as the ring, and its results are judged apart); and ranks share a machine,
so timing (who waits for the CPU, caches) is a channel no wall closes. The hold runs inside the rank, beside the
student's code: it reads the kernel's byte counts, which nothing in the rank raises but bytes that arrive, and the
harness checks after the student's function that a backward pass went through it; a function that forges that
flag, or replaces the module with one that says it was passed, is not stopped by it; and a hook that starts its bucket's all-reduce and waits for it at once gets past
the hold although nothing overlaps in time: the handout says so.
"""
from __future__ import annotations

import hashlib
import json
import time
from typing import Any, Mapping

from util.contract import Tolerance

RUN_TIMEOUT = 30.0
"""Seconds a run's ranks may take (their collectives' timeout too)."""
PROCESS_AGE = 110.0
"""A student process older than this is replaced before a run (the grader ends one at the judge's timeout)."""
RESULT_RTOL = 1e-5
"""Gradients, Adam updates and tensor-parallel outputs against the grader's computation, relative to the
reference's largest element (float32 reaches about 1e-7)."""
SUM_RTOL = 1e-6
"""A ring all-reduce against the float64 sum, relative to the sum of the inputs' magnitudes (float32 over
four ranks: below 3e-7)."""
ADAM_RTOL = 1e-4
"""An Adam step against ``torch.optim.Adam``'s, relative to the largest step (the error of the step itself) ..."""
ADAM_ROUNDING = 2.0 ** -22
"""... plus this much of each new parameter's magnitude: storing ``p - lr x update`` in float32 rounds it by up to
``2 ** -24 |p|`` (6e-8) whatever the step, and this allows four such roundings (release 3; before it, a correct
step failed for parameters large against the step)."""

_student: Any = None
_started = 0.0
_runs: dict[str, Any] = {}
_references: dict[str, Any] = {}


# ------------------------------------------------------------------ inputs


def _run_key(spec: Mapping[str, Any]) -> str:
    """What a run's inputs depend on: the spec but what the case decides (and a test's label and timeout)."""
    return json.dumps({k: v for k, v in spec.items() if k not in ("check", "timeout", "label")}, sort_keys=True)


def _held(spec: Mapping[str, Any]) -> str:
    """``"held"`` for a run whose model carries the grader's hold (13.8's ``overlap`` cases: the same inputs as
    the run of its other cases, run apart), else ``""``: part of the run's cache key, not of its inputs."""
    return "held" if spec.get("run") == "overlap" and spec.get("check") == "overlap" else ""


def _unheld(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """The spec of the run without the hold on the same inputs (whose bytes the held run's must equal: the hold
    changes when the bytes travel, never which): the grader's own run of the stated step is made once for both."""
    return {**spec, "check": "bytes"} if _held(spec) else spec


def _timeout(spec: Mapping[str, Any]) -> float:
    """Seconds a run's ranks may take: :data:`RUN_TIMEOUT`, or less where a case says so (the course's tests)."""
    return min(float(spec.get("timeout", RUN_TIMEOUT)), RUN_TIMEOUT)


def _generator(spec: Mapping[str, Any]):
    """The run's inputs' generator: drawn from the grading secret (:mod:`util.judging.secret`) and the run, so
    that nothing a notebook or a rank holds (the spec, the course's code) determines them."""
    from util.judging import secret

    return secret.generator("lab13", "inputs", _run_key(spec))


def _cache_key(*parts: str) -> str:
    """A cache key that also names this grading's secret (a test that renews it draws new inputs)."""
    from util.judging import secret

    return secret.digest("lab13", "cache").hex()[:16] + "".join(parts)


def mlp_weights(widths: list[int], rng) -> dict[str, Any]:
    """An MLP's parameters drawn from ``rng`` (PyTorch's default initialisation's range), as arrays ``p0``,
    ``p1``, ... in ``parameters()`` order: sent to every rank of a data-parallel run as data, never as a seed."""
    import numpy as np

    weights = {}
    for index, (width_in, width_out) in enumerate(zip(widths, widths[1:])):
        bound = 1 / np.sqrt(width_in)
        weights[f"p{2 * index}"] = rng.uniform(-bound, bound, (width_out, width_in)).astype(np.float32)
        weights[f"p{2 * index + 1}"] = rng.uniform(-bound, bound, width_out).astype(np.float32)
    return weights


def inputs(spec: Mapping[str, Any]) -> tuple[str, dict, list[dict], dict]:
    """``(function, header, per-rank arrays, the whole inputs)`` the judge runs a case on."""
    import numpy as np

    rng, world, run = _generator(spec), int(spec["world"]), spec["run"]
    f32 = np.float32
    if run == "ring":
        n = int(spec["n"])
        if spec["values"] == "integer":
            xs = [rng.integers(-1000, 1000, n).astype(f32) for _ in range(world)]
        else:
            xs = [rng.standard_normal(n).astype(f32) for _ in range(world)]
        return "ring_all_reduce", {}, [{"x": x} for x in xs], {"xs": xs}
    if run in ("ddp", "overlap"):
        widths, rows = [int(w) for w in spec["widths"]], int(spec["rows"])
        x = rng.standard_normal((rows, widths[0])).astype(f32)
        y = rng.integers(0, widths[-1], rows).astype(np.int64)
        weights = mlp_weights(widths, rng)
        header = {"widths": widths, "cap_bytes": int(spec["cap_bytes"])}
        if run == "overlap":  # the bytes the hold waits for (0: no hold), from the stated rule, here
            from util.labs.lab13.calls import mlp_from
            from util.labs.lab13.judge_reference import hold_floor

            held = spec.get("check") == "overlap"
            header["hold"] = hold_floor(mlp_from(widths, weights), int(spec["cap_bytes"]), world) if held else 0
        shards = np.array_split(np.arange(rows), world)
        return ("ddp_gradients" if run == "ddp" else "overlapped_ddp"), header, \
            [{"x": x[i], "y": y[i], **weights} for i in shards], {"x": x, "y": y, **weights}
    if run == "adam":
        n = int(spec["n"])
        params, grads = rng.standard_normal(n).astype(f32), (0.1 * rng.standard_normal(n)).astype(f32)
        exp_avg = (0.05 * rng.standard_normal(n)).astype(f32)
        exp_avg_sq = (0.01 * rng.random(n)).astype(f32)
        header = {"step": int(spec["step"]), "lr": float(spec["lr"])}
        parts = np.array_split(np.arange(n), world)
        ranks = [{"params": params, "grads": grads, "exp_avg": exp_avg[i], "exp_avg_sq": exp_avg_sq[i]} for i in parts]
        return "sharded_adam_step", header, ranks, {"params": params, "grads": grads, "exp_avg": exp_avg,
                                                   "exp_avg_sq": exp_avg_sq}
    if run == "tp":
        batch, d, h = int(spec["batch"]), int(spec["d"]), int(spec["h"])
        full = {"x": rng.standard_normal((batch, d)), "w1": rng.standard_normal((h, d)) / np.sqrt(d),
                "b1": 0.1 * rng.standard_normal(h), "w2": rng.standard_normal((d, h)) / np.sqrt(h),
                "b2": 0.1 * rng.standard_normal(d), "grad_y": rng.standard_normal((batch, d))}
        full = {k: v.astype(f32) for k, v in full.items()}
        parts = np.array_split(np.arange(h), world)
        ranks = [{"x": full["x"], "w1": full["w1"][i], "b1": full["b1"][i], "w2": full["w2"][:, i],
                  "b2": full["b2"], "grad_y": full["grad_y"]} for i in parts]
        return "tp_mlp", {}, ranks, full
    raise ValueError(f"no such run {run!r}")


# ------------------------------------------------------------------ runs


def _npz(arrays: Mapping[str, Any]) -> bytes:
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.savez(buffer, **{k: np.ascontiguousarray(v) for k, v in arrays.items()})
    return buffer.getvalue()


def _student_process():
    """The student process this judge's runs go to (started on first use, replaced when old)."""
    global _student, _started
    from util.student_process import StudentProcess

    if _student is not None and time.monotonic() - _started > PROCESS_AGE:
        _student.close()
        _student = None
    if _student is None:
        _student = StudentProcess.start("util.labs.lab13.rank_harness:serve", max_data=64 << 20, seconds=600)
        _started = time.monotonic()
    return _student


def student_run(pickled: bytes, spec: Mapping[str, Any]) -> tuple[dict | None, str]:
    """The student's function run on the grader's ranks: ``(run, "")`` with ``run`` holding ``results``,
    ``wire``, ``messages`` (validated), or ``(None, why not)``. Shared by the cases of one input."""
    global _student
    from util.labs.lab13.ranks import unpack
    from util.student_process import ChannelError

    key = _cache_key(hashlib.sha256(pickled).hexdigest(), _run_key(spec), _held(spec))
    if key in _runs:
        return _runs[key]
    name, header, ranks, _ = inputs(spec)
    world = int(spec["world"])
    from util.judging.student_code import TooLarge, check_size
    from util.labs.lab13.rank_harness import MAX_FUNCTION

    try:
        check_size(pickled, MAX_FUNCTION, f"the pickled {name}")
    except TooLarge as exc:
        return None, str(exc)
    outcome: tuple[dict | None, str]
    for attempt in range(2):  # a process that died between runs is replaced once
        try:
            student = _student_process()
            student.send({"run": {"world": world, "call": name, "header": header, "timeout": _timeout(spec)}},
                         data=pickled)
            for rank, arrays in enumerate(ranks):
                student.send({"rank": rank, "arrays": sorted(arrays)}, data=_npz(arrays))
            try:
                reference_run(_unheld(spec))  # the grader's own run meanwhile: the two share the machine's cores
            except Exception:  # noqa: BLE001 - its bytes case says so when it asks again; the reply must be read
                pass
            reply, data = student.receive(timeout=_timeout(spec) + 90)
        except ChannelError as exc:
            if _student is not None:
                _student.close()
                _student = None
            if attempt == 0 and "time allowed" not in str(exc):
                continue
            outcome = (None, f"the grader's run of {name} on {world} ranks ended without an answer ({exc})")
            break
        outcome = _read_reply(reply, data, world, name, unpack)
        break
    _runs[key] = outcome
    return outcome


def _read_reply(reply: dict, data: bytes, world: int, name: str, unpack) -> tuple[dict | None, str]:
    where = f"run again by the grader on {world} ranks"
    if "raised" in reply and isinstance(reply["raised"], dict):
        details = str(reply["raised"].get("details", "")).strip().splitlines()
        last = details[-1] if details else "an error"
        return None, f"{where}, rank {reply['raised'].get('rank')} raised {last[:600]}"
    if "timeout" in reply:
        return None, f"{where}, {str(reply['timeout'])[:300]}"
    if "done" not in reply:
        return None, f"{where}, the ranks could not be started: {str(reply.get('failed'))[:300]}"
    if reply.get("walls") is not True or reply.get("apart") is not True:
        return None, (f"{where}: this grader's machine could not keep the ranks apart (seccomp walls: "
                      f"{reply.get('walls') is True}, Landlock: {reply.get('apart') is True}), so the case was not "
                      "judged; the instructor must grade lab 13 on Linux 5.13 or later with Landlock enabled (x86-64 or "
                      "arm64)")
    try:
        results = unpack(reply["done"], data)
    except ValueError as exc:
        return None, f"{where}, what the ranks returned could not be read ({exc})"
    wire = reply.get("wire")
    if not (isinstance(results, list) and len(results) == world and isinstance(wire, list) and len(wire) == world
            and all(isinstance(row, list) and len(row) == world and all(isinstance(v, int) for v in row)
                    for row in wire)):
        return None, f"{where}, the grader's harness answered something malformed"
    from util.labs.lab13.ranks import _messages

    messages = reply.get("messages") if isinstance(reply.get("messages"), list) else []
    return {"results": results, "wire": wire, "messages": [_messages(m) for m in messages[:world]]}, ""


def reference_run(spec: Mapping[str, Any]) -> dict:
    """The stated algorithm on the same inputs, on the judge's own ranks (cached per input)."""
    from util.labs.lab13 import calls, judge_reference
    from util.labs.lab13.ranks import launch

    key = _cache_key(_run_key(spec), _held(spec))
    if key not in _references:
        name, header, ranks, _ = inputs(spec)
        reference = judge_reference.FUNCTIONS[name]

        def job(rank: int, world: int, _header: dict, _data: bytes) -> Any:
            return calls.call(name, reference, header, ranks[rank], rank, world)

        calls.prepare(name)
        run = launch(int(spec["world"]), job, timeout=RUN_TIMEOUT)
        _references[key] = {"results": run.results, "wire": run.wire, "messages": run.messages}
    return _references[key]


def _function(data: bytes) -> tuple[bytes | None, list[str]]:
    from util.artifacts import read_saved_arrays

    arrays, problems = read_saved_arrays(data, expected=["function"])
    if problems:
        return None, problems
    return arrays["function"].tobytes(), []


# ------------------------------------------------------------------ what a case decides


def _tensor_sends(messages: list[dict]) -> tuple[int, int]:
    sends = [m for m in messages if m["op"] in ("send", "isend")]
    return len(sends), sum(m["bytes"] for m in sends)


def _calls(messages: list[dict]) -> str:
    ops: dict[str, list[int]] = {}
    for m in messages:
        ops.setdefault(m["op"], []).append(m["bytes"])
    return ", ".join(f"{len(v)} {k} ({sum(v):,} B)" for k, v in sorted(ops.items())) or "no torch.distributed calls"


def bytes_problems(student: dict, reference: dict, stated: str) -> list[str]:
    """Empty when every pair of ranks exchanged exactly the bytes the stated algorithm exchanges on the wire."""
    if student["wire"] == reference["wire"]:
        return []
    world = len(reference["wire"])
    ours = [sum(row) for row in student["wire"]]
    theirs = [sum(row) for row in reference["wire"]]
    problem = (f"on {world} ranks, counted on the wire, your ranks sent {', '.join(f'{b:,}' for b in ours)} bytes "
               f"(rank 0, 1, ...); {stated} sends {', '.join(f'{b:,}' for b in theirs)}")
    if student["messages"] and all(student["messages"]):
        mine = student["messages"][0]
        sends, sent = _tensor_sends(mine)
        if sends:
            ref_sends, ref_sent = _tensor_sends(reference["messages"][0])
            problem += (f". Rank 0 made {sends} sends of {sent:,} tensor bytes in all, where {stated} makes "
                        f"{ref_sends} of {ref_sent:,}")
        else:
            problem += f". Rank 0 made {_calls(mine)}; {stated} makes {_calls(reference['messages'][0])}"
    return [problem]


def _max_relative(found, expected, scale: float | None = None) -> float:
    import numpy as np

    found, expected = np.asarray(found, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    top = scale if scale is not None else float(np.abs(expected).max(initial=0.0))
    return float(np.abs(found - expected).max(initial=0.0)) / (top or 1.0)


def _array(value: Any, shape: tuple, what: str) -> tuple[Any, str]:
    import numpy as np

    try:
        array = np.asarray(value)
    except Exception:  # noqa: BLE001 - anything a rank returned
        return None, f"{what} is not an array"
    if array.dtype.kind not in "fiu" or array.shape != tuple(shape):
        return None, f"{what} has shape {list(array.shape)} ({array.dtype}); expected {list(shape)} floats"
    if not np.isfinite(array.astype(np.float64)).all():
        return None, f"{what} holds NaN or infinity"
    return array, ""


def check_ring(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 13.1: ``ring_all_reduce`` run again on the grader's ranks. ``result``: every rank holds the float64
    sum of the ranks' inputs (integer-valued inputs: exactly; else within :data:`SUM_RTOL` of the sum of
    their magnitudes); ``bytes``: the bytes between every pair of ranks equal the stated ring's."""
    import numpy as np

    pickled, problems = _function(data)
    if problems:
        return problems
    run, problem = student_run(pickled, spec)
    if run is None:
        return [problem]
    if spec["check"] == "bytes":
        return bytes_problems(run, reference_run(spec), "the stated ring (reduce-scatter, then all-gather)")
    xs = inputs(spec)[3]["xs"]
    exact = np.sum(np.stack(xs).astype(np.float64), axis=0)
    scale = np.sum(np.abs(np.stack(xs).astype(np.float64)), axis=0)
    for rank, result in enumerate(run["results"]):
        array, problem = _array(result, exact.shape, f"rank {rank}'s result")
        if array is None:
            return [f"run again by the grader on {len(xs)} ranks, {problem}"]
        if spec["values"] == "integer":
            if not np.array_equal(array.astype(np.float64), exact):
                wrong = int(np.sum(array.astype(np.float64) != exact))
                return [f"run again by the grader on {len(xs)} ranks with integer-valued tensors of {exact.size:,} "
                        f"elements, rank {rank}'s sum is wrong in {wrong:,} elements (integer sums are exact)"
                        + _ratio_hint(array, exact)]
        else:
            worst = float(np.max(np.abs(array - exact) / np.maximum(scale, 1e-30)))
            if not worst <= SUM_RTOL:
                return [f"run again by the grader on {len(xs)} ranks ({exact.size:,} elements), rank {rank}'s sum "
                        f"differs from the float64 sum by {worst:.2g} of the inputs' magnitudes (at most {SUM_RTOL:g})"
                        + _ratio_hint(array, exact)]
    return []


def _ratio_hint(found, expected, what: str = "the sum") -> str:
    import numpy as np

    mask = np.abs(expected) > 1e-3
    if mask.sum() < 3:
        return ""
    ratios = found[mask] / expected[mask]
    if np.allclose(ratios, ratios[0], rtol=1e-3) and abs(ratios[0] - 1) > 1e-3:
        return f" (it is {ratios[0]:.3g} times {what} everywhere)"
    return ""


def _data_parallel_rerun(data: bytes, spec: Mapping[str, Any], name: str) -> list[str]:
    """The saved function ``name`` run again on the grader's ranks and judged as data parallelism (13.3, 13.8)."""
    pickled, problems = _function(data)
    if problems:
        return problems
    run, problem = student_run(pickled, spec)
    if run is None:
        return [problem]
    return _data_parallel(run, spec, name)


def check_ddp(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 13.3: ``ddp_gradients`` run again on the grader's ranks, each with its shard of a batch only the
    grader holds. ``result``: every rank's gradients equal one process's on the whole batch (within
    :data:`RESULT_RTOL` of each parameter's largest gradient); ``buckets``: the stated bucket rule;
    ``bytes``: what one all-reduce per bucket puts on the wire."""
    return _data_parallel_rerun(data, spec, "ddp_gradients")


def check_overlap(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 13.8: ``overlapped_ddp`` run again on the grader's ranks, each with its shard of a batch only the
    grader holds. ``result``, ``buckets`` and ``bytes`` as 13.3's (and the all-reduces' tensor bytes, in the
    order the ranks called them, those of the buckets in order); ``overlap``: a run of its own on the same
    inputs, whose model carries the grader's hold after the first layer (:mod:`util.labs.lab13.hold`: its
    backward waits until the bytes of the buckets closed before it have arrived on the rank's connections,
    counted by the kernel), finishes, with the stated step's bytes on the wire and every rank's gradients those of
    one process (so that no other traffic opens the hold)."""
    return _data_parallel_rerun(data, spec, "overlapped_ddp")


def _data_parallel(run: dict, spec: Mapping[str, Any], name: str) -> list[str]:
    """What a case of 13.3 or 13.8 decides, from the student's run ``run``."""
    import torch
    import torch.nn.functional as F

    from util.labs.lab13.calls import mlp_from
    from util.labs.lab13.judge_reference import make_buckets, ready_sizes

    if spec["check"] == "bytes":
        return bytes_problems(run, reference_run(spec), "one all_reduce per bucket, the buckets in order,")
    if spec["check"] == "overlap":  # the held run finished: its bytes must be the stated step's, its gradients right
        wire = bytes_problems(run, reference_run(_unheld(spec)), "the stated overlapped step")
        if wire:
            return [f"with the grader's hold on the first layer your step finished, but {wire[0]}: only the stated "
                    "all-reduces may open the hold"]
    _, header, _, full = inputs(spec)
    model = mlp_from(header["widths"], full)
    world = int(spec["world"])
    for rank, result in enumerate(run["results"]):
        if not isinstance(result, dict) or set(result) != {"grads", "buckets"}:
            return [f"run again by the grader, rank {rank} returned {type(result).__name__}; {name} returns "
                    "{'grads': [...], 'buckets': [...]}"]
    if spec["check"] == "buckets":
        sizes = ready_sizes(model)
        expected = make_buckets(sizes, int(spec["cap_bytes"]))
        for rank, result in enumerate(run["results"]):
            found = result["buckets"]
            if found != expected:
                return [f"with a cap of {spec['cap_bytes']:,} bytes on an MLP of widths {header['widths']}, rank "
                        f"{rank}'s buckets are {str(found)[:160]}; by the stated rule (gradient-ready order, a bucket "
                        f"closes once it holds at least the cap) there are {len(expected)} buckets"]
        if name == "overlapped_ddp":
            want = [sum(sizes[i] for i in bucket) for bucket in expected]
            for rank, messages in enumerate(run["messages"]):
                found = [m["bytes"] for m in messages if m["op"] == "all_reduce"]
                if found != want:
                    return [f"with a cap of {spec['cap_bytes']:,} bytes on an MLP of widths {header['widths']}, rank "
                            f"{rank}'s all_reduce calls passed {str(found)[:160]} bytes, in this order; the buckets in "
                            f"the order the backward pass fills them hold {want}: one all_reduce per bucket, each "
                            "started when its bucket closes"]
        return []
    model.zero_grad()
    F.cross_entropy(model(torch.from_numpy(full["x"])), torch.from_numpy(full["y"])).backward()
    expected = [p.grad.numpy() for p in model.parameters()]
    for rank, result in enumerate(run["results"]):
        grads = result["grads"]
        if not isinstance(grads, list) or len(grads) != len(expected):
            return [f"run again by the grader, rank {rank} returned {len(grads) if isinstance(grads, list) else 'no'} "
                    f"gradients; the MLP has {len(expected)} parameters (one gradient each, in parameters() order)"]
        for index, (found, want) in enumerate(zip(grads, expected)):
            array, problem = _array(found, want.shape, f"rank {rank}'s gradient {index}")
            if array is None:
                return [f"run again by the grader on {world} ranks, {problem}"]
            worst = _max_relative(array, want)
            if not worst <= RESULT_RTOL:
                return [f"run again by the grader on {world} ranks (a batch of {len(full['y'])} split in {world}), "
                        f"rank {rank}'s gradient of parameter {index} differs from one process's on the whole batch "
                        f"by {worst:.2g} of its largest element (at most {RESULT_RTOL:g})"
                        + _ratio_hint(array, want, "one process's gradient")]
    return []


def adam64(full: Mapping[str, Any], step: int, lr: float) -> tuple[Any, Any, Any]:
    """``(parameters, exp_avg, exp_avg_sq)`` after one Adam step on all the parameters, in float64, as
    ``torch.optim.Adam`` computes it (betas 0.9 and 0.999, eps 1e-8; ``tests/labs/test_lab13_judge.py`` holds
    them together). Computed here without ``torch.optim``, whose first step imports ``torch._dynamo`` (seconds)."""
    import numpy as np

    p, g, m, v = (np.asarray(full[key], dtype=np.float64) for key in ("params", "grads", "exp_avg", "exp_avg_sq"))
    m = 0.9 * m + (1 - 0.9) * g
    v = 0.999 * v + (1 - 0.999) * g * g
    step_size = lr / (1 - 0.9 ** step)
    return p - step_size * m / (np.sqrt(v) / np.sqrt(1 - 0.999 ** step) + 1e-8), m, v


def adam_error(found, before, expected) -> float:
    """The largest ratio, over the elements, of ``|found - expected|`` to what 13.5 allows: :data:`ADAM_RTOL` of the
    largest step (``expected - before``) plus :data:`ADAM_ROUNDING` of the new parameter's magnitude; at most 1 passes."""
    import numpy as np

    found, before, expected = (np.asarray(a, dtype=np.float64) for a in (found, before, expected))
    step_scale = float(np.abs(expected - before).max(initial=0.0)) or 1.0
    allowed = ADAM_RTOL * step_scale + ADAM_ROUNDING * np.abs(expected)
    return float(np.max(np.abs(found - expected) / allowed, initial=0.0))


def check_adam(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 13.5: ``sharded_adam_step`` run again on the grader's ranks, each holding only its shard of Adam's
    state. ``result``: every rank's parameters moved as one float64 Adam step on all of them moves them (element by
    element within :data:`ADAM_RTOL` of the largest step plus :data:`ADAM_ROUNDING` of the parameter's
    magnitude), and each rank's state is its shard, updated (within :data:`ADAM_RTOL` of its largest element);
    ``bytes``: what the stated ring all-gather of the shards puts on the wire."""
    import numpy as np

    pickled, problems = _function(data)
    if problems:
        return problems
    run, problem = student_run(pickled, spec)
    if run is None:
        return [problem]
    if spec["check"] == "bytes":
        return bytes_problems(run, reference_run(spec), "your ring_all_gather of the updated shards (the stated ring)")
    _, header, _, full = inputs(spec)
    params, exp_avg, exp_avg_sq = adam64(full, header["step"], header["lr"])
    world, n = int(spec["world"]), params.size
    shards = np.array_split(np.arange(n), world)
    moved = params - full["params"]
    for rank, result in enumerate(run["results"]):
        if not isinstance(result, dict) or set(result) != {"params", "exp_avg", "exp_avg_sq"}:
            return [f"run again by the grader, rank {rank} returned {type(result).__name__}; sharded_adam_step returns "
                    "{'params': ..., 'exp_avg': ..., 'exp_avg_sq': ...}"]
        array, problem = _array(result["params"], (n,), f"rank {rank}'s parameters")
        if array is None:
            return [f"run again by the grader on {world} ranks, {problem}"]
        worst = adam_error(array, full["params"], params)
        if not worst <= 1.0:
            return [f"run again by the grader on {world} ranks ({n:,} parameters), rank {rank}'s parameters moved "
                    f"differently from one Adam step on all of them (float64, torch.optim.Adam's formula): "
                    f"{worst:.2g} times the allowed error somewhere (at most {ADAM_RTOL:g} of the largest step plus "
                    f"{ADAM_ROUNDING:.2g} of the parameter's magnitude)"
                    + _ratio_hint(array.astype(np.float64) - full["params"], moved, "the Adam step")]
        for key, want in (("exp_avg", exp_avg), ("exp_avg_sq", exp_avg_sq)):
            part = want[shards[rank]]
            found, problem = _array(result[key], part.shape, f"rank {rank}'s {key}")
            if found is None:
                return [f"run again by the grader on {world} ranks, {problem} (each rank holds its shard of "
                        "Adam's state: chunk `rank` of torch.tensor_split over the world)"]
            if not _max_relative(found, part) <= ADAM_RTOL:
                return [f"run again by the grader on {world} ranks, rank {rank}'s {key} is not its shard of the state "
                        "after the step"]
    return []


def check_tp(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 13.6: ``tp_mlp`` run again on the grader's ranks, each holding only its shard of the weights.
    ``result``: the output and every gradient equal the unsplit MLP's under float64 autograd (within
    :data:`RESULT_RTOL` of each tensor's largest element); ``bytes``: one all-reduce forward, one backward."""
    import numpy as np
    import torch

    pickled, problems = _function(data)
    if problems:
        return problems
    run, problem = student_run(pickled, spec)
    if run is None:
        return [problem]
    if spec["check"] == "bytes":
        return bytes_problems(run, reference_run(spec), "one all_reduce in the forward pass and one in the backward")
    _, _, _, full = inputs(spec)
    world = int(spec["world"])
    t = {k: torch.from_numpy(v.astype(np.float64)).requires_grad_(k in ("x", "w1", "b1", "w2", "b2"))
         for k, v in full.items()}
    y = torch.relu(t["x"] @ t["w1"].T + t["b1"]) @ t["w2"].T + t["b2"]
    y.backward(t["grad_y"])
    parts = np.array_split(np.arange(full["b1"].size), world)
    for rank, result in enumerate(run["results"]):
        keys = ("y", "grad_x", "grad_w1", "grad_b1", "grad_w2", "grad_b2")
        if not isinstance(result, dict) or set(result) != set(keys):
            return [f"run again by the grader, rank {rank} returned {type(result).__name__}; tp_mlp returns a dict "
                    f"with the keys {', '.join(keys)}"]
        cut = parts[rank]
        expected = {"y": y.detach().numpy(), "grad_x": t["x"].grad.numpy(), "grad_w1": t["w1"].grad.numpy()[cut],
                    "grad_b1": t["b1"].grad.numpy()[cut], "grad_w2": t["w2"].grad.numpy()[:, cut],
                    "grad_b2": t["b2"].grad.numpy()}
        for key in keys:
            array, problem = _array(result[key], expected[key].shape, f"rank {rank}'s {key}")
            if array is None:
                return [f"run again by the grader on {world} ranks, {problem}"]
            worst = _max_relative(array, expected[key])
            if not worst <= RESULT_RTOL:
                return [f"run again by the grader on {world} ranks (batch {spec['batch']}, d {spec['d']}, h "
                        f"{spec['h']}), rank {rank}'s {key} differs from the unsplit MLP's (float64 autograd) by "
                        f"{worst:.2g} of its largest element (at most {RESULT_RTOL:g})"
                        + _ratio_hint(array, expected[key], "the unsplit MLP's")]
    return []


def check_schedule(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 13.7: the saved orders replayed here (the course's :func:`util.labs.lab13.pipeline.replay`): a
    schedule of every operation, within the activation limit on every stage, finishing when the stated
    schedule of its kind finishes, and holding per stage what it holds."""
    from util.labs.lab13.judge_reference import schedule
    from util.labs.lab13.pipeline import replay

    try:
        saved = json.loads(data.decode("utf-8")) if len(data) < (4 << 20) else None
    except (UnicodeDecodeError, ValueError):
        saved = None
    if not isinstance(saved, dict) or set(saved) != {"orders"}:
        return ["the file saved for this case is not the schedule the course saves; run the notebook again from the "
                "top"]
    kind, stages, micro, limit = spec["kind"], int(spec["stages"]), int(spec["microbatches"]), int(spec["limit"])
    where = f"{kind} on {stages} stages, {micro} micro-batches, at most {limit} held per stage"
    try:
        if len(saved["orders"]) != stages:
            return [f"{where}: the schedule has {len(saved['orders'])} stages' orders; expected {stages}"]
        found = replay(saved["orders"], micro)
    except ValueError as exc:
        return [f"{where}: {exc}"]
    expected = replay(schedule(kind, stages, micro, limit), micro)
    problems = []
    over = [s for s, held in enumerate(found.peak) if held > limit]
    if over:
        problems.append(f"{where}: stage {over[0]} holds {found.peak[over[0]]} micro-batches' activations at once, "
                        f"over the limit of {limit}")
    elif found.makespan != expected.makespan:
        problems.append(f"{where}: replayed, your schedule ends at time {found.makespan}; the stated {kind} schedule "
                        f"ends at {expected.makespan}")
    elif found.peak != expected.peak:
        problems.append(f"{where}: replayed, your stages hold at most {found.peak} micro-batches; the stated {kind} "
                        f"schedule holds {expected.peak}")
    return problems
