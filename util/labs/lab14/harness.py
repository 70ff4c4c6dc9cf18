"""The course's side of lab 14's student processes: what runs there, and in which order.

The grader does not take a kernel's traffic, or a tiled attention's results, from the notebook's kernel,
where the student's code could have replaced the counter or the checks. Its judges (grader-only) ask for
**student processes** (:mod:`util.student_process`) running one of these three harnesses, send them the
student's code first and then inputs the judge drew itself (from the grading secret, which never reaches a
student process), and decide from what comes back, against their own float64 references and closed forms.

* :func:`serve_kernels` (tasks 14.3 to 14.5): Triton's interpreter with the course's traffic counter
  (:mod:`util.labs.lab14.traffic`) installed **before any kernel is compiled**. It runs nothing of the
  student's but kernel bodies, each from its source alone after :func:`util.labs.lab14.rules.kernel_problems`
  found nothing (the judge checked first, and it checks again here): Triton's language, no name of the
  process's own (the counter, the interpreter, a module), globals of ``tl`` and a few builtins only. The
  course's launchers (:mod:`util.labs.lab14.launch`) choose the grid and arguments (fresh argument objects for
  every program), and every load or store must fall inside the tensors they pass.
* :func:`serve_compiler` (the same tasks): Triton's own compiler, never the interpreter, compiling each kernel
  for the stated GPU as the counted launch calls it (:mod:`util.labs.lab14.gpu`); a kernel it refuses is not
  counted. The compiler traces the student's source, so it runs here, not in the judge.
* :func:`serve_attention` (task 14.2): the student's ``FlashAttention`` (an autograd Function, pickled by
  value in the notebook), run forward and backward in a process that may start no other, write no file and
  open few descriptors (:func:`_confine`), so the memory the grader reads from outside (its peak resident
  memory, which it cannot reset) is all its code held. The judge bounds the growth of that peak during each
  case (``util.labs.lab14.judge.ATTENTION_BYTES``): an attention that holds a whole ``N x N`` score matrix at
  any moment fails, however it made room (unmapping libraries frees address space, not a byte of the peak).

Messages are JSON headers plus float32 bytes (``util.student_process.Channel``); replies are data for the judge
to check, never a verdict.
"""
from __future__ import annotations

import math
import os
import resource
from typing import Any

from util.student_process import Channel, ChannelError

CODE_BYTES = 4 << 20
"""The most a pickled ``FlashAttention`` may take (its code and small constants; the course's is ~10 KB)."""
SPARE_DESCRIPTORS = 8
"""File descriptors the student's code may open besides those the harness holds (a pipe takes two, and its
buffer is memory the grader's measurement of the process does not see)."""


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


KERNELS = {"matmul": "matmul_kernel", "softmax": "softmax_kernel", "flash": "flash_kernel",
           "backward": "flash_backward_kernel"}
"""Kernel kind -> the name its source must define."""


def _parameters(kind: str) -> tuple[str, ...]:
    from util.labs.lab14 import launch

    return {"matmul": launch.MATMUL_PARAMETERS, "softmax": launch.SOFTMAX_PARAMETERS,
            "flash": launch.FLASH_PARAMETERS, "backward": launch.FLASH_BACKWARD_PARAMETERS}[kind]


def _load_kernel(header: dict) -> tuple[str, str]:
    """``(kind, source)`` of a request to load a kernel, or ``ValueError`` for anything else."""
    kind, source = header.get("kernel"), header.get("source")
    if kind not in KERNELS or not isinstance(source, str):
        raise ValueError(f"expected a kernel (one of {sorted(KERNELS)}) and its source")
    return kind, source


def _run_kernel(kind: str, kernel: Any, header: dict, data: bytes) -> tuple[dict, bytes]:
    import torch

    from util.labs.lab14 import launch

    shape = header["shape"]
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
    elif kind == "flash":
        dims = [int(shape["heads"]), int(shape["n"]), int(shape["d"])]
        q, offset = _floats(data, 0, dims)
        k, offset = _floats(data, offset, dims)
        v, _ = _floats(data, offset, dims)
        o, lse, traffic = launch.run_flash(kernel, q, k, v, bool(shape["causal"]), tuple(shape["block"]))
        outputs = [o, lse]
    else:  # the backward: q, k, v, O, dO, then L
        dims = [int(shape["heads"]), int(shape["n"]), int(shape["d"])]
        tensors, offset = [], 0
        for _ in range(5):
            tensor, offset = _floats(data, offset, dims)
            tensors.append(tensor)
        lse, _ = _floats(data, offset, dims[:2])
        q, k, v, o, do = tensors
        dq, dk, dv, traffic = launch.run_flash_backward(kernel, q, k, v, o, lse, do, bool(shape["causal"]),
                                                        tuple(shape["block"]))
        outputs = [dq, dk, dv]
    return {"done": traffic.to_dict()}, b"".join(t.to(torch.float32).contiguous().numpy().tobytes() for t in outputs)


