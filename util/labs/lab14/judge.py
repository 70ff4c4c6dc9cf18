"""Lab 14's grader-side checks (``Task.grader_check``): every verdict decided here, on inputs drawn here, by the
grader's own float64 references and closed forms; the student's code runs only in student processes.

* 14.2 :func:`check_attention`: the saved ``FlashAttention`` class runs forward and backward in a student process
  (:func:`util.labs.lab14.harness.serve_attention`) that may start no process, write no file and open few
  descriptors, on q, k, v, dO drawn here; the grader measures the process's peak resident memory from outside
  (restarted before each case where it may: a root grader), and the peak may grow by at most
  :data:`ATTENTION_BYTES` while the class is unpickled and run, less than one score matrix of the largest case.
  O, dQ, dK, dV are compared with float64 autograd computed here (query block by query block, so the reference
  never holds the whole score matrix either).
* 14.3 to 14.5 :func:`check_matmul`, :func:`check_softmax`, :func:`check_flash`: the saved kernel source is read
  (:func:`util.labs.lab14.rules.kernel_problems`: nothing else of Python's), compiled by Triton's own compiler
  for the stated GPU as the counted launch calls it (:func:`util.labs.lab14.harness.serve_compiler`; once per
  kernel and constexprs in a grading), then run in a student process that never runs anything else of the
  student's (:func:`util.labs.lab14.harness.serve_kernels`), where the course's counter was installed before the
  kernel was made and the course's launcher chooses grid and arguments (each program its own); the outputs are
  compared with float64 computed here, and the bytes loaded and stored per tensor with the closed forms here
  (:func:`matmul_traffic`, :func:`softmax_traffic`, :func:`flash_traffic`), exactly.
* 14.8 :func:`check_backward` (release 5): the FlashAttention backward kernel, judged as 14.3 to 14.5 are (the
  rules, the compiler, the interpreter with the course's counter), on q, k, v, dO drawn here and O, L computed
  here; dQ, dK, dV against float64 autograd, the traffic against :func:`backward_traffic`.

Inputs: drawn from the grading secret (:mod:`util.judging.secret`) and the case's spec, so nothing the notebook
or a student process holds can compute them, and a submission graded twice is judged on two draws. A student
process receives the student's code first and only then the values of the case, never its spec. One student
process of each kind serves every case of a notebook (all start at the first case, so their imports overlap);
one that dies or overruns is replaced for the next.
"""
from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Mapping

from util.contract import Tolerance
from util.judging import secret
from util.labs.lab14 import gpu

ATTENTION_BYTES = 12 << 20
"""How far the student process's peak resident memory may rise above what it held when it was ready (before any
student code ran), through every case so far: unpickling and running the student's attention, the inputs it
receives (1 MiB at N = 2,048) and the outputs it sends (1 MiB) included. A 2,048 x 2,048 float32 score matrix
alone needs 16 MiB; the course's solution reaches about 8 MiB at the largest case (its harness's copies, a block
of scores, the gradients)."""
KERNEL_RTOL = 1e-5
"""Kernel outputs against float64: max |yours - float64| / max |float64| (measured: at most 5e-7)."""
START_SECONDS = 120.0
"""How long a student process may take to import PyTorch and Triton and answer its first request."""
RUN_SECONDS = 30.0
"""How long one kernel or one attention may run there after that (the course's: at most about 1 s a case on a
quiet machine, 5 s under a load of 15)."""
LIFETIME = 300.0
"""How long each student process may live: every case of the notebook, under load."""
HARNESSES = {"kernels": "util.labs.lab14.harness:serve_kernels",
             "compiler": "util.labs.lab14.harness:serve_compiler",
             "attention": "util.labs.lab14.harness:serve_attention"}
