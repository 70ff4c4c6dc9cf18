"""How lab 2's written questions are marked (grader-only: students, kernels and judges never see this file).

Each item's text is what the student reads when it is applied; its note guides markers only. The model
answers are in the solution's answer cells.
"""
from util.rubric import Item, Rubric

RUBRICS = {
    "2.Q1": Rubric(items=(
        Item("A", 2, "Explains that a node's inputs and outputs, and tensors waiting for a later reader, are "
             "live together, so the peak sums several tensors"),
        Item("B", 2, "Explains that another topological order changes which tensors are alive at the same "
             "step, and so the peak",
             note="a branch run earlier or later"),
        Item("C", 2, "Names what a runtime does differently: buffer reuse, in-place operators, rounded "
             "allocations, counting weights or the input",
             note="two of these"),
    )),
}
