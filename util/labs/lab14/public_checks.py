"""Lab 14's public checks (``check("14.3")``): the notebook's hand-counted examples and its stated rules, never a
hidden case's input. ``CHECKS[task id]`` is attached to each task in ``tasks.py``. The kernel checks run the
kernel in Triton's interpreter through the course's launchers, on inputs small enough to count by hand.
"""
from __future__ import annotations

import inspect
import math
from typing import Any

from util.checks import equal, first, has_keys
from util.contract import Check
from util.labs.lab14.machines import TOY

TOY_PLAN = {"block": [64, 64, 16], "bytes": 49152, "flops": 524288, "seconds": 4.9152e-05, "bound": "memory"}
"""``plan_matmul(64, 64, 64, TOY)``, worked out in the notebook."""
CLOSE = 1e-5
"""Kernel outputs against float64 (relative to the largest element), as the grader checks them."""


def _relative(found, expected) -> float:
    import torch

    if tuple(found.shape) != tuple(expected.shape) or not torch.isfinite(found).all():
        return math.inf
    return float((found.double() - expected.double()).abs().max() / (expected.abs().max() or 1.0))


def _costs(causal: bool, expected: dict):
    def test(fn) -> str | None:
        found = fn(4, 2, 1, 2, causal)
        return first(has_keys(found, list(expected), "attention_costs(4, 2, 1, 2, ...)"),
                     equal(dict(found), expected, f"attention_costs(4, 2, 1, 2, {causal})"))
    return test


def _attention64(q, k, v, do, causal: bool):
    import torch

    q, k, v = (t.double().requires_grad_() for t in (q, k, v))
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    out = torch.softmax(scores, -1) @ v
    out.backward(do.double())
    return out.detach(), q.grad, k.grad, v.grad


def _tiled(causal: bool):
    def test(cls) -> str | None:
        import torch

        cls = inspect.unwrap(cls)  # the class itself: check() hands a check a wrapper of it
        generator = torch.Generator().manual_seed(1)
        q, k, v, do = (torch.randn(1, 10, 4, generator=generator) for _ in range(4))
        mine = [t.clone().requires_grad_() for t in (q, k, v)]
        out = cls.apply(*mine, causal, 4)
        out.backward(do)
        found = [out.detach(), *(t.grad for t in mine)]
        for name, f, e in zip(("O", "dQ", "dK", "dV"), found, _attention64(q, k, v, do, causal)):
            if f is None:
                return f"{name} is None: backward must return the gradients of q, k and v"
            error = _relative(f, e)
            if not error <= 1e-4:
                return f"{name} differs from float64 autograd by {error:.2g} of its largest element (at most 1e-4)"
        return None
    return test


def _rules(name: str, kind: str):
    def test(kernel) -> str | None:
        from util.labs.lab14 import launch
        from util.labs.lab14.rules import kernel_problems, kernel_source

        parameters = {"matmul": launch.MATMUL_PARAMETERS, "softmax": launch.SOFTMAX_PARAMETERS,
                      "flash": launch.FLASH_PARAMETERS, "backward": launch.FLASH_BACKWARD_PARAMETERS}[kind]
        problems = kernel_problems(kernel_source(inspect.unwrap(kernel)), name, parameters)
        return "; ".join(problems[:3]) if problems else None
    return test


def _traffic(found, loaded: dict, stored: dict) -> str | None:
    return first(equal(dict(found.loaded), loaded, "bytes loaded"), equal(dict(found.stored), stored, "bytes stored"))


def _ragged_matmul(kernel) -> str | None:
    import torch

    from util.labs.lab14.launch import run_matmul

    generator = torch.Generator().manual_seed(2)
    a, b = torch.randn(100, 90, generator=generator), torch.randn(90, 72, generator=generator)
    c, traffic = run_matmul(inspect.unwrap(kernel), a, b, (32, 32, 32))
    error = _relative(c, a.double() @ b.double())
    if not error <= CLOSE:
        return f"C differs from float64 by {error:.2g} of its largest element (at most {CLOSE:g})"
    return _traffic(traffic, {"a": 108_000, "b": 103_680, "c": 0}, {"a": 0, "b": 0, "c": 28_800})


