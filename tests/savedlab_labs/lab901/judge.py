"""The grader-side check of the tiny saved-file lab: a file of at least 4 bytes passes."""


def check_size(spec, data, tolerance):
    return [] if len(data) >= 4 else [f"only {len(data)} bytes"]
