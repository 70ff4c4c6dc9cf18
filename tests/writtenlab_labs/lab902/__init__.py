"""A tiny test lab with written questions (see ``tests/writtenlab.py``), found through ``$COURSE_LAB_DIRS``."""