_students: dict[str, Any] = {}
_answered: set[str] = set()
"""The kinds of student process that have answered a request (imports done: later requests get less time)."""
_owing: set[str] = set()
"""The kinds of student process started that have not yet said they are ready (the attention's, once warm)."""
_baseline: dict[str, int] = {}
"""Kind -> the student process's memory when it said it was ready, before any student code ran (bytes)."""
_compiled: dict[tuple, list[str]] = {}
"""(kind, the source's SHA-256, constexprs) -> what Triton's compiler said of it in this grading (empty: compiled)."""


# ------------------------------------------------------------------ closed forms (the answers of 14.1 and 14.6)


def matmul_traffic(m: int, n: int, k: int, block: tuple[int, int, int]) -> tuple[dict, dict]:
    """Bytes loaded and stored per tensor by a tiled matmul: each of the ``cdiv(N, BN)`` column blocks reads all
    of A, each of the ``cdiv(M, BM)`` row blocks all of B (masked lanes move nothing), C is written once."""
    bm, bn, _ = block
    return ({"a": 4 * m * k * -(-n // bn), "b": 4 * k * n * -(-m // bm), "c": 0},
            {"a": 0, "b": 0, "c": 4 * m * n})


def softmax_traffic(rows: int, cols: int) -> tuple[dict, dict]:
    """A fused row softmax reads each row once and writes it once."""
    return {"x": 4 * rows * cols, "y": 0}, {"x": 0, "y": 4 * rows * cols}


def key_rows(n: int, block: tuple[int, int], causal: bool) -> int:
    """Rows of K (and of V) one head's programs load together: each query block ``i`` visits the key blocks
    starting below its end, ``min((i + 1) BM, N)`` when causal, ``N`` otherwise (the last one cut at ``N``)."""
    bm, bn = block
    total = 0
    for start in range(0, n, bm):
        end = min(start + bm, n) if causal else n
        total += min(-(-end // bn) * bn, n)
    return total


def flash_traffic(heads: int, n: int, d: int, block: tuple[int, int], causal: bool) -> tuple[dict, dict]:
    """FlashAttention's forward: Q read once, K and V once per query block (up to the diagonal when causal), O
    and the log-sum-exp L written once."""
    kv = 4 * heads * d * key_rows(n, block, causal)
    return ({"q": 4 * heads * n * d, "k": kv, "v": kv, "o": 0, "lse": 0},
            {"q": 0, "k": 0, "v": 0, "o": 4 * heads * n * d, "lse": 4 * heads * n})


def query_rows(n: int, block: tuple[int, int], causal: bool) -> int:
    """Rows of Q (and of dO, O, L) one head's key-block programs load together in the backward: each key block
    ``j`` visits the query blocks from the one holding its first key, ``floor(j BN / BM) BM``, when causal (the
    blocks before see none of its keys), from 0 otherwise, to ``N``."""
    bm, bn = block
    return sum(n - (start // bm * bm if causal else 0) for start in range(0, n, bn))


def backward_traffic(heads: int, n: int, d: int, block: tuple[int, int], causal: bool) -> tuple[dict, dict]:
    """FlashAttention-2's backward as one kernel without atomics (task 14.8): the key-block programs read K and
    V once and Q, dO, O and L once per query block they visit (:func:`query_rows`; O for ``D = rowsum(dO O)``);
    the query-block programs read Q, dO, O and L once and K and V once per key block they visit
    (:func:`key_rows`, as the forward); dQ, dK and dV are written once, and nothing is read from them."""
    rows, keys, full = query_rows(n, block, causal), key_rows(n, block, causal), 4 * heads * n * d
    each = 4 * heads * d * (rows + n)
    loaded = {"q": each, "k": 4 * heads * d * (n + keys), "v": 4 * heads * d * (n + keys), "o": each, "do": each,
              "lse": 4 * heads * (rows + n), "dq": 0, "dk": 0, "dv": 0}
    stored = {name: 0 for name in loaded} | {"dq": full, "dk": full, "dv": full}
    return loaded, stored


# ------------------------------------------------------------------ inputs and references


def _generator(spec: Mapping[str, Any]):
    import torch

    return torch.Generator().manual_seed(secret.seed("lab14", "inputs", json.dumps(dict(spec), sort_keys=True)))


def inputs(spec: Mapping[str, Any], shapes: list[list[int]], scale: float = 1.0) -> list:
    """The float32 inputs of a case: standard normal (times ``scale``), drawn from the grading secret for the
    case's spec (the same within a grading, another in the next)."""
    import torch

    generator = _generator(spec)
    return [torch.randn(shape, generator=generator) * scale for shape in shapes]


def attention64(q, k, v, do, causal: bool, rows: int = 512):
    """O, dQ, dK, dV of attention in float64 by autograd, ``rows`` query rows at a time (each row of O depends on
    its own query only: the gradients of K and V add up over the blocks)."""
    import torch

    q, k, v, do = (t.double() for t in (q, k, v, do))
    k, v = k.clone().requires_grad_(), v.clone().requires_grad_()
    n, d = q.shape[-2], q.shape[-1]
    outs, dqs = [], []
    for start in range(0, n, rows):
        qi = q[..., start:start + rows, :].clone().requires_grad_()
        end = min(start + rows, n) if causal else n  # a causal block sees no key past its last query
        scores = qi @ k[..., :end, :].transpose(-1, -2) / math.sqrt(d)
        if causal:
            later = torch.arange(end)[None, :] > torch.arange(start, start + qi.shape[-2])[:, None]
            scores = scores.masked_fill(later, float("-inf"))
        oi = torch.softmax(scores, -1) @ v[..., :end, :]
        oi.backward(do[..., start:start + rows, :])
        outs.append(oi.detach())
        dqs.append(qi.grad)
    return torch.cat(outs, -2), torch.cat(dqs, -2), k.grad, v.grad


def _error(found, expected) -> float:
    import torch

    if found.shape != expected.shape:
        return math.inf
    if not torch.isfinite(found).all():
        return math.nan
    scale = float(expected.abs().max()) or 1.0
    return float((found.double() - expected.double()).abs().max()) / scale


# ------------------------------------------------------------------ student processes


def _student(kind: str):
    """The student process of ``kind`` serving this notebook's cases, started (with the other kinds, so that
    their imports overlap) if there is none."""
    from util.student_process import StudentProcess

    for name in (kind, *(other for other in HARNESSES if other != kind)):
        if name not in _students:
            _students[name] = StudentProcess.start(HARNESSES[name], max_data=256 << 20, seconds=LIFETIME)
            if name == "attention":
                _owing.add(name)
    return _students[kind]


def _drop(kind: str) -> None:
    student = _students.pop(kind, None)
    _answered.discard(kind)
    _owing.discard(kind)
    _baseline.pop(kind, None)
    if student is not None:
        student.close()


def _ask(kind: str, header: dict | None, data: bytes = b"") -> tuple[dict | None, bytes, str]:
    """Send one request to the student process of ``kind`` and wait for its answer: ``(reply, data, problem)``;
    on a timeout or a dead process the reply is ``None``, the problem says why, and the process is replaced for
    the next case. ``header`` ``None``: only wait until the process is ready."""
    problem = _post(kind, header, data)
    return (None, b"", problem) if problem else _collect(kind) if header is not None else ({"ready": True}, b"", "")


def _post(kind: str, header: dict | None, data: bytes = b"") -> str:
    """Send one request to the student process of ``kind`` (started if need be, waited for until it is ready);
    its answer is read by :func:`_collect`. Returns the problem, or ``""``."""
    from util.student_process import ChannelError

    try:
        student = _student(kind)
    except ChannelError as exc:
        _students.pop(kind, None)
        return f"the grader could not start a process to run your code in ({exc})"
    try:
        if kind in _owing:
            ready, _ = student.receive(timeout=_allowed(kind))
            if ready.get("ready") is not True:
                raise ChannelError("it did not get ready")
            _owing.discard(kind)
        if header is not None:
            student.send(header, data=data)
        return ""
    except ChannelError as exc:
        return _failed(kind, exc)


def _collect(kind: str) -> tuple[dict | None, bytes, str]:
    """The answer to the request :func:`_post` sent the student process of ``kind``: ``(reply, data, problem)``."""
    from util.student_process import ChannelError

    student = _students.get(kind)
    if student is None:
        return None, b"", "the process the grader ran your code in ended without an answer"
    try:
        reply, out = student.receive(timeout=_allowed(kind))
        _answered.add(kind)
        return reply, out, ""
    except ChannelError as exc:
        return None, b"", _failed(kind, exc)


def _allowed(kind: str) -> float:
    return RUN_SECONDS if kind in _answered else START_SECONDS + RUN_SECONDS


def _failed(kind: str, exc: Exception) -> str:
    allowed = _allowed(kind)
    _drop(kind)
    if "time allowed" in str(exc):
        return (f"your code did not finish within {allowed:.0f} s when the grader ran it (the course's takes about a "
                "second)")
    return f"the process the grader ran your code in ended without an answer ({exc})"


def _peak(kind: str, restart: bool) -> int:
    """The peak resident memory of the student process of ``kind`` as the grader measures it, at least its current
    memory; ``restart``: restarted at the current one first (a root grader may; another measures from the peak as
    it stands)."""
    from util.student_process import ChannelError

    student = _students[kind]
    if restart:
        try:
            student.reset_peak()
        except ChannelError:
            pass
    stats = student.stats()
    return max(int(stats["rss"]), int(stats["peak_rss"]))


def _read_outputs(out: bytes, shapes: list[list[int]]) -> list | None:
    import numpy as np
    import torch

    sizes = [int(np.prod(shape)) for shape in shapes]
    if len(out) != 4 * sum(sizes):
        return None
    found, offset = [], 0
    for shape, size in zip(shapes, sizes):
        found.append(torch.from_numpy(np.frombuffer(out, dtype=np.float32, count=size, offset=offset).copy()).reshape(shape))
        offset += 4 * size
    return found


# ------------------------------------------------------------------ 14.2


def check_attention(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 14.2: ``FlashAttention`` run by the grader in a student process (see the module's docstring), its
    peak memory grown by at most :data:`ATTENTION_BYTES`; O, dQ, dK, dV within ``tolerance.rtol`` of float64
    autograd, relative to each one's largest element."""
    from util.artifacts import read_saved_arrays
    from util.judging.student_code import TooLarge, check_size
    from util.labs.lab14.harness import CODE_BYTES
    from util.student_process import ChannelError

    arrays, problems = read_saved_arrays(data, expected=["function"])
    if problems:
        return problems
    pickled = arrays["function"].tobytes()
    try:
        check_size(pickled, CODE_BYTES, "the pickled FlashAttention")
    except TooLarge as exc:
        return [str(exc)]
    dims = [int(spec["heads"]), int(spec["n"]), int(spec["d"])]
    reply, _, problem = _ask("attention", None)
    if reply is None:
        return [problem]
    try:
        if "attention" not in _baseline:  # ready, and nothing of the student's has run there yet
            _baseline["attention"] = _peak("attention", restart=True)
        before = _baseline["attention"]  # never restarted after: every case is charged with all that came before
    except (ChannelError, KeyError, ValueError) as exc:
        _drop("attention")
        return [f"the grader could not measure the process it runs your code in ({exc})"]
    reply, _, problem = _ask("attention", {"function": len(pickled)}, pickled)
    if reply is None:
        return [problem]
    if reply.get("loaded") is not True:
        return [f"the grader could not load FlashAttention: {str(reply.get('raised'))[:300]}"]
    q, k, v, do = inputs(spec, [dims] * 4)
    header = {"heads": dims[0], "n": dims[1], "d": dims[2], "causal": bool(spec["causal"]), "block": int(spec["block"])}
    reply, out, problem = _ask("attention", header, b"".join(t.numpy().tobytes() for t in (q, k, v, do)))
    if reply is None:
        return [problem]
    try:
        grown = _peak("attention", restart=False) - before
    except (ChannelError, KeyError, ValueError) as exc:
        _drop("attention")
        return [f"the grader could not measure the process it runs your code in ({exc})"]
    matrix = 4 * dims[1] * dims[1]
    if "memory" in reply or grown > ATTENTION_BYTES:
        held = f"its memory grew by {grown / 2 ** 20:.1f} MiB" if "memory" not in reply else \
            f"it ran out of memory ({str(reply['memory'])[:120]})"
        return [f"run by the grader at N = {dims[1]:,}, FlashAttention used more memory than it is allowed: {held}, "
                f"over the {ATTENTION_BYTES / 2 ** 20:.0f} MiB allowed besides what the process held before (one "
                f"{dims[1]:,} x {dims[1]:,} score matrix takes {matrix / 2 ** 20:.1f} MiB): never build the whole "
                "matrix, forward or backward; keep one block of scores at a time"]
    if reply.get("done") is not True:
        return [f"run by the grader, FlashAttention raised {str(reply.get('raised'))[:300]}"]
    found = _read_outputs(out, [dims] * 4)
    if found is None:
        return ["the process the grader ran FlashAttention in sent back something unreadable"]
    expected = attention64(q, k, v, do, bool(spec["causal"]))
    for name, mine, ref in zip(("O", "dQ", "dK", "dV"), found, expected):
        error = _error(mine, ref)
        if not error <= tolerance.rtol:
            shown = "NaN or infinity" if math.isnan(error) else f"{error:.2g} of its largest element"
            problems.append(f"{name} differs from float64 autograd by {shown} (at most {tolerance.rtol:g})")
    return problems


# ------------------------------------------------------------------ 14.3 to 14.5 (and 14.8)


def _traffic_problems(found: Any, expected: tuple[dict, dict], what: Mapping[str, str]) -> list[str]:
    if not isinstance(found, dict) or not isinstance(found.get("loaded"), dict) or not isinstance(found.get("stored"), dict):
        return ["the grader's count of the kernel's traffic came back unreadable"]
    problems = []
    for book, verb in ((0, "loaded"), (1, "stored")):
        for name, bytes_expected in expected[book].items():
            got = found[verb].get(name)
            if not isinstance(got, int) or isinstance(got, bool):
                return ["the grader's count of the kernel's traffic came back unreadable"]
            if got != bytes_expected:
                times = f" ({got / bytes_expected:.3g} times the closed form)" if bytes_expected else ""
                problems.append(f"the kernel {verb} {got:,} bytes {'from' if verb == 'loaded' else 'into'} "
                                f"{what[name]}; the closed form is {bytes_expected:,}{times}")
    return problems


def _compile_key(kind: str, source: str, values: Mapping[str, Any]) -> tuple:
    return kind, hashlib.sha256(source.encode()).hexdigest(), json.dumps(dict(values), sort_keys=True)


def _compiled_problems(reply: dict, values: Mapping[str, Any]) -> list[str]:
    """What the compiling process's ``reply`` says is wrong with a kernel (empty: it compiled)."""
    if isinstance(reply.get("compiled"), dict):
        return []
    if "refused" in reply:
        return [str(p)[:300] for p in list(reply["refused"])[:3]]
    return [f"Triton's compiler refused it for a GPU ({', '.join(f'{k}={v}' for k, v in values.items())}): "
            f"{str(reply.get('raised'))[:400]}; the interpreter runs Python that no GPU can (a list that grows, a "
            "value left for another program): hold blocks in tensors"]


def _run_kernel(kind: str, data: bytes, parameters, name: str, header: dict, values: Mapping[str, Any],
                inputs_: list) -> tuple[list | None, Any, list[str]]:
    """Compile the kernel for the GPU (once per kernel and constexprs in a grading) while the interpreter runs it
    on the case's inputs: ``(outputs, traffic, problems)``, the run's results counting only if it compiled."""
    from util.labs.lab14.rules import kernel_problems

    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, None, ["the file saved for this case is not the kernel's source; run the notebook again"]
    problems = kernel_problems(source, name, parameters)
    if problems:
        return None, None, [f"the grader does not run {name}: {problems[0]}"] + problems[1:3]
    key = _compile_key(kind, source, values)
    compiling = key not in _compiled
    if compiling:  # the compiler works while the interpreter runs: both count, only the compiled is counted
        problem = _post("compiler", {"kernel": kind, "source": source, "constexprs": dict(values)})
        if problem:
            return None, None, [problem]
    ran = _interpret(kind, source, name, header, inputs_)
    if compiling:
        reply, _, problem = _collect("compiler")
        if reply is None:
            return None, None, [problem]  # not remembered: the next case asks a fresh process again
        _compiled[key] = _compiled_problems(reply, values)
    if _compiled[key]:
        return None, None, [f"the grader does not count {name}: {_compiled[key][0]}"] + _compiled[key][1:3]
    return ran


def _interpret(kind: str, source: str, name: str, header: dict, inputs_: list) -> tuple[list | None, Any, list[str]]:
    reply, _, problem = _ask("kernels", {"kernel": kind, "source": source})
    if reply is None:
        return None, None, [problem]
    if "refused" in reply:
        return None, None, [f"the grader does not run {name}: {str(reply['refused'])[:300]}"]
    if reply.get("loaded") is not True:
        return None, None, [f"the grader could not load {name}: {str(reply.get('raised'))[:300]}"]
    payload = b"".join(t.contiguous().numpy().tobytes() for t in inputs_)
    reply, out, problem = _ask("kernels", {"shape": header}, payload)
    if reply is None:
        return None, None, [problem]
    if "done" not in reply:
        return None, None, [f"run by the grader, {name} raised {str(reply.get('raised'))[:320]}"]
    return out, reply["done"], []


def _judged(found: list | None, expected: list, names: list[str], traffic: Any, closed: tuple[dict, dict],
            what: Mapping[str, str]) -> list[str]:
    if found is None:
        return ["the process the grader ran the kernel in sent back something unreadable"]
    problems = []
    for name, mine, ref in zip(names, found, expected):
        error = _error(mine, ref)
        if math.isnan(error):
            problems.append(f"{name} holds NaN or infinity where float64 has numbers (an element never stored, or an "
                            "overflow)")
        elif not error <= KERNEL_RTOL:
            problems.append(f"{name} differs from float64 by {error:.2g} of its largest element (at most {KERNEL_RTOL:g})")
    return problems + _traffic_problems(traffic, closed, what)


def check_matmul(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 14.3: C within :data:`KERNEL_RTOL` of float64 and the bytes loaded from A and B and stored into C
    exactly :func:`matmul_traffic`, on a shape and tile of the case (B stored transposed where it says so)."""
    from util.labs.lab14.launch import MATMUL_PARAMETERS

    m, n, k = int(spec["m"]), int(spec["n"]), int(spec["k"])
    block = tuple(int(b) for b in spec["block"])
    a, b = inputs(spec, [[m, k], [k, n]])
    header = {"m": m, "n": n, "k": k, "block": list(block), "b_transposed": bool(spec.get("b_transposed"))}
    out, traffic, problems = _run_kernel("matmul", data, MATMUL_PARAMETERS, "matmul_kernel", header,
                                         gpu.constexprs("matmul", header), [a, b])
    if problems:
        return problems
    expected = a.double() @ b.double()
    return _judged(_read_outputs(out, [[m, n]]), [expected], ["C"], traffic, matmul_traffic(m, n, k, block),
                   {"a": "A", "b": "B", "c": "C"})


def check_softmax(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 14.4: each row's softmax within :data:`KERNEL_RTOL` of float64, with one read of X and one write of Y
    (:func:`softmax_traffic`)."""
    import torch

    from util.labs.lab14.launch import SOFTMAX_PARAMETERS

    rows, cols = int(spec["rows"]), int(spec["cols"])
    [x] = inputs(spec, [[rows, cols]], scale=float(spec.get("scale", 1.0)))
    header = {"rows": rows, "cols": cols}
    out, traffic, problems = _run_kernel("softmax", data, SOFTMAX_PARAMETERS, "softmax_kernel", header,
                                         gpu.constexprs("softmax", header), [x])
    if problems:
        return problems
    expected = torch.softmax(x.double(), -1)
    return _judged(_read_outputs(out, [[rows, cols]]), [expected], ["Y"], traffic, softmax_traffic(rows, cols),
                   {"x": "X", "y": "Y"})


def check_flash(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 14.5: O and L within :data:`KERNEL_RTOL` of float64 and the bytes per tensor exactly
    :func:`flash_traffic`."""
    import torch

    from util.labs.lab14.launch import FLASH_PARAMETERS

    dims = [int(spec["heads"]), int(spec["n"]), int(spec["d"])]
    block, causal = tuple(int(b) for b in spec["block"]), bool(spec["causal"])
    q, k, v = inputs(spec, [dims] * 3)
    header = {"heads": dims[0], "n": dims[1], "d": dims[2], "block": list(block), "causal": causal}
    out, traffic, problems = _run_kernel("flash", data, FLASH_PARAMETERS, "flash_kernel", header,
                                         gpu.constexprs("flash", header), [q, k, v])
    if problems:
        return problems
    scores = q.double() @ k.double().transpose(-1, -2) / math.sqrt(dims[2])
    if causal:
        scores = scores.masked_fill(torch.ones(dims[1], dims[1], dtype=torch.bool).triu(1), float("-inf"))
    expected = [torch.softmax(scores, -1) @ v.double(), torch.logsumexp(scores, -1)]
    return _judged(_read_outputs(out, [dims, dims[:2]]), expected, ["O", "L"], traffic,
                   flash_traffic(*dims, block, causal), {"q": "Q", "k": "K", "v": "V", "o": "O", "lse": "L"})


# ------------------------------------------------------------------ 14.8


def check_backward(spec: Mapping[str, Any], data: bytes, tolerance: Tolerance) -> list[str]:
    """Task 14.8: dQ, dK, dV within :data:`KERNEL_RTOL` of float64 autograd and the bytes per tensor exactly
    :func:`backward_traffic`. q, k, v, dO are drawn here; O and L are the grader's own (float64, given in
    float32), so the backward is judged apart from the student's forward."""
    import torch

    from util.labs.lab14.launch import FLASH_BACKWARD_PARAMETERS

    dims = [int(spec["heads"]), int(spec["n"]), int(spec["d"])]
    block, causal = tuple(int(b) for b in spec["block"]), bool(spec["causal"])
    q, k, v, do = inputs(spec, [dims] * 4)
    scores = q.double() @ k.double().transpose(-1, -2) / math.sqrt(dims[2])
    if causal:
        scores = scores.masked_fill(torch.ones(dims[1], dims[1], dtype=torch.bool).triu(1), float("-inf"))
    o, lse = (torch.softmax(scores, -1) @ v.double()).float(), torch.logsumexp(scores, -1).float()
    header = {"heads": dims[0], "n": dims[1], "d": dims[2], "block": list(block), "causal": causal}
    out, traffic, problems = _run_kernel("backward", data, FLASH_BACKWARD_PARAMETERS, "flash_backward_kernel",
                                         header, gpu.constexprs("backward", header), [q, k, v, o, do, lse])
    if problems:
        return problems
    _, *expected = attention64(q, k, v, do, causal)
    return _judged(_read_outputs(out, [dims] * 3), expected, ["dQ", "dK", "dV"], traffic,
                   backward_traffic(*dims, block, causal),
                   {"q": "Q", "k": "K", "v": "V", "o": "O", "do": "dO", "lse": "L", "dq": "dQ", "dk": "dK",
                    "dv": "dV"})
