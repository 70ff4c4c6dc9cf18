"""How lab 6's written questions are marked (grader-only: students, kernels and judges never see this file).

Each item's text is what the student reads when it is applied; its note guides markers only. The model
answers are in the solution's answer cells.
"""
from util.rubric import Item, Rubric

RUBRICS = {
    "6.Q1": Rubric(items=(
        Item("A", 2, "Passes back each other up: disabling one lets another rewrite the same pattern, so no "
             "single pass restores the bits and only the pair does",
             note="naming LayerNormFusionL1 and SimplifiedLayerNormFusion is not required"),
        Item("B", 1, "1-minimal means no single element can be dropped; the smallest set would need every "
             "subset tested"),
        Item("C", 2, "ddmin needs tens of sessions (polynomial in n) against 2^64 subsets",
             note="an order of magnitude with a reason"),
    )),
}
