"""Lab 14's judges against the held-out hostile submissions, each attack beside a control that plays
the same wrong answer straight, judged through the grader's judge process (``tests/labs/judged_files.py``), as
whoever runs the tests (root in CI) and as an unprivileged grader.

* 14.2's memory case (class 3, a cap that counts what the student can give back): the address space used to be
  capped at what the warm process had mapped plus 12 MiB, and a process that has imported PyTorch maps about
  1.7 GB of CUDA libraries it never executes on a CPU. The **unmapper** unmaps their code segments (found with
  ``dl_iterate_phdr``, as ``/proc/self/maps`` is closed to it) and discards their pages, then builds the whole
  score matrix: it passed (4 points). Now the grader charges the growth of the process's peak resident memory,
  which it reads from outside, and the process may give nothing mapped back (no ``munmap``, ``madvise``, ...):
  the unmapper fails like the control, which builds the matrix straight. A **stash** that writes the matrix to a
  file in pieces fails too (no file may grow there).
* 14.5 and 14.4 (class 4, a simulator that runs what the hardware cannot): Triton's interpreter runs Python, so
  a FlashAttention forward that holds a query block's whole row of scores in a tuple that grows in its loop (an
  exact two-pass softmax, not the online one) matched the closed-form traffic and the outputs: 5 points a case.
  Now each kernel is compiled by Triton's own compiler for the stated GPU first, which refuses it; the same
  holding in a list is refused by the rules already, and so is a kernel that leaves a value on a pointer for the
  next program (each program gets argument objects of its own, too). The control is the online-softmax
  solution, which compiles and passes.
* 14.4's overflow case (class 5, a case named for a mistake that an allowed way sidesteps): a softmax without the
  maximum computed in float64 passed a case of values around 50 (exp(175) is a float64); the case's values are now
  around 1,000, past float64's exp too. Float32 and float64 both fail; the solution passes.
"""
from __future__ import annotations

import inspect
import os
import subprocess
import sys
import textwrap

os.environ.setdefault("TRITON_INTERPRET", "1")  # before Triton is imported, as the notebook does

import cloudpickle  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import triton.language as tl  # noqa: E402
from judged_files import judge_files, save_case  # noqa: E402
from lab14_solution import namespace, source  # noqa: E402

from grader.execute import confinement  # noqa: E402
from util.labs import get_lab  # noqa: E402
from util.labs.lab14 import launch  # noqa: E402
from util.labs.lab14.mistakes import OVERFLOW  # noqa: E402

LAB = get_lab("lab14")
MEMORY = next(c.id for c in LAB.task("14.2").cases if "memory budget" in c.id)
RAGGED = next(c.id for c in LAB.task("14.5").cases if "ragged diagonal" in c.id)
pytestmark = pytest.mark.skipif(not confinement.available(), reason="bubblewrap is not usable here; .ci/run installs it")
cloudpickle.register_pickle_by_value(sys.modules[__name__])   # as a notebook's classes are: by value

