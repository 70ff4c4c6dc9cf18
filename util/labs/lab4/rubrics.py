"""How lab 4's written questions are marked (grader-only: students, kernels and judges never see this file).

Each item's text is what the student reads when it is applied; its note guides markers only. The model
answers are in the solution's answer cells.
"""
from util.rubric import Item, Rubric

RUBRICS = {
    "4.Q1": Rubric(items=(
        Item("A", 2, "The top-level walk counts one output per container and misses the outputs of the leaves "
             "inside it (130 leaf calls against 19 modules)"),
        Item("B", 2, "Training keeps every leaf's output for the backward pass, so the sum is what it holds"),
        Item("C", 2, "Inference frees each tensor after its last reader: its peak counts only the tensors "
             "alive at once"),
    )),
}
