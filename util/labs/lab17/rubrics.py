"""How lab 17's written questions are marked (grader-only: students, kernels and judges never see this file).

Each item's text is what the student reads when it is applied; its note guides markers only. The model answers
are in the solution's answer cells (``solutions/lab17_frontier_costs.ipynb``).
"""
from util.rubric import Item, Rubric

RUBRICS = {
    "17.Q1": Rubric(items=(
        Item("A", 1, "The noise is relative (multiplicative): log residuals weigh every run by its relative error",
             note="'the losses near E would otherwise count less' or 'errors are a percentage' is enough"),
        Item("B", 1, "Fitting the loss itself weighs the small, high-loss runs most and moves the parameters (about "
             "1 %)", note="any correct consequence of the weighting"),
        Item("C", 1, "About 80 tokens per parameter at 1e23 FLOPs (N about 14 B, D about 1.2 T), well above 20",
             note="accept 70-95 with the student's own fit shown; the ratio growing with C is a plus, not needed"),
        Item("X", -1, "Says the log makes the problem linear (it does not: E sits inside the log)"),
    )),
    "17.Q2": Rubric(items=(
        Item("A", 1, "Decode at the largest batch is bound by memory: each step reads all the weights and the cache, "
             "so the FLOPs per token do not set the time", note="must name the memory bound or the bytes read"),
        Item("B", 0.5, "The mixture's total weights (93 GB against 26 GB) leave less memory for the KV cache: about "
             "half the batch, so about half the tokens per second"),
        Item("C", 0.5, "The mixture wins against a dense model of equal quality (more parameters, all activated), "
             "where compute dominates, or when weights are a small share of the memory (many GPUs)",
             note="either condition earns C"),
    )),
}
