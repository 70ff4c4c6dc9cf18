"""The vocabulary every group of the grader shares, and nothing else: it imports no other group.

* ``results``: what grading a submission produced (check, task, submission), as JSON and Gradescope's schema;
* ``records``: the record each graded submission keeps (``grading.json``), the class's source of truth;
* ``limits``: what a submission may use (:class:`~grader.core.limits.Limits`) and the one deadline
  policy every runner asks (:class:`~grader.core.limits.Deadlines`);
* ``safe_text``: text from a submission made safe for each place it is written; ``files``: atomic writers;
* ``notebook`` and ``untrusted``: reading notebooks and other submitted files, bounded, links never followed.
"""
