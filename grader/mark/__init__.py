"""Marking written answers by hand: the marks' store, their points, the marking page and the CSV round trip.

``python -m grader mark CLASS_FOLDER`` serves a page on 127.0.0.1 where TAs mark one question across the
class (:mod:`grader.mark.server`, :mod:`grader.mark.api`); ``--export-csv`` / ``--import-csv`` do the same
offline (:mod:`grader.mark.offline`). Every mark lives in ``marks.sqlite`` in the class folder
(:mod:`grader.mark.store`), keyed by submission, question and the answer's SHA-256, holding the rubric
items applied, never their points: :mod:`grader.mark.state` scores them against the rubric as it is now,
and the class's reports (:mod:`grader.report.class_folder`) add them to the autograder's points.

Imports ``grader.core`` and ``util`` only; ``grader.report`` reads the marks through it (the README's
Layers block).
"""
