"""Lab 16: compression (magnitude and channel pruning, 2:4 sparsity and its storage, low rank under a parameter
budget, distillation re-trained by the grader, LoRA)."""
