"""How a rank calls a lab 13 function the grader runs again: from the arrays that rank was given.

The grader re-runs the functions of tasks 13.1, 13.3, 13.5, 13.6 and 13.8 on ranks of its own
(:mod:`util.labs.lab13.rank_harness`), and runs its own versions the same way to count what the stated
algorithms put on the wire. Each rank receives only its own inputs (its chunk of the data, its shard of the
weights) as arrays, and :func:`call` turns them into the call the notebook makes. A caller's ``header`` holds
what every rank may know (the MLP's widths, the bucket cap, the learning rate): no seed, no spec; the MLP's
parameters come as arrays too.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping


def _tensor(arrays: Mapping[str, Any], name: str):
    import numpy as np
    import torch

    if name not in arrays:
        raise ValueError(f"the grader sent no array {name!r}")
    return torch.from_numpy(np.array(arrays[name], copy=True))


def _ring(fn: Callable, header: Mapping[str, Any], arrays: Mapping[str, Any], rank: int, world: int) -> Any:
    return fn(_tensor(arrays, "x"), rank, world)


def mlp_from(widths: list[int], arrays: Mapping[str, Any]):
    """The course's MLP of ``widths`` (:func:`util.labs.lab13.nets.build_mlp`) holding the parameters the grader
    sent (arrays ``p0``, ``p1``, ... in ``parameters()`` order)."""
    import torch

    from util.labs.lab13.nets import build_mlp

    model = build_mlp(widths, 0)
    with torch.no_grad():
        for index, parameter in enumerate(model.parameters()):
            value = _tensor(arrays, f"p{index}")
            if tuple(value.shape) != tuple(parameter.shape):
                raise ValueError(f"the grader sent parameter {index} of shape {list(value.shape)}; the MLP's is "
                                 f"{list(parameter.shape)}")
            parameter.copy_(value)
    return model


def _ddp(fn: Callable, header: Mapping[str, Any], arrays: Mapping[str, Any], rank: int, world: int) -> Any:
    model = mlp_from([int(w) for w in header["widths"]], arrays)
    return fn(model, _tensor(arrays, "x"), _tensor(arrays, "y"), rank, world, int(header["cap_bytes"]))


def _overlap(fn: Callable, header: Mapping[str, Any], arrays: Mapping[str, Any], rank: int, world: int) -> Any:
    """13.8: as 13.3, and where the header gives ``hold`` (the bytes to wait for, computed by the judge), the model
    carries the grader's hold after its first layer (:func:`util.labs.lab13.hold.held_model`), made before the
    student's function is called."""
    model = mlp_from([int(w) for w in header["widths"]], arrays)
    cap = int(header["cap_bytes"])
    gate = None
    if int(header.get("hold") or 0) > 0:
        from util.labs.lab13.hold import held_model

        model = held_model(model, int(header["hold"]))
        gate = model[1] if len(model) > 1 and hasattr(model[1], "passed") else None
    result = fn(model, _tensor(arrays, "x"), _tensor(arrays, "y"), rank, world, cap)
    if gate is not None and not gate.passed:
        raise RuntimeError("the grader's hold after the first layer was never passed: run the backward pass through "
                           "the model you were given, as it is")
    return result


def _adam(fn: Callable, header: Mapping[str, Any], arrays: Mapping[str, Any], rank: int, world: int) -> Any:
    return fn(_tensor(arrays, "params"), _tensor(arrays, "grads"), _tensor(arrays, "exp_avg"),
              _tensor(arrays, "exp_avg_sq"), int(header["step"]), rank, world, float(header["lr"]))


def _tp(fn: Callable, header: Mapping[str, Any], arrays: Mapping[str, Any], rank: int, world: int) -> Any:
    return fn(*(_tensor(arrays, name) for name in ("x", "w1", "b1", "w2", "b2", "grad_y")), rank, world)


CALLS: dict[str, Callable] = {
    "ring_all_reduce": _ring,
    "ddp_gradients": _ddp,
    "overlapped_ddp": _overlap,
    "sharded_adam_step": _adam,
    "tp_mlp": _tp,
}
"""The name of the function the grader runs -> how a rank calls it."""


PREPARE: dict[str, tuple[str, ...]] = {"tp_mlp": ("torch.fx.experimental.symbolic_shapes",)}
"""Modules a function's ranks would each import on first use, imported once before they are forked: a
``backward`` given an explicit gradient imports PyTorch's symbolic shapes (and sympy), 1 to 10 s per process."""


def prepare(name: str) -> None:
    """Import, in the process about to fork the ranks, what ``name``'s ranks would each import."""
    import importlib

    for module in PREPARE.get(name, ()):
        importlib.import_module(module)


def call(name: str, fn: Callable, header: Mapping[str, Any], arrays: Mapping[str, Any], rank: int, world: int) -> Any:
    """Call ``fn`` (the function ``name``) on rank ``rank`` of ``world`` with that rank's ``arrays``."""
    if name not in CALLS:
        raise ValueError(f"the grader runs no function {name!r} on ranks; it runs {', '.join(CALLS)}")
    if not callable(fn):
        raise TypeError(f"{name} is a {type(fn).__name__}, not a function")
    return CALLS[name](fn, header, arrays, rank, world)
