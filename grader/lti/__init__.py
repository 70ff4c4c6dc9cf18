"""LTI 1.3 Advantage: the course as a tool an LMS (Canvas, Moodle) registers, and its grades sent back.

``python -m grader lti config`` prints what the LMS's registration asks for (the tool's key, its URLs: JSON for
Canvas's developer key, the URLs for Moodle); ``python -m grader lti post`` sends each student's lab score to the
LMS's gradebook with the assignment and grade services (AGS), creating a line item per lab where missing. The CSV
exports (``python -m grader export``) do not depend on this package.

One concept per module: :mod:`.registration` (the LMS's registration of the tool, ``OUT/lti.json``, and the
tool's key), :mod:`.scores` (what each student's score for a lab is, in AGS's words), :mod:`.ledger` (every post
and its answer, and what was sent), :mod:`.ags` (the LMS's line items and scores over HTTP, through pylti1p3),
:mod:`.post` (the ``post`` command) and :mod:`.tool_config` (the ``config`` command). See ``docs/lms.md``.
"""
