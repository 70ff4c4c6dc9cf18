"""Command line: ``python -m grader {grade,report,export,lti,mark,similarity,check,build,release,publish,links,regen,dispute,leaderboard,gradescope,autograde}``.

This module only parses arguments. Flags mean the same in every subcommand that has them: ``--lab``
(a lab's name), ``--out`` (where the subcommand writes; for grade, report and export, the gradebook
folder), the limits (``--timeout``, ``--cell-timeout``, ``--memory``, ...) and the class settings
(``--roster``, ``--overrides``, ``--extensions``, ``--deadline``, ``--late-policy``, ``--term``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader import __version__
from grader.core.limits import Limits, parse_size
from grader.report import lms
from grader.report.lms.table import MISSING, UNMARKED
from util.labs import LABS, get_lab

GRADEBOOK = Path("build/gradebook")
"""The default gradebook folder."""


def _labs(name: str | None):
    return [get_lab(name)] if name else list(LABS.values())


def _sub(sub, name: str, help_text: str, description: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=help_text, description=description)


def _lab_flag(p: argparse.ArgumentParser, help_text: str, **kwargs) -> None:
    p.add_argument("--lab", choices=list(LABS), help=help_text, **kwargs)


def _limit_flags(p: argparse.ArgumentParser) -> None:
    """The per-submission limits: the same flags for grade, gradescope and autograde."""
    g = p.add_argument_group("limits (per submission)")
    g.add_argument("--timeout", "--notebook-timeout", dest="notebook_timeout", type=int, metavar="S",
                   help="seconds for the whole notebook, hidden cases included (default: the lab's, 900)")
    g.add_argument("--cell-timeout", type=int, metavar="S", help="seconds for one cell (default: the lab's, 300)")
    g.add_argument("--memory", type=parse_size, default=Limits.memory, metavar="SIZE",
                   help="memory for all its processes together, e.g. 4G (default: 4G)")
    g.add_argument("--procs", type=int, default=Limits.procs, metavar="N",
                   help="processes it may run at once (default: %(default)s)")
    g.add_argument("--fsize", type=parse_size, default=Limits.fsize, metavar="SIZE",
                   help="largest file it may write, and the size of its /tmp (default: 1G)")
    g.add_argument("--disk", type=parse_size, default=Limits.disk, metavar="SIZE",
                   help="files it may keep in its scratch folder, in all (default: 4G)")
    g.add_argument("--max-output", type=parse_size, default=Limits.output, metavar="SIZE",
                   help="printed output kept per cell; the rest is dropped, never graded (default: 1M)")
    g.add_argument("--max-notebook-output", type=parse_size, default=Limits.notebook_output, metavar="SIZE",
                   help="printed output kept for the whole notebook; the rest is dropped (default: 16M)")
    g.add_argument("--judge-timeout", type=int, metavar="S",
                   help="seconds the grader's check of one saved file may take (default: the lab's, 120)")
    g.add_argument("--max-notebook", type=parse_size, default=Limits.notebook_size, metavar="SIZE",
                   help="largest notebook file graded; a larger one is refused unread (default: 32M)")
    g.add_argument("--max-saved-files", type=int, default=Limits.saved_files, metavar="N",
                   help="files its hidden cases may save for the grader's checks; the cases past it fail "
                        "(default: %(default)s)")
    g.add_argument("--max-saved-file", type=parse_size, default=Limits.saved_file, metavar="SIZE",
                   help="largest saved file the grader judges; a larger one fails its case (default: 512M)")
    g.add_argument("--max-saved", type=parse_size, default=Limits.saved_total, metavar="SIZE",
                   help="saved files judged in all; a case whose file would go over it fails (default: 1536M)")
    g.add_argument("--keep-saved", type=parse_size, default=Limits.kept_saved, metavar="SIZE",
                   help="judged files copied into its results folder (16M each at most); the others are "
                        "listed by SHA-256 only (default: 64M)")


def _limits(args) -> Limits:
    return Limits(notebook_timeout=args.notebook_timeout, cell_timeout=args.cell_timeout, memory=args.memory,
                  procs=args.procs, fsize=args.fsize, disk=args.disk, output=args.max_output,
                  notebook_output=args.max_notebook_output, judge_timeout=args.judge_timeout,
                  notebook_size=args.max_notebook, saved_files=args.max_saved_files, saved_file=args.max_saved_file,
                  saved_total=args.max_saved, kept_saved=args.keep_saved)


def _class_flags(p: argparse.ArgumentParser) -> None:
    """The class settings: the same flags for grade, report and export (remembered in OUT/class.json)."""
    g = p.add_argument_group("class settings (remembered in OUT/class.json for later runs; 'none' removes one)")
    g.add_argument("--roster", metavar="CSV",
                   help="students: student_id, name, email, submission (a path or pattern), optional section, "
                        "login_id, canvas_id")
    g.add_argument("--overrides", metavar="CSV",
                   help="manual points: student, task, points, reason (applied on every run, shown in feedback)")
    g.add_argument("--extensions", metavar="CSV",
                   help="deadline extensions: student, lab (empty: all), days or until, reason")
    g.add_argument("--deadline", action="append", metavar="LAB=TIME",
                   help="a lab's deadline, ISO 8601, e.g. labN=2025-03-07T23:59 (repeat per lab)")
    g.add_argument("--term", metavar="FILE",
                   help="a file holding this term's secret: hidden cases drawn from a seed get seeds of their own "
                        "from it, graded against the references made for it (python -m grader regen --term FILE)")
    g.add_argument("--late-policy", metavar="POLICY",
                   help="'flag' (mark late submissions) or 'P%%/day' (take P%% of the lab's points per day "
                        "late, e.g. 10%%/day); default flag")
    g.add_argument("--student-feedback", choices=("summary", "diagnosed"), metavar="{summary,diagnosed}",
                   help="what the feedback shows per failed hidden case: 'summary' (where and how a result "
                        "differs; default) or 'diagnosed' (its input, the student's value, the expected value or "
                        "failed property, the likely mistake), from --feedback-from and after the lab's deadline")
    g.add_argument("--feedback-from", metavar="YYYY-MM-DD",
                   help="the day diagnosed feedback starts (local midnight); set it after the deadline and after "
                        "every extension")


def _settings(args) -> dict:
    return {"roster": args.roster, "overrides": args.overrides, "extensions": args.extensions,
            "deadlines": args.deadline, "late_policy": args.late_policy, "term": args.term,
            "feedback": args.student_feedback, "feedback_from": args.feedback_from}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m grader",
        description="The course's autograder: grade students' notebooks, report and export the grades, "
                    "build the student copies of the labs and their reference answers.",
        epilog="Run `python -m grader COMMAND --help` for a command's flags. The README's sections "
               "'For instructors' and 'For TAs' show them at work.")
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    g = _sub(sub, "grade", "grade submitted notebooks; write and print the gradebook",
             "Grade every submission under PATHS into the gradebook folder (--out): per submission its "
             "results, feedback and record; for the class, the gradebooks, statistics and report.html, built "
             "from every result the folder holds. Submissions graded before under the same inputs are kept "
             "(--force regrades them).")
    g.add_argument("paths", nargs="+", type=Path, metavar="PATH",
                   help="notebooks, submission folders, or folders to search for them")
    g.add_argument("--out", type=Path, default=GRADEBOOK, metavar="DIR",
                   help="the gradebook folder (default: %(default)s)")
    _lab_flag(g, "grade against this lab (default: read from each notebook)")
    g.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                   help="grade N notebooks at a time (each kernel uses one core; default: %(default)s)")
    g.add_argument("--cluster", metavar="ADDRESS",
                   help="grade on a Dask cluster: local:N (N worker processes here), a scheduler's address "
                        "(tcp://host:8786) or its scheduler file; replaces --jobs")
    g.add_argument("--force", action="store_true",
                   help="regrade every submission, even those already graded against the same inputs")
    g.add_argument("--feedback", action="store_true", help="also print every task's feedback")
    g.add_argument("--show-expected", action="store_true",
                   help="put expected values in the feedback of checks that are not hidden (default: feedback "
                        "says where and how an answer differs, never the value)")
    g.add_argument("--feedback-dir", type=Path, metavar="DIR",
                   help="also collect each student's feedback as DIR/<submission>.md and .html")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument("--no-sandbox", action="store_true",
                   help="run kernels without bubblewrap even where it works (limits still apply)")
    _limit_flags(g)
    _class_flags(g)

    r = _sub(sub, "report", "rebuild the gradebooks, statistics, feedback and report.html, grading nothing",
             "Rebuild every class-level file of the gradebook folder from the results it holds, with the "
             "class settings applied: after editing overrides.csv, or to add a roster or a deadline.")
    r.add_argument("--out", type=Path, default=GRADEBOOK, metavar="DIR",
                   help="the gradebook folder (default: %(default)s)")
    r.add_argument("--feedback-dir", type=Path, metavar="DIR",
                   help="also collect each student's feedback as DIR/<submission>.md and .html")
    _class_flags(r)

    e = _sub(sub, "export", "write the grades as the upload file of an LMS or as CSV",
             "Write OUT/export_<format>.csv: one row per student on the roster, including students who "
             "submitted nothing, one column per lab (total after overrides and late penalties).")
    e.add_argument("--format", required=True, choices=list(lms.formats()), metavar="FORMAT",
                   help="the LMS the file is for: " + lms.help_text())
    e.add_argument("--out", type=Path, default=GRADEBOOK, metavar="DIR",
                   help="the gradebook folder to export (default: %(default)s)")
    e.add_argument("--file", type=Path, metavar="CSV", help="write here instead of OUT/export_<format>.csv")
    e.add_argument("--lab", action="append", choices=list(LABS), help="only this lab (repeat for several)")
    e.add_argument("--column", action="append", metavar="LAB=NAME",
                   help="the LMS column of a lab, e.g. labN='Lab N (1234)' for Canvas assignment 1234 "
                        "(default: 'labN: <the lab's title>')")
    e.add_argument("--missing", choices=MISSING, default="zero",
                   help="the grade of a student with no submission: zero, or blank (no grade); default zero")
    e.add_argument("--unmarked", choices=UNMARKED, default="blank",
                   help="a lab whose written answers are not all marked yet: blank (no grade, reported; the "
                        "default), zero (the total so far: answers to mark count 0), or auto (the autograder's "
                        "points alone)")
    _class_flags(e)

    lti = _sub(sub, "lti", "LTI 1.3: print the tool's registration for an LMS, or post the scores to its gradebook",
               "The course as an LTI 1.3 tool of an LMS (Canvas, Moodle): `lti config` prints what the LMS's "
               "registration of the tool asks for; `lti post` sends each roster student's lab scores to the "
               "LMS's gradebook (assignment and grade services), as OUT/lti.json says (see docs/lms.md).")
    lsub = lti.add_subparsers(dest="lti_command", required=True, metavar="ACTION",
                              help="config (the tool's registration) or post (the scores)")
    lc = lsub.add_parser("config", help="print the tool's registration: Canvas's developer key JSON, or Moodle's "
                         "external tool fields", description="Print what the LMS's registration of the tool asks "
                         "for, with the tool's public key (made in OUT the first time).")
    lc.add_argument("--url", required=True, metavar="URL", help="the class server's address, e.g. "
                    "https://hub.example.edu")
    lc.add_argument("--format", choices=("canvas", "moodle"), default="canvas",
                    help="the LMS (default: %(default)s)")
    lc.add_argument("--out", type=Path, default=GRADEBOOK, metavar="DIR",
                    help="the gradebook folder, where the tool's key is kept (default: %(default)s)")
    lc.add_argument("--file", type=Path, metavar="FILE", help="write here instead of printing")
    lp = lsub.add_parser("post", help="post each roster student's lab scores to the LMS's gradebook",
                         description="Post every roster student's score of each lab to the lab's line item at the "
                         "LMS (created where missing), as OUT/lti.json registers it. Scores the LMS already holds "
                         "are not sent again; every request and answer is recorded in OUT/lti_posts.log.")
    lp.add_argument("--out", type=Path, default=GRADEBOOK, metavar="DIR",
                    help="the gradebook folder (default: %(default)s)")
    lp.add_argument("--lab", action="append", choices=list(LABS), help="only this lab (repeat for several)")
    lp.add_argument("--unmarked", choices=("pending", "skip"), default="pending",
                    help="a lab whose written answers are not all marked: pending (sent as AGS's PendingManual, "
                         "no score: the LMS shows it needs grading; the default) or skip (not sent)")
    lp.add_argument("--missing", choices=("zero", "skip"), default="zero",
                    help="a student with no submission for a lab: zero (sent 0; the default) or skip (not sent)")
    lp.add_argument("--again", action="store_true", help="send every score, also those the LMS already holds")
    _class_flags(lp)

    m = _sub(sub, "mark", "mark written answers by hand: a page on this machine, or a CSV round trip",
             "Serve the marking page of a class folder on 127.0.0.1 (a URL with a token is printed): one written "
             "question across the class, answers shown anonymously, rubric items by keyboard. The marks go to "
             "CLASS/marks.sqlite; `python -m grader report` adds them to the gradebooks and feedback. With "
             "--export-csv / --import-csv, mark offline instead.")
    m.add_argument("out", type=Path, metavar="CLASS", help="the class folder (grade --out)")
    m.add_argument("--port", type=int, default=0, help="the port on 127.0.0.1 (default: any free one)")
    m.add_argument("--marker", default="", metavar="NAME",
                   help="your name, kept with each mark for the instructor (never shown to students)")
    m.add_argument("--export-csv", type=Path, metavar="CSV",
                   help="write the answers still to mark to CSV (anonymous) instead of serving the page")
    m.add_argument("--import-csv", type=Path, metavar="CSV",
                   help="read marks back from such a CSV: all rows or, when one is bad, none")
    m.add_argument("--question", metavar="ID", help="with --export-csv: only this question, e.g. 10.Q6")
    m.add_argument("--all", action="store_true", help="with --export-csv: every answer, marked ones too")
    m.add_argument("--names", action="store_true",
                   help="with --export-csv: name each answer's submission (default: the page's pseudonym)")

    sim = _sub(sub, "similarity", "which submissions share their code: a report for the instructor, grading nothing",
               "Compare, lab by lab, the code each graded submission of CLASS wrote itself (its code cells and "
               "support files, the handout's code removed) pairwise with copydetect, and its written answers as "
               "text; write CLASS/similarity.html (the pairs above the threshold, side by side, shared passages "
               "marked), similarity.csv and similarity.json (each submission's closest match: `python -m grader "
               "report` adds it to the per-lab gradebooks). Changes no grade.")
    sim.add_argument("out", type=Path, metavar="CLASS", help="the class folder (grade --out)")
    sim.add_argument("--lab", action="append", choices=list(LABS), help="only this lab (repeat for several)")
    sim.add_argument("--names", action="store_true",
                     help="name the submissions (default: pseudonyms, so a pair is read before knowing whose)")
    sim.add_argument("--threshold", type=float, metavar="F",
                     help="list the pairs sharing at least this fraction of one side's code (default: 0.5)")
    sim.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                     help="tokenize the submissions in N processes (default: %(default)s)")
    sim.add_argument("--cluster", metavar="ADDRESS",
                     help="tokenize them on a Dask cluster, as grade --cluster grades: local:N, a scheduler's "
                          "address or its scheduler file; replaces --jobs")

    c = sub.add_parser("check", help="a student's self-check: run a notebook, then its tasks' public checks")
    c.add_argument("paths", nargs="+", metavar="NOTEBOOK",
                   help="a notebook's path, or a lab's name (labN) or notebook name, found from any folder")
    c.add_argument("--task", action="append", metavar="ID",
                   help="report only this task's checks, e.g. N.M (repeat it, or N.M,N.K, for several)")
    c.add_argument("--lab", choices=list(LABS), help="check against this lab (default: read from each notebook)")
    c.add_argument("--cell-timeout", type=int, metavar="S", help="seconds per cell (default: the lab's, 300)")
    c.add_argument("--notebook-timeout", type=int, metavar="S", help="seconds per notebook (default: the lab's, 900)")

    b = _sub(sub, "build", "generate labs/ and the example submissions from solutions/",
             "Replace each solution region of solutions/ with a stub to make labs/, and apply each declared "
             "mistake to make grader/examples/.")
    b.add_argument("--check", action="store_true", help="fail if generated files are stale; write nothing")
    _lab_flag(b, "only this lab (default: every lab)")
    b.add_argument("--clean-solutions", action="store_true", help="clear outputs in solutions/ first")

    rel = _sub(sub, "release", "write the students' copy (labs, util, the self-check, Docker files, a student "
                               "README; nothing secret) into a new folder",
               "Copy what students need into DIR: the generated labs, util/ without any lab's grader-only files "
               "(mistakes, judges), the self-check, requirements and Docker files, and a student README. "
               "Solutions, references and example submissions stay behind.")
    rel.add_argument("dest", type=Path, metavar="DIR", help="a folder that does not exist yet (or is empty)")

    pub = _sub(sub, "publish", "commit the students' copy to a git repository that a class server's students pull",
               "Write the students' copy (as release does) and commit it as the next commit of BRANCH of the bare "
               "git repository REPO (made when absent): the repository nbgitpuller pulls into each student's "
               "server (docs/hub.md). An unchanged course commits nothing; a changed cell of an earlier release "
               "is warned about (students who edited it keep their version).")
    pub.add_argument("repo", type=Path, metavar="REPO", help="the bare repository, e.g. build/hub/handouts.git")
    pub.add_argument("--branch", default="main", help="the branch students pull (default: %(default)s)")
    pub.add_argument("--message", help="the commit message (default: says how many files)")

    lk = _sub(sub, "links", "print each lab's nbgitpuller link for a class server",
              "Print one line per lab: its name, the nbgitpuller link that pulls the published handouts into "
              "the student's ~/handouts (first time: clone; later: pull, keeping their work) and opens the "
              "lab's notebook, and its title.")
    lk.add_argument("--hub", default="http://127.0.0.1:8000", metavar="URL",
                    help="the hub's public address (default: %(default)s, docker/hub/hub.sh's)")
    lk.add_argument("--repo", default="file:///srv/handouts.git", metavar="URL",
                    help="the repository as the students' servers reach it (default: %(default)s, where "
                         "docker/hub mounts it; on Kubernetes the git host's https address)")
    lk.add_argument("--branch", default="main", help="the branch (default: %(default)s)")
    lk.add_argument("--target", default="handouts", metavar="FOLDER",
                    help="the folder of the student's home it goes to (default: %(default)s)")
    lk.add_argument("--lab", action="append", choices=list(LABS), help="only this lab (repeat for several)")
    lk.add_argument("--lti", action="store_true",
                    help="print each lab's LTI 1.3 target link instead: the URL an LMS's link to the lab holds "
                         "(a student launched from it signs in and lands in the lab's pull; docs/lms.md)")

    rg = _sub(sub, "regen", "regenerate reference answers by running the solutions",
              "Run each lab's solution twice and write grader/references/<lab>.json when both runs agree "
              "(--check: verify the committed references are fresh, writing nothing).")
    rg.add_argument("--check", action="store_true", help="verify the committed references are fresh; write nothing")
    rg.add_argument("--term", metavar="FILE",
                    help="make the references for the term whose secret FILE holds (stored beside it), not the "
                         "course's default ones")
    _lab_flag(rg, "only this lab (default: every lab)")

    d = _sub(sub, "dispute", "run a student's task again, twice, and record whether the mark stands",
             "Re-run each TASK's hidden cases for STUDENT's graded submission in fresh sandboxes, twice, and write a "
             "record beside the original grading (inputs, returned values, verdicts, points, timings, what the "
             "grader measured, the grader's version): OUT/<submission>/disputes/. --decide POINTS appends the "
             "decision to the class's overrides with the record named in its reason.")
    d.add_argument("out", type=Path, metavar="CLASS_FOLDER", help="the gradebook folder the class was graded into")
    d.add_argument("student", metavar="STUDENT", help="a submission's folder there, or a roster student_id or email")
    d.add_argument("task", nargs="+", metavar="TASK", help="the task in dispute, e.g. 8.4 (several of one lab: "
                                                            "run again together)")
    d.add_argument("--decide", type=float, metavar="POINTS", help="the instructor's decision: the task's points")
    d.add_argument("--reason", metavar="TEXT", help="why (shown to the student with the decision)")
    d.add_argument("--no-sandbox", action="store_true", help="run without bubblewrap (not for real disputes)")
    _limit_flags(d)

    lb = _sub(sub, "leaderboard", "rank a class on a figure the grader measured itself",
              "Write OUT/leaderboard_<lab>.html and .csv for every lab that declares a leaderboard (or those named): "
              "anonymous nicknames, figures the grader measured in its own processes, ties within the measurement's "
              "band.")
    lb.add_argument("out", type=Path, metavar="CLASS_FOLDER", help="the gradebook folder the class was graded into")
    lb.add_argument("--lab", action="append", choices=list(LABS), help="only this lab (repeat for several)")

    gs = _sub(sub, "gradescope", "build a lab's Gradescope autograder zip",
              "Write a Gradescope autograder zip for one lab: setup.sh (Python 3.11 in a virtual environment, "
              "bubblewrap, g++, cmake), run_autograder with the limits given here, the grader, util/ and the "
              "lab's references. Keep --memory under the Gradescope machine's and --timeout under the "
              "assignment's autograder timeout.")
    _lab_flag(gs, "the lab to grade", required=True)
    gs.add_argument("--out", type=Path, metavar="ZIP", help="the zip to write (default: build/autograder_<lab>.zip)")
    gs.add_argument("--student-feedback", choices=("summary", "diagnosed"), metavar="{summary,diagnosed}",
                    help="'diagnosed': each task with a failed hidden case gets a second test, shown by Gradescope "
                         "after the due date, with each case's input, the student's value and the expected value "
                         "or failed property (default: summary, the summary only)")
    _limit_flags(gs)

    a = _sub(sub, "autograde", "grade $GRADESCOPE_ROOT/submission into results/results.json "
                               "(run_autograder calls this)",
             "What Gradescope's run_autograder runs: grade the submission in <root>/submission and write "
             "<root>/results/results.json, feedback.md and feedback.html.")
    _lab_flag(a, "the lab to grade", required=True)
    a.add_argument("--root", type=Path, metavar="DIR", help="instead of $GRADESCOPE_ROOT or /autograder")
    a.add_argument("--student-feedback", choices=("summary", "diagnosed"), metavar="{summary,diagnosed}",
                   help="as gradescope's: 'diagnosed' adds the explained hidden cases, visible after the due date")
    _limit_flags(a)
    return p


def _similarity(args) -> int:
    """``similarity``, its tokenizing on a Dask cluster with ``--cluster`` (report/ knows no cluster: it is given a map)."""
    from grader.report import similarity

    threshold = similarity.THRESHOLD if args.threshold is None else args.threshold
    if not args.cluster:
        return similarity.main(out=args.out, labs=args.lab, names=args.names, threshold=threshold, jobs=args.jobs)
    from grader.grade import cluster

    try:
        client, local = cluster.connect(args.cluster)
    except (ValueError, OSError) as exc:
        print(f"grader: --cluster {args.cluster}: {exc}", file=sys.stderr)
        return 2
    try:
        return similarity.main(out=args.out, labs=args.lab, names=args.names, threshold=threshold,
                               mapper=lambda function, items: client.gather(client.map(function, items, pure=False)))
    finally:
        client.close()
        if local is not None:
            local.close()


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "grade":
        from grader.grade import batch
        return batch.main(paths=args.paths, out=args.out, lab=args.lab, show_feedback=args.feedback,
                          progress=not args.no_progress, jobs=args.jobs, limits=_limits(args), force=args.force,
                          feedback_dir=args.feedback_dir, sandbox=False if args.no_sandbox else None,
                          settings=_settings(args), reveal=args.show_expected, cluster=args.cluster)
    if args.command == "report":
        from grader.report import class_folder
        return class_folder.main(out=args.out, feedback_dir=args.feedback_dir, settings=_settings(args))
    if args.command == "export":
        from grader.report import export
        return export.main(out=args.out, fmt=args.format, labs=args.lab, columns=args.column,
                           missing=args.missing, file=args.file, settings=_settings(args), unmarked=args.unmarked)
    if args.command == "lti":
        if args.lti_command == "config":
            from grader.lti import tool_config
            return tool_config.main(out=args.out, hub=args.url, fmt=args.format, file=args.file)
        from grader.lti import post
        return post.main(out=args.out, labs=args.lab, unmarked=args.unmarked, missing=args.missing,
                         again=args.again, settings=_settings(args))
    if args.command == "mark":
        if args.export_csv or args.import_csv:
            if args.export_csv and args.import_csv:
                print("grader: give --export-csv or --import-csv, not both", file=sys.stderr)
                return 2
            from grader.mark import offline
            return offline.main(out=args.out, export_csv=args.export_csv, import_csv=args.import_csv,
                                question=args.question, everything=args.all, names=args.names, marker=args.marker)
        from grader.mark import server
        return server.main(out=args.out, port=args.port, marker=args.marker)
    if args.command == "similarity":
        return _similarity(args)
    if args.command == "check":
        from grader import selfcheck
        return selfcheck.main(paths=args.paths, lab=args.lab, cell_timeout=args.cell_timeout,
                              notebook_timeout=args.notebook_timeout, tasks=args.task)
    if args.command in ("gradescope", "autograde"):
        from grader.grade import gradescope
        if args.command == "gradescope":
            out = args.out or Path("build") / f"autograder_{args.lab}.zip"
            return gradescope.main_build(lab=get_lab(args.lab), out=out, limits=_limits(args),
                                         student_feedback=args.student_feedback or "summary")
        return gradescope.main_autograde(lab=get_lab(args.lab), root=args.root, limits=_limits(args),
                                         student_feedback=args.student_feedback or "summary")
    if args.command == "dispute":
        from grader.grade import dispute
        return dispute.main(out=args.out, who=args.student, task_ids=args.task, decide_points=args.decide,
                            reason=args.reason, limits=_limits(args), sandbox=False if args.no_sandbox else None)
    if args.command == "leaderboard":
        from grader.report import leaderboard
        return leaderboard.main(out=args.out, labs=args.lab)
    if args.command == "release":
        from grader.author import release
        return release.main(dest=args.dest)
    if args.command in ("publish", "links"):
        from grader.author import publish
        if args.command == "publish":
            return publish.main_publish(repo=args.repo, branch=args.branch, message=args.message)
        return publish.main_links(hub=args.hub, repo=args.repo, branch=args.branch, target=args.target, labs=args.lab,
                                  lti=args.lti)
    if args.command == "build":
        from grader.author import build
        return build.main(labs=_labs(args.lab), check_only=args.check, clean_solutions=args.clean_solutions)
    from grader.author import regen
    return regen.main(labs=_labs(args.lab), check_only=args.check, term=args.term)


if __name__ == "__main__":
    sys.exit(main())
