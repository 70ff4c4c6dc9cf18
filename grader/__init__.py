"""The course's autograder: run notebooks, judge their answers, report grades, author the labs.

Subpackages by what they do (as otter-grader groups by verb), importing each other one way only
(README "Layers"; ``tests/test_structure.py`` holds them to it):

* ``core/``: the vocabulary all share: results, the grading record, limits and the deadline policy,
  safe text, atomic files, reading notebooks and untrusted files;
* ``execute/``: run one notebook or process confined: a fresh kernel in the sandbox, under limits, in a
  scratch folder (``kernel``, ``confinement``, ``sandbox``, ``launch``, ``watchdog``, ``output``);
* ``judge/``: turn what a run exported into points (``compare``, ``score``, ``artifacts``: the
  grader-side checks of saved files in a judge process, ``references``: the expected answers);
* ``report/``: feedback, the class's gradebooks, statistics, report page and LMS exports (``lms/``);
* ``grade/``: grading composed: one run (``run``), one submission, one job (``jobs``), a whole class
  (``batch``, ``resume``), Gradescope, a Dask cluster (``cluster``, ``worker_check``, ``parcel``);
* ``author/``: what TAs run: build the student copies and examples (``build``, ``markers``),
  regenerate the references (``regen``), release the students' copy, publish it for a class server
  (``publish``: a git repository and its nbgitpuller links).

``cli`` only parses arguments; ``selfcheck`` is the students' ``python -m grader check``. No module
here names a lab: labs are plug-ins in ``util/labs/``.
"""
import sys
from pathlib import Path

# nbformat validates notebooks with jsonschema, whose format checker imports ``rfc3987_syntax`` when it is
# installed (jupyterlab's ``jsonschema[format-nongpl]`` brings it): that import compiles 39 Earley grammars, 1.3 s of
# every grader command that reads a notebook (python-jsonschema/jsonschema#1428). No schema the grader validates
# uses the two formats it checks (``iri``, ``iri-reference``); a None entry makes that optional import fail at once,
# so jsonschema leaves those two formats unchecked, as it does wherever the package is not installed.
sys.modules.setdefault("rfc3987_syntax", None)

REPO = Path(__file__).resolve().parent.parent
"""The course repository's root (the kernel imports this repository's ``util``)."""

__version__ = "0.2.0"
"""The grader's version (``python -m grader --version``); pyproject.toml reads it from here."""
