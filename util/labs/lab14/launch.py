"""The course's launchers: how the lab's three kernels are called, counted and timed.

A kernel is only half a program: the host code around it picks the grid, the block sizes and the arguments.
Here that half is the course's, the same in the notebook and in the grader, so a kernel is graded on what it
does with the arguments it is given (:mod:`util.labs.lab14.rules` says what a kernel may be written with):

* :func:`run_matmul` ``(kernel, a, b, block=(BLOCK_M, BLOCK_N, BLOCK_K))``: ``C = A @ B``, float32, one
  program per ``BLOCK_M x BLOCK_N`` tile of C, grid ``(cdiv(M, BLOCK_M), cdiv(N, BLOCK_N))``;
* :func:`run_softmax` ``(kernel, x)``: the softmax of each row of a float32 matrix, one program per row,
  ``BLOCK`` = the next power of two of the row length;
* :func:`run_flash` ``(kernel, q, k, v, causal, block=(BLOCK_M, BLOCK_N))``: attention of ``[heads, N, D]``
  float32 tensors (contiguous), scale ``1/sqrt(D)``, one program per ``BLOCK_M`` query rows of one head, grid
  ``(cdiv(N, BLOCK_M), heads)``; the output ``O`` ``[heads, N, D]`` and the log-sum-exp ``L`` ``[heads, N]``;
* :func:`run_flash_backward` ``(kernel, q, k, v, o, lse, do, causal, block=(BLOCK_M, BLOCK_N))``: the gradients
  ``dQ``, ``dK``, ``dV`` of that attention from ``O``, ``L`` and ``dO`` (release 5), grid
  ``(cdiv(N, BLOCK_N) + cdiv(N, BLOCK_M), heads)``: first one program per key block (its ``dK`` and ``dV``), then
  one per query block (its ``dQ``).

Each runs the kernel in Triton's interpreter on the CPU (wherever the tensors were) and returns its outputs
with the :class:`util.labs.lab14.traffic.Traffic` the course counted (:func:`util.labs.lab14.traffic.counting`):
bytes per tensor, named as the kernel's parameters are, without their ``_ptr``. Outputs start as NaN, so an
element the kernel never stores shows. :func:`gpu_seconds` times the same launch compiled, on a GPU.
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import inspect
import linecache
import math
from typing import Any, Callable

from util.labs.lab14.rules import BUILTINS
from util.labs.lab14.traffic import Traffic, counting

MATMUL_PARAMETERS = ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
                     "stride_cm", "stride_cn", "BLOCK_M", "BLOCK_N", "BLOCK_K")
"""The parameters of task 14.3's ``matmul_kernel``, in order."""
SOFTMAX_PARAMETERS = ("x_ptr", "y_ptr", "n_cols", "stride_x", "stride_y", "BLOCK")
"""The parameters of task 14.4's ``softmax_kernel``, in order."""
FLASH_PARAMETERS = ("q_ptr", "k_ptr", "v_ptr", "o_ptr", "lse_ptr", "N", "scale", "stride_h", "stride_n", "D",
                    "BLOCK_M", "BLOCK_N", "CAUSAL")
"""The parameters of task 14.5's ``flash_kernel``, in order."""
FLASH_BACKWARD_PARAMETERS = ("q_ptr", "k_ptr", "v_ptr", "o_ptr", "do_ptr", "lse_ptr", "dq_ptr", "dk_ptr", "dv_ptr",
                             "N", "scale", "stride_h", "stride_n", "D", "BLOCK_M", "BLOCK_N", "CAUSAL")
"""The parameters of task 14.8's ``flash_backward_kernel``, in order (release 5)."""
_interpreted: dict[Any, Any] = {}


def interpreted(kernel: Any) -> Any:
    """The kernel as Triton's interpreter runs it (an ``InterpretedFunction`` of its Python function), whether
    ``@triton.jit`` compiled it for a GPU or interprets it already (``TRITON_INTERPRET=1``)."""
    from triton.runtime.interpreter import InterpretedFunction

    if isinstance(kernel, InterpretedFunction):
        return kernel
    fn = getattr(kernel, "fn", None)
    if fn is None or not callable(fn):
        raise TypeError(f"expected a @triton.jit kernel, got a {type(kernel).__name__}: decorate the function "
                        "with @triton.jit")
    if fn not in _interpreted:
        _interpreted[fn] = InterpretedFunction(fn)
    return _interpreted[fn]


