"""The judges' toolkit: the few mechanisms every grader-side judge builds on, so that a judge cannot be written
with the mistakes the held-out attacks found (issue 49).

* :mod:`util.judging.secret`: the grading secret, the only source a judge draws hidden inputs from (never a
  salt in a judge's source, never the case's spec alone);
* :mod:`util.judging.student_code`: loading a student's pickled code in a student process before anything of a
  case exists there, and bounding its pickle;
* :mod:`util.judging.heap`: a student process's heap made ready for a peak-memory measurement (what the set-up
  freed neither resident nor reusable, so growth is what student code allocated).

And one rule no module can hold for a judge: every count, size or flag it grades it computes from plain data
(arrays, shapes, flags saved as data), never by calling a method of an object the student's code built.

Who uses it: the labs' judges (``util/labs/labN/judge*.py``) and harnesses, the judge worker
(``grader/judge/worker.py``, which installs the secret), and the attack kit (``tests/test_attack_kit.py``).
"""
