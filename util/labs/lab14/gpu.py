"""Compiling a graded kernel with Triton's own compiler for a GPU, on a machine that has none.

Triton's interpreter runs a kernel's body as ordinary Python, so it also runs what no GPU could: a Python list
that grows in a loop (a query block's whole row of scores "in registers"), a value a program leaves for the next
one. So before the grader counts a kernel, it compiles it, in a process of its own
(:func:`util.labs.lab14.harness.serve_compiler`), exactly as the launch that will be counted calls it: the
lab's parameters (pointers to float32, 32-bit integers, the scale a float32), the launch's constexprs (its block
sizes, ``CAUSAL``), Triton's default ``num_warps`` and ``num_stages``, for :data:`TARGET`. Triton's pipeline
runs without a GPU or a CUDA toolkit: its front end (which refuses Python that is not Triton's language), TTIR,
TTGIR (layouts, shared memory), LLVM IR and PTX for ``sm_90a``. The last step, PTX to a cubin, is a program of
its own (``ptxas``), and the process that compiles a student's kernel may start none
(:func:`util.student_process.harden`): :func:`compile_source` stops at PTX, telling Triton the PTX version of its
bundled ``ptxas`` (:data:`PTX_VERSION`) instead of asking it. A kernel the compiler refuses is not counted, and
the student sees the compiler's message.

Only in a process where ``TRITON_INTERPRET`` was never set: there ``triton.language``'s own functions
(``tl.max``, ``tl.sum``, ...) are compiled functions; under the interpreter they are interpreted ones, which the
compiler cannot trace (:func:`compiler_ready` says which).
"""
from __future__ import annotations

from typing import Any, Mapping

TARGET = ("cuda", 90, 32)
"""The GPU the grader compiles for: an H100's compute capability 9.0, 32 threads a warp (the lab's stated GPU)."""
NUM_WARPS = 4
"""Triton's default warps per program on CUDA (the course's launchers set none)."""
NUM_STAGES = 3
"""Triton's default software-pipelining stages on CUDA."""
PTXAS = "Cuda compilation tools, release 12.9, V12.9.86"
"""What Triton 3.8's bundled ``ptxas --version`` says (``TRITON_VERSION`` of :mod:`util.labs.lab14.traffic`)."""
PTX_VERSION = 88
"""The PTX version Triton 3.8 picks for that ``ptxas`` (CUDA 12.9: 8.8)."""
KINDS = {
    "matmul": ("matmul_kernel", ("*fp32",) * 3 + ("i32",) * 9 + ("constexpr",) * 3),
    "softmax": ("softmax_kernel", ("*fp32",) * 2 + ("i32",) * 3 + ("constexpr",)),
    "flash": ("flash_kernel", ("*fp32",) * 5 + ("i32", "fp32", "i32", "i32") + ("constexpr",) * 4),
    "backward": ("flash_backward_kernel", ("*fp32",) * 9 + ("i32", "fp32", "i32", "i32") + ("constexpr",) * 4),
}
"""Kernel kind -> its name and the Triton type of each of its parameters (in the order of
:data:`util.labs.lab14.launch.MATMUL_PARAMETERS`, ``SOFTMAX_PARAMETERS``, ``FLASH_PARAMETERS``,
``FLASH_BACKWARD_PARAMETERS``)."""


def compiler_ready() -> str:
    """Empty when this process can compile kernels; otherwise why not (the interpreter was switched on first)."""
    import triton.language as tl
    from triton.runtime.jit import JITFunction

    if not isinstance(tl.max, JITFunction):
        return "Triton was imported with TRITON_INTERPRET=1: its own functions are interpreted, not compiled"
    return ""


def constexprs(kind: str, launch: Mapping[str, Any]) -> dict[str, Any]:
    """The constexpr arguments of a launch of ``kind`` as the judge describes it (``block``, ``cols``, ``d``,
    ``causal``): what :func:`util.labs.lab14.launch.matmul_args` (and the others) will pass."""
    from util.labs.lab14.launch import softmax_block

    if kind == "matmul":
        return dict(zip(("BLOCK_M", "BLOCK_N", "BLOCK_K"), (int(b) for b in launch["block"])))
    if kind == "softmax":
        return {"BLOCK": softmax_block(int(launch["cols"]))}
    if kind in ("flash", "backward"):
        bm, bn = (int(b) for b in launch["block"])
        return {"D": int(launch["d"]), "BLOCK_M": bm, "BLOCK_N": bn, "CAUSAL": bool(launch["causal"])}
    raise ValueError(f"kind is matmul, softmax, flash or backward, not {kind!r}")


def compile_source(kind: str, source: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """Compile the kernel of ``kind`` in ``source`` (which must have passed
    :func:`util.labs.lab14.rules.kernel_problems`) with the constexprs ``values`` for :data:`TARGET`: what the
    compiler made of it (``shared`` memory in bytes, the stages it produced). Raises what Triton's compiler
    raises for a kernel it refuses (``triton.compiler.errors.CompilationError``, among others)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    from util.labs.lab14.launch import kernel_function

    name, types = KINDS[kind]
    _without_ptxas()
    fn = JITFunction(kernel_function(source, name))
    signature = dict(zip(fn.arg_names, types))
    compiled = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=dict(values)),
                              target=GPUTarget(*TARGET), options={"num_warps": NUM_WARPS, "num_stages": NUM_STAGES,
                                                                  "ptx_version": PTX_VERSION})
    return {"shared": int(compiled.metadata.shared), "ptx_bytes": len(compiled.asm["ptx"]),
            "stages": [stage for stage in ("ttir", "ttgir", "llir", "ptx") if stage in compiled.asm]}


def _without_ptxas() -> None:
    """Triton's pipeline up to PTX, in a process that may not start ``ptxas``: its version given (Triton's
    ``mock_ptx_version`` knob, which only its cache key reads) and the cubin step replaced by an empty one (the
    hook's key keeps such results apart in Triton's cache)."""
    from triton import knobs

    knobs.nvidia.mock_ptx_version = PTXAS

    def no_cubin(*args: Any):
        if not args:
            return "lab14: no cubin", "lab14: no cubin"
        stages = args[1]
        stages["cubin"] = lambda module, metadata: b""

    knobs.runtime.add_stages_inspection_hook = no_cubin
