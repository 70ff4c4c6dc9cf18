"""Grading: one submission (``submission``), a whole class (``batch``, ``resume``), Gradescope."""
