"""Authoring labs: the student copies and example submissions from the solutions, and the references."""