def kernel_function(source: str, name: str) -> Any:
    """The plain Python function ``name`` defined by ``source`` alone: its decorators dropped, its globals only
    ``tl`` and the builtins :data:`util.labs.lab14.rules.BUILTINS`, nothing of it run. The grader's way of
    loading a kernel it has checked with :func:`util.labs.lab14.rules.kernel_problems` (never a source that has
    not passed): :func:`compile_kernel` wraps it for the interpreter, :mod:`util.labs.lab14.gpu` for the GPU
    compiler."""
    import triton.language as tl

    tree = ast.parse(source)
    tree.body[0].decorator_list = []
    filename = f"<graded kernel {name} {hashlib.sha256(source.encode()).hexdigest()[:12]}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"tl": tl, "__name__": "graded_kernel",
                 "__builtins__": {key: getattr(builtins, key) for key in sorted(BUILTINS)}}
    exec(compile(tree, filename, "exec"), namespace)  # defines the function; nothing of it runs yet
    return namespace[name]


def compile_kernel(source: str, name: str) -> Any:
    """The kernel ``name`` made from ``source`` alone (:func:`kernel_function`), for the interpreter."""
    from triton.runtime.interpreter import InterpretedFunction

    return InterpretedFunction(kernel_function(source, name))


def _cpu(tensor: Any, what: str):
    import torch

    if not isinstance(tensor, torch.Tensor) or tensor.dtype != torch.float32:
        raise TypeError(f"{what} must be a float32 torch tensor, got {getattr(tensor, 'dtype', type(tensor).__name__)}")
    return tensor.detach().cpu()


def _launch(kernel: Any, grid: tuple[int, ...], args: tuple, tensors: dict) -> Traffic:
    """Run every program of ``kernel[grid](*args)`` in Triton's interpreter, counted against ``tensors``.

    Triton's own grid loop (``GridExecutor``) hands every program the same argument objects, so a program could
    leave something on a pointer for the next one, which no GPU allows; here each program gets argument objects
    of its own (Triton's ``_implicit_cvt`` of each argument, made again for every program), and the rest is
    Triton's: its language patched for the interpreter while the programs run, one program after another."""
    from triton.runtime import interpreter

    function = interpreted(kernel)
    body = function.rewrite()
    constexprs = set(interpreter.GridExecutor(body, function.arg_names, grid).constexprs)
    bound = inspect.getcallargs(body, *args)
    dims = tuple(grid) + (1,) * (3 - len(grid))
    with counting(tensors) as traffic:
        scope = interpreter._patch_lang(body)
        try:
            interpreter.interpreter_builder.set_grid_dim(*dims)
            for x in range(dims[0]):
                for y in range(dims[1]):
                    for z in range(dims[2]):
                        interpreter.interpreter_builder.set_grid_idx(x, y, z)
                        body(**{name: value if name in constexprs else interpreter._implicit_cvt(value)
                                for name, value in bound.items()})
        except Exception as exc:  # the interpreter wraps what a nested call raised: show the kernel's own error
            if type(exc).__name__ == "InterpreterError" and exc.__cause__ is not None:
                raise exc.__cause__ from None
            raise
        finally:
            scope.restore()
    return traffic


def matmul_args(a, b, c, block: tuple[int, int, int]) -> tuple[tuple[int, ...], tuple]:
    """The grid and arguments of a matmul launch (:data:`MATMUL_PARAMETERS`)."""
    (m, k), n = a.shape, b.shape[1]
    bm, bn, bk = (int(x) for x in block)
    grid = (math.ceil(m / bm), math.ceil(n / bn))
    return grid, (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                  bm, bn, bk)


