"""Lab 12's grader-side checks (``Task.grader_check``): verdicts decided on what a case saved, with the
grader's own computation, never in the student's kernel.

* 12.1 :func:`check_grads`: the student's ``grad`` (saved pickled) run again in a student process where autograd
  cannot run (:mod:`util.labs.lab12.grad_harness`), its gradients against ``torch.autograd`` in float64 on the
  same graph and inputs, rebuilt here.
* 12.2 :func:`check_memory`: the saved-activation bytes against the grader's own measurement on a real
  training step (autograd's saved-tensor hooks, unique storages), and the total against its own sum.
* 12.4 :func:`check_plan`: the saved plan executed by the course's executor here (peak and recompute
  counted as it runs) against the budget and the least recompute any plan within it has
  (:func:`least_recompute`, an exact search over segment boundaries).
* 12.5: :mod:`util.labs.lab12.judge_training`.

The saved bytes are untrusted: arrays are read without pickle, the plan as bounded JSON, and every
name, shape and number is checked before use.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping, Sequence

from util.contract import Tolerance

STATE_COPIES = {"sgd": 0, "momentum": 1, "adam": 2}
"""Optimizer state in copies of the trainable parameters' bytes (the notebook's convention)."""


MAX_GRAD_PICKLE = 256 << 10
"""Largest pickled ``grad`` the judge runs again (a reverse-mode pass and its rules pickle to a few KiB)."""
_rerun: dict[str, Any] = {}
"""This judge process's student process for 12.1, started at its first case and kept for the others."""


def _rerun_grad(pickled: bytes, spec: Mapping[str, Any]) -> tuple[dict | None, str]:
    """The student's ``grad`` run again on the case in a student process where autograd cannot run
    (:mod:`util.labs.lab12.grad_harness`): ``(name -> float64 gradient, "")`` or ``(None, why not)``."""
    import numpy as np

    from util.student_process import ChannelError, StudentProcess

    key = hashlib.sha256(pickled).hexdigest()
    try:
        if _rerun.get("key") != key:
            if "process" in _rerun:
                _rerun.pop("process").close()
            process = StudentProcess.start("util.labs.lab12.grad_harness:serve", max_data=64 << 20, seconds=170)
            process.send({"function": True}, data=pickled)
            reply, _ = process.receive(timeout=90)
            if reply.get("ready") is not True:
                process.close()
                return None, f"run again by the grader, grad could not be loaded: {str(reply.get('raised'))[:250]}"
            _rerun.update(key=key, process=process)
        process = _rerun["process"]
        process.send({"case": {k: spec[k] for k in ("graph", "batch", "start")}})
        reply, data = process.receive(timeout=60)
    except ChannelError as exc:
        _rerun.clear()
        return None, f"the grader could not run grad again ({exc})"
    if "done" not in reply:
        return None, (f"run again by the grader (one thread, autograd refused), grad raised "
                      f"{str(reply.get('raised'))[:250]}")
    found, offset = {}, 0
    try:
        for name, shape in reply["done"]:
            size = int(np.prod(shape, dtype=np.int64)) * 8
            if not isinstance(name, str) or size < 0 or offset + size > len(data):
                raise ValueError(name)
            found[name] = np.frombuffer(data[offset:offset + size], dtype=np.float64).reshape(shape)
            offset += size
    except (TypeError, ValueError):
        return None, "the gradients grad returned when the grader ran it again could not be read"
    return found, ""


def rerun_start(spec: Mapping[str, Any]) -> int:
    """Where the inputs of 12.1's re-run start (``graphs.feeds``: the first training image, or the seed of the uniform
    values), drawn from the grading secret for this case, never the spec's: a ``grad`` cannot have been computed
    beforehand for them. The judge's own float64 autograd runs on the same inputs."""
    import json

    from util.data import TRAIN
    from util.judging import secret

    return int(secret.generator("lab12", "12.1", json.dumps(dict(spec), sort_keys=True)).integers(
        0, TRAIN - int(spec["batch"]) + 1))


def check_grads(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 12.1: the student's ``grad``, run again by the grader where autograd cannot run (another student
    process: one thread, no thread or process can start, autograd refused with no way to turn the refusal
    off), must give each gradient within ``tolerance.rtol`` of float64 autograd, relative to the largest element
    of the float64 gradient (``max|g - g64| / max|g64|``), on inputs drawn from the grading secret
    (:func:`rerun_start`). The kernel's own gradients count for nothing."""
    import numpy as np
    import torch

    from util.artifacts import read_saved_arrays
    from util.labs.lab12.graphs import build_graph, feeds, parameter_names

    gm = build_graph(spec["graph"], torch.float64)
    names = parameter_names(gm)
    arrays, problems = read_saved_arrays(data, expected=[f"grad/{name}" for name in names] + ["grad_fn"])
    if problems:
        return problems
    pickled = arrays["grad_fn"].tobytes()
    if len(pickled) > MAX_GRAD_PICKLE:
        return [f"grad pickles to {len(pickled):,} bytes; the grader runs again at most {MAX_GRAD_PICKLE:,}"]
    spec = {**spec, "start": rerun_start(spec)}  # the re-run's inputs: drawn from the grading secret
    rerun, problem = _rerun_grad(pickled, spec)
    if rerun is None:
        return [problem]
    loss = gm(*feeds(spec["graph"], spec["batch"], spec["start"], torch.float64).values())
    loss.backward()
    for name in names:
        expected = getattr(gm, name).grad.numpy()
        found = rerun.get(name)
        if found is None or found.shape != expected.shape:
            problems.append(f"the gradient of {name!r} has shape {list(getattr(found, 'shape', []))}; the parameter "
                            f"has shape {list(expected.shape)}")
            continue
        if not np.isfinite(found).all():
            problems.append(f"the gradient of {name!r} holds NaN or infinity")
            continue
        scale = float(np.abs(expected).max()) or 1.0
        worst = float(np.abs(found - expected).max()) / scale
        if not worst <= tolerance.rtol:
            problems.append(f"the gradient of {name!r} differs from float64 autograd by {worst:.2g} of its largest "
                            f"element (at most {tolerance.rtol:g}; run again by the grader, autograd refused)")
    return problems


