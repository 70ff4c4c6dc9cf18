"""The course's side of lab 14's student processes: what runs there, and in which order.

The grader does not take a kernel's traffic, or a tiled attention's results, from the notebook's kernel,
where the student's code could have replaced the counter or the checks. Its judges (grader-only) ask for
**student processes** (:mod:`util.student_process`) running one of these two harnesses, send them the
student's code and inputs the judge drew itself, and decide from what comes back, against their own float64
references and closed forms.

* :func:`serve_kernels` (tasks 14.3 to 14.5): Triton's interpreter with the course's traffic counter
  (:mod:`util.labs.lab14.traffic`) installed **before any kernel is compiled**. It runs nothing of the
  student's but kernel bodies, each from its source alone after :func:`util.labs.lab14.rules.kernel_problems`
  found nothing (the judge checked first, and it checks again here): Triton's language, no name of the
  process's own (the counter, the interpreter, a module), globals of ``tl`` and a few builtins only. The
  course's launchers (:mod:`util.labs.lab14.launch`) choose the grid and arguments, and every load or store
  must fall inside the tensors they pass. No other student code ever runs in this process.
* :func:`serve_attention` (task 14.2): the student's ``FlashAttention`` (an autograd Function, pickled by
  value in the notebook), run forward and backward. Before anything of it is unpickled, the process's address
  space is capped (``RLIMIT_AS``, hard, which an unprivileged process cannot raise again) at what PyTorch
  needs plus :data:`ATTENTION_HEADROOM`: far less than one ``N x N`` score matrix of the largest case, so an
  attention that builds the whole matrix cannot run there, whatever memory it asks for (heap, ``mmap``).

Messages are JSON headers plus float32 bytes (``util.student_process.Channel``); replies are data for the judge
to check, never a verdict.
"""
from __future__ import annotations

import math
import os
import resource
from typing import Any

from util.student_process import Channel, ChannelError

ATTENTION_HEADROOM = 12 << 20
"""Bytes of address space the student's attention may add to what the harness holds once PyTorch is warm
(inputs, outputs, gradients and every temporary of every case): a 2048 x 2048 float32 score matrix needs 16 MiB,
the course's solution 3 to 5 MiB."""


def _error(exc: BaseException) -> str:
    """The message of ``exc``, or of what it wraps (Triton's ``InterpreterError`` wraps the kernel's error)."""
    inner = exc.__cause__ if type(exc).__name__ == "InterpreterError" and exc.__cause__ is not None else exc
    return f"{type(inner).__name__}: {inner}"[:400]


def _floats(data: bytes, offset: int, shape: list[int]) -> tuple[Any, int]:
    import numpy as np
    import torch

    elements = math.prod(int(n) for n in shape)
    array = np.frombuffer(data, dtype=np.float32, count=elements, offset=offset).reshape(shape).copy()
    return torch.from_numpy(array), offset + 4 * elements


def _run_kernel(header: dict, data: bytes) -> tuple[dict, bytes]:
    import torch

    from util.labs.lab14 import launch, rules

    kind, source, shape = header["kernel"], header["source"], header["shape"]
    name, parameters = {"matmul": ("matmul_kernel", launch.MATMUL_PARAMETERS),
                        "softmax": ("softmax_kernel", launch.SOFTMAX_PARAMETERS),
                        "flash": ("flash_kernel", launch.FLASH_PARAMETERS)}[kind]
    problems = rules.kernel_problems(source, name, parameters)
    if problems:
        return {"refused": problems}, b""
    kernel = launch.compile_kernel(source, name)
    if kind == "matmul":
        m, n, k = int(shape["m"]), int(shape["n"]), int(shape["k"])
        a, offset = _floats(data, 0, [m, k])
        b, _ = _floats(data, offset, [k, n])
        if shape.get("b_transposed"):
            b = b.T.contiguous().T  # the same values, stored column by column
        c, traffic = launch.run_matmul(kernel, a, b, tuple(shape["block"]))
        outputs = [c]
    elif kind == "softmax":
        x, _ = _floats(data, 0, [int(shape["rows"]), int(shape["cols"])])
        y, traffic = launch.run_softmax(kernel, x)
        outputs = [y]
    else:
        dims = [int(shape["heads"]), int(shape["n"]), int(shape["d"])]
        q, offset = _floats(data, 0, dims)
        k, offset = _floats(data, offset, dims)
        v, _ = _floats(data, offset, dims)
        o, lse, traffic = launch.run_flash(kernel, q, k, v, bool(shape["causal"]), tuple(shape["block"]))
        outputs = [o, lse]
    return {"done": traffic.to_dict()}, b"".join(t.to(torch.float32).contiguous().numpy().tobytes() for t in outputs)


