"""Running one notebook: a fresh kernel, sandboxed and under limits, in a scratch folder."""