def _small_softmax(kernel) -> str | None:
    import torch

    from util.labs.lab14.launch import run_softmax

    x = torch.tensor([[1000.0, 999.0, 998.0, 0.0, -5.0], [1.0, 2.0, 3.0, 4.0, 5.0], [-1e3, -1e3, 0.0, 7.0, 7.0]])
    y, traffic = run_softmax(inspect.unwrap(kernel), x)
    error = _relative(y, torch.softmax(x.double(), -1))
    if not error <= CLOSE:
        return f"the softmax differs from float64 by {error:.2g} (NaN: did the row's maximum come off before exp?)"
    return _traffic(traffic, {"x": 60, "y": 0}, {"x": 0, "y": 60})


def _small_flash(kernel) -> str | None:
    import torch

    from util.labs.lab14.launch import run_flash

    generator = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 40, 16, generator=generator) for _ in range(3))
    for causal, kv in ((False, 7_680), (True, 5_632)):
        o, lse, traffic = run_flash(inspect.unwrap(kernel), q, k, v, causal, (16, 16))
        scores = q.double() @ k.double().transpose(-1, -2) / 4
        if causal:
            scores = scores.masked_fill(torch.ones(40, 40, dtype=torch.bool).triu(1), float("-inf"))
        for name, found, expected in (("O", o, torch.softmax(scores, -1) @ v.double()),
                                      ("L", lse, torch.logsumexp(scores, -1))):
            error = _relative(found, expected)
            if not error <= CLOSE:
                return f"{'causal' if causal else 'full'} attention: {name} differs from float64 by {error:.2g}"
        problem = _traffic(traffic, {"q": 2_560, "k": kv, "v": kv, "o": 0, "lse": 0},
                           {"q": 0, "k": 0, "v": 0, "o": 2_560, "lse": 160})
        if problem:
            return f"{'causal' if causal else 'full'} attention: {problem}"
    return None


SMALL_BACKWARD = {
    False: ({"q": 10_240, "k": 7_680, "v": 7_680, "o": 10_240, "do": 10_240, "lse": 640, "dq": 0, "dk": 0, "dv": 0},
            {"q": 0, "k": 0, "v": 0, "o": 0, "do": 0, "lse": 0, "dq": 2_560, "dk": 2_560, "dv": 2_560}),
    True: ({"q": 8_192, "k": 7_168, "v": 7_168, "o": 8_192, "do": 8_192, "lse": 512, "dq": 0, "dk": 0, "dv": 0},
           {"q": 0, "k": 0, "v": 0, "o": 0, "do": 0, "lse": 0, "dq": 2_560, "dk": 2_560, "dv": 2_560}),
}
"""Causal -> the bytes loaded and stored per tensor by the backward on one head of 40 x 16 in query blocks of 32
and key blocks of 16, counted by hand in the notebook (task 14.8)."""


def _small_backward(kernel) -> str | None:
    import torch

    from util.labs.lab14.launch import run_flash_backward

    generator = torch.Generator().manual_seed(4)
    q, k, v, do = (torch.randn(1, 40, 16, generator=generator) for _ in range(4))
    for causal in (False, True):
        expected = _attention64(q, k, v, do, causal)
        scores = q.double() @ k.double().transpose(-1, -2) / 4
        if causal:
            scores = scores.masked_fill(torch.ones(40, 40, dtype=torch.bool).triu(1), float("-inf"))
        o, lse = expected[0].float(), torch.logsumexp(scores, -1).float()
        dq, dk, dv, traffic = run_flash_backward(inspect.unwrap(kernel), q, k, v, o, lse, do, causal, (32, 16))
        for name, found, wanted in zip(("dQ", "dK", "dV"), (dq, dk, dv), expected[1:]):
            error = _relative(found, wanted)
            if not error <= CLOSE:
                return f"{'causal' if causal else 'full'} attention: {name} differs from float64 autograd by {error:.2g}"
        problem = _traffic(traffic, *SMALL_BACKWARD[causal])
        if problem:
            return f"{'causal' if causal else 'full'} attention: {problem}"
    return None