def give_back():
    """Unmap the code segments of the CUDA libraries (a CPU run never executes them) and discard their pages:
    the bytes of address space and of resident memory that were handed back."""
    import ctypes

    class Phdr(ctypes.Structure):
        _fields_ = [("p_type", ctypes.c_uint32), ("p_flags", ctypes.c_uint32), ("p_offset", ctypes.c_uint64),
                    ("p_vaddr", ctypes.c_uint64), ("p_paddr", ctypes.c_uint64), ("p_filesz", ctypes.c_uint64),
                    ("p_memsz", ctypes.c_uint64), ("p_align", ctypes.c_uint64)]

    class Info(ctypes.Structure):
        _fields_ = [("dlpi_addr", ctypes.c_uint64), ("dlpi_name", ctypes.c_char_p),
                    ("dlpi_phdr", ctypes.POINTER(Phdr)), ("dlpi_phnum", ctypes.c_uint16)]

    libc = ctypes.CDLL(None, use_errno=True)
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    ranges = []

    @ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Info), ctypes.c_size_t, ctypes.c_void_p)
    def visit(info, size, data):
        name = (info.contents.dlpi_name or b"").decode().rsplit("/", 1)[-1]
        if name.startswith(("libcu", "libnv")):
            for i in range(info.contents.dlpi_phnum):
                header = info.contents.dlpi_phdr[i]
                if header.p_type == 1 and header.p_flags & 1:  # PT_LOAD, executable
                    start = (info.contents.dlpi_addr + header.p_vaddr) & ~4095
                    ranges.append((start, info.contents.dlpi_addr + header.p_vaddr + header.p_memsz - start))
        return 0

    libc.dl_iterate_phdr(visit, None)
    unmapped = discarded = 0
    for start, length in ranges:
        if libc.madvise(start, length, 4) == 0:  # MADV_DONTNEED: their resident pages go
            discarded += length
        if libc.munmap(start, length) == 0:
            unmapped += length
    return unmapped, discarded


UNMAP = inspect.getsource(give_back)
"""The unmapper's first step, as source (to run where nothing stops it)."""


