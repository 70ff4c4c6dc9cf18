"""The solution notebook's functions, run in this process without side effects (for tests and tools).

Tests call a solution's functions on inputs of their own (a model the judge must accept, a graph
a public check must pass) without running the whole notebook: :func:`solution_namespace` runs just
the set-up cells and the cells of the tasks asked for, with their solution regions kept.
"""
from __future__ import annotations

from typing import Callable

from grader import REPO
from grader.author.markers import remove_markers
from grader.core.notebook import cell_tasks, headings, read


def solution_namespace(lab_name: str, task_ids: tuple[str, ...] | list[str] = (),
                       edit: Callable[[str], str] | None = None, allow_errors: bool = False) -> dict:
    """Run part of a lab's *solution* notebook in this process and return its namespace.

    Executes, in a fresh namespace, the code cells before the first task heading (imports,
    ``setup()``) and the code cells under each task in ``task_ids``, in notebook order, with the
    solution regions kept. For benchmarks and tests that need the reference implementation of a
    function, e.g.::

        tiled = solution_namespace("labN", ("N.1", "N.2"))["tiled_gemm_model"]   # a function of task N.2

    Answers the cells export with ``submit`` go to a throw-away folder, not ``./outputs``; what
    they print is not shown. IPython magics are not supported (the course notebooks use none). Each cell's
    source is registered with ``linecache`` under the cell's name, as IPython registers a notebook's cells, so
    that what reads a function's source (``inspect.getsource``, Triton's interpreter) works on what it defines.
    A task id the notebook has no heading for raises ``KeyError``. ``edit`` rewrites each code cell's source
    before it runs (the attack kit's hostile variants of the solution: ``tests/attack_kit.py``). With
    ``allow_errors`` a cell that raises is left where it raised and the next cell runs, as the grader runs a
    student's notebook (a mistake's variant may break one of the notebook's own demonstrations); the errors are
    listed in the namespace's ``__cell_errors__``.
    """
    import contextlib
    import io
    import linecache
    import os
    import tempfile

    from util.answers import OUTPUT_DIR_ENV
    from util.labs import get_lab

    lab = get_lab(lab_name)
    path = REPO / "solutions" / lab.notebook
    nb = read(path)
    wanted = set(task_ids)
    known = {found[0] for found in headings(nb).values()}
    if wanted - known:
        raise KeyError(f"solutions/{lab.notebook} has no task {', '.join(sorted(wanted - known))}; "
                       f"its tasks are {', '.join(sorted(known))}")
    namespace: dict = {"__name__": f"solution_{lab_name}"}
    errors: list[str] = []
    previous = os.environ.get(OUTPUT_DIR_ENV)
    with tempfile.TemporaryDirectory(prefix=f"solution-{lab_name}-") as scratch:
        os.environ[OUTPUT_DIR_ENV] = scratch
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                for index, (cell, task) in enumerate(zip(nb.cells, cell_tasks(nb))):
                    if cell.cell_type == "code" and (task is None or task in wanted):
                        source = remove_markers(cell.source, f"{lab.notebook} cell {index}")
                        source = edit(source) if edit is not None else source
                        # an edited cell is its own file: what reads a function's source finds the version it ran
                        filename = f"<{lab.notebook} cell {index}>" if edit is None else \
                            f"<{lab.notebook} cell {index}, edited by {getattr(edit, '__qualname__', 'an edit')} {id(edit):x}>"
                        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
                        try:
                            exec(compile(source, filename, "exec"), namespace)
                        except Exception as exc:
                            if not allow_errors:
                                raise
                            errors.append(f"{filename}: {type(exc).__name__}: {exc}")
        finally:
            if previous is None:
                os.environ.pop(OUTPUT_DIR_ENV, None)
            else:
                os.environ[OUTPUT_DIR_ENV] = previous
    if allow_errors:
        namespace["__cell_errors__"] = errors
    return namespace
