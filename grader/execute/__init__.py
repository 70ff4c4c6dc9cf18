"""Running one notebook or process confined: a fresh kernel, sandboxed and under limits, in a scratch
folder. It knows nothing of scoring: it imports only ``grader.core``."""