def measured_saved_bytes(model, batch_shape: Sequence[int]) -> int:
    """Bytes of the unique storages autograd saves on one training step of ``model`` (train mode,
    ``cross_entropy`` of the logits against int64 labels), the model's parameters and buffers left out."""
    import torch
    import torch.nn.functional as F

    model.train()
    own = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    storages: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in own:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    x = torch.zeros(tuple(batch_shape))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        logits = model(x)
        F.cross_entropy(logits, torch.zeros(x.shape[0], dtype=torch.int64))
    return sum(storages.values())


def check_memory(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 12.2: ``saved_activations`` equal to the grader's own measurement on a real step of the
    case's model, and ``total`` equal to weights + gradients + optimizer state + that measurement."""
    import numpy as np

    from util.artifacts import read_saved_arrays
    from util.labs.lab12.nets import build_net

    arrays, problems = read_saved_arrays(data, expected=["saved_activations", "total"])
    if problems:
        return problems
    found = {}
    for key, array in arrays.items():
        if array.shape != () or not np.issubdtype(array.dtype, np.integer):
            return [f"{key} was saved as {array.dtype} of shape {list(array.shape)}; the course saves one integer"]
        found[key] = int(array)
    model = build_net(spec["model"])
    params = list(model.parameters())
    trainable = sum(p.numel() * p.element_size() for p in params if p.requires_grad)
    fixed = sum(p.numel() * p.element_size() for p in params) + trainable * (1 + STATE_COPIES[spec["optimizer"]])
    saved = measured_saved_bytes(model, spec["batch"])
    if found["saved_activations"] != saved:
        problems.append(f"saved_activations is {found['saved_activations']:,} bytes, "
                        f"{'more' if found['saved_activations'] > saved else 'less'} than the grader measured on a real "
                        "training step (the unique storages autograd saves, the model's parameters and buffers left "
                        "out, the loss's tensors included)")
    if found["total"] != fixed + saved:
        problems.append(f"total is {found['total']:,} bytes, {'more' if found['total'] > fixed + saved else 'less'} "
                        "than weights + grads + optimizer_state + the saved activations the grader measured")
    return problems


def least_recompute(chain, budget: int) -> int | None:
    """The fewest recompute multiply-adds of any plan for ``chain`` whose peak is at most ``budget``
    (``None``: no plan fits). Exact: for each segment start, the plans reaching it that no other beats
    on both kept bytes and recompute so far (the peak of a segment ``[s, e)`` is the bytes kept up to
    ``s`` plus what its backward holds, see :mod:`util.labs.lab12.executor`)."""
    sizes, macs, n = chain.bytes, chain.macs, chain.n
    frontier: dict[int, list[tuple[int, int]]] = {0: [(sizes[0], 0)]}
    best = None
    for s in range(n):
        for kept, cost in frontier.get(s, []):
            held = 0
            local = 0
            for e in range(s + 1, n + 1):
                i = e - 1
                held += sizes[i + 1]
                local = max(local, held + sizes[i + 1] + (sizes[i] if i else 0))
                if kept + local > budget:
                    break
                total = cost + sum(macs[s:e - 1])
                if e == n:
                    best = total if best is None else min(best, total)
                    continue
                state = (kept + sizes[e], total)
                states = frontier.setdefault(e, [])
                if any(k <= state[0] and c <= state[1] for k, c in states):
                    continue
                states[:] = [(k, c) for k, c in states if not (state[0] <= k and state[1] <= c)] + [state]
    return best


def check_plan(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 12.4: the saved plan run by the course's executor here: its peak within the budget and its
    recompute no more than the least any plan within the budget needs; or, where no plan fits, a
    ``ValueError`` raised."""
    from util.labs.lab12.executor import Chain, plan_problems, run_plan

    chain = Chain(int(spec["batch"]), tuple(int(w) for w in spec["widths"]))
    budget = int(spec["budget"])
    try:
        saved = json.loads(data.decode("utf-8")) if len(data) < (1 << 20) else None
    except (UnicodeDecodeError, ValueError):
        saved = None
    if not isinstance(saved, dict) or not ({"plan"} == set(saved) or {"raised"} == set(saved)):
        return ["the file saved for this case is not the plan the course saves; run the notebook again from the top"]
    least = least_recompute(chain, budget)
    if "raised" in saved:
        if least is None:
            return []
        return [f"checkpoint_plan raised ValueError, but a plan fits this budget of {budget:,} bytes"]
    plan = saved["plan"]
    problems = plan_problems(chain, plan)
    if problems:
        return problems
    run = run_plan(chain, plan)
    if run.peak_bytes > budget:
        problems.append(f"run by the grader's executor, the plan's peak is {run.peak_bytes:,} bytes (at "
                        f"{run.peak_at}), over the budget of {budget:,}"
                        + ("; no plan fits this budget: checkpoint_plan must raise ValueError" if least is None else ""))
    elif least is not None and run.recompute_macs > least:
        problems.append(f"the plan recomputes {run.recompute_macs:,} multiply-adds; another plan within the budget "
                        "recomputes fewer")
    return problems