def serve_kernels(channel: Channel) -> None:
    """For each case: ``{"kernel": "matmul"|"softmax"|"flash"|"backward", "source": str}``, answered ``{"loaded": true}`` or
    ``{"refused": [problems]}``; then (after a load) ``{"shape": {...}}`` + the inputs (float32), answered
    ``{"done": traffic}`` + the outputs (float32) or ``{"raised": message}``; until the judge closes the
    channel. The counter is installed before the first request is read, and the kernel is made from its source
    before any input of the case arrives."""
    os.environ["TRITON_INTERPRET"] = "1"
    import torch

    torch.set_num_threads(1)
    from util.labs.lab14 import launch, rules, traffic

    traffic.install()
    while True:
        try:
            header, _, _ = channel.receive()
        except ChannelError:
            return
        kernel = None
        try:
            kind, source = _load_kernel(header)
            problems = rules.kernel_problems(source, KERNELS[kind], _parameters(kind))
            if problems:
                reply = {"refused": problems}
            else:
                kernel = launch.compile_kernel(source, KERNELS[kind])
                reply = {"loaded": True}
        except Exception as exc:  # a source that defines nothing runnable
            reply = {"raised": _error(exc)}
        try:
            channel.send(reply)
            if kernel is None:
                continue
            header, data, _ = channel.receive()
        except ChannelError:
            return
        try:
            reply, out = _run_kernel(kind, kernel, header, data)
        except Exception as exc:  # the kernel (or its inputs) may raise anything
            reply, out = {"raised": _error(exc)}, b""
        try:
            channel.send(reply, data=out)
        except ChannelError:
            return


def serve_compiler(channel: Channel) -> None:
    """Answer ``{"kernel": kind, "source": str, "constexprs": {...}}`` with ``{"compiled": {...}}`` (what
    :func:`util.labs.lab14.gpu.compile_source` made), ``{"refused": [problems]}`` (the rules) or
    ``{"raised": message}`` (Triton's compiler refused it), until the judge closes the channel. Never under the
    interpreter: it compiles for a GPU (:mod:`util.labs.lab14.gpu`)."""
    os.environ.pop("TRITON_INTERPRET", None)
    os.environ["TRITON_CACHE_DIR"] = os.path.join(os.getcwd(), "triton-cache")
    from util.labs.lab14 import gpu, rules

    ready = gpu.compiler_ready()
    while True:
        try:
            header, _, _ = channel.receive()
        except ChannelError:
            return
        try:
            kind, source = _load_kernel(header)
            problems = rules.kernel_problems(source, KERNELS[kind], _parameters(kind))
            if ready:
                reply = {"raised": ready}
            elif problems:
                reply = {"refused": problems}
            else:
                reply = {"compiled": gpu.compile_source(kind, source, dict(header.get("constexprs") or {}))}
        except Exception as exc:  # Triton's compiler refusing the kernel, in its words
            reply = {"raised": _compiler_error(exc)}
        try:
            channel.send(reply)
        except ChannelError:
            return