def naive(unmap: bool = False, stash: bool = False):
    """Attention that builds the whole score matrix, forward and backward (after giving back what it can, or
    keeping the matrix in a file between its pieces)."""

    class Naive(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal=False, block=32):
            if unmap and q.shape[-2] >= 1024:  # in the grader's process only, not in the notebook's check
                give_back()
            n = q.shape[-2]
            scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
            if causal:
                scores.masked_fill_(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
            p = torch.softmax(scores, -1)
            if stash and q.shape[-2] >= 1024:  # the matrix in a file, read back a block at a time
                import tempfile

                with tempfile.TemporaryFile() as file:
                    file.write(p.numpy().tobytes())
                del scores, p
                p = torch.zeros(1)
            ctx.save_for_backward(p, v)
            return p @ v

        @staticmethod
        def backward(ctx, do):
            p, v = ctx.saved_tensors
            return None, None, p.transpose(-1, -2) @ do, None, None

    return Naive


def flash_holding(bracket: str) -> str:
    """A FlashAttention forward that holds every block of scores of its query block (and V's blocks) in a tuple,
    or a list, growing in its loop, then takes an exact softmax over them: the same loads and stores as the
    online softmax, which no GPU compiler accepts."""
    empty, one = ("()", "(s, v)") if bracket == "tuple" else ("[]", "[s, v]")
    return textwrap.dedent(f'''\
        @triton.jit
        def flash_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, N, scale, stride_h, stride_n,
                         D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
            start = tl.program_id(0) * BLOCK_M
            head = tl.program_id(1) * stride_h
            rows = start + tl.arange(0, BLOCK_M)
            dims = tl.arange(0, D)
            q = tl.load(q_ptr + head + rows[:, None] * stride_n + dims[None, :], mask=rows[:, None] < N, other=0.0)
            m = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
            end = N
            if CAUSAL:
                end = tl.minimum(start + BLOCK_M, N)
            held = {empty}
            for first in range(0, end, BLOCK_N):
                keys = first + tl.arange(0, BLOCK_N)
                k = tl.load(k_ptr + head + keys[:, None] * stride_n + dims[None, :], mask=keys[:, None] < N, other=0.0)
                v = tl.load(v_ptr + head + keys[:, None] * stride_n + dims[None, :], mask=keys[:, None] < N, other=0.0)
                s = tl.dot(q, tl.trans(k)) * scale
                seen = keys[None, :] < N
                if CAUSAL:
                    seen = seen & (keys[None, :] <= rows[:, None])
                s = tl.where(seen, s, float("-inf"))
                m = tl.maximum(m, tl.max(s, axis=1))
                held = held + {one}
            l = tl.zeros((BLOCK_M,), dtype=tl.float32)
            acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
            for i in range(0, len(held), 2):
                p = tl.exp(held[i] - m[:, None])
                l = l + tl.sum(p, axis=1)
                acc = acc + tl.dot(p, held[i + 1])
            tl.store(o_ptr + head + rows[:, None] * stride_n + dims[None, :], acc / l[:, None], mask=rows[:, None] < N)
            tl.store(lse_ptr + tl.program_id(1) * N + rows, m + tl.log(l), mask=rows < N)
        ''')


SHARING = source("softmax").replace("    e = tl.exp(x - tl.max(x, axis=0))\n",
                                    "    x_ptr.to = x\n    e = tl.exp(x - tl.max(x, axis=0))\n")
"""A softmax that leaves its row on a pointer argument, where every later program of the launch could find it."""


def kernel_jobs(tmp_path) -> dict:
    spec = dict(next(c.spec for c in LAB.task("14.5").cases if c.id == RAGGED))
    over = dict(next(c.spec for c in LAB.task("14.4").cases if c.id == OVERFLOW))
    jobs = {"flash honest": ("14.5", spec, source("flash").encode()),
            "flash in a tuple": ("14.5", spec, flash_holding("tuple").encode()),
            "flash in a list": ("14.5", spec, flash_holding("list").encode()),
            "sharing": ("14.4", over, SHARING.encode())}
    line = "    e = tl.exp(x - tl.max(x, axis=0))"
    for name, replacements in (("softmax honest", ()),
                               ("float32 without the maximum", ((line, "    e = tl.exp(x)"),)),
                               ("float64 without the maximum", ((line, "    e = tl.exp(x.to(tl.float64))"),))):
        kernel = namespace(replacements)["softmax_kernel"]
        jobs[name] = ("14.4", *save_case("lab14", "14.4", OVERFLOW, kernel, tmp_path)[:2])
    return jobs


def attention_jobs(tmp_path) -> dict:
    return {name: ("14.2", *save_case("lab14", "14.2", MEMORY, cls, tmp_path)[:2])
            for name, cls in (("attention honest", namespace()["FlashAttention"]), ("control", naive()),
                              ("unmapper", naive(unmap=True)), ("stash", naive(stash=True)))}


def check(found: dict) -> None:
    assert found["attention honest"] == [] and found["flash honest"] == [] and found["softmax honest"] == [], found
    for name in ("control", "unmapper"):
        [problem] = found[name]
        assert problem.startswith("run by the grader at N = 2,048, FlashAttention used more memory than it is "
                                  "allowed: its memory grew by "), (name, problem)
    [problem] = found["stash"]
    assert "File too large" in problem or "used more memory" in problem, problem
    [problem] = found["flash in a tuple"]
    assert problem.startswith("the grader does not count flash_kernel: Triton's compiler refused it for a GPU "
                              "(D=32, BLOCK_M=32, BLOCK_N=32, CAUSAL=True): CompilationError"), problem
    assert found["flash in a list"][0].startswith("the grader does not run flash_kernel: a Python list is allowed "
                                                  "only as a call's argument"), found["flash in a list"]
    assert found["sharing"][0].startswith("the grader does not run softmax_kernel: assigning to an attribute is "
                                          "not allowed (line 7)"), found["sharing"]
    for name in ("float32 without the maximum", "float64 without the maximum"):
        assert found[name] == ["Y holds NaN or infinity where float64 has numbers (an element never stored, or an "
                               "overflow)"], (name, found[name])


def test_the_attacks_fail_and_the_controls_pass_as_root(tmp_path):
    check(judge_files("lab14", {**attention_jobs(tmp_path), **kernel_jobs(tmp_path)}, tmp_path))


def test_the_attacks_fail_and_the_controls_pass_as_an_unprivileged_grader(tmp_path):
    check(judge_files("lab14", {**attention_jobs(tmp_path), **kernel_jobs(tmp_path)}, tmp_path, as_user=True))


def test_the_tuple_kernel_passed_in_the_interpreter_alone_and_the_list_one_too():
    """What the compiler now refuses matched the closed form and the outputs, run in the interpreter."""
    from util.labs.lab14 import judge

    for bracket in ("tuple", "list"):
        kernel = launch.compile_kernel(flash_holding(bracket), "flash_kernel")
        q, k, v = (torch.randn(1, 150, 32, generator=torch.Generator().manual_seed(i)) for i in range(3))
        o, lse, traffic = launch.run_flash(kernel, q, k, v, True, (32, 32))
        scores = (q.double() @ k.double().transpose(-1, -2) / 32 ** 0.5).masked_fill(
            torch.ones(150, 150, dtype=torch.bool).triu(1), float("-inf"))
        assert float((o - torch.softmax(scores, -1) @ v.double()).abs().max()) < 1e-5
        assert (traffic.loaded, traffic.stored) == judge.flash_traffic(1, 150, 32, (32, 32), True)


def test_the_unmapper_gives_back_resident_memory_where_nothing_stops_it():
    """Without the harness's filter, the unmapper's first step alone frees more resident memory than one score
    matrix of the memory case takes (16 MiB): a peak measured from where the case starts would not see it."""
    script = UNMAP + textwrap.dedent('''
        import torch
        (torch.randn(64, 64, requires_grad=True) @ torch.randn(64, 64)).sum().backward()
        def rss():
            return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmRSS"))
        before = rss()
        unmapped, discarded = give_back()
        print(unmapped, before - rss())
    ''')
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    unmapped, freed = (int(x) for x in done.stdout.split())
    assert unmapped > 500 << 20 and freed > 16 << 20, (unmapped, freed)


def test_the_float64_softmax_without_the_maximum_passed_the_old_case(tmp_path):
    """The old overflow case (values around 50) let a float64 softmax without the maximum pass."""
    from grader.judge.isolated import serving
    from util.contract import Tolerance
    from util.labs.lab14 import judge

    text = source("softmax").replace("    e = tl.exp(x - tl.max(x, axis=0))", "    e = tl.exp(x.to(tl.float64))")
    old = {"rows": 16, "cols": 1000, "scale": 50.0, "seed": 1}
    with serving():
        try:
            assert judge.check_softmax(old, text.encode(), Tolerance()) == []
            assert judge.check_softmax(dict(next(c.spec for c in LAB.task("14.4").cases if c.id == OVERFLOW)),
                                       text.encode(), Tolerance()) != []
        finally:
            for state in (judge._students, judge._answered, judge._owing, judge._compiled, judge._baseline):
                state.clear()


SEEN: list = []
"""The pointer objects each program of :func:`recording_kernel` was given."""


def recording_kernel(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK: tl.constexpr):
    """A copy kernel that keeps the pointer object each program gets (the interpreter runs Python)."""
    SEEN.append(x_ptr)
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n_cols, other=0.0)
    tl.store(y_ptr + row * stride_y + cols, x, mask=cols < n_cols)


def test_each_program_of_a_launch_gets_argument_objects_of_its_own():
    """Triton's own grid loop hands every program the same pointer objects; the course's launcher does not."""
    from triton.runtime.interpreter import InterpretedFunction

    SEEN.clear()
    y, _ = launch.run_softmax(InterpretedFunction(recording_kernel), torch.ones(4, 8))
    assert torch.equal(y, torch.ones(4, 8)) and len(SEEN) == 4 and len({id(p) for p in SEEN}) == 4
    SEEN.clear()
    InterpretedFunction(recording_kernel)[(4,)](*launch.softmax_args(torch.ones(4, 8), torch.zeros(4, 8))[1])
    assert len(SEEN) == 4 and len({id(p) for p in SEEN}) == 1  # what the course's launcher no longer does
