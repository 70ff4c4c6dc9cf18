"""The judge worker: the grader-side checks of saved files, run one case at a time in a confined process.

:mod:`grader.judge.isolated` runs this file's source with ``python -c`` inside the sandbox (where
``grader/`` is not visible: it imports only the standard library and ``util``). It reads one JSON
line from stdin, ``{"cases": [{"check": "module:function", "spec": {...}, "tolerance": {...},
"file": path, "returned": value}, ...]}``, and for each case calls ``check(spec, data, tolerance)`` on the
file's bytes (``check(spec, data, tolerance, returned=value)`` when the check takes a ``returned`` argument:
what the case returned in the kernel, untrusted JSON),
writing two JSON lines to its protocol stream: ``{"start": i}`` before and ``{"done": i, "problems":
[...], "facts": {...}}`` after (at most :data:`MAX_PROBLEMS` problems of :data:`MAX_TEXT` characters). A
check returns its problems, or ``(problems, facts)``: what the grader measured on the way (a speed-up, the
band it was judged in), numbers and short texts for the instructor's records, disputes and leaderboards,
never a verdict (:data:`MAX_FACTS` of them). Whatever the
check prints goes to stderr, never into the protocol. A check that raises is a problem with the
case; a check that crashes, hangs or bloats the process is the grader's to notice.
"""
import importlib
import inspect
import json
import os
import sys

MAX_PROBLEMS = 20
MAX_TEXT = 400
MAX_FACTS = 32


def _facts(found: object) -> dict:
    """The facts a check reported, bounded: names of at most 64 characters -> a finite number, a short text,
    or a list of at most 16 numbers; anything else is dropped."""
    import math

    out = {}
    for name, value in list(found.items())[:MAX_FACTS] if isinstance(found, dict) else []:
        if not isinstance(name, str) or len(name) > 64:
            continue
        if isinstance(value, bool) or value is None:
            out[name] = value
        elif isinstance(value, (int, float)) and math.isfinite(value):
            out[name] = value
        elif isinstance(value, str):
            out[name] = value[:MAX_TEXT]
        elif isinstance(value, (list, tuple)) and len(value) <= 16 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
            out[name] = list(value)
    return out


def main() -> None:
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # prints of the checks (and of C libraries) go to stderr, not into the protocol
    sys.stdout = sys.stderr
    job = json.loads(sys.stdin.readline())
    import util.labs  # noqa: F401  (puts extra lab folders on sys.path)
    from util.judging import secret

    secret.install(bytes.fromhex(job.pop("secret")))  # the grader's, for this grading (never in a file)
    from util.contract import Tolerance

    def emit(record: dict) -> None:
        protocol.write(json.dumps(record) + "\n")
        protocol.flush()

    for index, case in enumerate(job["cases"]):
        emit({"start": index})
        try:
            module, _, name = case["check"].partition(":")
            check = getattr(importlib.import_module(module), name)
            with open(case["file"], "rb") as handle:
                data = handle.read()
            extra = {"returned": case.get("returned")} if "returned" in inspect.signature(check).parameters else {}
            found = check(case["spec"], data, Tolerance(**case["tolerance"]), **extra)
            facts = {}
            if isinstance(found, tuple) and len(found) == 2 and isinstance(found[1], dict):
                found, facts = found
            problems = [str(p)[:MAX_TEXT] for p in list(found)[:MAX_PROBLEMS]]
            facts = _facts(facts)
        except MemoryError:
            problems, facts = ["the grader's check of this file ran out of memory"], {}
        except Exception as exc:  # a hostile file: a problem with the case, never a crash of the judge
            problems, facts = [f"the grader could not check the model ({type(exc).__name__}: {exc})"[:MAX_TEXT]], {}
        emit({"done": index, "problems": problems, "facts": facts})


if __name__ == "__main__":  # python -c sets it too
    main()
