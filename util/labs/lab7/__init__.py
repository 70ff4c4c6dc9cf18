"""Lab 7: mixed precision with op lists (MXNet AMP's conversion, as an ONNX graph pass).

``tasks.py`` declares the lab; ``lists.py`` holds the op lists; ``graphs.py`` the course's graphs and
inputs; ``summary.py`` what a converted model is summarised by; ``emulator.py`` the course's fp16
emulator, which the grader-side checks of ``judge.py`` use; ``plots.py`` draws where the casts went;
``public_checks.py`` and ``mistakes.py`` are the self-checks and the example submissions.
"""
