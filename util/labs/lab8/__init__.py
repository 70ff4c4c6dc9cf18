"""Lab 8, a graph executor: shape inference, a memory plan, an executor inside the plan, a C++ kernel.

``tasks.py`` declares the lab; ``graphs.py`` builds its ONNX graphs; ``plans.py`` holds the course's
shapes, lifetimes, plan check and plan; ``harness.py`` runs an executor inside a plan as the grader
does; ``verify.py`` says what is wrong with a run (public checks and judge share it); ``kernel.py``
builds and loads C++ kernels; ``plots.py`` draws plans. ``judge.py`` and ``judge_timing.py`` are the
grader's side (graded kernels and student copies do not have them).
"""
