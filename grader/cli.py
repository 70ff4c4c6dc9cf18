"""Command line: ``python -m grader {grade,check,build,regen,gradescope,autograde}``.

This module only parses arguments."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader.execute.limits import Limits, parse_size
from util.labs import LABS, get_lab


def _labs(name: str | None):
    return [get_lab(name)] if name else list(LABS.values())


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m grader", description="Autograder for the course's labs.")
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("grade", help="grade submitted notebooks and print the gradebook")
    g.add_argument("paths", nargs="+", type=Path, help="notebooks, or folders to search for .ipynb files")
    g.add_argument("--out", type=Path, default=Path("build/gradebook"), help="where results go (default: %(default)s)")
    g.add_argument("--lab", choices=list(LABS), help="grade against this lab (default: read from each notebook)")
    g.add_argument("--feedback", action="store_true", help="also print every task's feedback")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                   help="grade N notebooks at a time (each kernel uses one core; default: %(default)s)")
    g.add_argument("--cluster", metavar="ADDRESS",
                   help="grade on a Dask cluster: local:N (N worker processes here), a scheduler's address "
                        "(tcp://host:8786) or its scheduler file; replaces --jobs")
    g.add_argument("--cell-timeout", type=int, metavar="S", help="seconds per cell (default: the lab's, 300)")
    g.add_argument("--timeout", "--notebook-timeout", dest="notebook_timeout", type=int, metavar="S",
                   help="seconds per notebook (default: the lab's, 900)")
    g.add_argument("--memory", type=parse_size, default=Limits.memory, metavar="SIZE",
                   help="memory for one submission, all its processes together, e.g. 4G (default: 4G)")
    g.add_argument("--procs", type=int, default=Limits.procs, metavar="N",
                   help="processes one submission may run at once (default: %(default)s)")
    g.add_argument("--fsize", type=parse_size, default=Limits.fsize, metavar="SIZE",
                   help="largest file a submission may write, and its /tmp (default: 1G)")
    g.add_argument("--disk", type=parse_size, default=Limits.disk, metavar="SIZE",
                   help="files a submission may keep in its scratch folder, in all (default: 4G)")
    g.add_argument("--max-output", type=parse_size, default=Limits.output, metavar="SIZE",
                   help="printed output kept per cell; the rest is dropped, never graded (default: 1M)")
    g.add_argument("--force", action="store_true",
                   help="regrade every submission, even those already graded against the same inputs")
    g.add_argument("--feedback-dir", type=Path, metavar="DIR",
                   help="also write each student's feedback as DIR/<submission>.md (always in OUT/<submission>/)")
    g.add_argument("--no-sandbox", action="store_true",
                   help="run kernels without bubblewrap even where it works (limits still apply)")

    b = sub.add_parser("build", help="generate labs/ and example submissions from solutions/")
    b.add_argument("--check", action="store_true", help="fail if generated files are stale; write nothing")
    b.add_argument("--lab", choices=list(LABS))
    b.add_argument("--clean-solutions", action="store_true", help="clear outputs in solutions/ first")

    c = sub.add_parser("check", help="a student's self-check: run a notebook, then its tasks' public checks")
    c.add_argument("paths", nargs="+", type=Path, metavar="NOTEBOOK", help="notebooks to check")
    c.add_argument("--lab", choices=list(LABS), help="check against this lab (default: read from each notebook)")
    c.add_argument("--cell-timeout", type=int, metavar="S", help="seconds per cell (default: the lab's, 300)")
    c.add_argument("--notebook-timeout", type=int, metavar="S", help="seconds per notebook (default: the lab's, 900)")

    for name, help_text in (("gradescope", "build a lab's Gradescope autograder zip"),
                            ("autograde", "grade $GRADESCOPE_ROOT/submission into results/results.json "
                                          "(run_autograder calls this)")):
        a = sub.add_parser(name, help=help_text)
        a.add_argument("--lab", choices=list(LABS), required=True)
        if name == "gradescope":
            a.add_argument("--out", type=Path, help="the zip to write (default: build/autograder_<lab>.zip)")
        else:
            a.add_argument("--root", type=Path, help="instead of $GRADESCOPE_ROOT or /autograder")
        a.add_argument("--memory", type=parse_size, default=Limits.memory, metavar="SIZE",
                       help="memory per submission (default: 4G; keep it under the Gradescope machine's)")
        a.add_argument("--procs", type=int, default=Limits.procs, metavar="N")
        a.add_argument("--fsize", type=parse_size, default=Limits.fsize, metavar="SIZE")

    r = sub.add_parser("regen", help="regenerate reference answers by running the solutions")
    r.add_argument("--check", action="store_true", help="verify the committed references are fresh; write nothing")
    r.add_argument("--lab", choices=list(LABS))
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "grade":
        from grader.grade import batch
        limits = Limits(memory=args.memory, procs=args.procs, fsize=args.fsize, disk=args.disk,
                        output=args.max_output)
        return batch.main(paths=args.paths, out=args.out, lab=args.lab, show_feedback=args.feedback,
                          progress=not args.no_progress, cell_timeout=args.cell_timeout,
                          notebook_timeout=args.notebook_timeout, jobs=args.jobs, limits=limits,
                          force=args.force, feedback_dir=args.feedback_dir,
                          sandbox=False if args.no_sandbox else None, cluster=args.cluster)
    if args.command == "check":
        from grader import selfcheck
        return selfcheck.main(paths=args.paths, lab=args.lab, cell_timeout=args.cell_timeout,
                              notebook_timeout=args.notebook_timeout)
    if args.command in ("gradescope", "autograde"):
        from grader.grade import gradescope
        limits = Limits(memory=args.memory, procs=args.procs, fsize=args.fsize)
        if args.command == "gradescope":
            out = args.out or Path("build") / f"autograder_{args.lab}.zip"
            return gradescope.main_build(lab=get_lab(args.lab), out=out, limits=limits)
        return gradescope.main_autograde(lab=get_lab(args.lab), root=args.root, limits=limits)
    if args.command == "build":
        from grader.author import build
        return build.main(labs=_labs(args.lab), check_only=args.check, clean_solutions=args.clean_solutions)
    from grader.author import regen
    return regen.main(labs=_labs(args.lab), check_only=args.check)


if __name__ == "__main__":
    sys.exit(main())
