"""How lab 12's written questions are marked (grader-only: students, kernels and judges never see this file).

Each item's text is what the student reads when it is applied; its note guides markers only. The model
answers are in the solution's answer cells.
"""
from util.rubric import Item, Rubric

RUBRICS = {
    "12.Q1": Rubric(items=(
        Item("A", 1, "Adam keeps two moments per parameter: state of twice the weights (four times 77,032 "
             "bytes with weights and gradients)"),
        Item("B", 1, "The saved activations grow with the batch; weights, gradients and state do not"),
    )),
    "12.Q2": Rubric(items=(
        Item("A", 1, "The square-root rule ignores the budget: it may keep fewer activations than allowed and "
             "recompute more"),
        Item("B", 1, "The exact plan keeps as many activations as the budget allows: each kept one is a block "
             "not recomputed"),
        Item("C", 1, "With different widths the bytes kept and the MACs recomputed differ per cut; the rule "
             "treats all blocks alike"),
    )),
}
