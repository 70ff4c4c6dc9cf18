"""A small lab for the hostile-data tests (``tests/test_hostile_data.py``), found through ``$COURSE_LAB_DIRS``."""
