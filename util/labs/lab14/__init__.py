"""Lab 14: attention and GPU kernels without a GPU (attention's bytes and FLOPs, FlashAttention in PyTorch, Triton
kernels run in Triton's interpreter with their memory traffic counted exactly, predicted GPU time, what an H100's
compiler makes of a tile, and FlashAttention-2's backward as a Triton kernel).

``tasks.py`` declares the lab; ``traffic.py`` counts a kernel's loads and stores inside Triton's interpreter;
``rules.py`` says what a graded kernel may be written with; ``launch.py`` holds the course's launchers (grid,
arguments, counting, GPU timing); ``machines.py`` the stated machine models; ``plots.py`` the figures;
``harness.py`` the course's side of the grader's student processes. The grader-only judges run every kernel
again in a process of their own and compare with their own float64 references and closed forms.
"""