def _backward_answer(answer: Any) -> str | None:
    problem = has_keys(answer, ["loaded_bytes", "causal_loaded_bytes", "stored_bytes", "correct", "causal_correct"])
    if problem:
        return problem
    full, causal = list(answer["loaded_bytes"]), list(answer["causal_loaded_bytes"])
    return first(equal(answer["stored_bytes"], 98_304, "stored_bytes"), equal(answer["correct"], True, "correct"),
                 equal(answer["causal_correct"], True, "causal_correct"),
                 None if len(full) == len(causal) == 3 and all(c <= f for c, f in zip(causal, full))
                 and all(c < f for c, f in zip(causal[1:], full[1:])) else
                 f"causal_loaded_bytes {causal} is not below loaded_bytes {full} wherever N holds more than one "
                 "block (128 and 256)")


def _toy_plan(fn) -> str | None:
    found = fn(64, 64, 64, dict(TOY))
    problem = has_keys(found, list(TOY_PLAN), "plan_matmul(64, 64, 64, TOY)")
    if problem:
        return problem
    found = dict(found, block=list(found["block"]))
    if isinstance(found["seconds"], float) and math.isclose(found["seconds"], TOY_PLAN["seconds"], rel_tol=1e-9):
        found["seconds"] = TOY_PLAN["seconds"]
    return equal(found, TOY_PLAN, "plan_matmul(64, 64, 64, TOY)")


def _plan_consistent(answer: Any) -> str | None:
    from util.labs.lab14.machines import H100

    problem = has_keys(answer, ["block", "bytes", "flops", "seconds", "bound"])
    if problem:
        return problem
    compute, memory = answer["flops"] / H100["flops"], answer["bytes"] / H100["bandwidth"]
    if not math.isclose(answer["seconds"], max(compute, memory), rel_tol=1e-9):
        return f"seconds is {answer['seconds']:.4g}; the roofline gives max(flops / 495e12, bytes / 3.35e12) = " \
               f"{max(compute, memory):.4g}"
    bound = "memory" if memory > compute else "compute"
    return equal(answer["bound"], bound, "bound")


HAND_OCCUPANCY = (
    ((128, 48 * 1024, 8), {"blocks": 2, "warps": 16, "limited_by": ["registers"]}),
    ((84, 16 * 1024, 4), {"blocks": 5, "warps": 20, "limited_by": ["registers"]}),
    ((90, 100 * 1024, 4), {"blocks": 2, "warps": 8, "limited_by": ["shared"]}),
    ((64, 230 * 1024, 4), {"blocks": 0, "warps": 0, "limited_by": ["shared"]}),
)
"""``occupancy(registers, shared, num_warps)`` worked out by hand in the notebook (task 14.7)."""


def _hand_occupancy(fn) -> str | None:
    for arguments, expected in HAND_OCCUPANCY:
        found = fn(*arguments)
        what = f"occupancy{arguments}"
        problem = has_keys(found, list(expected), what)
        if problem:
            return problem
        found = dict(found, limited_by=sorted(found["limited_by"]) if isinstance(found["limited_by"], (list, tuple))
                     else found["limited_by"])
        problem = equal(found, expected, what)
        if problem:
            return problem
    return None


def _public_table() -> list:
    from util.labs.lab14.compiled import load

    return load()


def _shared_as_compiled(answer: Any) -> str | None:
    from util.labs.lab14.compiled import config_name

    rows = _public_table()
    problem = has_keys(answer, ["shared", "blocks", "warps", "limited_by"])
    if problem:
        return problem
    if len(answer["shared"]) != len(rows):
        return f"shared has {len(answer['shared'])} entries; PUBLIC_CONFIGS has {len(rows)} configurations"
    for found, row in zip(answer["shared"], rows):
        if found != row["compiled"]["shared"]:
            return (f"for {config_name(row['config'])} you predict {found:,} bytes of shared memory; the compiler "
                    f"asked for {row['compiled']['shared']:,}")
    return None


def _warps_are_blocks(answer: Any) -> str | None:
    rows = _public_table()
    for blocks, warps, row in zip(answer["blocks"], answer["warps"], rows):
        if warps != blocks * row["config"]["num_warps"]:
            return f"{warps} warps for {blocks} blocks of {row['config']['num_warps']} warps"
    return None



