"""Lab 12: training systems (reverse-mode autodiff, training memory, activation checkpointing, a real training run)."""