def run_matmul(kernel: Any, a, b, block: tuple[int, int, int] = (32, 32, 32)):
    """``(C, traffic)``: ``kernel`` (``matmul_kernel``, :data:`MATMUL_PARAMETERS`) computing ``C = A @ B`` in the
    interpreter; ``a`` is ``M x K``, ``b`` ``K x N`` (any strides: a transposed view works), float32."""
    import torch

    a, b = _cpu(a, "a"), _cpu(b, "b")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"a is {list(a.shape)} and b is {list(b.shape)}: expected M x K and K x N")
    c = torch.full((a.shape[0], b.shape[1]), float("nan"))
    grid, args = matmul_args(a, b, c, block)
    return c, _launch(kernel, grid, args, {"a": a, "b": b, "c": c})


def softmax_block(n_cols: int) -> int:
    """The ``BLOCK`` the course launches the softmax with: the smallest power of two >= ``n_cols``."""
    return 1 << max(0, int(n_cols) - 1).bit_length()


def softmax_args(x, y) -> tuple[tuple[int, ...], tuple]:
    """The grid and arguments of a softmax launch (:data:`SOFTMAX_PARAMETERS`)."""
    return (x.shape[0],), (x, y, x.shape[1], x.stride(0), y.stride(0), softmax_block(x.shape[1]))


def run_softmax(kernel: Any, x):
    """``(Y, traffic)``: ``kernel`` (``softmax_kernel``, :data:`SOFTMAX_PARAMETERS`) computing the softmax of
    each row of ``x`` (float32, rows x cols, rows contiguous) in the interpreter."""
    import torch

    x = _cpu(x, "x")
    if x.dim() != 2 or x.stride(1) != 1:
        raise ValueError(f"x must be a matrix with contiguous rows, got shape {list(x.shape)}, strides {x.stride()}")
    y = torch.full(x.shape, float("nan"))
    grid, args = softmax_args(x, y)
    return y, _launch(kernel, grid, args, {"x": x, "y": y})


def flash_args(q, k, v, o, lse, causal: bool, block: tuple[int, int]) -> tuple[tuple[int, ...], tuple]:
    """The grid and arguments of a FlashAttention launch (:data:`FLASH_PARAMETERS`)."""
    heads, n, d = q.shape
    bm, bn = (int(x) for x in block)
    return (math.ceil(n / bm), heads), (q, k, v, o, lse, n, 1.0 / math.sqrt(d), q.stride(0), q.stride(1), d, bm, bn,
                                        bool(causal))


def run_flash(kernel: Any, q, k, v, causal: bool = False, block: tuple[int, int] = (32, 32)):
    """``(O, L, traffic)``: ``kernel`` (``flash_kernel``, :data:`FLASH_PARAMETERS`) computing attention of
    ``q, k, v`` (``[heads, N, D]``, float32, D a power of two from 16) in the interpreter: ``O = softmax(Q K^T /
    sqrt(D)) V`` (with ``causal``, key ``j`` is seen by query ``i`` only when ``j <= i``) and ``L``, each row's
    log-sum-exp of its scaled scores (natural log)."""
    import torch

    q, k, v = (_cpu(t, name).contiguous() for t, name in ((q, "q"), (k, "k"), (v, "v")))
    if q.dim() != 3 or q.shape != k.shape or q.shape != v.shape:
        raise ValueError(f"q, k, v must be [heads, N, D] of one shape; got {list(q.shape)}, {list(k.shape)}, "
                         f"{list(v.shape)}")
    o = torch.full(q.shape, float("nan"))
    lse = torch.full(q.shape[:2], float("nan"))
    grid, args = flash_args(q, k, v, o, lse, causal, block)
    traffic = _launch(kernel, grid, args, {"q": q, "k": k, "v": v, "o": o, "lse": lse})
    return o, lse, traffic