def serve_kernels(channel: Channel) -> None:
    """Answer ``{"kernel": "matmul"|"softmax"|"flash", "source": str, "shape": {...}}`` + the inputs (float32)
    with ``{"done": traffic}`` + the outputs (float32), ``{"refused": [problems]}`` or ``{"raised": message}``,
    until the judge closes the channel. The counter is installed before the first request is read."""
    os.environ["TRITON_INTERPRET"] = "1"
    import torch

    torch.set_num_threads(1)
    from util.labs.lab14 import traffic

    traffic.install()
    while True:
        try:
            header, data, _ = channel.receive()
        except ChannelError:
            return
        try:
            reply, out = _run_kernel(header, data)
        except Exception as exc:  # the kernel (or its inputs) may raise anything
            reply, out = {"raised": _error(exc)}, b""
        try:
            channel.send(reply, data=out)
        except ChannelError:
            return


def _address_space() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def _warm_up() -> None:
    """One attention forward and backward (course code), so PyTorch's kernels and autograd are loaded before
    the address space is measured and capped."""
    import torch

    q, k, v = (torch.randn(2, 64, 32, requires_grad=True) for _ in range(3))
    scores = (q @ k.transpose(-1, -2) / 4).masked_fill(torch.ones(64, 64, dtype=torch.bool).triu(1), float("-inf"))
    out = torch.softmax(scores, -1) @ v
    out.backward(torch.ones_like(out))
    (torch.exp(scores[..., :8].detach() - 1).amax(-1) * torch.log(torch.ones(2, 64))).sum()


def serve_attention(channel: Channel) -> None:
    """Warm PyTorch up, cap the address space, then answer ``{"heads", "n", "d", "causal", "block",
    "function": size}`` + the pickled class and q, k, v, dO (float32) with ``{"done": true}`` + O, dQ, dK, dV
    (float32), or ``{"raised": message}`` (``{"memory": message}`` when it ran out of the memory allowed)."""
    import numpy as np
    import torch

    torch.set_num_threads(1)
    _warm_up()
    import cloudpickle

    limit = _address_space() + ATTENTION_HEADROOM
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)  # one already tighter stays
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    while True:
        try:
            header, data, _ = channel.receive()
        except ChannelError:
            return
        out = b""
        try:
            size = int(header["function"])
            cls = cloudpickle.loads(data[:size])
            dims = [int(header["heads"]), int(header["n"]), int(header["d"])]
            tensors, offset = [], size
            for _ in range(4):
                tensor, offset = _floats(data, offset, dims)
                tensors.append(tensor)
            q, k, v = (t.requires_grad_() for t in tensors[:3])
            with torch.enable_grad():
                o = cls.apply(q, k, v, bool(header["causal"]), int(header["block"]))
                o.backward(tensors[3])
            parts = [o, q.grad, k.grad, v.grad]
            if any(not isinstance(t, torch.Tensor) or list(t.shape) != dims for t in parts):
                raise ValueError(f"FlashAttention returned {type(o).__name__} {list(getattr(o, 'shape', []))} and "
                                 f"gradients of shapes {[list(getattr(t, 'shape', [])) for t in parts[1:]]}; "
                                 f"expected {dims} each")
            out = b"".join(np.ascontiguousarray(t.detach().to(torch.float32).numpy()).tobytes() for t in parts)
            reply = {"done": True}
        except MemoryError as exc:
            reply = {"memory": _error(exc)}
        except Exception as exc:  # the student's code may raise anything
            text = _error(exc)
            reply = {"memory": text} if "can't allocate memory" in text or "Cannot allocate" in text else \
                {"raised": text}
        try:
            channel.send(reply, data=out)
        except ChannelError:
            return