def _row(block, stages: int, warps: int, registers: int, spills: int, shared: int) -> dict:
    return {"config": {"block": list(block), "dtype": "fp16", "num_stages": stages, "num_warps": warps},
            "compiled": {"registers": registers, "spills": spills, "shared": shared}}


HAND_LAUNCH = (
    (_row((128, 128, 64), 3, 8, 107, 0, 98304), 2_181_038_080 / 3.35e12),
    (_row((128, 256, 32), 3, 8, 172, 0, 73728), 1_644_167_168 / 3.35e12 * 2),
    (_row((64, 64, 32), 3, 4, 64, 0, 24576), 4_328_521_728 / 3.35e12),
    (_row((128, 256, 64), 2, 4, 255, 1844, 98304), None),
    (_row((128, 128, 64), 4, 8, 96, 0, 240 * 1024), None),
)
"""``launch_seconds(4096, 4096, 4096, config, compiled, H100_FP16)`` worked out by hand in the notebook (task
14.9): 16 warps (full throughput), 8 warps (half), 32 warps, a candidate that spills, one over 227 KiB."""


def _hand_launch(fn) -> str | None:
    from util.labs.lab14.machines import H100_FP16

    seconds = (getattr(inspect.unwrap(fn), "__globals__", {}) or {}).get("launch_seconds")  # check() wraps fn
    if not callable(seconds):
        return "the notebook defines no launch_seconds() next to choose_launch(); keep the names the notebook gives"
    for row, expected in HAND_LAUNCH:
        found = seconds(4096, 4096, 4096, dict(row["config"]), dict(row["compiled"]), dict(H100_FP16))
        what = f"launch_seconds(4096, 4096, 4096, {row['config']}, {row['compiled']}, H100_FP16)"
        if expected is None:
            if found is not None:
                return f"{what} is {found!r}; a candidate that spills or fits no SM is excluded: None"
        elif found is None or not isinstance(found, (int, float)) or not math.isclose(found, expected, rel_tol=1e-9):
            return f"{what} is {found!r}; the notebook works it out as {expected:.6g} s"
    return None


def _chooser_rules(fn) -> str | None:
    """Ties go to the first candidate, the excluded are None and never chosen, the answer is the chosen row's."""
    from util.labs.lab14.machines import H100_FP16

    rows = [_row((128, 128, 64), 4, 8, 105, 0, 131072), _row((256, 256, 32), 3, 8, 255, 1732, 98304),
            _row((128, 128, 64), 2, 8, 108, 0, 65536), _row((128, 128, 64), 1, 8, 124, 0, 32768)]
    found = fn(4096, 4096, 4096, [dict(r) for r in rows], dict(H100_FP16))
    problem = has_keys(found, ["config", "seconds", "times"], "choose_launch(...)")
    if problem:
        return problem
    times = found["times"]
    if not isinstance(times, (list, tuple)) or len(times) != 4:
        return "times must hold one entry per candidate, in order"
    if times[1] is not None:
        return "the 256 x 256 x 32 candidate spills 1,732 bytes: its time must be None and it is never chosen"
    if found["config"] != rows[2]["config"]:
        return (f"chose {found['config']}; the 2-stage and 1-stage 128 x 128 x 64 tie (16 warps each, the same "
                "bytes), and a tie goes to the candidate listed first")
    if found["seconds"] != times[2]:
        return "seconds must be the chosen candidate's entry of times"
    return None


def _launch_answer(answer: Any) -> str | None:
    from util.labs.lab14.choice import PUBLIC_CANDIDATES

    problem = has_keys(answer, ["config", "seconds", "times"])
    if problem:
        return problem
    if len(answer["times"]) != len(PUBLIC_CANDIDATES):
        return f"times has {len(answer['times'])} entries; the notebook has {len(PUBLIC_CANDIDATES)} candidates"
    spilling = [i for i, c in enumerate(PUBLIC_CANDIDATES) if c["block"][1] == 256 and c["block"][2] == 64]
    if any(answer["times"][i] is not None for i in spilling):
        return "the two candidates that spill (128 x 256 x 64 at 4 warps, 256 x 256 x 64) must be None"
    allowed = [t for t in answer["times"] if t is not None]
    if not allowed or answer["seconds"] != min(allowed):
        return "seconds must be the least of the candidates' times"
    return None


