"""Judging a run: exported answers, hidden-case records and saved files against the references; the
judge process that checks saved files runs confined by ``grader.execute``."""
