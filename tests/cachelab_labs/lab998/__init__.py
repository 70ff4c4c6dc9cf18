"""A test lab whose answer comes from the export cache (tests/test_caches.py), found through ``$COURSE_LAB_DIRS``."""
