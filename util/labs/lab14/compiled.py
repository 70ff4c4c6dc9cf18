"""What an H100's compiler makes of a tile (task 14.7): the course's matmul kernel compiled by Triton for the GPU.

Triton's pipeline runs without a GPU (:mod:`util.labs.lab14.gpu`): :func:`compile_tile` compiles
:data:`TILE_KERNEL`, the course's tiled matmul (``C = A @ B``, A ``M x K`` and B ``K x N`` stored by rows, both
contiguous and 16-byte aligned, as a launch on real tensors tells Triton), for :data:`util.labs.lab14.gpu.TARGET`
at one configuration: the tile ``(BLOCK_M, BLOCK_N, BLOCK_K)``, the element type, ``num_stages`` (how many tiles
of A and B the software pipeline keeps in shared memory at once, loading the next while the tensor cores
multiply the current) and ``num_warps`` (warps per program). Triton's compiled metadata gives the shared memory
a program asks for; Triton's bundled ``ptxas -v`` (NVIDIA's assembler, run on the PTX) gives the registers per
thread and the bytes spilled to local memory when 255 registers are not enough.

The course compiled it for you: :func:`load` gives the figures of the notebook's configurations
(:data:`PUBLIC_CONFIGS`), and the grader holds those of its hidden ones, compiled the same way when the course
wrote its references: nothing is compiled while a notebook is graded. In the notebook, Triton runs in its
interpreter, which cannot compile (:func:`util.labs.lab14.gpu.compiler_ready`); in a shell without
``TRITON_INTERPRET``, ``python -m util.labs.lab14.compiled`` compiles the public configurations again on your
machine and says whether it found the stored figures.

:data:`H100_LIMITS` are the GPU's stated limits, which task 14.7's occupancy is computed from.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping

HERE = Path(__file__).resolve().parent
PUBLIC_FILE = HERE / "compiled_public.json"
HIDDEN_FILE = HERE / "cases_compiled.json"  # grader-only (util.labs.GRADER_ONLY: "cases*")

DTYPES = {"fp16": 2, "bf16": 2, "fp32": 4}
"""Element types the course compiles the tile kernel for -> bytes an element (fp32 runs as TF32 on the tensor
cores)."""

H100_LIMITS = {
    "registers_per_sm": 65536,
    "registers_per_thread": 255,
    "register_unit": 256,
    "shared_per_sm": 228 * 1024,
    "shared_per_block": 227 * 1024,
    "reserved_per_block": 1024,
    "threads_per_sm": 2048,
    "blocks_per_sm": 32,
    "warp": 32,
}
"""An H100's limits on what one SM holds at once (CUDA's compute capability 9.0): 65,536 32-bit registers, at
most 255 per thread, given to each warp in units of 256 (a warp of 32 threads using ``r`` registers each takes
``r x 32`` rounded up to a multiple of 256); 228 KiB of shared memory, of which one block may ask at most 227 KiB,
and CUDA reserves 1 KiB more for every block; 2,048 threads (64 warps of 32); 32 blocks. A Triton program is one
block of ``num_warps x 32`` threads."""

TILE_KERNEL = '''\
def tile_matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """C[tile] = A[rows, :] @ B[:, columns] for the tile (program_id(0), program_id(1)); A, B, C by rows."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    columns = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    depth = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rows[:, None] * stride_am + (k0 + depth)[None, :])
        b = tl.load(b_ptr + (k0 + depth)[:, None] * stride_bk + columns[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rows[:, None] * stride_cm + columns[None, :], acc.to(c_ptr.dtype.element_ty))
'''
"""The course's tile kernel (shapes that are multiples of the tile: no masks), compiled by :func:`compile_tile`."""

PUBLIC_CONFIGS = (
    {"block": [64, 64, 32], "dtype": "fp16", "num_stages": 3, "num_warps": 4},
    {"block": [128, 64, 32], "dtype": "fp16", "num_stages": 3, "num_warps": 4},
    {"block": [128, 128, 64], "dtype": "fp16", "num_stages": 1, "num_warps": 8},
    {"block": [128, 128, 64], "dtype": "fp16", "num_stages": 2, "num_warps": 8},
    {"block": [128, 128, 64], "dtype": "fp16", "num_stages": 3, "num_warps": 8},
    {"block": [128, 128, 64], "dtype": "fp16", "num_stages": 4, "num_warps": 8},
    {"block": [128, 256, 32], "dtype": "fp16", "num_stages": 3, "num_warps": 8},
    {"block": [256, 128, 64], "dtype": "fp16", "num_stages": 3, "num_warps": 8},
    {"block": [256, 256, 64], "dtype": "fp16", "num_stages": 3, "num_warps": 8},
    {"block": [128, 64, 32], "dtype": "fp32", "num_stages": 3, "num_warps": 4},
)
"""The notebook's configurations (task 14.7): tiles that grow, one tile at 1 to 4 stages, a float32 tile."""


def config_name(config: Mapping[str, Any]) -> str:
    """``"128x128x64 fp16, 3 stages, 8 warps"``."""
    bm, bn, bk = config["block"]
    stages = int(config["num_stages"])
    return f"{bm}x{bn}x{bk} {config['dtype']}, {stages} stage{'s' if stages != 1 else ''}, {config['num_warps']} warps"


def ptxas_path() -> Path:
    """Triton's bundled ``ptxas`` (the version :data:`util.labs.lab14.gpu.PTXAS` names)."""
    import triton

    return Path(triton.__file__).resolve().parent / "backends" / "nvidia" / "bin" / "ptxas"


def _ptxas(ptx: str) -> dict[str, int]:
    """Registers per thread and bytes spilled, as ``ptxas -v`` reports them for ``sm_90a``."""
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "kernel.ptx"
        source.write_text(ptx, encoding="utf-8")
        done = subprocess.run([str(ptxas_path()), "-v", "--gpu-name", "sm_90a", str(source), "-o",
                               str(Path(folder) / "kernel.cubin")], capture_output=True, text=True, timeout=120)
    if done.returncode:
        raise RuntimeError(f"ptxas refused the PTX (exit {done.returncode}): {done.stderr[-500:]}")
    registers = re.search(r"Used (\d+) registers", done.stderr)
    spills = re.search(r"(\d+) bytes spill stores", done.stderr)
    if registers is None or spills is None:
        raise RuntimeError(f"ptxas -v did not report registers and spills: {done.stderr[-500:]}")
    return {"registers": int(registers.group(1)), "spills": int(spills.group(1))}


def compile_tile(config: Mapping[str, Any]) -> dict[str, int]:
    """What Triton's compiler and ``ptxas`` make of :data:`TILE_KERNEL` at ``config`` for an H100:
    ``{"registers": per thread, "spills": bytes spilled by a thread, "shared": bytes of shared memory a program
    asks for}``. Course-side only: it starts ``ptxas``, and it needs a process where ``TRITON_INTERPRET`` was
    never set."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    from util.labs.lab14.gpu import TARGET, compiler_ready
    from util.labs.lab14.launch import kernel_function

    problem = compiler_ready()
    if problem:
        raise RuntimeError(f"cannot compile here: {problem}; run `python -m util.labs.lab14.compiled` in a shell")
    fn = JITFunction(kernel_function(TILE_KERNEL, "tile_matmul"))
    dtype = config["dtype"]
    if dtype not in DTYPES:
        raise ValueError(f"dtype is one of {', '.join(DTYPES)}, not {dtype!r}")
    signature = dict(zip(fn.arg_names, (f"*{dtype}",) * 3 + ("i32",) * 6 + ("constexpr",) * 3))
    aligned = {(index,): [["tt.divisibility", 16]] for index in range(9)}  # as a launch on real tensors specializes
    bm, bn, bk = (int(b) for b in config["block"])
    compiled = triton.compile(ASTSource(fn=fn, signature=signature, attrs=aligned,
                                        constexprs={"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}),
                              target=GPUTarget(*TARGET),
                              options={"num_warps": int(config["num_warps"]), "num_stages": int(config["num_stages"])})
    return {**_ptxas(compiled.asm["ptx"]), "shared": int(compiled.metadata.shared)}


def load(path: Path = PUBLIC_FILE) -> list[dict[str, Any]]:
    """The stored table: one ``{"config": {...}, "compiled": {"registers", "spills", "shared"}}`` per
    configuration."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def table(configs) -> list[dict[str, Any]]:
    """Every configuration of ``configs`` compiled (:func:`compile_tile`), in order."""
    return [{"config": dict(config), "compiled": compile_tile(config)} for config in configs]


def _write() -> None:
    """Compile the public configurations and the grader's hidden ones (its ``TILE_CONFIGS``) and store both tables
    (course-side: the hidden table is grader-only, and the references are written again after it)."""
    from util.labs.lab14.cases_tiles import TILE_CONFIGS

    for path, configs in ((PUBLIC_FILE, PUBLIC_CONFIGS), (HIDDEN_FILE, TILE_CONFIGS)):
        path.write_text(json.dumps(table(configs), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path.name}: {len(configs)} configurations")


def main(argv: list[str]) -> int:
    """Compile :data:`PUBLIC_CONFIGS` again and print the figures; exit status 1 if any differs from the stored
    table (``--write``, course-side: compile and store the tables)."""
    if argv == ["--write"]:
        _write()
        return 0
    stored = {json.dumps(row["config"], sort_keys=True): row["compiled"] for row in load()}
    differ = 0
    for config in PUBLIC_CONFIGS:
        found = compile_tile(config)
        same = stored.get(json.dumps(dict(config), sort_keys=True)) == found
        differ += not same
        print(f"{config_name(config):36} {found['registers']:3} registers, {found['spills']:5} bytes spilled, "
              f"{found['shared']:7,} bytes shared{'' if same else '   (the stored table says otherwise)'}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