def _compiler_error(exc: BaseException) -> str:
    """The last lines of what Triton's compiler said (its messages quote the kernel, then say what is wrong)."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {' / '.join(lines[-4:])}"[:500]


_KEEP = {"x86_64": (0xC000003E, 9, (11, 25, 28, 30, 67, 216, 425, 440)),
         "aarch64": (0xC00000B7, 222, (215, 216, 233, 196, 197, 234, 425, 440))}
"""Machine -> (its audit architecture, ``mmap``'s number, the numbers refused by :func:`keep_what_is_mapped`:
``munmap``, ``mremap``, ``madvise``, ``shmat``, ``shmdt``, ``remap_file_pages``, ``io_uring_setup``,
``process_madvise``)."""
MAP_FIXED = 0x10


def keep_what_is_mapped() -> None:
    """From now on this process gives nothing back that it has mapped: ``munmap``, ``mremap``, ``madvise``,
    ``remap_file_pages``, ``process_madvise`` and ``mmap`` over an existing mapping (``MAP_FIXED``) are refused
    with ``EPERM``, and so are System V shared memory (a segment detached holds data outside the process's pages)
    and ``io_uring``; a seccomp filter keeps it so (Linux x86-64 and arm64; elsewhere nothing changes).

    Why: the grader charges the attention with the growth of the process's peak resident memory, and a process
    that could unmap or discard pages it did not allocate (libraries it never executes: a CUDA build of PyTorch
    keeps ~150 MiB of them resident on a CPU) would make room under that peak for what it holds. glibc is told
    first to serve every allocation from its heap (``M_MMAP_MAX`` 0), so what is freed is reused rather than
    unmapped, and kept rather than trimmed; the heap's top could still shrink (``brk``), which gives back only
    free memory."""
    import ctypes
    import platform
    import struct
    import sys

    if platform.machine() not in _KEEP or not sys.platform.startswith("linux"):
        return
    arch, mmap, refused = _KEEP[platform.machine()]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mallopt(-4, 0)  # M_MMAP_MAX: no allocation of its own mapping, whose free would unmap it
    libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD: what is freed stays for the next allocation (no page faults)
    ld, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    allow, eperm = 0x7FFF0000, 0x00050001
    code = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, allow),  # another architecture: harden() refuses it
            (ld, 0, 0, 0)]
    for number in refused:
        code += [(jeq, 0, 1, number), (ret, 0, 0, eperm)]
    code += [(jeq, 1, 0, mmap), (ret, 0, 0, allow),
             (ld, 0, 0, 16 + 3 * 8), (jset, 0, 1, MAP_FIXED), (ret, 0, 0, eperm),  # mmap's flags (low 32 bits)
             (ret, 0, 0, allow)]
    program = b"".join(struct.pack("HBBI", c, jt, jf, k) for c, jt, jf, k in code)

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    buffer = ctypes.create_string_buffer(program, len(program))
    libc.prctl(38, 1, 0, 0, 0)  # no_new_privs (harden() set it already)
    if libc.prctl(22, 2, ctypes.byref(Program(len(program) // 8, ctypes.addressof(buffer))), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "could not install the filter that keeps this process's mappings")


def _confine() -> None:
    """What the student's attention may do besides computing, once PyTorch is warm: start no process (its memory
    would be its own), write no file (``RLIMIT_FSIZE`` 0: a file in ``/tmp``, ``/dev/shm`` or a ``memfd`` holds
    no byte), open at most :data:`SPARE_DESCRIPTORS` more files (hard limits, which it cannot raise again), give
    back nothing mapped (:func:`keep_what_is_mapped`). What it holds is then in its own pages, where the grader
    measures it from outside."""
    from util.student_process import no_processes

    opened = len(os.listdir("/proc/self/fd"))
    for limit, value in ((resource.RLIMIT_FSIZE, 0), (resource.RLIMIT_NOFILE, opened + SPARE_DESCRIPTORS)):
        _, hard = resource.getrlimit(limit)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)  # one already tighter stays
        resource.setrlimit(limit, (value, value))
    no_processes()
    keep_what_is_mapped()


def _warm_up() -> None:
    """One attention forward and backward (course code), so PyTorch's kernels and autograd are loaded before
    the student's code runs, and their one-off buffers are not charged to it."""
    import torch

    q, k, v = (torch.randn(2, 64, 32, requires_grad=True) for _ in range(3))
    scores = (q @ k.transpose(-1, -2) / 4).masked_fill(torch.ones(64, 64, dtype=torch.bool).triu(1), float("-inf"))
    out = torch.softmax(scores, -1) @ v
    out.backward(torch.ones_like(out))
    (torch.exp(scores[..., :8].detach() - 1).amax(-1) * torch.log(torch.ones(2, 64))).sum()


def _attend(cls: Any, header: dict, data: bytes) -> tuple[dict, bytes]:
    import numpy as np
    import torch

    dims = [int(header["heads"]), int(header["n"]), int(header["d"])]
    tensors, offset = [], 0
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
    return {"done": True}, b"".join(np.ascontiguousarray(t.detach().to(torch.float32).numpy()).tobytes()
                                    for t in parts)


def serve_attention(channel: Channel) -> None:
    """Warm PyTorch up and confine the process (:func:`_confine`), say ``{"ready": true}``; then for each case:
    the pickled class (at most :data:`CODE_BYTES`), loaded by :func:`util.judging.student_code.load` before
    anything of the case is here, answered ``{"loaded": true}`` or ``{"raised": message}``; then (after a load)
    ``{"heads", "n", "d", "causal", "block"}`` + q, k, v, dO (float32), answered ``{"done": true}`` + O, dQ, dK,
    dV (float32) or ``{"raised": message}``. The judge reads the process's peak memory around each case."""
    import ctypes
    import gc

    import torch

    from util.judging import student_code

    torch.set_num_threads(1)
    _warm_up()
    import cloudpickle  # noqa: F401  (imported before the peak is measured)

    gc.collect()
    ctypes.CDLL(None).malloc_trim(0)  # what the set-up freed goes back: the peak starts from what is held
    _confine()
    try:
        channel.send({"ready": True})
    except ChannelError:
        return
    while True:
        try:
            _, code, _ = channel.receive()
        except ChannelError:
            return
        cls = None
        try:
            cls = student_code.load(code, limit=CODE_BYTES, what="the pickled FlashAttention")
            reply = {"loaded": True}
        except Exception as exc:  # unpickling runs the student's code: it may raise anything
            reply = {"raised": _error(exc)}
        del code
        try:
            channel.send(reply)
            if cls is None:
                continue
            header, data, _ = channel.receive()
        except ChannelError:
            return
        out = b""
        try:
            reply, out = _attend(cls, header, data)
        except MemoryError as exc:
            reply = {"memory": _error(exc)}
        except Exception as exc:  # the student's code may raise anything
            reply = {"raised": _error(exc)}
        del cls, data
        try:
            channel.send(reply, data=out)
        except ChannelError:
            return
        del out
        gc.collect()
