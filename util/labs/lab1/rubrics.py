"""How lab 1's written questions are marked (grader-only: students, kernels and judges never see this file).

Each item's text is what the student reads when it is applied; its note guides markers only. The model
answers are in the solution's answer cells.
"""
from util.rubric import Item, Rubric

RUBRICS = {
    "1.Q1": Rubric(items=(
        Item("A", 2, "Names where ptflops' extra MACs come from: BatchNorm, pooling windows and the "
             "functional ReLUs (about 15 million)",
             note="two of the three with the size is enough"),
        Item("B", 1, "Says the bias additions are counted by the tools and not by the convention"),
        Item("C", 2, "Explains that elementwise layers cost memory traffic, not multiply-accumulates, so a "
             "MAC count of convolutions and linear layers keeps one kind of cost",
             note="'memory-bound' or 'bytes, not arithmetic' with a reason"),
    )),
}