CHECKS: dict[str, tuple[Check, ...]] = {
    "14.1": (
        Check("attention_costs(4, 2, 1, 2, False) as counted by hand in the notebook",
              _costs(False, {"scores_bytes": 64, "naive_bytes": 384, "flash_bytes": 208, "naive_flops": 128,
                             "flash_flops": 128}),
              "the table of task 14.1: naive traffic 4(4Nd + 4N^2) per head; FlashAttention reads Q once and K, V once "
              "per query block", calls_function=True),
        Check("attention_costs(4, 2, 1, 2, True): causal, by hand",
              _costs(True, {"scores_bytes": 64, "naive_bytes": 384, "flash_bytes": 176, "naive_flops": 128,
                            "flash_flops": 96}),
              "a causal query block i visits key rows 0 .. min((i + 1) B, N) - 1 only; the naive form computes "
              "everything and masks", calls_function=True),
        Check("the fused form moves fewer bytes and no more FLOPs",
              lambda a: None if a["flash_bytes"] < a["naive_bytes"] and a["flash_flops"] <= a["naive_flops"] else
              f"flash_bytes {a['flash_bytes']:,} vs naive_bytes {a['naive_bytes']:,}; flash_flops {a['flash_flops']:,} "
              f"vs naive_flops {a['naive_flops']:,}",
              "FlashAttention never writes the scores; a causal one skips the tiles above the diagonal"),
    ),
    "14.2": (
        Check("FlashAttention matches float64 autograd on 10 queries in blocks of 4", _tiled(False),
              "the last block holds 2 rows: slice with q[..., i:i + block, :], which stops at N", calls_function=True),
        Check("causal FlashAttention matches float64 autograd on 10 queries in blocks of 4", _tiled(True),
              "query i sees keys j <= i: mask j > i with -inf before the exponential, and skip key blocks past the "
              "query block", calls_function=True),
        Check("the answer's errors are within the stated 1e-4",
              lambda a: next((f"{k} is {a[k]:.2g}" for k in ("o_error", "dq_error", "dk_error", "dv_error")
                              if not a[k] <= 1e-4), None),
              "float32 tiles land near 1e-7 of the largest element; far more means a wrong recurrence"),
    ),
    "14.3": (
        Check("matmul_kernel is written in Triton's language alone (help(kernel_problems))",
              _rules("matmul_kernel", "matmul"), "the rules of graded kernels, in the Conventions", calls_function=True),
        Check("a ragged 100 x 90 by 90 x 72 product in tiles of 32: correct, and A 108,000 B, B 103,680 B, C 28,800 B",
              _ragged_matmul, "mask every load and the store at the edges: rows < M, columns < N, ks < K",
              calls_function=True),
        Check("the answer: C stored once (65,536 bytes), correct, and less traffic as the square tile grows",
              lambda a: first(equal(a["stored_bytes"], 65_536, "stored_bytes"), equal(a["correct"], True, "correct"),
                              None if a["loaded_bytes"][0] > a["loaded_bytes"][1] > a["loaded_bytes"][2] else
                              f"loaded_bytes {a['loaded_bytes']} does not fall as the tile grows from 32 to 128"),
              "traffic 4(MK cdiv(N, BN) + KN cdiv(M, BM))"),
    ),
    "14.4": (
        Check("softmax_kernel is written in Triton's language alone (help(kernel_problems))",
              _rules("softmax_kernel", "softmax"), "the rules of graded kernels, in the Conventions",
              calls_function=True),
        Check("3 rows of 5 with values up to 1000: correct, 60 bytes read and 60 written",
              _small_softmax, "subtract the row's maximum before tl.exp; fill masked lanes with -inf; load once",
              calls_function=True),
        Check("the answer: one read and one write of 64 x 1000 floats (256,000 bytes each), correct",
              lambda a: first(equal(a["loaded_bytes"], 256_000, "loaded_bytes"),
                              equal(a["stored_bytes"], 256_000, "stored_bytes"), equal(a["correct"], True, "correct")),
              "keep the row in registers between the max, the sum and the division"),
    ),
    "14.5": (
        Check("flash_kernel is written in Triton's language alone (help(kernel_problems))",
              _rules("flash_kernel", "flash"), "the rules of graded kernels, in the Conventions", calls_function=True),
        Check("1 head of 40 x 16 in blocks of 16, full and causal: O and L correct, Q 2,560 B, K and V 7,680 B "
              "(causal 5,632 B), O 2,560 B, L 160 B", _small_flash,
              "rescale the accumulator and l by exp(m_old - m_new) at every key block; load Q once, before the loop",
              calls_function=True),
        Check("the answer: O and L stored once (25,344 bytes), both correct, less traffic as the block grows",
              lambda a: first(equal(a["stored_bytes"], 25_344, "stored_bytes"), equal(a["correct"], True, "correct"),
                              equal(a["causal_correct"], True, "causal_correct"),
                              None if a["loaded_bytes"][0] > a["loaded_bytes"][1] > a["loaded_bytes"][2] else
                              f"loaded_bytes {a['loaded_bytes']} does not fall as the block grows"),
              "K and V are read once per query block: cdiv(N, BLOCK_M) times"),
    ),
    "14.6": (
        Check("plan_matmul(64, 64, 64, TOY) as worked out in the notebook", _toy_plan,
              "least traffic first, then the smallest on-chip footprint 4(BM BK + BK BN + BM BN), then the smallest "
              "BLOCK_M, then BLOCK_N", calls_function=True),
        Check("the answer's seconds and bound follow the roofline on the H100-like machine", _plan_consistent,
              "seconds = max(flops / flops per second, bytes / bandwidth); memory-bound when the second is larger"),
    ),
    "14.7": (
        Check("occupancy of the four configurations worked out by hand in the notebook", _hand_occupancy,
              "each limit is a whole number of blocks (round down); a warp's registers are r x 32 rounded up to a "
              "multiple of 256; every block also takes the 1 KiB CUDA reserves; a block over 227 KiB fits nowhere",
              calls_function=True),
        Check("the answer's shared memory is the compiler's figure on every configuration of the table",
              _shared_as_compiled, "the pipeline keeps num_stages tiles of A and of B at once: num_stages x "
              "(BLOCK_M BLOCK_K + BLOCK_K BLOCK_N) x bytes an element"),
        Check("the answer's warps are its blocks times num_warps", _warps_are_blocks,
              "an SM holds whole blocks: warps = blocks x num_warps"),
    ),
    "14.8": (
        Check("flash_backward_kernel is written in Triton's language alone (help(kernel_problems))",
              _rules("flash_backward_kernel", "backward"), "the rules of graded kernels, in the Conventions",
              calls_function=True),
        Check("1 head of 40 x 16, query blocks of 32 and key blocks of 16, full and causal: dQ, dK, dV correct and "
              "the bytes per tensor counted by hand", _small_backward,
              "a key-block program reads its K and V once and, per query block it visits, Q, dO, O and L; causal, it "
              "starts at the query block holding its first key; a query-block program stops at its diagonal",
              calls_function=True),
        Check("the answer: dQ, dK, dV stored once at N = 256 (98,304 bytes), correct, less traffic when causal "
              "once N holds more than one block",
              _backward_answer, "the causal backward skips the blocks above the diagonal in both kinds of program"),
    ),
    "14.9": (
        Check("launch_seconds of the five candidates worked out by hand in the notebook", _hand_launch,
              "bytes: 2 (M K cdiv(N, BN) + K N cdiv(M, BM) + M N); seconds: the roofline's max(FLOPs / flops, bytes / "
              "bandwidth) x 16 / min(16, warps); None when the compiler spilled or no block fits an SM",
              calls_function=True),
        Check("choose_launch: an excluded candidate is None and never chosen, a tie goes to the first listed",
              _chooser_rules, "compare with <, not <=, walking the candidates in order", calls_function=True),
        Check("the answer: the spilling candidates excluded, seconds the least time", _launch_answer,
              "exclude on the compiler's spills, not on its registers: a tile that spills reports 255"),
    ),
}
