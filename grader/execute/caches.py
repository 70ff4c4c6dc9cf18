"""The export caches as the grader keeps them: built by the grader, shown read-only, verified before use.

Each lab's ``prepare`` hook (``Lab.prepare``) exports the models its notebook and hidden cases
load into the shared caches (``build/onnx``, ``build/torchscript``; :mod:`util.export_cache`). The
grader runs it outside the sandbox, in a subprocess (torch stays out of the grader's memory),
before grading the lab. Kernels see the caches read-only and cannot remount them.

The grader records each file's size and SHA-256 right after the hook that exported it ran
(having deleted, just before, every file it had not recorded). Before each submission,
:func:`ensure` checks every cache file against its record (cheap: a file unchanged since its last
check is not hashed again).
A file that differs, or that no export wrote, is deleted and the lab's hook runs again, so no
submission is graded against a tampered model, whoever tampered with it (a kernel graded without
the sandbox, a person, a disk error).
"""
from __future__ import annotations

import subprocess
import sys

from grader import REPO
from util import export_cache
from util.contract import Lab


def verify() -> list[str]:
    """Names of the cache files that did not match their record and were deleted (every kind)."""
    return [f"{kind}/{name}" for kind in export_cache.KINDS for name in export_cache.verify(kind)]


def prepare(lab: Lab, *, timeout: int = 600) -> str | None:
    """Run ``lab``'s ``prepare`` hook in a subprocess; ``None`` when it worked (or there is none),
    else why not. A failing hook only costs time: each kernel then exports for itself."""
    if not lab.prepare:
        return None
    module, function = lab.prepare.split(":")
    code = f"import importlib, util.labs; importlib.import_module({module!r}).{function}()"
    try:
        done = subprocess.run([sys.executable, "-c", code], cwd=str(REPO), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    finally:  # what the hook exported (verify() deleted every file not recorded before it ran)
        for kind in export_cache.KINDS:
            export_cache.record_new(kind)
    return " ".join(done.stderr.strip().splitlines()[-1:]) or f"exit code {done.returncode}" if done.returncode else None


def ensure(lab: Lab) -> list[str]:
    """Make the caches safe for grading ``lab``: verify them, and rebuild what had to be deleted.

    Returns the deleted files' names (empty when all was well); a failure to rebuild is printed
    as a warning (kernels then export for themselves).
    """
    removed = verify()
    if removed:
        print(f"grader: warning: {len(removed)} export cache file(s) did not match the size and hash recorded "
              f"when they were written and were deleted: {', '.join(removed[:5])}; rebuilding", file=sys.stderr)
        failure = prepare(lab)
        if failure:
            print(f"grader: warning: preparing {lab.name} ({lab.prepare}) failed, kernels will export models "
                  f"themselves: {failure}", file=sys.stderr)
    return removed
