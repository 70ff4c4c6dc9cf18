"""Grading, composed from the groups below it: one run (``run``), one submission (``submission``),
one job as the local pool and the cluster both run it (``jobs``), a whole class (``batch``,
``collect``, ``resume``), Gradescope, and a Dask cluster (``cluster``, ``parcel``, ``worker_check``)."""