def flash_backward_args(q, k, v, o, lse, do, dq, dk, dv, causal: bool,
                        block: tuple[int, int]) -> tuple[tuple[int, ...], tuple]:
    """The grid and arguments of a FlashAttention backward launch (:data:`FLASH_BACKWARD_PARAMETERS`): the
    ``cdiv(N, BLOCK_N)`` key-block programs first, then the ``cdiv(N, BLOCK_M)`` query-block programs."""
    heads, n, d = q.shape
    bm, bn = (int(x) for x in block)
    return (math.ceil(n / bn) + math.ceil(n / bm), heads), (q, k, v, o, do, lse, dq, dk, dv, n, 1.0 / math.sqrt(d),
                                                           q.stride(0), q.stride(1), d, bm, bn, bool(causal))


def run_flash_backward(kernel: Any, q, k, v, o, lse, do, causal: bool = False, block: tuple[int, int] = (32, 32)):
    """``(dQ, dK, dV, traffic)``: ``kernel`` (``flash_backward_kernel``, :data:`FLASH_BACKWARD_PARAMETERS`)
    computing the gradients of attention (as :func:`run_flash` computes it) in the interpreter, from ``q, k, v``,
    the forward's ``O`` and ``L`` (``[heads, N, D]`` and ``[heads, N]``) and the output's gradient ``do``, all
    float32. Program ``p < cdiv(N, BLOCK_N)`` of head ``h`` writes ``dK`` and ``dV`` of the key block ``p``
    (``BLOCK_N`` rows); program ``cdiv(N, BLOCK_N) + i`` writes ``dQ`` of the query block ``i`` (``BLOCK_M``
    rows). No program reads what another writes: each sums its block's gradient itself."""
    import torch

    q, k, v, o, do = (_cpu(t, name).contiguous() for t, name in ((q, "q"), (k, "k"), (v, "v"), (o, "o"),
                                                                 (do, "do")))
    lse = _cpu(lse, "lse").contiguous()
    if q.dim() != 3 or any(t.shape != q.shape for t in (k, v, o, do)) or tuple(lse.shape) != tuple(q.shape[:2]):
        raise ValueError(f"q, k, v, o, do must be [heads, N, D] of one shape and lse [heads, N]; got "
                         f"{[list(t.shape) for t in (q, k, v, o, do)]} and {list(lse.shape)}")
    dq, dk, dv = (torch.full(q.shape, float("nan")) for _ in range(3))
    grid, args = flash_backward_args(q, k, v, o, lse, do, dq, dk, dv, causal, block)
    traffic = _launch(kernel, grid, args, {"q": q, "k": k, "v": v, "o": o, "do": do, "lse": lse, "dq": dq,
                                           "dk": dk, "dv": dv})
    return dq, dk, dv, traffic


def gpu_seconds(kind: str, kernel: Any, *inputs: Any, block: tuple[int, ...] | None = None,
                causal: bool = False) -> float:
    """Seconds one launch of ``kernel`` takes compiled on the GPU (``triton.testing.do_bench``: the mean after
    warm-up, in a loop of launches), ``kind`` one of ``"matmul"`` (inputs ``a, b``), ``"softmax"`` (``x``),
    ``"flash"`` (``q, k, v``). Needs a GPU and a kernel decorated without ``TRITON_INTERPRET``."""
    import torch
    import triton

    if not torch.cuda.is_available():
        raise RuntimeError("gpu_seconds needs a GPU; on a CPU the notebook counts traffic and predicts time instead")
    cuda = [t.detach().to("cuda", torch.float32) for t in inputs]
    if kind == "matmul":
        c = torch.empty(cuda[0].shape[0], cuda[1].shape[1], device="cuda")
        grid, args = matmul_args(cuda[0], cuda[1], c, block or (64, 64, 32))
    elif kind == "softmax":
        grid, args = softmax_args(cuda[0], torch.empty_like(cuda[0]))
    elif kind == "flash":
        q, k, v = (t.contiguous() for t in cuda)
        grid, args = flash_args(q, k, v, torch.empty_like(q), torch.empty(q.shape[:2], device="cuda"), causal,
                                block or (64, 64))
    else:
        raise ValueError(f"kind is matmul, softmax or flash, not {kind!r}")
    run: Callable[[], Any] = lambda: kernel[grid](*args)  # noqa: E731
    return float(triton.testing.do_bench(run)) / 1e3
