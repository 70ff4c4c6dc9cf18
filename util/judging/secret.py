"""The grading secret: where every hidden input a judge draws comes from.

A judge that draws its inputs from a salt in its own source and the case's spec can be beaten by anyone who reads
the source (the held-out attacks did it on labs 13 and 14: a rank recomputed every other rank's "hidden" inputs);
a term secret only redraws a seed from a small space. Here the grader holds one secret per grading process, 32
bytes from the operating system's strong randomness (:func:`secrets.token_bytes`), made in memory when it is first
needed and never written to a file, an environment variable or a command line. It reaches a judge process only
inside the job the grader writes to that process's standard input (:mod:`grader.judge.worker` calls
:func:`install`); a kernel or a student process never receives it, and nothing of it can be derived from the
course's code.

A judge asks for what it needs by naming it::

    rng = secret.generator("labN", "inputs", json.dumps(spec, sort_keys=True))    # numpy Generator
    seed = secret.seed("labN", "batch order", case_id)                            # an int for torch.manual_seed

The same names give the same draw within one grading (the judge's reference run and the student's run see the
same inputs), and different draws in the next grading: a submission graded twice is judged on two draws, so a
judge must be written so that every correct answer passes every draw (tolerances that hold for any input the
draw can give; the tests grade the solutions on fresh secrets).

Who uses it: every judge that draws an input (``util/labs/labN/judge*.py``), the judge worker, the attack kit.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets as _system

SIZE = 32
"""Bytes of a grading secret."""
_secret: bytes | None = None


def install(value: bytes) -> None:
    """Use ``value`` as this process's grading secret (the judge worker, with what the grader sent on its
    standard input; a test that must judge twice on the same draw). Refuses anything shorter than :data:`SIZE`."""
    global _secret
    if not isinstance(value, bytes) or len(value) < SIZE:
        raise ValueError(f"a grading secret is at least {SIZE} random bytes")
    _secret = value


def current() -> bytes:
    """This process's grading secret, made from the system's strong randomness the first time it is asked for."""
    global _secret
    if _secret is None:
        _secret = _system.token_bytes(SIZE)
    return _secret


def renew() -> bytes:
    """Forget this process's secret and make a new one (a test that grades the same answer on two draws)."""
    global _secret
    _secret = None
    return current()


def digest(*names: object) -> bytes:
    """32 bytes determined by the secret and ``names`` (HMAC-SHA256; names joined unambiguously)."""
    message = b"\0".join(str(name).replace("\0", "\\0").encode("utf-8", "surrogatepass") for name in names)
    return hmac.new(current(), message, hashlib.sha256).digest()


def seed(*names: object, bits: int = 63) -> int:
    """A non-negative integer below ``2 ** bits`` drawn from the secret for ``names`` (a torch or numpy seed)."""
    return int.from_bytes(digest(*names), "big") % (1 << bits)


def generator(*names: object):
    """A :class:`numpy.random.Generator` drawn from the secret for ``names``."""
    import numpy as np

    return np.random.default_rng(np.random.SeedSequence(list(digest(*names))))


def permutation(n: int, *names: object) -> list[int]:
    """``0 .. n-1`` in an order drawn from the secret for ``names`` (a batch order no student code can predict)."""
    return [int(i) for i in generator("permutation", *names).permutation(int(n))]
