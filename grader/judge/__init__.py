"""Judging a run: exported answers, hidden-case records and saved files against the references."""
