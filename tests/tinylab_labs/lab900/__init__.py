"""A tiny lab for grader tests (see ``tests/tinylab.py``), found through ``$COURSE_LAB_DIRS``."""
