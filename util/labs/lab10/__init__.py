"""Lab 10: what a transformer costs (parameters, prefill and decode MACs, the KV cache, intensity, fusions).

``tasks.py`` declares the lab; ``gpt.py`` is the course's TinyGPT (GPT-2's layout, attention as explicit
matrix products) and its configs; ``recorder.py`` the hooks that record what a decoding fed the model;
``decode_harness.py`` the student's side of the grader's replay of a decoding on modules the judge serves;
``fusions.py`` counts what onnxruntime's transformer optimizer fused; ``public_checks.py`` and
``mistakes.py`` are the self-checks and the example submissions; the grader-only judges measure every
count on models they build themselves.
"""
