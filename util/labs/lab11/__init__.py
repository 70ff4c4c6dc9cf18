"""Lab 11: from counts to time (the roofline, profilers, and what a measurement can be trusted to say).

``tasks.py`` declares the lab; ``machine.py`` holds the machine models, the course's timers and the scripted
workloads; ``traces.py`` the recorded profiles (``traces/``) and the layer annotation every profile uses;
``plots.py`` the figures; ``public_checks.py`` the self-checks. Grader-only: ``judge.py`` compares a measured
case with the grader's own measurement, which ``judge_measure.py`` takes (and which recorded the traces);
``mistakes.py`` holds the example submissions.
"""
