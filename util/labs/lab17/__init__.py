"""Lab 17: what a frontier model costs (mixtures of experts, caches that store less, scaling laws, a cluster's
training plan and a serving plan), counted from published configurations and stated conventions.

``tasks.py`` declares the lab; ``configs.py`` holds the configurations as their authors published them and the
GPU's figures; ``moe.py`` a small mixture-of-experts transformer the course builds on PyTorch's meta device to
measure its parameters and FLOPs; ``scaling.py`` the course's table of training runs; ``plots.py`` the figures;
``public_checks.py`` and ``mistakes.py`` the self-checks and the example submissions.
"""
