"""The course's autograder: run notebooks, judge their answers, report grades, author the labs.

Subpackages by what they do (as otter-grader groups by verb):

* ``execute/``: run one notebook: a fresh kernel in the sandbox, under limits, in a scratch folder
  (``kernel``, ``scratch``, ``sandbox``, ``limits``, ``watchdog``, ``output``);
* ``judge/``: turn what a run exported into points (``compare``, ``score``, ``artifacts``: the
  grader-side checks of saved files, ``references``: the expected answers);
* ``report/``: results, feedback, the class's gradebooks, statistics, report page and LMS exports;
* ``grade/``: grade one submission or a whole class (``submission``, ``batch``, ``resume``,
  ``gradescope``), locally or on a Dask cluster (``cluster``, ``worker_check``, ``parcel``);
* ``author/``: what TAs run: build the student copies and examples (``build``, ``markers``) and
  regenerate the references (``regen``).

``cli`` only parses arguments; ``notebook`` reads course notebooks; ``selfcheck`` is the students'
``python -m grader check``. No module here names a lab: labs are plug-ins in ``util/labs/``.
"""
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
"""The course repository's root (the kernel imports this repository's ``util``)."""

__version__ = "0.2.0"
"""The grader's version (``python -m grader --version``); pyproject.toml reads it from here."""
