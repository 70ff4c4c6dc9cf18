"""Reporting grades: result dataclasses, per-student feedback, the gradebook and class statistics."""
