"""A tiny test lab whose task saves a file for a grader-side check (see ``tests/tinylab.py``)."""
